"""Apply a :class:`~tsevo.library.tool.ReadingRule` to a tool's evidence: the builtin reviewer's core.

The tool stays evidence-only (numbers); turning evidence into an option is the rule's job, and the
rule lives in the tool's guidance. A rule either proposes one option with a confidence or abstains.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._scope import option_number
from .tool import ReadingRule

__all__ = [
    "Reading",
    "apply_rule",
    "branch_reading",
    "extremum_reads",
    "inverts",
    "match_label",
    "norm_label",
    "option_number",
    "read_options",
]

_TOK = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class Reading:
    """The outcome of reading evidence with a rule.

    Attributes:
        option: Proposed option index, or ``None`` (abstain).
        confidence: Confidence in [0, 1] (0 when abstaining).
        reason: Short human-readable explanation.
    """

    option: int | None
    confidence: float
    reason: str


@functools.lru_cache(maxsize=1 << 16)
def norm_label(s: str) -> str:
    """Normalized option text used as a class label (lower-case word tokens, single-spaced)."""
    return " ".join(_TOK.findall(s.lower()))


@functools.lru_cache(maxsize=1 << 16)
def _tokens(s: str) -> tuple[str, ...]:
    """Lower-case word tokens of an option or a question (cached: rules read the same texts often)."""
    return tuple(_TOK.findall(s.lower()))


def match_label(label: str, options: Sequence[str]) -> int | None:
    """Index of the option matching a class label: exact (normalized) first, then unique token containment."""
    return _match_label(label, tuple(options))


@functools.lru_cache(maxsize=1 << 16)
def _match_label(label: str, options: tuple[str, ...]) -> int | None:
    lab = norm_label(label)
    if not lab:
        return None
    exact = [i for i, o in enumerate(options) if norm_label(o) == lab]
    if len(exact) == 1:
        return exact[0]
    lt = set(lab.split())
    cont = [i for i, o in enumerate(options) if lt <= set(norm_label(o).split())]
    if len(cont) == 1:
        return cont[0]
    return None


def _num(outputs: Mapping[str, Any], key: str) -> float | None:
    v = outputs.get(key)
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float) and math.isfinite(v):
        return float(v)
    return None


def apply_rule(
    rule: ReadingRule,
    outputs: Mapping[str, Any] | None,
    options: Sequence[str],
    candidates: Sequence[str] = (),
    question: str = "",
    *,
    explain: bool = True,
) -> Reading:
    """Read a tool's outputs with a rule.

    Args:
        rule: The reading rule.
        outputs: The tool's outputs (``None`` when it abstained).
        options: The question's option texts.
        candidates: The question's candidate series names (for ``extremum``).
        question: The question text (an ``extremum`` rule's ``invert_words`` are looked up in it).
        explain: Write the reading's ``reason``; off, it is left empty (the option and the
            confidence are the same): fitting a rule reads millions of rows and needs neither.

    Returns:
        A :class:`Reading`; ``option`` is ``None`` when the rule abstains.
    """
    if not outputs:
        return Reading(None, 0.0, "no evidence")
    if rule.kind == "branches":
        return branch_reading(rule, outputs, options, candidates, question, explain)[1]
    if rule.kind == "consensus":
        return _read_consensus(rule, outputs, options, candidates, question, explain)
    if rule.kind == "label":
        return _read_label(rule, outputs, options, explain)
    if rule.kind == "nearest_number":
        return _read_nearest(rule, outputs, options, explain)
    if rule.kind == "tree":
        return _read_tree(rule, outputs, options, explain)
    return _read_extremum(rule, outputs, options, candidates, question, explain)


def branch_reading(
    rule: ReadingRule,
    outputs: Mapping[str, Any],
    options: Sequence[str],
    candidates: Sequence[str] = (),
    question: str = "",
    explain: bool = True,
) -> tuple[int | None, Reading]:
    """A ``branches`` rule's reading, and the index of the branch that gave it.

    The first branch whose outputs are present and that names an option reads; where every
    present branch abstains, the last one's reading stands. The index is ``None`` where no
    branch's outputs are present.
    """
    which, last = None, Reading(None, 0.0, "no branch's outputs are present")
    for i, sub in enumerate(rule.branches):
        if sub.applies(outputs, candidates):
            which = i
            last = apply_rule(sub, outputs, options, candidates, question, explain=explain)
            if last.option is not None:
                break
    return which, last


def _read_consensus(
    rule: ReadingRule,
    outputs: Mapping[str, Any],
    options: Sequence[str],
    candidates: Sequence[str],
    question: str,
    explain: bool = True,
) -> Reading:
    reads = [
        apply_rule(r, outputs, options, candidates, question, explain=explain)
        for r in rule.branches
    ]
    named = [r.option for r in reads if r.option is not None]
    weights = rule.weights or (1.0,) * len(reads)
    tally: dict[int, float] = {}
    for r, w in zip(reads, weights, strict=True):
        if r.option is not None:
            tally[r.option] = tally.get(r.option, 0.0) + w
    top = max(tally, key=lambda o: (tally[o], named.count(o), -o), default=None)
    share = rule.lead_quorum if top is not None and reads[0].option == top else 0.0
    if top is not None and tally[top] >= (share or rule.quorum) * sum(weights) - 1e-9:
        why = " and ".join(r.reason for r in reads if r.option == top) if explain else ""
        return Reading(top, rule.confidence, why)
    if not explain:
        return Reading(None, 0.0, "")
    if len(named) < len(reads) and rule.quorum == 1.0:
        return Reading(
            None, 0.0, "no consensus: " + next(r.reason for r in reads if r.option is None)
        )
    return Reading(None, 0.0, "no consensus: " + "; ".join(r.reason for r in reads))


def inverts(rule: ReadingRule, question: str) -> bool:
    """Whether the question names one of the rule's ``invert_words`` (flipping its extremum)."""
    return bool(rule.invert_words) and not set(rule.invert_words).isdisjoint(_tokens(question))


def _read_label(
    rule: ReadingRule, outputs: Mapping[str, Any], options: Sequence[str], explain: bool = True
) -> Reading:
    v = _num(outputs, rule.key)
    if v is None:
        return Reading(None, 0.0, f"output {rule.key!r} missing" if explain else "")
    idx = _label_index(v, rule.bins, rule.margin)
    if idx < 0:
        why = f"{rule.key}={v:.4g} inside the abstain band" if explain else ""
        return Reading(None, 0.0, why)
    label = rule.labels[idx]
    opt = match_label(label, options)
    if opt is None:
        why = f"{rule.key}={v:.4g} -> '{label}', which no option names" if explain else ""
        return Reading(None, 0.0, why)
    return Reading(opt, rule.confidence, f"{rule.key}={v:.4g} -> '{label}'" if explain else "")


def _label_index(v: float, bins: tuple[float, ...], margin: float) -> int:
    """The class ``v`` falls in (how many cuts lie at or below it); -1 within ``margin`` of a cut."""
    idx = 0
    for b in bins:  # a plain loop: fitting rules reads millions of rows
        if abs(v - b) < margin:
            return -1
        idx += v >= b
    return idx


def _read_tree(
    rule: ReadingRule, outputs: Mapping[str, Any], options: Sequence[str], explain: bool = True
) -> Reading:
    node: Any = rule.tree
    path = []
    while not isinstance(node, str):
        key, cut, low, high = node
        v = _num(outputs, key)
        if v is None:
            return Reading(None, 0.0, f"output {key!r} missing" if explain else "")
        if abs(v - cut) < rule.margin:
            why = f"{key}={v:.4g} inside the abstain band of {cut:.4g}" if explain else ""
            return Reading(None, 0.0, why)
        if explain:
            path.append(f"{key}={v:.4g}")
        node = low if v < cut else high
    opt = match_label(node, options)
    if opt is None:
        why = f"{', '.join(path)} -> '{node}', which no option names" if explain else ""
        return Reading(None, 0.0, why)
    return Reading(opt, rule.confidence, f"{', '.join(path)} -> '{node}'" if explain else "")


def _read_nearest(
    rule: ReadingRule, outputs: Mapping[str, Any], options: Sequence[str], explain: bool = True
) -> Reading:
    x = _num(outputs, rule.key)
    if x is None:
        return Reading(None, 0.0, f"output {rule.key!r} missing" if explain else "")
    opt, target = _nearest(rule, x, tuple(options))
    if opt == _NO_NUMBERS:
        return Reading(None, 0.0, "no numeric options")
    if opt < 0:
        why = f"target {target:.4g} is ambiguous between two options" if explain else ""
        return Reading(None, 0.0, why)
    why = f"{rule.key}={x:.4g} -> target {target:.4g}" if explain else ""
    return Reading(opt, rule.confidence, why)


_NO_NUMBERS = -2
""":func:`_nearest`'s option when no option writes a number (any negative: it abstains)."""


def _nearest(rule: ReadingRule, x: float, options: tuple[str, ...]) -> tuple[int, float]:
    """(the option whose number lies nearest the mapped value, or a negative number, that value).

    -1: the two nearest options are within the rule's margin; ``_NO_NUMBERS``: no option has one.
    """
    target = rule.scale * x + rule.offset
    scored = sorted((abs(n - target), i) for i, n in _option_numbers(options))
    if not scored:
        return _NO_NUMBERS, target
    if len(scored) > 1:
        d1, d2 = scored[0][0], scored[1][0]
        if (d2 - d1) / (d1 + d2 + 1e-12) < rule.margin:
            return -1, target
    return scored[0][1], target


@functools.lru_cache(maxsize=1 << 16)
def _option_numbers(options: tuple[str, ...]) -> tuple[tuple[int, float], ...]:
    """(index, number) of the options that write a number."""
    return tuple((i, n) for i, o in enumerate(options) if (n := option_number(o)) is not None)


def _read_extremum(
    rule: ReadingRule,
    outputs: Mapping[str, Any],
    options: Sequence[str],
    candidates: Sequence[str],
    question: str = "",
    explain: bool = True,
) -> Reading:
    opt, why, mode, best, score = _extremum(rule, outputs, options, candidates, question)
    if opt < 0:
        if why == _NO_OPTION:
            why = f"no single option names candidate {best!r}" if explain else ""
        return Reading(None, 0.0, why)
    why = f"{mode} {rule.prefix}* at candidate {best} ({score:.4g})" if explain else ""
    return Reading(opt, rule.confidence, why)


_NO_OPTION = "no option"


def _extremum(
    rule: ReadingRule,
    outputs: Mapping[str, Any],
    options: Sequence[str],
    candidates: Sequence[str],
    question: str,
) -> tuple[int, str, str, str, float]:
    """(option or -1, why it abstains, the mode read, the best candidate, its score)."""
    scores = _candidate_scores(rule.prefix, outputs, candidates)
    mode = rule.mode
    if len(scores) < 2:
        return -1, "fewer than two candidate scores", mode, "", 0.0
    if inverts(rule, question):
        mode = "max" if mode == "min" else "min"
    best, b1, gap = _best_candidate(scores, mode)
    if gap < rule.margin:
        return -1, "best candidates are too close", mode, best, b1
    opt = _candidate_option(best, options)
    if opt < 0:
        return -1, _NO_OPTION, mode, best, b1
    return opt, "", mode, best, b1


def _candidate_scores(
    prefix: str, outputs: Mapping[str, Any], candidates: Sequence[str]
) -> dict[str, float]:
    scores = {}
    for c in candidates:
        v = _num(outputs, f"{prefix}{c}")
        if v is not None:
            scores[c] = v
    return scores


def _best_candidate(scores: Mapping[str, float], mode: str) -> tuple[str, float, float]:
    """(the best candidate for ``mode``, its score, the gap to the runner-up relative to the spread).

    Two scores at least. The gap is ``-inf`` when every score is equal: no margin reads it (and NaN
    where both the gap and the spread overflow to infinity: every margin reads it).
    """
    ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=mode == "max")
    (best, b1), (_, b2) = ranked[0], ranked[1]
    spread = max(scores.values()) - min(scores.values())
    return best, b1, (-math.inf if spread <= 0 else abs(b1 - b2) / spread)


def _candidate_option(best: str, options: Sequence[str]) -> int:
    """The one option naming the candidate (-1: none, or several)."""
    want = best.lower()
    hits = [i for i, o in enumerate(options) if want in _tokens(o)]
    return hits[0] if len(hits) == 1 else -1


def extremum_reads(
    prefix: str,
    outputs: Mapping[str, Any] | None,
    options: Sequence[str],
    candidates: Sequence[str],
) -> tuple[tuple[int, float], tuple[int, float]]:
    """What ``extremum`` rules on ``prefix`` with no invert words read, for the modes min and max.

    Per mode: the option the rule names whatever its margin (-1 where it names none), and the gap
    between the two best candidates' scores relative to their spread. A rule of margin ``m`` reads
    that option unless ``gap < m``, exactly as :func:`apply_rule` does; the scores are read once
    for both modes and every margin (fitting reads each row many times).
    """
    scores = _candidate_scores(prefix, outputs, candidates) if outputs else {}
    if len(scores) < 2:
        return (-1, -math.inf), (-1, -math.inf)
    out = []
    for mode in ("min", "max"):
        best, _, gap = _best_candidate(scores, mode)
        opt = _candidate_option(best, options)
        out.append((opt, gap if opt >= 0 else -math.inf))
    return out[0], out[1]


def read_options(
    rule: ReadingRule,
    outputs: Sequence[Mapping[str, Any] | None],
    options: Sequence[Sequence[str]],
    candidates: Sequence[Sequence[str]] | None = None,
    questions: Sequence[str] | None = None,
) -> list[int]:
    """The option :func:`apply_rule` reads on each of many rows (-1 where it abstains).

    Row ``i`` is ``outputs[i]`` read under ``options[i]`` (and ``candidates[i]``, ``questions[i]``
    for an ``extremum`` rule). Fitting reading rules reads every candidate rule on every train row,
    millions of reads per round; this gives the same options without a :class:`Reading` or a reason
    per row, and maps each option set's labels to options once. ``tree``, ``consensus`` and
    ``branches`` rules read row by row through :func:`apply_rule`. The same option as
    :func:`apply_rule` on every row (pinned by tests).
    """
    n = len(outputs)
    if rule.kind == "label":
        return _label_options(rule, outputs, options)
    out = [-1] * n
    if rule.kind == "nearest_number":
        for i, (o, opts) in enumerate(zip(outputs, options, strict=True)):
            x = _num(o, rule.key) if o else None
            if x is not None:
                out[i] = max(-1, _nearest(rule, x, tuple(opts))[0])
        return out
    cands = candidates if candidates is not None else [()] * n
    texts = questions if questions is not None else [""] * n
    for i, (o, opts) in enumerate(zip(outputs, options, strict=True)):
        if rule.kind == "extremum":
            out[i] = _extremum(rule, o, opts, cands[i], texts[i])[0] if o else -1
        else:
            opt = apply_rule(rule, o, opts, cands[i], texts[i], explain=False).option
            out[i] = -1 if opt is None else opt
    return out


def _label_options(
    rule: ReadingRule,
    outputs: Sequence[Mapping[str, Any] | None],
    options: Sequence[Sequence[str]],
) -> list[int]:
    """:func:`_read_label` on each row, without a reason (numpy costs more on a handful of rows)."""
    out: list[int] = []
    for o, opts in zip(outputs, options, strict=True):
        v = _num(o, rule.key) if o else None
        idx = -1 if v is None else _label_index(v, rule.bins, rule.margin)
        m = None if idx < 0 else _match_label(rule.labels[idx], tuple(opts))
        out.append(-1 if m is None else m)
    return out
