"""The gate's per-trace phases (design §4.2): reconciliation, typing, deliberation, shared base."""

from __future__ import annotations

import pytest

from tsevo.taxonomy.phases import (
    Proposal,
    SharedBase,
    check_proposal,
    deliberate,
    error_id,
    phase_record,
    reconcile,
    split_error_id,
    type_of,
)


def _p(trace: str, seq: int) -> Proposal:
    return Proposal(trace, seq, "tool", "d", "q")


def test_error_id_round_trips():
    assert error_id("abc", 3) == "abc#3" and split_error_id("abc#3") == ("abc", 3)
    assert split_error_id(error_id("a#b", 12)) == ("a#b", 12)


def test_reconcile_quorum_edges():
    # t#1: one proposer (dropped); t#2: two proposers + one more confirm = 3 (confirmed exactly at
    # quorum); t#3: two proposers, nobody else confirms = 2 (rejected one below); u#1: 3 proposers.
    props = [
        [_p("t", 1), _p("t", 2), _p("t", 3), _p("u", 1), _p("u", 1)],
        [_p("t", 2), _p("t", 3), _p("u", 1)],
        [_p("u", 1)],
        [],
    ]
    asked: list[tuple[int, str]] = []

    def votes(r: int, eid: str) -> bool:
        asked.append((r, eid))
        return eid == "t#2" and r == 2

    rec = reconcile(props, votes, quorum_propose=2, quorum_confirm=3)
    assert rec.confirmed == ("t#2", "u#1")
    assert dict(rec.dropped) == {"t#1": (0,)}
    assert set(rec.votes) == {"t#2", "t#3", "u#1"}
    assert rec.tally("t#2") == 3 and rec.tally("t#3") == 2 and rec.tally("u#1") == 3
    assert rec.proposers["u#1"] == (0, 1, 2)  # a duplicate proposal counts once
    assert (0, "t#2") not in asked and (3, "t#2") in asked  # proposers are not asked
    # the mapping form gives the same answer; a missing key is a reject
    maps = [{}, {}, {"t#2": True}, {"t#3": False}]
    assert reconcile(props, maps, quorum_propose=2, quorum_confirm=3) == rec
    # looser quorums admit more
    assert reconcile(props, maps, quorum_propose=1, quorum_confirm=1).confirmed == (
        "t#1",
        "t#2",
        "t#3",
        "u#1",
    )
    assert rec.to_dict(["a", "b", "c", "d"])["voted"]["t#2"]["confirm"] == ["a", "b", "c"]


def test_reconcile_orders_by_trace_then_seq():
    props = [[_p("b", 10), _p("b", 9), _p("a", 2)]] * 2
    rec = reconcile(props, lambda r, e: False, quorum_propose=2, quorum_confirm=2)
    assert rec.confirmed == ("a#2", "b#9", "b#10")  # numeric seq order, not string order


def test_type_of_majority_and_ties():
    assert type_of(["B", "B", "A", "C"]) == "B"
    assert type_of(["C", "B", "C", "B"]) == "B"  # tie: B before C
    assert type_of(["C", "A", None, None]) == "A"  # tie: A first
    assert type_of(["C", None, None, None]) == "C"
    assert type_of([None, None]) == "A" and type_of([]) == "A"
    with pytest.raises(ValueError):
        type_of(["D"])


def test_deliberation_touches_only_non_unanimous_and_stops_at_the_cap():
    labels = [
        {"e1": {"X"}, "e2": {"X"}, "e3": {"X"}},
        {"e1": {"X"}, "e2": {"Y"}, "e3": {"Z"}},
        {"e1": {"X"}, "e2": set(), "e3": {"X"}},
    ]
    calls: list[tuple[int, str]] = []

    def flip(r: int, e: str, others: list[set[str]]) -> set[str]:
        calls.append((r, e))
        # annotator 1 on e3 never settles: alternates W, Z, W, ... every round
        if (r, e) == (1, "e3"):
            return {"W"} if calls.count((1, "e3")) % 2 else {"Z"}
        return {"X"} if r == 0 or any("X" in o for o in others) else set()

    final, rec = deliberate(labels, ["e1", "e2", "e3"], flip, rounds=2, quorum=2)
    assert {e for _, e in calls} == {"e2", "e3"}  # e1 is unanimous: never deliberated
    assert [c["after"] for r in rec.rounds for c in r["changed"] if c["error"] == "e3"] == [
        ["W"],
        ["Z"],
    ]
    assert [r["round"] for r in rec.rounds] == [1, 2]  # the cap, e3 still split
    assert rec.rounds[0]["deliberated"] == ["e2", "e3"] and rec.rounds[1]["deliberated"] == ["e3"]
    assert final[1]["e2"] == {"X"} and final[2]["e2"] == {"X"}
    assert labels[1]["e2"] == {"Y"}  # the input is not changed
    assert rec.consolidated == {"e1": {"X"}, "e2": {"X"}, "e3": {"X"}}
    # nothing changes -> one round only
    _, rec2 = deliberate(labels, ["e1", "e2", "e3"], lambda r, e, o: set(labels[r][e]))
    assert len(rec2.rounds) == 1 and rec2.rounds[0]["changed"] == []
    assert rec2.consolidated["e2"] == frozenset() and rec2.consolidated["e3"] == {"X"}
    # round cap 0: no deliberation, consolidation on the phase-4 labels
    _, rec3 = deliberate(labels, ["e1", "e2", "e3"], flip, rounds=0)
    assert rec3.rounds == ()
    calls.clear()
    _, rec4 = deliberate(labels, ["e1", "e2", "e3"], flip, rounds=3)
    assert len(rec4.rounds) == 3  # without the cap of 2 a third round runs


def test_check_proposal_wants_a_verbatim_quote_and_the_event_role():
    events = [
        {"seq": 1, "role": "answerer", "kind": "answer", "stage": 0, "option": 1, "text": "x"},
        {"seq": 2, "role": "tool", "kind": "tool_error", "stage": 1, "error_kind": "timeout"},
    ]
    assert check_proposal(events, Proposal("t", 2, "tool", "d", "error_kind=timeout")) == []
    assert check_proposal(events, Proposal("t", 3, "tool", "d", "timeout"))  # no event 3
    assert check_proposal(events, Proposal("t", 1, "answerer", "d", "timeout"))  # not in event 1
    assert check_proposal(events, Proposal("t", 2, "reviewer", "d", "timeout"))  # wrong role


def test_shared_base_grows_and_keeps():
    base = SharedBase()
    labels = [{"e1": {"A1"}, "e2": {"A1"}}, {"e1": {"A1"}, "e2": {"B1"}}]
    added = base.grow(labels, ["e1", "e2"], ["rule one"])
    assert added["anchors"] == {"e1": ["A1"]} and added["confusions"] == {"A1|B1": 1}
    base.grow([{"e3": {"C1"}}, {"e3": {"C1"}}], ["e3"], ["rule one", "rule two"])
    assert base.to_dict() == {
        "anchors": {"e1": ["A1"], "e3": ["C1"]},
        "rules": ["rule one", "rule two"],
        "confusions": {"A1|B1": 1},
    }


def test_phase_record_names_annotators():
    props = [[_p("t", 1)], [_p("t", 1)]]
    rec = reconcile(props, lambda r, e: True, quorum_propose=2, quorum_confirm=2)
    labels = [{"t#1": {"X"}}, {"t#1": {"Y"}}]
    final, delib = deliberate(labels, ["t#1"], lambda r, e, o: {"X"})
    out = phase_record(["a", "b"], props, rec, {"t#1": ["A", "B"]}, delib, final)
    assert out["types"]["t#1"] == {"type": "A", "by": {"a": "A", "b": "B"}}
    assert out["deliberation"][0]["changed"] == [
        {"annotator": "b", "error": "t#1", "before": ["Y"], "after": ["X"]}
    ]
    assert out["final_labels"] == {"a": {"t#1": ["X"]}, "b": {"t#1": ["X"]}}
    assert out["reconciliation"]["confirmed"] == ["t#1"]
