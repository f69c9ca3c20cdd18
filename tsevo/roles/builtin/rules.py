"""Fitting reading rules to measured values on train rows (the builtin planner's statistics).

Three rule kinds, matching :class:`~tsevo.library.tool.ReadingRule`:

* ``label``: classes (gold option texts) ordered by their median value; one cut point between
  each pair of adjacent classes, placed to maximise the pair's separation (a 1-D stump chain);
* ``nearest_number``: an affine map from the value to the option numbers (identity, least squares,
  and through-origin fits are tried);
* ``extremum``: choose the candidate with the minimum or the maximum per-candidate score.

Every fit is scored by grouped k-fold cross-validated accuracy, because a rule picked on a handful of
rows is usually spurious; the simplest rule that cross-validates wins.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tsevo.library.reading import apply_rule, norm_label, option_number, read_options
from tsevo.library.tool import ReadingRule

from .extremum import ExtremumTable

__all__ = [
    "Row",
    "cross_validate",
    "fit_rule",
    "fit_scored",
    "net_gain",
    "read_all",
    "read_option",
    "separation",
    "train_accuracy",
    "tune_margin",
]

_TOK = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class Row:
    """One fit row: measured values, the question's options and candidates, and its gold index.

    Attributes:
        qid: The question's opaque id (folds are assigned by a hash of it).
        values: Measured values (a dict of keys) or ``None`` when the measurement abstained.
        options: Option texts.
        candidates: Candidate series names.
        gold: Gold option index.
        current: The current library's answer to it (``None`` when unknown).
        question: The question text (read by an extremum rule's ``invert_words``).
    """

    qid: str
    values: dict[str, float] | None
    options: tuple[str, ...]
    candidates: tuple[str, ...]
    gold: int
    current: int | None = None
    question: str = ""


def read_option(rule: ReadingRule, r: Row) -> int | None:
    """The option ``rule`` reads on a fit row (``None``: it abstains); no reason is written."""
    return apply_rule(rule, r.values, r.options, r.candidates, r.question, explain=False).option


def read_all(rule: ReadingRule, rows: Sequence[Row]) -> list[int]:
    """The option ``rule`` reads on each fit row (-1: it abstains), as :func:`read_option` would."""
    return read_options(
        rule,
        [r.values for r in rows],
        [r.options for r in rows],
        [r.candidates for r in rows],
        [r.question for r in rows],
    )


def _hits(rule: ReadingRule, rows: Sequence[Row]) -> int:
    """How many fit rows ``rule`` reads right."""
    return sum(o == r.gold for o, r in zip(read_all(rule, rows), rows, strict=True))


def _acc(rule: ReadingRule, rows: Sequence[Row]) -> float:
    if not rows:
        return 0.0
    return _hits(rule, rows) / len(rows)


def _median(xs: Sequence[float]) -> float:
    """``float(np.median(xs))`` of a short list without numpy's overhead (the same value)."""
    s = sorted(xs)
    n = len(s)
    if n == 0 or any(x != x for x in s):
        return float(np.median(xs))  # numpy's NaN and empty-input behaviour
    mid = n // 2
    return float(s[mid]) if n % 2 else float((s[mid - 1] + s[mid]) / 2.0)


def _fit_label(rows: Sequence[Row], key: str, min_points: int = 4) -> ReadingRule | None:
    pts = [
        (r.values[key], norm_label(r.options[r.gold])) for r in rows if r.values and key in r.values
    ]
    if len(pts) < min_points:
        return None
    by: dict[str, list[float]] = {}
    for v, lab in pts:
        by.setdefault(lab, []).append(v)
    if len(by) < 2 or len(by) > 6:
        return None
    order = sorted(by, key=lambda lab: (_median(by[lab]), lab))
    cuts: list[float] = []
    for lo, hi in itertools.pairwise(order):
        a = np.sort(np.asarray(by[lo]))
        b = np.sort(np.asarray(by[hi]))
        cand = np.unique(np.concatenate([a, b]))
        mids = (cand[:-1] + cand[1:]) / 2.0 if cand.size > 1 else cand
        # rows each cut reads right; the first of the best (a loop keeping strict improvements)
        score = (a[None, :] < mids[:, None]).sum(1) + (b[None, :] >= mids[:, None]).sum(1)
        cuts.append(float(mids[int(np.argmax(score))]))
    if cuts != sorted(cuts):
        med = [_median(by[lab]) for lab in order]
        cuts = [(m1 + m2) / 2.0 for m1, m2 in itertools.pairwise(med)]
        if cuts != sorted(cuts) or len(set(cuts)) != len(cuts):
            return None
    if len(set(cuts)) != len(cuts):
        return None
    rule = ReadingRule("label", key, tuple(round(c, 10) for c in cuts), tuple(order))
    if len(order) == 2 and (hits := _acc(rule, rows) * len(rows)) < len(pts):
        # more cuts only when each buys clearly more rows read right (Occam; CV judges the rest)
        step = max(2.0, 0.05 * len(pts))
        for segs in (3, 4):
            alt = _fit_alternating(pts, order, key, segs)
            if alt is None or alt[0] < hits + step:
                break
            hits, rule = alt
    return rule


def _fit_alternating(
    pts: Sequence[tuple[float, str]], order: Sequence[str], key: str, segs: int
) -> tuple[float, ReadingRule] | None:
    """Best reading of two classes by ``segs`` value bands with alternating classes.

    A cut-point chain reads only monotone relations; alternating bands read, e.g., "lower" for
    moderate values and "higher" at both extremes. Exact dynamic programme over the sorted values
    (cuts only between distinct values). Returns (rows read right, rule), or None when there is no
    room for ``segs`` bands.
    """
    if len(pts) < 4 * segs:
        return None
    srt = sorted(pts)
    v = np.asarray([p[0] for p in srt])
    n = v.size
    cum = [
        np.concatenate(([0], np.cumsum([p[1] == lab for p in srt]))).astype(np.float64)
        for lab in order
    ]
    cut_ok = np.concatenate(([True], v[1:] > v[:-1], [True]))  # a band may end at position i
    neg = -np.inf
    # best[s][c][i]: rows right in the first i sorted rows using s+1 bands, the last of class c
    best = np.full((segs, 2, n + 1), neg)
    back = np.zeros((segs, 2, n + 1), dtype=np.int64)
    for c in (0, 1):
        best[0, c] = np.where(cut_ok, cum[c], neg)
        best[0, c, 0] = neg  # bands are never empty
    idx = np.arange(n + 1)
    for k in range(1, segs):
        for c in (0, 1):
            # band (i, j] of class c after a band of the other class ending at i
            prev = np.where(idx < n, best[k - 1, 1 - c] - cum[c], neg)  # indexed by i
            run = np.maximum.accumulate(prev)
            # the latest i attaining the running best (any attaining i is optimal)
            arg = np.maximum.accumulate(np.where(np.isfinite(prev) & (prev >= run), idx, 0))
            # j > i strictly: use the running best up to j - 1
            shifted = np.concatenate(([neg], run[:-1]))
            arg_s = np.concatenate(([0], arg[:-1]))
            val = shifted + cum[c]
            best[k, c] = np.where(cut_ok, val, neg)
            back[k, c] = arg_s
    last = segs - 1
    c_end = int(np.argmax(best[last, :, n]))
    total = float(best[last, c_end, n])
    if not np.isfinite(total):
        return None
    cuts: list[float] = []
    labels = [order[c_end]]
    j, c = n, c_end
    for k in range(last, 0, -1):
        i = int(back[k, c, j])
        if not 0 < i < n:
            return None
        cuts.append((v[i - 1] + v[i]) / 2.0)
        c = 1 - c
        labels.append(order[c])
        j = i
    cuts.reverse()
    labels.reverse()
    if len(set(cuts)) != len(cuts):
        return None
    rule = ReadingRule("label", key, tuple(round(float(x), 10) for x in cuts), tuple(labels))
    return total, rule


def _fit_nearest(rows: Sequence[Row], key: str, min_points: int = 3) -> ReadingRule | None:
    xs, ys = [], []
    for r in rows:
        if not r.values or key not in r.values:
            continue
        g = option_number(r.options[r.gold])
        if g is None:
            continue
        xs.append(r.values[key])
        ys.append(g)
    if len(xs) < min_points:
        return None
    x = np.asarray(xs)
    y = np.asarray(ys)
    cands = [(1.0, 0.0)]
    if (
        len(xs) >= max(2, min_points)
        and np.all(np.isfinite(x))
        and np.all(np.abs(x) < 1e12)
        and np.ptp(x) > 1e-12 * (1 + np.abs(x).max())
    ):
        with np.errstate(all="ignore"):
            xc = (x - x.mean()) / np.ptp(x)
            a0, b0 = np.polyfit(xc, y, 1)
        a, b = a0 / np.ptp(x), b0 - a0 * x.mean() / np.ptp(x)
        if math.isfinite(a) and math.isfinite(b):
            cands.append((float(a), float(b)))
    denom = float((x * x).sum())
    if denom > 0:
        cands.append((float((x * y).sum() / denom), 0.0))
    best: ReadingRule | None = None
    best_acc = -1.0
    for a, b in cands:
        rule = ReadingRule(
            "nearest_number", key, scale=round(a, 10), offset=round(b, 10), margin=0.02
        )
        acc = _acc(rule, rows)
        if acc > best_acc + 1e-12:
            best, best_acc = rule, acc
    return best


def fit_rule(kind: str, rows: Sequence[Row], key: str, *, few: bool = False) -> ReadingRule | None:
    """Fit a rule of ``kind`` reading ``key`` (for ``extremum``: the base key) on ``rows``.

    ``few``: the few-examples regime (a question kind with a handful of train rows): a label rule
    from two rows of two classes, a numeric reading from one row (identity or a scale through the
    origin) and an affine one from two (a unit conversion is exact).
    """
    if kind == "label":
        return _fit_label(rows, key, 2 if few else 4)
    if kind == "nearest_number":
        return _fit_nearest(rows, key, 1 if few else 3)
    if kind == "extremum":
        return ExtremumTable(rows, f"{key}_").fit(np.arange(len(rows)))
    raise ValueError(f"unknown rule kind {kind!r}")


def fit_scored(
    kind: str, rows: Sequence[Row], key: str, *, few: bool = False
) -> tuple[ReadingRule | None, float]:
    """:func:`fit_rule` and the fitted rule's :func:`train_accuracy` on the same rows (0 for none).

    An ``extremum`` rule's accuracy comes from the table its fit read (one reading of the rows).
    """
    fits = _Fits(kind, rows, key, few)
    every = np.arange(len(rows))
    rule = fits.fit(every)
    if rule is None or not rows:
        return rule, 0.0
    return rule, fits.hits(rule, every) / len(rows)


class _Fits:
    """Fits of one rule kind on subsets of the same rows, and what fitted rules read on them.

    Cross-validation and margin tuning fit and read fold after fold; an ``extremum`` rule does
    both from one table of the rows' candidate scores (:class:`~.extremum.ExtremumTable`), the
    other kinds fit and read the subset's rows.
    """

    def __init__(self, kind: str, rows: Sequence[Row], key: str, few: bool = False) -> None:
        self.kind, self.rows, self.key, self.few = kind, rows, key, few
        self.gold = np.fromiter((r.gold for r in rows), np.int64, len(rows))
        self.table = ExtremumTable(rows, f"{key}_") if kind == "extremum" else None

    def fit(self, idx: np.ndarray) -> ReadingRule | None:
        if self.table is not None:
            return self.table.fit(idx)
        return fit_rule(self.kind, [self.rows[i] for i in idx], self.key, few=self.few)

    def reads(self, rule: ReadingRule, idx: np.ndarray) -> np.ndarray:
        """The option ``rule`` reads on rows ``idx`` (-1: it abstains)."""
        if self.table is not None:
            return self.table.reads(rule, idx)
        return np.asarray(read_all(rule, [self.rows[i] for i in idx]), dtype=np.int64)

    def hits(self, rule: ReadingRule, idx: np.ndarray) -> int:
        return int(np.sum(self.reads(rule, idx) == self.gold[idx]))

    def net(self, rule: ReadingRule, idx: np.ndarray, harm_weight: float) -> float:
        """:func:`net_gain` of ``rule`` on rows ``idx``."""
        return _net((self.rows[i] for i in idx), self.reads(rule, idx).tolist(), harm_weight)


def _fold(qid: str, k: int) -> int:
    return int(hashlib.sha256(qid.encode()).hexdigest()[:8], 16) % k


def cross_validate(
    kind: str, rows: Sequence[Row], key: str, k: int = 5, *, few: bool = False
) -> float:
    """Grouped k-fold accuracy of fitting a rule on k-1 folds and reading the held-out fold.

    ``few``: leave-one-out with the few-examples fits (see :func:`fit_rule`). A ``label`` rule
    can only name classes it was fitted on, so a held-out row whose class no other row has (the
    one example of a class among a handful) says nothing about the measurement: it is left out of
    the score, which is the accuracy on the rows whose class the fit could know. Without this,
    leave-one-out fails every question kind of three classes and four rows, whatever it measures.
    """
    if len(rows) < 2:
        return 0.0
    k = len(rows) if few else min(k, len(rows))
    folds = list(range(len(rows))) if few else [_fold(r.qid, k) for r in rows]
    labels = [norm_label(r.options[r.gold]) for r in rows] if few and kind == "label" else []
    fits = _Fits(kind, rows, key, few)
    fold_of = np.asarray(folds)
    hits = scored = 0
    for f in range(k):
        if labels and labels.count(labels[f]) < 2:
            continue  # the only row of its class: no fit on the others could name it
        test = np.flatnonzero(fold_of == f)
        scored += len(test)
        if not len(test):
            continue
        rule = fits.fit(np.flatnonzero(fold_of != f))
        if rule is not None:
            hits += fits.hits(rule, test)
    return hits / scored if scored else 0.0


def train_accuracy(rule: ReadingRule, rows: Sequence[Row]) -> float:
    """Accuracy of a fitted rule on its own rows."""
    return _acc(rule, rows)


def separation(rule: ReadingRule, rows: Sequence[Row]) -> float:
    """How widely a ``label`` rule's classes are separated on the rows (a tie-break, in [-1, 1]).

    For each pair of adjacent classes the gap between the lower class's largest value and the upper
    class's smallest one, in units of the values' interquartile range; the narrowest pair counts.
    Negative when classes overlap. Among measurements that read the rows equally well, the one with
    the widest gap is the least likely to be a coincidence of a few rows (the max-margin argument).
    For a ``nearest_number`` rule the narrowest row's relative margin: how much nearer the mapped
    value lies to the gold option's number than to the nearest other one, ``(d_other - d_gold) /
    (d_other + d_gold)`` (1 for an exact reading). Other rule kinds return 0.
    """
    if rule.kind == "nearest_number":
        return _number_separation(rule, rows)
    if rule.kind != "label":
        return 0.0
    by: dict[str, list[float]] = {}
    for r in rows:
        if r.values and rule.key in r.values:
            by.setdefault(norm_label(r.options[r.gold]), []).append(r.values[rule.key])
    vals = [v for vs in by.values() for v in vs]
    if len(vals) < 4:
        return 0.0
    q75, q25 = np.percentile(vals, [75, 25])
    spread = float(q75 - q25) or float(np.std(vals)) or 1.0
    gaps = [
        (min(by[hi]) - max(by[lo])) / spread
        for lo, hi in itertools.pairwise(rule.labels)
        if by.get(lo) and by.get(hi)
    ]
    if not gaps:
        return 0.0
    return float(np.clip(min(gaps), -1.0, 1.0))


def _number_separation(rule: ReadingRule, rows: Sequence[Row]) -> float:
    margins = []
    for r in rows:
        if not r.values or rule.key not in r.values:
            continue
        nums = [option_number(o) for o in r.options]
        gold = nums[r.gold]
        others = [n for i, n in enumerate(nums) if i != r.gold and n is not None]
        if gold is None or not others:
            continue
        target = rule.scale * r.values[rule.key] + rule.offset
        d_gold, d_other = abs(gold - target), min(abs(n - target) for n in others)
        if math.isfinite(d_gold) and math.isfinite(d_other):
            margins.append((d_other - d_gold) / (d_other + d_gold + 1e-12))
    if len(margins) < 2:
        return 0.0
    return float(np.clip(min(margins), -1.0, 1.0))


HARM_WEIGHT = 2.0
"""A broken answer counts this many fixed ones when margins are tuned (harm is what a single score
hides, so the builtin planner prefers abstaining over breaking right answers)."""


def net_gain(rule: ReadingRule, rows: Sequence[Row], harm_weight: float = HARM_WEIGHT) -> float:
    """Weighted net effect of letting the rule's readings replace the current answers.

    Answers fixed count +1, answers broken count ``-harm_weight``.
    """
    return _net(rows, read_all(rule, rows), harm_weight)


def _net(rows: Iterable[Row], read: Iterable[int], harm_weight: float) -> float:
    net = 0.0
    for r, opt in zip(rows, read, strict=True):
        if r.current is None or opt < 0 or opt == r.current:
            continue
        if opt == r.gold:
            net += 1.0
        elif r.current == r.gold:
            net -= harm_weight
    return net


def _base_key(rule: ReadingRule) -> str:
    return rule.prefix[:-1] if rule.kind == "extremum" else rule.key


def _margin_grid(rule: ReadingRule, rows: Sequence[Row]) -> list[float] | None:
    if rule.kind != "label":
        return [0.02, 0.05, 0.1, 0.2, 0.3]
    vals = [r.values[rule.key] for r in rows if r.values and rule.key in r.values]
    if len(vals) < 4:
        return None
    q75, q25 = np.percentile(vals, [75, 25])
    spread = float(q75 - q25) or float(np.std(vals)) or 1.0
    return [round(g * spread, 10) for g in (0.0, 0.05, 0.1, 0.2, 0.35, 0.5)]


def tune_margin(rule: ReadingRule, rows: Sequence[Row], k: int = 5) -> ReadingRule:
    """Widen the rule's abstain band where that avoids breaking answers the current library gets right.

    Candidate margins are scaled to the rule kind (cut-point bands in units of the values' spread for
    ``label``; relative gaps for ``nearest_number`` and ``extremum``). Each margin is scored out of
    fold: the rule is refitted on k-1 folds and its readings on the held-out fold count (fixed +1,
    broken ``-HARM_WEIGHT``). In-sample cut points separate their own rows perfectly, so an in-sample
    score would never see the near-cut readings that break answers on new questions. The smallest
    margin with the largest out-of-fold net gain wins; the returned rule is the full fit with it.
    """
    grid = _margin_grid(rule, rows)
    if grid is None:
        return rule
    k = min(k, len(rows))
    folds = [_fold(r.qid, k) for r in rows] if k >= 2 else []
    fits = _Fits(rule.kind, rows, _base_key(rule))
    fold_of = np.asarray(folds)
    refits: list[tuple[ReadingRule, np.ndarray]] = []
    for f in range(k if folds else 0):
        test = np.flatnonzero(fold_of == f)
        refit = fits.fit(np.flatnonzero(fold_of != f)) if len(test) else None
        if refit is not None:
            refits.append((refit, test))
    every = np.arange(len(rows))
    best, best_net = rule, None
    for m in grid:
        if refits:
            net = sum(
                fits.net(replace(refit, margin=m), test, HARM_WEIGHT) for refit, test in refits
            )
        else:
            net = fits.net(replace(rule, margin=m), every, HARM_WEIGHT)
        if best_net is None or net > best_net:
            best, best_net = replace(rule, margin=m), net
    return best
