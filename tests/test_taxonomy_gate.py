"""The builtin gate (design §4, §7.7–7.9): four readers, stratified rounds, κ and coverage."""

from __future__ import annotations

import json

import pytest

from tests.taxonomy_fixtures import planted_draft
from tsevo.taxonomy import Taxonomy, taxonomy_to_dict
from tsevo.taxonomy.gate import READERS, Panel, gate, sample_round
from tsevo.taxonomy.traces import Trace


@pytest.fixture(scope="module")
def setup():
    return planted_draft()


def test_gate_rounds_read_the_gate_pool_only(setup):
    traces, draft = setup
    res = gate(draft, traces)
    pool = {t.problem_id for t in traces if t.metadata["pool"] == "gate"}
    assert 1 <= len(res.rounds) <= 5
    seen: set[str] = set()
    for rnd in res.rounds:
        assert len(rnd["traces"]) <= 5 and set(rnd["traces"]) <= pool
        assert not seen & set(rnd["traces"])  # no repeats
        seen |= set(rnd["traces"])
        assert set(rnd["labels"]) == set(READERS)
        assert rnd["metric"] == rnd["gated_by"] == "cohen_area"
        # event-level errors (design §4.2): at events of the round's traces, each consolidated
        assert {e.rpartition("#")[0] for e in rnd["errors"]} <= set(rnd["traces"])
        assert set(rnd["consolidated"]) == set(rnd["errors"]) and "phases" in rnd
        assert "coverage" in rnd and "fleiss_code_macro" in rnd
    agreement = res.taxonomy.generation["agreement"]
    assert res.taxonomy.status in ("accepted", "review_required")
    assert agreement["metric"] == "cohen_area" and agreement["panel"] == "builtin-4view"
    if res.taxonomy.status == "accepted":
        assert agreement["final_kappa"] >= 0.75 and agreement["final_coverage"] >= 0.70


def test_readers_read_their_own_views(setup):
    """Perturbing one view changes only the readers of that view (design §7.8)."""
    traces, draft = setup
    by_id = {t.problem_id: t for t in traces}
    base = [t for t in traces if t.metadata["pool"] == "induction" and t.failed]
    panel = Panel(draft, base, by_id)
    t = next(t for t in traces if t.metadata["pool"] == "gate" and panel.alpha(t))
    before = [r(t) for r in panel.readers()]
    assert all(before), before  # a crisp planted failure: every reader finds it
    text_off = Trace(t.problem_id, "?", "[#1 SYSTEM s0] final", t.metadata)
    after = [r(text_off) for r in panel.readers()]
    assert after[0] == before[0] and after[1] == before[1] and after[3] == before[3]
    assert after[2] != before[2]  # only gamma reads the text
    feats = {**t.features, "tool.any_error": False, "tool.n_error": 0, "tool.error_timeout": False}
    feats_off = Trace(t.problem_id, t.task, t.raw_trajectory, {**t.metadata, "features": feats})
    after = [r(feats_off) for r in panel.readers()]
    assert after[2] == before[2] and after[3] == before[3]  # text and events untouched
    assert after[0] != before[0]


def test_sampler_quota_and_seed(setup):
    traces, _ = setup
    pool = [t for t in traces if t.metadata["pool"] == "gate"]
    a = sample_round(pool, set(), 1, 5, seed=0)
    assert len(a) == 5 and a == sample_round(list(reversed(pool)), set(), 1, 5, seed=0)
    assert sum(t.failed for t in a) >= 2


def test_gate_reruns_identical(setup):
    traces, draft = setup
    a, b = gate(draft, traces), gate(draft, list(reversed(traces)))
    assert json.dumps(a.rounds, sort_keys=True) == json.dumps(b.rounds, sort_keys=True)
    assert taxonomy_to_dict(a.taxonomy) == taxonomy_to_dict(b.taxonomy)


def test_uncovered_errors_get_bounded_adds(setup):
    traces, _ = setup
    res = gate(Taxonomy.create([]), traces)
    assert res.rounds[0]["coverage"] == 0.0 and res.lineage  # nothing covered -> add edits
    ops = [e["op"] for entry in res.lineage for e in entry.edits]
    assert set(ops) == {"add"} and len(res.lineage[0].edits) <= 2
    assert all(c.origin == "added" for c in res.taxonomy.codes)
    assert "Tool_Error" in {c.name for c in res.taxonomy.codes}  # the planted failure
    assert res.rounds[-1]["fingerprint"] == res.taxonomy.fingerprint
