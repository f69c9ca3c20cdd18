"""Paired statistics and the whole-library gate: hand-computed cases, edges and properties."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsevo.evolve import (
    ArmOutcome,
    GateDecision,
    PairedCounts,
    ProtocolConfig,
    decide_gate,
    flip_class,
    paired_counts,
    paired_flips,
)

CFG = ProtocolConfig()


def counts(n: int, h: int, m: int, *, n_attempted: int | None = None) -> PairedCounts:
    """Counts with h helped, m harmed, the rest of n unchanged-wrong."""
    return PairedCounts(
        n_attempted=n if n_attempted is None else n_attempted,
        n=n,
        helped=h,
        harmed=m,
        unchanged_right=0,
        unchanged_wrong=n - h - m,
    )


def arms(rows: list[tuple[bool, bool, bool, bool]]) -> tuple[dict, dict]:
    """Build both arms from rows (base_completed, base_correct, cand_completed, cand_correct)."""
    base, cand = {}, {}
    for i, (bc, bk, cc, ck) in enumerate(rows):
        q = f"q{i:05d}"
        base[q] = ArmOutcome(q, bc, bc and bk, 0 if bc else None)
        cand[q] = ArmOutcome(q, cc, cc and ck, 1 if cc else None)
    return base, cand


# ---- flip classes and counting ------------------------------------------------------------


def test_flip_class_all_four() -> None:
    assert flip_class(False, True) == "helped"
    assert flip_class(True, False) == "harmed"
    assert flip_class(True, True) == "unchanged-right"
    assert flip_class(False, False) == "unchanged-wrong"


def test_paired_counts_only_counts_questions_both_arms_completed() -> None:
    base = {
        "a": ArmOutcome("a", True, False, 0),  # helped
        "b": ArmOutcome("b", True, True, 1),  # harmed
        "c": ArmOutcome("c", True, True, 1),  # unchanged-right
        "d": ArmOutcome("d", True, False, 0),  # unchanged-wrong
        "e": ArmOutcome("e", True, False, 0),  # cand incomplete: not paired
        "f": ArmOutcome("f", False, False, None),  # base incomplete: not paired
    }
    cand = {
        "a": ArmOutcome("a", True, True, 1),
        "b": ArmOutcome("b", True, False, 0, tool_errors=2),
        "c": ArmOutcome("c", True, True, 1),
        "d": ArmOutcome("d", True, False, 2),
        "e": ArmOutcome("e", False, False, None, tool_errors=1),
        "f": ArmOutcome("f", True, True, 1),
    }
    c = paired_counts(base, cand)
    assert (c.n_attempted, c.n, c.helped, c.harmed) == (6, 4, 1, 1)
    assert (c.unchanged_right, c.unchanged_wrong) == (1, 1)
    assert (c.base_incomplete, c.cand_incomplete) == (1, 1)
    assert c.helped_ids == ("a",) and c.harmed_ids == ("b",)
    assert c.error_rate == pytest.approx(2 / 6)
    assert c.tool_error_rate == pytest.approx(2 / 6)  # b and e have candidate tool errors
    assert paired_flips(base, cand)["e"] is None
    assert paired_flips(base, cand)["f"] is None


def test_mismatched_ids_raise_clear_error() -> None:
    base = {"a": ArmOutcome("a", True, True, 0), "b": ArmOutcome("b", True, True, 0)}
    cand = {"a": ArmOutcome("a", True, True, 0), "c": ArmOutcome("c", True, True, 0)}
    with pytest.raises(ValueError, match=r"same question ids.*'b'.*'c'"):
        paired_counts(base, cand)
    with pytest.raises(ValueError, match="holds the outcome"):
        paired_counts({"a": ArmOutcome("x", True, True, 0)}, {"a": ArmOutcome("a", True, True, 0)})


def test_arm_outcome_rejects_correct_without_completion() -> None:
    with pytest.raises(ValueError, match="completed=False"):
        ArmOutcome("q", completed=False, correct=True, answer=None)


# ---- the strict path ----------------------------------------------------------------------


def test_clean_three_vs_zero_fails_strict_but_passes_single_round_in_one_round_run() -> None:
    # n = 100, h = 3, m = 0: delta = 3/100 = 0.03;
    # delta_lb = 0.03 - 1.96*sqrt(3)/100 = 0.03 - 0.0339482 = -0.0039482 < 0 -> strict fails.
    # single round: delta > 0; h - m = 3 >= max(3, ceil(0.02*100) = 2) = 3; m/n = 0 <= 0.10.
    c = counts(100, 3, 0)
    d = decide_gate(c, config=CFG, rounds=1)
    assert d.delta == pytest.approx(0.03)
    assert d.delta_lb == pytest.approx(0.03 - 1.96 * math.sqrt(3) / 100)
    assert d.delta_lb == pytest.approx(-0.0039482, abs=1e-7)
    assert not d.strict_passed
    assert d.single_round_passed
    assert (d.path, d.passed, d.invalid) == ("single_round", True, False)
    # multi-round runs admit through the strict path alone
    d3 = decide_gate(c, config=CFG, rounds=3)
    assert (d3.path, d3.passed, d3.single_round_applies) == ("rejected", False, False)
    assert any("single-round rule not applied" in r for r in d3.reasons)


def test_strict_lower_bound_edge_is_exact() -> None:
    # h = 337, m = 288: h + m = 625, sqrt = 25, z*25 = 49 = h - m, so delta_lb = 0 exactly: fail.
    d = decide_gate(counts(1000, 337, 288), config=CFG, rounds=3)
    assert not d.strict_passed and d.path == "rejected"
    assert d.delta_lb == pytest.approx(0.0, abs=1e-12)
    # one more helped: 50 > 1.96*sqrt(626) = 49.04 -> pass
    d = decide_gate(counts(1000, 338, 288), config=CFG, rounds=3)
    assert d.strict_passed and d.path == "strict"


def test_strict_needs_a_helped_question_and_wins_over_single_round() -> None:
    d = decide_gate(counts(151, 4, 0), config=CFG, rounds=1)
    # delta_lb = (4 - 1.96*2)/151 = 0.08/151 > 0
    assert d.delta_lb == pytest.approx(0.08 / 151)
    assert d.path == "strict" and d.strict_passed and d.single_round_passed
    d0 = decide_gate(counts(100, 0, 0), config=CFG, rounds=1)
    assert d0.path == "rejected" and d0.delta == 0.0
    assert d0.delta_lb == pytest.approx(-1.96 / 100)  # max(h + m, 1) = 1


# ---- the single-round rule at its edges ---------------------------------------------------


@pytest.mark.parametrize(
    ("n", "h", "m", "passes"),
    [
        (100, 3, 0, True),  # net 3 = floor 3
        (100, 2, 0, False),  # net 2 < 3
        (100, 5, 2, True),  # net 3 with harm
        (100, 4, 2, False),  # net 2
        (150, 3, 0, True),  # ceil(0.02*150) = 3: floor still 3
        (151, 3, 0, False),  # ceil(0.02*151) = ceil(3.02) = 4 beats 3
        (200, 5, 1, True),  # floor ceil(4.0) = 4, net 4
        (200, 4, 1, False),  # net 3 < 4
        (100, 13, 10, True),  # harm rate exactly 0.10 passes
        (100, 14, 11, False),  # harm rate 0.11 > 0.10
        (100, 0, 0, False),  # delta = 0 is not > 0
    ],
)
def test_single_round_rule_edges(n: int, h: int, m: int, passes: bool) -> None:
    d = decide_gate(counts(n, h, m), config=CFG, rounds=1)
    assert d.single_round_passed is passes
    assert not d.strict_passed  # all these fail the strict path
    assert d.path == ("single_round" if passes else "rejected")


def test_single_round_rule_choice_from_config() -> None:
    c = counts(100, 3, 0)
    always = CFG.replace(single_round_rule="always")
    never = CFG.replace(single_round_rule="never")
    assert decide_gate(c, config=always, rounds=3).path == "single_round"
    assert decide_gate(c, config=never, rounds=1).path == "rejected"
    with pytest.raises(ValueError, match="rounds"):
        decide_gate(c, config=CFG, rounds=0)


# ---- invalidity -------------------------------------------------------------------------


def test_error_rate_edge_two_percent_is_valid() -> None:
    # N = 100, n = 98 -> 1 - 98/100 = 0.02 exactly (in floats it is 0.0200000000000000018)
    d = decide_gate(counts(98, 10, 0, n_attempted=100), config=CFG, rounds=1)
    assert not d.invalid and d.path == "strict"
    assert d.error_rate == pytest.approx(0.02)


def test_error_rate_above_two_percent_is_invalid_not_rejected() -> None:
    # N = 10000, n = 9799 -> 201/10000 = 0.0201 > 0.02
    d = decide_gate(counts(9799, 500, 0, n_attempted=10000), config=CFG, rounds=1)
    assert d.error_rate == pytest.approx(0.0201)
    assert d.strict_passed  # the numbers would pass, but the measurement is invalid
    assert (d.path, d.invalid, d.passed, d.rejected) == ("invalid", True, False, False)
    assert any("error rate invalid" in r and "0.0201" in r for r in d.reasons)


def test_invalid_from_real_arms_with_incomplete_candidate() -> None:
    rows = [(True, False, True, True)] * 10 + [(True, True, True, True)] * 87
    rows += [(True, True, False, False)] * 3  # candidate crashed on 3 of 100
    base, cand = arms(rows)
    d = decide_gate(paired_counts(base, cand), config=CFG, rounds=1)
    assert (d.n_attempted, d.n, d.h, d.m) == (100, 97, 10, 0)
    assert d.invalid and d.path == "invalid"


def test_empty_measurements_are_invalid_with_a_reason() -> None:
    d = decide_gate(counts(0, 0, 0, n_attempted=5), config=CFG, rounds=1)
    assert d.invalid and d.delta_lb is None
    assert any("n = 0" in r for r in d.reasons)
    d = decide_gate(counts(0, 0, 0), config=CFG, rounds=1)
    assert d.invalid and any("N = 0" in r for r in d.reasons)


def test_reasons_carry_numbers_and_decision_round_trips_json() -> None:
    d = decide_gate(counts(100, 3, 0), config=CFG, rounds=1)
    text = " | ".join(d.reasons)
    assert "(3 - 0)/100" in text and "max(3, ceil(0.02*100)) = 3" in text
    again = GateDecision.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again == d
    bad = d.to_dict() | {"passed": False}
    with pytest.raises(ValueError, match="contradicts"):
        GateDecision.from_dict(bad)


def test_paired_counts_round_trip() -> None:
    base, cand = arms(
        [(True, False, True, True), (True, True, True, False), (False, False, True, True)]
    )
    c = paired_counts(base, cand)
    assert PairedCounts.from_dict(json.loads(json.dumps(c.to_dict()))) == c


# ---- properties -------------------------------------------------------------------------

rows_strategy = st.lists(
    st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()), max_size=60
)


@given(rows_strategy)
def test_swapping_arms_negates_delta_and_swaps_helped_harmed(rows: list) -> None:
    base, cand = arms(rows)
    c = paired_counts(base, cand)
    s = paired_counts(cand, base)
    assert (s.helped, s.harmed) == (c.harmed, c.helped)
    assert s.n == c.n and s.error_rate == c.error_rate
    assert s.delta == -c.delta
    d, ds = decide_gate(c, config=CFG, rounds=1), decide_gate(s, config=CFG, rounds=1)
    assert not (d.passed and ds.passed)


@given(rows_strategy)
def test_net_equals_change_in_correct_counts_on_paired_questions(rows: list) -> None:
    base, cand = arms(rows)
    c = paired_counts(base, cand)
    both = [q for q in base if base[q].completed and cand[q].completed]
    assert c.n == len(both)
    assert c.helped - c.harmed == sum(cand[q].correct for q in both) - sum(
        base[q].correct for q in both
    )
    assert c.cand_correct - c.base_correct == c.net


@given(rows_strategy)
def test_bounds_and_rates(rows: list) -> None:
    base, cand = arms(rows)
    c = paired_counts(base, cand)
    assert 0.0 <= c.error_rate <= 1.0
    assert 0.0 <= c.tool_error_rate <= 1.0
    d = decide_gate(c, config=CFG, rounds=1)
    if c.n:
        assert d.delta_lb is not None and d.delta_lb <= d.delta
        assert -1.0 <= d.delta <= 1.0
    if d.passed:
        assert d.delta > 0 and d.h > 0 and not d.invalid
    assert d.invalid == (c.n == 0 or c.error_rate > 0.02 + 1e-12)
