"""Per-update attribution and the one-shot prune: thresholds, dependents, acceptance, records."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsevo.evolve import (
    ArmOutcome,
    Attribution,
    PairedCounts,
    ProtocolConfig,
    PruneError,
    PrunePlan,
    PruneRecord,
    UpdateCounts,
    accept_pruned,
    attribute,
    clearly_harmful,
    decide_gate,
    plan_prune,
)

CFG = ProtocolConfig()


def gate(n: int, h: int, m: int, rounds: int = 3):
    c = PairedCounts(
        n_attempted=n, n=n, helped=h, harmed=m, unchanged_right=0, unchanged_wrong=n - h - m
    )
    return decide_gate(c, config=CFG, rounds=rounds)


# ---- the harmful rule -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("h", "m", "harmful"),
    [
        (0, 2, True),  # m >= 2 and 2 > 0
        (1, 2, False),  # 2 > 2*1 is false: mixed
        (1, 3, True),  # 3 > 2
        (0, 1, False),  # thin: m < 2
        (0, 0, False),  # changed nothing
        (2, 5, True),  # 5 > 4
        (3, 6, False),  # 6 > 6 is false
        (10, 1, False),
    ],
)
def test_clearly_harmful_thresholds(h: int, m: int, harmful: bool) -> None:
    assert clearly_harmful(h, m, CFG) is harmful


def test_clearly_harmful_follows_config() -> None:
    strict = CFG.replace(prune_min_harm=3, prune_harm_ratio=1.0)
    assert not clearly_harmful(0, 2, strict)
    assert clearly_harmful(2, 3, strict)
    with pytest.raises(ValueError):
        clearly_harmful(-1, 2, CFG)


# ---- plan ---------------------------------------------------------------------------------


def test_plan_removes_harmful_and_dependents_transitively_and_leaves_thin_and_mixed() -> None:
    counts = {
        "bad": UpdateCounts(helped=0, harmed=2),
        "mixed": (1, 2),
        "thin": (0, 1),
        "good": (5, 0),
        "idle": (0, 0),
    }
    # refine_bad targets bad; refine_of_refine targets refine_bad; sibling shares bad's measurement
    deps = {"bad": {"refine_bad", "sibling"}, "refine_bad": {"refine_of_refine"}, "good": {"g2"}}
    plan = plan_prune(counts, deps, CFG)
    assert plan.harmful == ("bad",)
    assert plan.removed == ("bad", "refine_bad", "refine_of_refine", "sibling")
    assert plan.kept == ("g2", "good", "idle", "mixed", "thin")
    assert not plan.empty and not plan.removes_all
    assert "clearly harmful" in plan.reason("bad") and "m_u = 2" in plan.reason("bad")
    assert "depends on bad" in plan.reason("sibling")
    assert "depends on refine_bad" in plan.reason("refine_of_refine")
    assert "mixed" in plan.reason("mixed")
    assert "thin" in plan.reason("thin")
    assert "changed no validation answer" in plan.reason("idle")
    assert PrunePlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_plan_with_nothing_harmful_is_empty() -> None:
    plan = plan_prune({"a": (1, 2), "b": (0, 1)}, {}, CFG)
    assert plan.empty and plan.removed == () and plan.kept == ("a", "b")


def test_plan_removing_everything_is_flagged() -> None:
    plan = plan_prune({"a": (0, 3)}, {"a": {"b"}}, CFG)
    assert plan.removes_all and plan.removed == ("a", "b")


def test_no_second_prune() -> None:
    with pytest.raises(PruneError, match="no second prune"):
        plan_prune({"a": (0, 3)}, {}, CFG, already_pruned=True)


# ---- attribution ------------------------------------------------------------------------


def _arms() -> tuple[dict, dict]:
    # (base_correct, cand_correct) per question; all completed except q7 (cand incomplete)
    table = {
        "q1": (False, True),  # helped
        "q2": (False, True),  # helped
        "q3": (True, False),  # harmed
        "q4": (True, False),  # harmed
        "q5": (True, True),
        "q6": (False, False),
        "q7": (True, False),  # candidate did not complete: not paired
        "q8": (True, False),  # harmed, no update responsible
    }
    base = {q: ArmOutcome(q, True, b, 0) for q, (b, _) in table.items()}
    cand = {
        q: ArmOutcome(q, q != "q7", c and q != "q7", None if q == "q7" else 1)
        for q, (_, c) in table.items()
    }
    return base, cand


def test_attribute_counts_every_responsible_update() -> None:
    base, cand = _arms()
    atts = [
        Attribution("q1", ("t1",)),
        Attribution("q2", ("t1", "t2")),
        Attribution("q3", ("t2",)),
        Attribution("q4", ("t2", "t1")),
        Attribution("q5", ("t3",)),  # unchanged: attributes nothing
        Attribution("q7", ("t2",)),  # unpaired: attributes nothing
    ]
    s = attribute(base, cand, atts, updates=["t1", "t2", "t3", "t4"])
    assert set(s.by_update) == {"t1", "t2", "t3", "t4"}
    assert (s.by_update["t1"].helped, s.by_update["t1"].harmed) == (2, 1)
    assert (s.by_update["t2"].helped, s.by_update["t2"].harmed) == (1, 2)
    assert s.by_update["t2"].harmed_ids == ("q3", "q4")
    assert (s.by_update["t3"].helped, s.by_update["t3"].harmed) == (0, 0)
    assert s.by_update["t4"] == UpdateCounts()
    assert s.unattributed_harmed == ("q8",) and s.unattributed_helped == ()
    # t2: m=2, h=1 -> mixed, kept; nothing removed
    assert plan_prune(s.by_update, {}, CFG).empty


def test_attribute_rejects_bad_records() -> None:
    base, cand = _arms()
    with pytest.raises(ValueError, match="no arm attempted"):
        attribute(base, cand, [Attribution("zz", ("t1",))])
    with pytest.raises(ValueError, match="two attributions"):
        attribute(base, cand, [Attribution("q1", ("t1",)), Attribution("q1", ("t2",))])
    with pytest.raises(ValueError, match="duplicate"):
        Attribution("q1", ("t1", "t1"))


# ---- acceptance and the record ------------------------------------------------------------


def test_accept_pruned_needs_pass_and_strictly_better_lower_bound() -> None:
    first = gate(100, 2, 0, rounds=3)  # delta_lb = (2 - 1.96*sqrt(2))/100 = -0.00772: rejected
    assert first.path == "rejected"
    better_pass = gate(100, 8, 0, rounds=3)  # delta_lb = 0.08 - 1.96*sqrt(8)/100 > 0
    assert better_pass.passed and better_pass.delta_lb > first.delta_lb
    assert accept_pruned(first, better_pass)
    better_fail = gate(100, 3, 0, rounds=3)  # delta_lb = -0.00395: better, still rejected
    assert better_fail.delta_lb > first.delta_lb and not better_fail.passed
    assert not accept_pruned(first, better_fail)
    assert not accept_pruned(first, first)  # equal is not strictly better
    invalid = decide_gate(
        PairedCounts(
            n_attempted=100, n=90, helped=30, harmed=0, unchanged_right=0, unchanged_wrong=60
        ),
        config=CFG,
        rounds=3,
    )
    assert not accept_pruned(first, invalid)
    with pytest.raises(PruneError, match="rejected gate"):
        accept_pruned(better_pass, better_pass)


def test_accept_pruned_passing_retest_with_worse_bound_is_refused() -> None:
    # A one-round run: first rejected with delta_lb = (2 - 1.96*sqrt(2))/100 = -0.00772;
    # retest passes the single-round rule (net 3) but delta_lb = (3 - 1.96*sqrt(9))/100 < that.
    first = gate(100, 2, 0, rounds=1)
    retest = gate(100, 6, 3, rounds=1)
    assert first.path == "rejected" and retest.path == "single_round"
    assert retest.delta_lb < first.delta_lb
    assert not accept_pruned(first, retest)
    base, cand = _arms()
    s = attribute(base, cand, [Attribution("q3", ("t1",)), Attribution("q4", ("t1",))])
    plan = plan_prune(s.by_update, {}, CFG)
    rec = PruneRecord.build(first, s, plan, retest)
    assert not rec.accepted and "rollback" in rec.outcome


def test_prune_record_round_trips_and_checks_its_inputs() -> None:
    base, cand = _arms()
    s = attribute(base, cand, [Attribution("q3", ("t1",)), Attribution("q4", ("t1",))])
    plan = plan_prune(s.by_update, {"t1": {"t1_refine"}}, CFG)
    assert plan.removed == ("t1", "t1_refine")
    first = gate(100, 3, 0)
    retest = gate(100, 8, 0)
    rec = PruneRecord.build(first, s, plan, retest)
    assert rec.accepted and "deploy" in rec.outcome
    assert PruneRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    # a plan that removes every update needs no retest (the pruned library is the current one)
    assert plan.removes_all and not PruneRecord.build(first, s, plan, None).accepted
    partial = plan_prune(s.by_update, {"t1": {"t1_refine"}, "t2": set()}, CFG)
    with pytest.raises(ValueError, match="needs its one retest"):
        PruneRecord.build(first, s, partial, None)
    empty = plan_prune({"t1": (0, 1)}, {}, CFG)
    rec0 = PruneRecord.build(first, s, empty, None)
    assert not rec0.accepted and rec0.retest is None
    assert PruneRecord.from_dict(json.loads(json.dumps(rec0.to_dict()))) == rec0
    with pytest.raises(ValueError, match="no retest"):
        PruneRecord.build(first, s, empty, retest)
    with pytest.raises(PruneError):
        PruneRecord.build(retest, s, plan, retest)


def test_a_prune_that_only_narrows_composite_branches_is_retested_and_recorded() -> None:
    base, cand = _arms()
    s = attribute(base, cand, [Attribution("q3", ("t1",)), Attribution("q4", ("t1",))])
    empty = plan_prune({"t1": (0, 1)}, {}, CFG)  # no clearly harmful update
    branch = {"tool": "t1", "removed_branches": [2], "kinds": 3, "branch_stats": {"b2": [0, 1]}}
    first, retest = gate(100, 3, 0), gate(100, 8, 0)
    with pytest.raises(ValueError, match="needs its one retest"):
        PruneRecord.build(first, s, empty, None, [branch])
    rec = PruneRecord.build(first, s, empty, retest, [branch])
    assert rec.accepted and rec.outcome.startswith("pruned 0 update(s) and 1 branch(es) of 1")
    assert rec.to_dict()["branches"] == [branch]
    assert PruneRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    assert "branches" not in PruneRecord.build(first, s, empty, None).to_dict()  # older bytes


# ---- properties -------------------------------------------------------------------------

ids = st.sampled_from([f"u{i}" for i in range(8)])


@given(
    st.dictionaries(ids, st.tuples(st.integers(0, 6), st.integers(0, 6))),
    st.dictionaries(ids, st.sets(ids, max_size=3)),
)
def test_plan_is_closed_under_dependents_and_partitions_updates(counts: dict, deps: dict) -> None:
    plan = plan_prune(counts, deps, CFG)
    removed, kept = set(plan.removed), set(plan.kept)
    assert not removed & kept
    assert set(plan.harmful) <= removed
    for u in removed:
        assert set(deps.get(u, ())) <= removed
    for u in plan.harmful:
        h, m = counts[u]
        assert m >= 2 and m > 2 * h
    for u in kept:
        if u in counts:
            assert not clearly_harmful(*counts[u], CFG)
    assert {u for u, _ in plan.reasons} == removed | kept
