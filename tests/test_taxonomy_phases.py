"""The gate's per-trace phases (design §4.2): reconciliation, typing, deliberation, shared base."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.taxonomy_fixtures import planted_draft
from tsevo.taxonomy.agreement import agreement
from tsevo.taxonomy.builtin_phases import EventViews, compatible, revise_scores
from tsevo.taxonomy.codes import Code
from tsevo.taxonomy.gate import (
    READERS,
    GateConfig,
    Panel,
    gate,
    gate_pool,
    round_errors,
    round_record,
    sample_round,
)
from tsevo.taxonomy.phases import (
    Proposal,
    SharedBase,
    check_proposal,
    deliberate,
    error_id,
    event_line,
    phase_record,
    reconcile,
    split_error_id,
    type_of,
)
from tsevo.taxonomy.traces import Trace, render


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


# -- the builtin panel's phases on the tiny fixture ---------------------------------------------


@pytest.fixture(scope="module")
def planted_gate():
    return planted_draft()


def test_builtin_event_round_records_every_phase(planted_gate):
    traces, draft = planted_gate
    res = gate(draft, traces, GateConfig(max_rounds=3))
    by_id = {t.problem_id: t for t in traces}
    disagree = 0
    for rnd in res.rounds:
        ph = rnd["phases"]
        assert rnd["unit"] == "event" and set(ph["proposals"]) == set(READERS)
        keys = [
            {error_id(p["trace_id"], p["event_seq"]) for p in ps} for ps in ph["proposals"].values()
        ]
        disagree += len(set.union(*keys) - set.intersection(*keys))
        for e in rnd["errors"]:  # confirmed errors sit at events of the round's traces
            tid, seq = split_error_id(e)
            assert tid in rnd["traces"] and any(ev["seq"] == seq for ev in by_id[tid].events)
            assert ph["reconciliation"]["voted"][e]["tally"] >= 3
            assert len(ph["reconciliation"]["voted"][e]["proposers"]) >= 2
        for p in (p for ps in ph["proposals"].values() for p in ps):
            assert not check_proposal(by_id[p["trace_id"]].events, Proposal(**p))
        assert set(rnd["consolidated"]) == set(rnd["errors"]) == set(ph["types"])
        # kappa on the phase-4 labels, coverage on the consolidated ones
        tax = draft if rnd["round"] == 1 else None
        if tax is not None:
            again = agreement(
                [{e: set(v) for e, v in rnd["labels"][n].items()} for n in READERS],
                rnd["errors"],
                tax,
                consolidated={e: set(v) for e, v in rnd["consolidated"].items()},
            )
            assert again.cohen_area == rnd["cohen_area"] and again.coverage == rnd["coverage"]
    assert disagree > 0  # the readers do not discover the same events


def _proposals(views: EventViews, t: Trace, tax) -> list[set[tuple[int, str]]]:
    return [{(p.event_seq, p.description) for p in views.discover(r, t, tax)} for r in range(4)]


def _with_events(t: Trace, events: list[dict]) -> Trace:
    return Trace(t.problem_id, t.task, t.raw_trajectory, {**t.metadata, "events": events})


def test_perturbing_one_view_changes_only_its_reader(planted_gate):
    traces, draft = planted_gate
    passes = [t for t in traces if t.metadata["pool"] == "induction" and not t.failed]
    views = EventViews(passes)
    t = next(t for t in traces if t.metadata["pool"] == "gate" and t.features["tool.any_error"])
    base = _proposals(views, t, draft)
    assert all(base), base  # the planted tool error: every reader finds something
    # gamma reads the rendered lines only
    quiet = re.sub(r"error|timed out|timeout|abstain", "x", t.raw_trajectory)
    after = _proposals(views, Trace(t.problem_id, t.task, quiet, t.metadata), draft)
    assert [a == b for a, b in zip(after, base, strict=True)] == [True, True, False, True]
    # alpha reads the features (and the events' fields its atoms tie to)
    feats = {**t.features, "tool.any_error": False, "tool.n_error": 0, "tool.error_timeout": False}
    after = _proposals(
        views,
        Trace(t.problem_id, t.task, t.raw_trajectory, {**t.metadata, "features": feats}),
        draft,
    )
    assert [a == b for a, b in zip(after, base, strict=True)] == [False, True, True, True]
    # beta reads payload numbers: a review that changed the answer is rare in passes
    ok = next(u for u in passes if any(e["kind"] == "review" for e in u.events))
    evs = [dict(e) for e in ok.events]
    before = _proposals(views, ok, draft)
    rev = next(e for e in evs if e["kind"] == "review")
    rev["answer_out"] = 7  # a number only beta reads (no decision, kind or text changes)
    after = _proposals(views, _with_events(ok, evs), draft)
    assert [a == b for a, b in zip(after, before, strict=True)] == [True, False, True, True]
    # delta reads the event tokens: an unseen tool status makes a rare transition
    evs = [dict(e) for e in ok.events]
    run = next(e for e in evs if e["kind"] == "review")
    run["decision"] = "hesitate"
    after = _proposals(views, _with_events(ok, evs), draft)
    assert [a == b for a, b in zip(after, before, strict=True)] == [True, True, True, False]


_SCRIPT = """
import hashlib, json
from tests.taxonomy_fixtures import planted_draft
from tsevo.taxonomy.gate import GateConfig, gate
traces, draft = planted_draft()
res = gate(draft, traces, GateConfig(max_rounds=2))
print(hashlib.sha256(json.dumps(res.rounds, sort_keys=True).encode()).hexdigest())
"""


def test_gate_output_identical_across_hash_seeds(planted_gate):
    """Another process, another string-hash seed, the same bytes."""
    traces, draft = planted_gate
    res = gate(draft, traces, GateConfig(max_rounds=2))
    here = hashlib.sha256(json.dumps(res.rounds, sort_keys=True).encode()).hexdigest()
    root = Path(__file__).resolve().parents[1]
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == here


def test_trace_unit_is_the_gate_before_the_phases(planted_gate):
    """``unit="trace"``: round 1 rebuilt by hand from the pre-phase pieces, exactly."""
    traces, draft = planted_gate
    res = gate(draft, traces, GateConfig(unit="trace", max_rounds=1))
    by_id = {t.problem_id: t for t in traces}
    base = sorted(
        (t for t in traces if t.metadata["pool"] == "induction" and t.failed),
        key=lambda t: t.problem_id,
    )
    batch = sample_round(gate_pool(traces), set(), 1, 5, 0)
    errs, errors = round_errors(batch)
    panel = Panel(draft, base, by_id)
    labels = [{e: read(t) for e, t in zip(errors, errs, strict=True)} for read in panel.readers()]
    ag = agreement(labels, errors, draft)
    want = round_record(1, draft, batch, errors, dict(zip(READERS, labels, strict=True)), ag)
    assert res.rounds == [want]
    assert "phases" not in res.rounds[0] and "consolidated" not in res.rounds[0]
    with pytest.raises(ValueError):
        GateConfig(unit="span")


def test_compatible_codes_and_deliberation_answers():
    a = Code(id="A.1", category="A", name="Tool_Error")
    b = Code(id="B.1", category="B", name="Reviewer_Replaces", applies_to_role="reviewer")
    c = Code(id="C.1", category="C", name="Short_Series")
    assert [compatible(x, "A", "tool") for x in (a, b, c)] == [True, False, False]
    assert [compatible(x, "C", "system") for x in (a, b, c)] == [False, False, True]
    assert compatible(b, "B", "reviewer") and not compatible(b, "B", "tool")
    assert compatible(b, "B", "*")  # the failed final answer: any role's B codes
    scores = {"X": 0.6, "Y": 0.3, "Z": 1.1, "W": 1.6}
    # adopts X (another chose it, own score >= 0.5), not Y (0.3); drops Z (its own, nobody else,
    # weak: < 1.5), keeps W (strong); V is not allowed for this error
    got = revise_scores({"Z", "W"}, [{"X", "Y", "V"}, set()], scores | {"V": 2.0}, {"X", "Y", "Z", "W"},
                        relax=0.5, strong=1.5)  # fmt: skip
    assert got == {"X", "W"}
    assert revise_scores({"Z"}, [{"Z"}], scores, {"Z"}, relax=0.5, strong=1.5) == {"Z"}


def test_a_quote_is_checked_against_the_line_annotators_read() -> None:
    """A stored trace's events have sorted keys, so rendering one again may reorder its fields;
    the quote is checked against the trace's own rendering, the text the annotators read."""
    shown = {"seq": 1, "role": "answerer", "kind": "answer", "stage": 0, "option": 0,
             "text": "0 (Series A)", "reason": "period rule: lag 12"}  # fmt: skip
    stored = dict(sorted(shown.items()))
    rendering = render([shown])
    quote = "text=0 (Series A) reason=period"  # verbatim in what annotators read
    assert quote in rendering and quote not in render([stored])
    p = Proposal("t1", 1, "answerer", "d", quote)
    assert event_line([stored], 1, rendering) == rendering
    assert check_proposal([stored], p, rendering) == []
    assert check_proposal([stored], p) and "not verbatim" in check_proposal([stored], p)[0]
    assert event_line([stored], 2, rendering) is None


def test_beta_reads_the_shared_base_anchors(planted_gate):
    """Anchors (errors every reader coded alike in an earlier round) join Beta's exemplars: two
    anchored events of one trace give that trace their code; unknown codes are dropped; the other
    readers do not read them."""
    traces, draft = planted_gate
    by_id = {t.problem_id: t for t in traces}
    base = sorted(
        (t for t in traces if t.metadata["pool"] == "induction" and t.failed),
        key=lambda t: t.problem_id,
    )
    panel = Panel(draft, base, by_id)
    t, code = next((x, i) for x in gate_pool(traces) for i in draft.ids if i not in panel.beta(x))
    others = [panel.alpha(t), panel.gamma(t), panel.delta(t)]
    panel.anchor({f"{t.problem_id}#1": ["Z.9"], f"{t.problem_id}#2": ["Z.9"]}, by_id)
    assert code not in panel.beta(t)  # an unknown code anchors nothing
    panel.anchor({f"{t.problem_id}#1": [code], f"{t.problem_id}#2": [code]}, by_id)
    assert code in panel.beta(t)
    assert [panel.alpha(t), panel.gamma(t), panel.delta(t)] == others
    panel.anchor({}, by_id)
    assert code not in panel.beta(t)
