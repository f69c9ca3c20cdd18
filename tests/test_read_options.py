"""Reading a rule on many rows at once gives, row by row, the option ``apply_rule`` gives.

:func:`tsevo.library.reading.read_options` is what the builtin planner's fits read (millions of
reads per round); the reviewer reads one question at a time with :func:`apply_rule`. Both must name
the same option on every row, for every rule kind, at cut points, inside abstain bands, with values
of every type a tool may return, and with options that name no label.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tsevo.library.reading import apply_rule, read_options
from tsevo.library.tool import ReadingRule
from tsevo.roles.builtin.rules import Row, _acc, fit_rule, net_gain, read_all, read_option

LABELS = ("low", "medium", "high", "Yes", "No", "upward trend", "flat")
CANDIDATES = ("A", "B", "C")

#: A value as a tool may return it: finite and non-finite floats, ints, bools, text, or None.
values = st.one_of(
    st.floats(-5, 5),
    st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.5, 1e300, -1e300]),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.integers(-3, 3),
    st.booleans(),
    st.just("text"),
    st.none(),
)
cuts = st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.5, 1e300]) | st.floats(-5, 5), max_size=4)


@st.composite
def label_rules(draw: Any) -> ReadingRule:
    bins = tuple(sorted(draw(cuts)))
    labels = tuple(draw(st.sampled_from(LABELS)) for _ in range(len(bins) + 1))
    margin = draw(st.sampled_from([0.0, 0.1, 1.0, 0]))
    return ReadingRule("label", "x", bins, labels, margin=margin)


@st.composite
def number_rules(draw: Any) -> ReadingRule:
    scale = draw(st.sampled_from([1.0, -2.0, 0.0, 1e300]) | st.floats(-10, 10))
    offset = draw(st.sampled_from([0.0, 3.0]) | st.floats(-10, 10))
    margin = draw(st.sampled_from([0.0, 0.02, 0.3]))
    return ReadingRule("nearest_number", "x", scale=scale, offset=offset, margin=margin)


@st.composite
def extremum_rules(draw: Any) -> ReadingRule:
    return ReadingRule(
        "extremum",
        prefix="s_",
        mode=draw(st.sampled_from(["min", "max"])),
        margin=draw(st.sampled_from([0.0, 0.02, 0.5])),
        invert_words=draw(st.sampled_from([(), ("mirrors",)])),
    )


@st.composite
def other_rules(draw: Any) -> ReadingRule:
    """Kinds read row by row (a tree, a consensus of labels)."""
    if draw(st.booleans()):
        leaf = st.sampled_from(LABELS)
        tree = ("x", draw(st.floats(-2, 2)), draw(leaf), ("y", 0.0, draw(leaf), draw(leaf)))
        return ReadingRule("tree", tree=tree, margin=draw(st.sampled_from([0.0, 0.2])))
    subs = tuple(draw(label_rules()) for _ in range(draw(st.integers(2, 3))))
    return ReadingRule("consensus", branches=subs, quorum=draw(st.sampled_from([0.6, 1.0])))


@st.composite
def rows(draw: Any) -> tuple[list[Any], list[tuple[str, ...]], list[tuple[str, ...]], list[str]]:
    n = draw(st.integers(0, 12))
    outputs: list[Any] = []
    options: list[tuple[str, ...]] = []
    cands: list[tuple[str, ...]] = []
    questions: list[str] = []
    for _ in range(n):
        shape = draw(st.sampled_from(["none", "empty", "keys"]))
        if shape == "none":
            outputs.append(None)
        elif shape == "empty":
            outputs.append({})
        else:
            out = {k: draw(values) for k in ("x", "y") if draw(st.booleans()) or k == "x"}
            for c in CANDIDATES:
                if draw(st.integers(0, 4)):
                    out[f"s_{c}"] = draw(values)
            outputs.append(out)
        kind = draw(st.sampled_from(["labels", "numbers", "series"]))
        if kind == "labels":
            opts = tuple(draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=4)))
        elif kind == "numbers":
            opts = tuple(
                draw(st.sampled_from(["1", "2.5", "-3", "about 10 hours", "none", "1e3", "2.5"]))
                for _ in range(draw(st.integers(1, 4)))
            )
        else:
            named = [f"Series {c}" for c in draw(st.permutations(CANDIDATES))[:2]]
            opts = (*named, "Series A and B")
        options.append(opts)
        cands.append(tuple(draw(st.permutations(CANDIDATES))[: draw(st.integers(0, 3))]))
        questions.append(draw(st.sampled_from(["Which one mirrors it?", "Which is closest?", ""])))
    return outputs, options, cands, questions


def _one_by_one(rule: ReadingRule, outputs, options, cands, questions) -> list[int]:  # type: ignore[no-untyped-def]
    out = []
    for o, opts, c, q in zip(outputs, options, cands, questions, strict=True):
        opt = apply_rule(rule, o, opts, c, q, explain=False).option
        assert opt == apply_rule(rule, o, opts, c, q).option  # the reason never changes it
        out.append(-1 if opt is None else opt)
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(label_rules(), number_rules(), extremum_rules(), other_rules()),
    rows(),
)
def test_read_options_is_apply_rule_row_by_row(rule: ReadingRule, data: Any) -> None:
    outputs, options, cands, questions = data
    got = read_options(rule, outputs, options, cands, questions)
    assert got == _one_by_one(rule, outputs, options, cands, questions)


def test_read_options_at_the_cut_and_the_band() -> None:
    """A value on a cut point reads the upper class; within the margin of any cut, no option."""
    rule = ReadingRule("label", "x", (0.0, 1.0), ("low", "medium", "high"), margin=0.25)
    opts = ("high", "low", "medium")
    vals = [-1.0, -0.25, -0.2, 0.0, 0.5, 0.75, 0.8, 1.0, 1.3, True, False, 2]
    got = read_options(rule, [{"x": v} for v in vals], [opts] * len(vals))
    assert got == [1, 1, -1, -1, 2, 2, -1, -1, 0, -1, -1, 0]
    assert got == _one_by_one(rule, [{"x": v} for v in vals], [opts] * 12, [()] * 12, [""] * 12)
    exact = ReadingRule("label", "x", (0.0, 1.0), ("low", "medium", "high"))  # no band
    vals = [-0.0, 0.0, 1.0, 1, True, -1e-300]
    got = read_options(exact, [{"x": v} for v in vals], [opts] * len(vals))
    assert got == [2, 2, 0, 0, 0, 1]


def _rows(vals: list[float], golds: list[int], current: list[int | None]) -> list[Row]:
    opts = ("low", "high")
    return [
        Row(f"q{i}", {"x": v}, opts, (), g, c)
        for i, (v, g, c) in enumerate(zip(vals, golds, current, strict=True))
    ]


def _reference_cut(a: list[float], b: list[float]) -> float:
    """The cut point a loop over the midpoints keeps (strict improvements: the first best)."""
    aa, bb = np.sort(np.asarray(a)), np.sort(np.asarray(b))
    cand = np.unique(np.concatenate([aa, bb]))
    mids = (cand[:-1] + cand[1:]) / 2.0 if cand.size > 1 else cand
    best, best_c = -1.0, float(mids[0])
    for c in mids:
        score = float((aa < c).sum() + (bb >= c).sum())
        if score > best:
            best, best_c = score, float(c)
    return best_c


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0]) | st.floats(-3, 3), min_size=2, max_size=8),
    st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0]) | st.floats(-3, 3), min_size=2, max_size=8),
)
def test_label_fit_keeps_the_first_best_cut(low: list[float], high: list[float]) -> None:
    """Two classes: the fitted cut is the first midpoint reading most rows right (ties included)."""
    rows_ = _rows(low + high, [0] * len(low) + [1] * len(high), [None] * (len(low) + len(high)))
    rule = fit_rule("label", rows_, "x")
    if rule is None or len(rule.bins) != 1:
        return  # equal medians or a fallback: nothing to pin here
    lo, hi = (low, high) if rule.labels == ("low", "high") else (high, low)
    assert rule.bins[0] == round(_reference_cut(lo, hi), 10)


def test_fit_scores_read_as_apply_rule() -> None:
    """Train accuracy and net gain count the options ``read_option`` names, row by row."""
    rng = np.random.default_rng(7)
    vals = rng.normal(size=40).round(2).tolist()
    golds = [int(v > 0.1) if rng.random() < 0.8 else int(v <= 0.1) for v in vals]
    current = [None if rng.random() < 0.2 else int(rng.integers(0, 2)) for _ in vals]
    rows_ = _rows(vals, golds, current)
    rule = ReadingRule("label", "x", (0.1,), ("low", "high"), margin=0.05)
    read = [read_option(rule, r) for r in rows_]
    assert read_all(rule, rows_) == [-1 if o is None else o for o in read]
    assert _acc(rule, rows_) == sum(o == r.gold for o, r in zip(read, rows_, strict=True)) / 40
    net = 0.0
    for o, r in zip(read, rows_, strict=True):
        if r.current is None or o is None or o == r.current:
            continue
        net += 1.0 if o == r.gold else (-2.0 if r.current == r.gold else 0.0)
    assert net_gain(rule, rows_) == net
