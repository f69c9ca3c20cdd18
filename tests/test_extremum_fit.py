"""``extremum`` fits from one table per row set give the rules and scores row-by-row reading gives.

:class:`tsevo.roles.builtin.extremum.ExtremumTable` reads each row's candidate scores once and
indexes every fit on a subset of the rows (cross-validation folds, margin tuning) and every reading
at any margin from that table. The references below are the row-by-row fits it replaced, reading
through :func:`apply_rule`: the fitted rules, cross-validated accuracies, tuned margins and train
accuracies must be the same, with ties, missing and non-finite scores, options that name no single
candidate, and a question word that flips the extremum.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tsevo.library.reading import apply_rule, extremum_reads
from tsevo.library.tool import ReadingRule
from tsevo.roles.builtin.extremum import ExtremumTable
from tsevo.roles.builtin.rules import (
    HARM_WEIGHT,
    Row,
    _Fits,
    _fold,
    cross_validate,
    fit_rule,
    fit_scored,
    net_gain,
    train_accuracy,
    tune_margin,
)

CANDS = ("A", "B", "C")
_TOK = re.compile(r"[a-z0-9_]+")


def _read(rule: ReadingRule, r: Row) -> int:
    opt = apply_rule(rule, r.values, r.options, r.candidates, r.question, explain=False).option
    return -1 if opt is None else opt


def _ref_fit(rows: list[Row], key: str) -> ReadingRule:
    """The row-by-row fit (before the table): min or max, then a flipping question word."""
    plain = {
        m: ReadingRule("extremum", prefix=f"{key}_", mode=m, margin=0.02) for m in ("min", "max")
    }
    hit = {m: np.asarray([_read(rule, r) == r.gold for r in rows]) for m, rule in plain.items()}
    best, best_acc = plain["min"], -1.0
    for m, rule in plain.items():
        acc = float(hit[m].mean()) if rows else 0.0
        if acc > best_acc + 1e-12:
            best, best_acc = rule, acc
    if best_acc >= 1.0 or len(rows) < 8:
        return best
    toks = [set(_TOK.findall(r.question.lower())) for r in rows]
    n = len(rows)
    df: dict[str, int] = {}
    for t in toks:
        for w in t:
            df[w] = df.get(w, 0) + 1
    words = sorted(
        w for w, c in df.items() if 0.1 * n <= c <= 0.9 * n and len(w) > 2 and w.isalpha()
    )
    found = None
    for w in words:
        has = np.asarray([w in t for t in toks])
        for m, other in (("min", "max"), ("max", "min")):
            hits = float(np.sum(np.where(has, hit[other], hit[m])))
            if found is None or hits > found[0]:
                found = (hits, m, w)
    if found is None or found[0] < best_acc * n + max(2.0, 0.05 * n):
        return best
    return ReadingRule(
        "extremum", prefix=f"{key}_", mode=found[1], margin=0.02, invert_words=(found[2],)
    )


def _ref_cv(rows: list[Row], key: str, few: bool) -> float:
    if len(rows) < 2:
        return 0.0
    k = len(rows) if few else min(5, len(rows))
    folds = list(range(len(rows))) if few else [_fold(r.qid, k) for r in rows]
    hits = scored = 0
    for f in range(k):
        test = [r for r, g in zip(rows, folds, strict=True) if g == f]
        scored += len(test)
        if test:
            rule = _ref_fit([r for r, g in zip(rows, folds, strict=True) if g != f], key)
            hits += sum(_read(rule, r) == r.gold for r in test)
    return hits / scored if scored else 0.0


def _ref_net(rule: ReadingRule, rows: list[Row]) -> float:
    net = 0.0
    for r in rows:
        o = _read(rule, r)
        if r.current is None or o < 0 or o == r.current:
            continue
        net += 1.0 if o == r.gold else (-HARM_WEIGHT if r.current == r.gold else 0.0)
    return net


def _ref_tune(rule: ReadingRule, rows: list[Row]) -> ReadingRule:
    k = min(5, len(rows))
    folds = [_fold(r.qid, k) for r in rows] if k >= 2 else []
    refits = []
    for f in range(k if folds else 0):
        test = [r for r, g in zip(rows, folds, strict=True) if g == f]
        if test:
            train = [r for r, g in zip(rows, folds, strict=True) if g != f]
            refits.append((_ref_fit(train, rule.prefix[:-1]), test))
    best, best_net = rule, None
    for m in (0.02, 0.05, 0.1, 0.2, 0.3):
        if refits:
            net = sum(_ref_net(replace(fit, margin=m), test) for fit, test in refits)
        else:
            net = _ref_net(replace(rule, margin=m), rows)
        if best_net is None or net > best_net:
            best, best_net = replace(rule, margin=m), net
    return best


scores = st.one_of(
    st.sampled_from([0.0, 1.0, 2.0, 5.0, 10.0]),
    st.floats(-3, 3),
    st.sampled_from([math.nan, math.inf, 1e308, -1e308, None, "x", True]),
)


@st.composite
def fit_rows(draw: Any) -> list[Row]:
    """Rows of candidate scores; ``mirrors`` questions tend to want the least score, others the most."""
    n = draw(st.integers(0, 14))
    out = []
    for i in range(n):
        vals: dict[str, Any] | None
        shape = draw(st.sampled_from(["keys", "keys", "keys", "keys", "none", "empty"]))
        if shape == "none":
            vals = None
        elif shape == "empty":
            vals = {}
        else:
            vals = {f"s_{c}": draw(scores) for c in CANDS if draw(st.integers(0, 5))}
        cands = tuple(draw(st.permutations(CANDS))[: draw(st.sampled_from([3, 3, 3, 2, 1]))])
        opts = tuple(f"Series {c}" for c in draw(st.permutations(CANDS)))
        if draw(st.integers(0, 6)) == 0:
            opts = (*opts[:2], "Series A and Series B")  # a candidate no single option names
        question = draw(st.sampled_from(["Which one mirrors the reference?", "Which is closest?"]))
        ranked = sorted(
            (v, c)
            for c in cands
            if isinstance(v := (vals or {}).get(f"s_{c}"), float) and math.isfinite(v)
        )
        gold = draw(st.integers(0, 2))
        if ranked and draw(st.integers(0, 3)):  # mostly structured: "mirrors" wants the least
            want = ranked[0][1] if "mirrors" in question else ranked[-1][1]
            gold = opts.index(f"Series {want}") if f"Series {want}" in opts else gold
        current = draw(st.sampled_from([None, 0, 1, 2, gold]))
        out.append(Row(f"q{i}", vals, opts, cands, gold, current, question))
    return out


@settings(max_examples=300, deadline=None)
@given(fit_rows(), st.sampled_from([0.0, 0.02, 0.2, 0.5, 1.0]))
def test_extremum_reads_are_apply_rule_at_every_margin(rows: list[Row], margin: float) -> None:
    for r in rows:
        lo, hi = extremum_reads("s_", r.values, r.options, r.candidates)
        for (opt, gap), mode in ((lo, "min"), (hi, "max")):
            rule = ReadingRule("extremum", prefix="s_", mode=mode, margin=margin)  # type: ignore[arg-type]
            assert (opt if not gap < margin else -1) == _read(rule, r)


@settings(max_examples=200, deadline=None)
@given(
    fit_rows(),
    st.sampled_from(["min", "max"]),
    st.sampled_from([0.0, 0.02, 0.1, 0.2, 0.5]),
    st.sampled_from([(), ("mirrors",), ("closest", "reference")]),
)
def test_table_reads_and_net_gain_match_row_by_row(
    rows: list[Row], mode: str, margin: float, words: tuple[str, ...]
) -> None:
    rule = ReadingRule("extremum", prefix="s_", mode=mode, margin=margin, invert_words=words)  # type: ignore[arg-type]
    table = ExtremumTable(rows, "s_")
    every = np.arange(len(rows))
    assert table.reads(rule, every).tolist() == [_read(rule, r) for r in rows]
    for hw in (HARM_WEIGHT, 0.5):
        assert _Fits("extremum", rows, "s").net(rule, every, hw) == net_gain(rule, rows, hw)


@settings(max_examples=300, deadline=None)
@given(fit_rows(), st.booleans())
def test_fits_and_scores_match_row_by_row_reading(rows: list[Row], few: bool) -> None:
    rule = fit_rule("extremum", rows, "s")
    assert rule == _ref_fit(rows, "s")
    fitted, acc = fit_scored("extremum", rows, "s")
    assert fitted == rule
    assert acc == train_accuracy(rule, rows)
    assert acc == (sum(_read(rule, r) == r.gold for r in rows) / len(rows) if rows else 0.0)
    assert cross_validate("extremum", rows, "s", few=few) == _ref_cv(rows, "s", few)
    conf = replace(rule, confidence=0.7)
    assert tune_margin(conf, rows) == _ref_tune(conf, rows)
    flipped = ReadingRule("extremum", prefix="s_", mode="max", invert_words=("mirrors",))
    assert tune_margin(flipped, rows) == _ref_tune(flipped, rows)


def test_a_question_word_flips_the_extremum() -> None:
    """ "mirrors" questions want the least score, the others the greatest: the fit finds the word."""
    rng = np.random.default_rng(3)
    rows = []
    for i in range(20):
        vals = {f"s_{c}": float(v) for c, v in zip(CANDS, rng.permutation(3), strict=True)}
        mirrors = i % 2 == 0
        want = (
            min(CANDS, key=lambda c: vals[f"s_{c}"])
            if mirrors
            else max(CANDS, key=lambda c: vals[f"s_{c}"])
        )
        q = "Which one mirrors the reference?" if mirrors else "Which is closest?"
        opts = tuple(f"Series {c}" for c in CANDS)
        rows.append(Row(f"q{i}", vals, opts, CANDS, opts.index(f"Series {want}"), None, q))
    rule = fit_rule("extremum", rows, "s")
    assert rule is not None and rule.invert_words in (("mirrors",), ("closest",))
    assert train_accuracy(rule, rows) == 1.0
    assert cross_validate("extremum", rows, "s") == 1.0
    assert rule == _ref_fit(rows, "s")
    # from eight rows a word may flip the extremum; on seven, min or max alone
    assert fit_rule("extremum", rows[:8], "s").invert_words  # type: ignore[union-attr]
    assert fit_rule("extremum", rows[:7], "s").invert_words == ()  # type: ignore[union-attr]


def test_a_gap_equal_to_the_margin_reads() -> None:
    """A runner-up exactly the margin away (1 / 50 of the spread) still reads, as ``apply_rule`` does."""
    opts = tuple(f"Series {c}" for c in CANDS)
    at_margin = {"s_A": 0.0, "s_B": 1.0, "s_C": 50.0}  # min A: gap 1 / 50 = 0.02, the fit's margin
    wide = {"s_A": 0.0, "s_B": 3.0, "s_C": 4.0}  # max C: gap 1 / 4
    rows = [
        Row("q0", at_margin, opts, CANDS, 0, None, ""),
        Row("q1", wide, opts, CANDS, 2, None, ""),
    ]
    rule = fit_rule("extremum", rows, "s")
    assert rule is not None and rule.mode == "min"  # one row each: the first mode on a tie
    assert _read(rule, rows[0]) == 0 and rule == _ref_fit(rows, "s")
