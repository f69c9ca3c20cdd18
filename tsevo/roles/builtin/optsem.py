"""Reading rules the option wording implies: positions, directions of change, which of two series.

Most option sets only name classes, and a label rule learns where each class lies on a measurement
(:func:`~.rules.fit_rule`). Some option sets also say *how* a measurement reads them:

* **positions** ("Beginning / Middle / End", "early / late"): a location expressed as a fraction of
  the series (0 = first point, 1 = last) read by equal parts: thirds for three positions, halves for
  two. No parameter is fitted;
* **directions** ("upward / downward", "increases / decreases / stays about the same", "positive /
  negative", "higher / lower / about the same"): a signed measurement read by its sign, with a
  symmetric band ``|v| < d`` for the "no change" option. Only ``d`` is fitted (none for two options);
* **which of two series** ("Series 1 / Series 2", "series 1 has the higher variance / series 2 has /
  they have the same"): a measurement of the second series minus the first (or a signed measurement
  of the pair, a lag) read by its sign. Whether a larger value means the second series ("the
  noisier") or the first ("the smoother") is the one fitted bit, with the band when an option names
  neither; searched in the catalog groups the question's words point at when they point at any;
* **test verdicts** ("Yes / No" about what the question's words name: is it stationary, does one
  series Granger-cause the other, is it white noise): a p-value of one of the tests in the catalog
  groups those words point at (:mod:`.concepts`), read at the conventional 5% level. Only which side
  means "yes" is fitted. Tests outside those groups are never searched: a Yes / No option set names
  nothing by itself, and among hundreds of tests one reads a handful of rows by chance.

With a handful of train rows per question kind, a learned label rule picked among hundreds of
measurements is usually a fluke: almost any measurement separates three rows. A rule whose cut points
the options fix has (almost) nothing to fit, so reading a kind's few rows right is real evidence that
the measurement says what the options name. :func:`semantic_rank` ranks every catalog measurement by
how well such a rule reads the rows; the kind planner (:mod:`.kindplan`) tries it before learned
rules. The option wording is all it reads (the question's gold answers score the rules, as for any
fit); nothing here knows a benchmark's templates.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from tsevo.library.primitives import CATALOG
from tsevo.library.reading import norm_label
from tsevo.library.tool import ReadingRule

from ..protocols import Example
from .concepts import relevance
from .measure import LOCATION_KEY, RankedMeasurement, SpecCache
from .rules import Row, read_option, separation, train_accuracy
from .specs import enumerate_specs, modes_for, rows_kind

__all__ = [
    "LOCATION_KEY",
    "P_VALUE_KEY",
    "option_semantics",
    "semantic_rank",
    "semantic_rule",
    "significance_rule",
    "yes_no",
]

_TOK = re.compile(r"[a-z]+")
#: Output keys the catalog names as a test's p-value (``p``, ``ks_p``, ``p_a_to_b``, ``mk_p``...). A
#: key so named counts as a p-value only where it reads as one (every value in [0, 1], not all
#: whole numbers: ``arma_order.p`` is an order).
P_VALUE_KEY = re.compile(r"(^|_)p($|_)")
#: The conventional significance level a Yes / No question about a test's hypothesis is read at.
ALPHA = 0.05
#: A series an option names: "series 2", "Series B", "the second series".
_SERIES = re.compile(r"\bseries\s+(\d+|[a-z])\b|\b(first|second)\s+series\b")
_ORDINAL = {"first": "1", "second": "2"}
_POSITION = {
    **dict.fromkeys(("beginning", "start", "early", "earlier", "first", "initial", "opening"), 0),
    **dict.fromkeys(("middle", "center", "centre", "mid", "midway"), 1),
    **dict.fromkeys(("end", "late", "later", "last", "final", "ending", "second"), 2),
}
_UP = frozenset(
    [
        "upward",
        "upwards",
        "up",
        "increases",
        "increase",
        "increasing",
        "increased",
        "higher",
        "positive",
        "positively",
        "growing",
        "grows",
        "rising",
        "rises",
        "above",
        "bigger",
        "larger",
    ]
)
_DOWN = frozenset(
    [
        "downward",
        "downwards",
        "down",
        "decreases",
        "decrease",
        "decreasing",
        "decreased",
        "lower",
        "negative",
        "negatively",
        "shrinking",
        "shrinks",
        "falling",
        "falls",
        "below",
        "smaller",
    ]
)
_NONE = frozenset(
    [
        "same",
        "flat",
        "constant",
        "unchanged",
        "uncorrelated",
        "neither",
        "stable",
        "none",
        "steady",
        "no",
    ]
)


def _position(words: set[str]) -> int | None:
    hit = {_POSITION[w] for w in words if w in _POSITION}
    return hit.pop() if len(hit) == 1 else None


def _direction(words: set[str]) -> int | None:
    up, down = bool(words & _UP), bool(words & _DOWN)
    if up != down:
        return 1 if up else -1
    if not up and words & _NONE:
        return 0
    return None


def _series(option: str) -> str | None:
    """The name of the series an option names first ("1", "b"; ordinals as "1" / "2"), else None.

    "Series 1" / "series B" / "the second series": the first series the option writes counts
    ("Series 2 drives series 1" names series 2).
    """
    m = _SERIES.search(option.lower())
    if m is None:
        return None
    return m.group(1) or _ORDINAL[m.group(2)]


def _named_series(options: Sequence[str]) -> tuple[int | None, ...] | None:
    """Each option's series by rank (0 first, 1 second, None for "neither / the same"), or None.

    Two options must name the two series, one each; a third may name none (the "no difference"
    option). Anything else (a third series, a series named twice) is None.
    """
    names = [_series(o) for o in options]
    named = sorted({n for n in names if n is not None}, key=lambda n: (len(n), n))
    if len(named) != 2 or sum(n is not None for n in names) != 2:
        return None
    return tuple(None if n is None else named.index(n) for n in names)


def option_semantics(options: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """What an option set names: ``("position" | "direction" | "series", labels)`` or None.

    Labels are the normalized option texts (:func:`~tsevo.library.reading.norm_label`) ordered as a
    label rule reads them (low value first): positions from the start of the series to its end,
    directions from down through "no change" to up, series from the first through "neither / the
    same" to the second. ``None`` unless every option names a distinct position (two or three,
    "beginning" among them), or a distinct direction (down and up, with or without a "no change"
    option), or two options name one of two series each ("Series 1 / Series 2", "series 1 has
    the higher variance / series 2 has / they have the same variance"), a third none.
    """
    if not 2 <= len(options) <= 3:
        return None
    words = [set(_TOK.findall(o.lower())) for o in options]
    labels = [norm_label(o) for o in options]
    ranks = _named_series(options)
    if ranks is not None:
        mid = {None: 1, 0: 0, 1: 2}
        return "series", tuple(
            lab for _, lab in sorted(zip([mid[r] for r in ranks], labels, strict=True))
        )
    for name, read in (("position", _position), ("direction", _direction)):
        got = [read(w) for w in words]
        if any(g is None for g in got) or len(set(got)) != len(got):
            continue
        if name == "position" and (0 not in got or any("series" in w for w in words)):
            continue  # "the first series / the second series" name series, not positions
        if name == "direction" and not {-1, 1} <= set(got):
            continue
        order = tuple(lab for _, lab in sorted(zip(got, labels, strict=True)))
        return name, order
    return None


def _band(values: Sequence[float], labels: Sequence[str], order: Sequence[str]) -> float:
    """The "no change" half-width ``d > 0`` reading most rows right (the middle of the best interval).

    Candidates lie between consecutive magnitudes, halfway from zero to the smallest one, and past
    the largest: rows with no "no change" label leave the band between zero and the nearest row
    (a band of zero would read no value as "no change" at all).
    """
    mags = np.unique(np.abs(np.asarray(values, dtype=float)))
    pos = mags[mags > 0.0]
    cands = np.unique(
        np.concatenate(((mags[:-1] + mags[1:]) / 2.0, pos[:1] / 2.0, [mags[-1] * 1.5 + 1e-12]))
    )
    cands = cands[cands > 0.0]
    if cands.size == 0:
        return 0.0
    scores = []
    for d in cands:
        hits = 0
        for v, lab in zip(values, labels, strict=True):
            got = order[0] if v <= -d else order[2] if v >= d else order[1]
            hits += got == lab
        scores.append(hits)
    best = max(scores)
    at = [float(d) for d, s in zip(cands, scores, strict=True) if s == best]
    return (at[0] + at[-1]) / 2.0


def yes_no(options: Sequence[str]) -> tuple[str, ...] | None:
    """``("no", "yes")`` (normalized labels) when the options are exactly Yes and No."""
    labels = tuple(sorted(norm_label(o) for o in options))
    return labels if labels == ("no", "yes") else None


def significance_rule(rows: Sequence[Row], key: str, alpha: float = ALPHA) -> ReadingRule | None:
    """A Yes / No question read as a test's verdict at ``alpha`` on the p-value ``key``.

    Only which side of ``alpha`` means "yes" is fitted (the rows' majority; a tie reads "yes" for
    a significant result). ``None`` unless ``key`` is named and reads as a p-value.
    """
    if not P_VALUE_KEY.search(key):
        return None
    pairs = [
        (float(r.values[key]), norm_label(r.options[r.gold]) == "yes")
        for r in rows
        if r.values and key in r.values
    ]
    vals = [v for v, _ in pairs]
    if len(vals) < 2 or min(vals) < 0.0 or max(vals) > 1.0 or all(v == int(v) for v in vals):
        return None
    agree = sum((v < alpha) == yes for v, yes in pairs)
    labels = ("yes", "no") if 2 * agree >= len(pairs) else ("no", "yes")
    return ReadingRule("label", key, (alpha,), labels)


def semantic_rule(
    meaning: tuple[str, tuple[str, ...]],
    rows: Sequence[Row],
    key: str,
    signed: bool | None = None,
) -> ReadingRule | None:
    """The rule the options name, reading ``key`` (``None`` when the values cannot mean it).

    Positions need every value in [0, 1]; a three-way direction fits its band on the rows; a
    significance reading (Yes / No) fits which side of the level means "yes". Which of two series
    is a direction whose side is fitted: ``key`` is the second series' measurement minus the
    first's (``dual_diff``) or a signed measurement of the pair (a lag), and whether a larger value
    means the second series ("the noisier one") or the first ("the smoother one") is the one bit.
    ``signed``: whether ``key`` is a signed measurement, judged on more rows than ``rows`` (a
    leave-one-out fold may hold one sign only); by default, whether ``rows`` take both signs.
    """
    kind, order = meaning
    if kind == "significance":
        return significance_rule(rows, key)
    have = [r for r in rows if r.values and key in r.values]
    vals = [r.values[key] for r in have]  # type: ignore[index]
    if len(vals) < 2:
        return None
    if kind == "position":
        if not LOCATION_KEY.search(key) or min(vals) < 0.0 or max(vals) > 1.0:
            return None
        cuts = (0.5,) if len(order) == 2 else (1 / 3, 2 / 3)
        return ReadingRule("label", key, tuple(round(c, 10) for c in cuts), order)
    if signed is None:
        signed = _signed(vals)
    if LOCATION_KEY.search(key) or not signed:
        return None  # a direction needs a signed measurement that takes both signs
    if kind != "series":
        return _signed_rule(have, vals, key, order)
    sides = (_signed_rule(have, vals, key, o) for o in (order, order[::-1]))
    return max(
        (r for r in sides if r is not None), key=lambda r: train_accuracy(r, have), default=None
    )


def _signed_rule(
    rows: Sequence[Row], vals: Sequence[float], key: str, order: tuple[str, ...]
) -> ReadingRule | None:
    """A signed value read by its sign, labels low first; three labels fit a "no change" band."""
    if len(order) == 2:
        return ReadingRule("label", key, (0.0,), order)
    d = _band(vals, [norm_label(r.options[r.gold]) for r in rows], order)
    if d <= 0.0:
        return None
    return ReadingRule("label", key, (round(-d, 10), round(d, 10)), order)


def _signed(vals: Sequence[float]) -> bool:
    return bool(vals) and min(vals) < 0.0 < max(vals)


def _loo(meaning: tuple[str, tuple[str, ...]], rows: Sequence[Row], key: str) -> float:
    """Leave-one-out accuracy (the band and a series reading's side are fitted; positions: none).

    Whether the measurement is signed is judged on every row, not on each fold's.
    """
    if meaning[0] == "position" or (len(meaning[1]) == 2 and meaning[0] != "series"):
        rule = semantic_rule(meaning, rows, key)
        return train_accuracy(rule, rows) if rule is not None else 0.0
    signed = _signed([r.values[key] for r in rows if r.values and key in r.values])
    hits = 0
    for i, r in enumerate(rows):
        rule = semantic_rule(meaning, [*rows[:i], *rows[i + 1 :]], key, signed)
        if rule is not None:
            hits += int(read_option(rule, r) == r.gold)
    return hits / len(rows)


def semantic_rank(
    cache: SpecCache,
    examples: Sequence[Example],
    groups: frozenset[str] | None = None,
    words: frozenset[str] = frozenset(),
    prefer: frozenset[str] = frozenset(),
) -> list[RankedMeasurement]:
    """Measurements read by the rule their rows' options name, best first (empty if they name none).

    All rows must share one option set with a meaning (:func:`option_semantics`). ``groups``
    restricts the search to those catalog groups (``None``: all); which of two series is read only
    from the ``prefer`` groups when there are any. Ranked by (leave-one-out)
    accuracy, then measurements of the ``prefer`` groups (those the question's words point at)
    first, then by how many of ``words`` the measurement's name speaks of, then by the widest
    margin between classes.
    """
    labeled = [e for e in examples if e.gold is not None]
    if len(labeled) < 2:
        return []
    meanings = {option_semantics(e.question.options) for e in labeled}
    if len(meanings) != 1:
        return []
    meaning = meanings.pop()
    if meaning is None:
        # Yes / No about what the question's words name: the verdict of that concept's tests
        yn = {yes_no(e.question.options) for e in labeled}
        if len(yn) != 1 or None in yn or not prefer:
            return []
        meaning = ("significance", ("no", "yes"))
    qs = [e.question for e in labeled]
    _, arity = rows_kind(qs)
    if meaning[0] == "series":
        if arity != "dual":
            return []  # which of two series: read from the two primary series only
        # any measurement of two series has a sign; only the groups the words name, if they name any
        groups = prefer or groups
    out: list[RankedMeasurement] = []
    for spec in enumerate_specs(modes_for(arity, qs)):
        group = CATALOG[spec.primitive].group
        if groups is not None and group not in groups:
            continue
        if meaning[0] == "significance" and group not in prefer:
            continue  # hundreds of tests would read a handful of Yes / No rows by chance
        vals = [cache.get(spec, q) for q in qs]
        if sum(bool(v) for v in vals) < len(qs):
            continue  # a handful of rows: the measurement must read every one
        rows = [
            Row(q.id, v, q.options, q.candidates, int(e.gold), None, q.question)  # type: ignore[arg-type]
            for q, v, e in zip(qs, vals, labeled, strict=True)
        ]
        for key in sorted({k for v in vals if v for k in v}):
            if not all(key in v for v in vals if v):
                continue
            rule = semantic_rule(meaning, rows, key)
            if rule is None:
                continue
            acc = train_accuracy(rule, rows)
            cv = _loo(meaning, rows, key)
            out.append(RankedMeasurement(spec, key, rule, cv, acc, 1.0, separation(rule, rows)))
    out.sort(
        key=lambda r: (
            -r.cv_acc,
            CATALOG[r.spec.primitive].group not in prefer,
            -relevance(words, r.spec.describe(r.key), CATALOG[r.spec.primitive].summary),
            -r.separation,
            len(r.spec.params),
            r.spec.describe(r.key),
        )
    )
    return out
