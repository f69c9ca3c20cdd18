"""The builtin gate (design §4, §7.7–7.9): four readers, stratified rounds, κ and coverage."""

from __future__ import annotations

import json

import pytest

from tests.taxonomy_fixtures import planted
from tsevo.taxonomy import Taxonomy, taxonomy_to_dict
from tsevo.taxonomy.gate import READERS, GateConfig, gate, sample_round
from tsevo.taxonomy.induce import induce


@pytest.fixture(scope="module")
def setup():
    traces, _ = planted(n=240, seed=1)
    return traces, induce(traces).taxonomy


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
        assert "coverage" in rnd and "fleiss_code_macro" in rnd
    agreement = res.taxonomy.generation["agreement"]
    assert res.taxonomy.status in ("accepted", "review_required")
    assert agreement["metric"] == "cohen_area" and agreement["panel"] == "builtin-4view"
    if res.taxonomy.status == "accepted":
        assert agreement["final_kappa"] >= 0.75 and agreement["final_coverage"] >= 0.70


def test_readers_are_different(setup):
    traces, draft = setup
    res = gate(draft, traces, GateConfig(early_stop="none"))
    differ = any(
        len({json.dumps(rnd["labels"][r], sort_keys=True) for r in READERS}) > 1
        for rnd in res.rounds
    )
    assert differ, "four readers that always agree are one reader"


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


def test_gate_with_no_codes_is_review_required(setup):
    traces, _ = setup
    res = gate(Taxonomy.create([]), traces)
    assert res.taxonomy.status == "review_required"
