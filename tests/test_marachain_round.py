"""Mara chains in the round (issue 13): depth 0 is the published protocol.

* The chain's evaluator answers train questions only (validation and test raise).
* On the tiny suite, seed 5, work group ``g3`` misses the bar with every direct attempt: with
  ``depth > 0`` a builtin chain runs, saves its nodes under their chain ids, counts its spend in
  the round's ledger and is recorded in ``synthesis.json`` and the analysis frames; started from
  the last attempt (``start = last``) it rescues the group and the gate admits the node; the same
  round with chains off (depth 0) has the same direct attempts and no chain anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tsevo.analysis import (
    CHAIN_FUNNEL_ORDER,
    CHAIN_NODES_COLUMNS,
    CHAIN_SCORES_COLUMNS,
    chain_nodes_df,
    chain_scores_df,
    funnel_df,
)
from tsevo.analysis.chain_arms import ADMISSION_KEYS, group_admissions
from tsevo.data import Question
from tsevo.evolve.chain import ChainSplitError, TrainOnlyEvaluator, rule_variant
from tsevo.library.tool import ReadingRule
from tsevo.marachain import Caps, ChainLedger, MaraConfig, Spend, parse_node_id
from tsevo.marachain.moves import CATEGORIES, FAMILIES
from tsevo.store import RunLayout


class _Inner:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def answer(self, split: str, library: Any, questions: Any) -> dict[str, Any]:
        self.calls.append(split)
        return {}


def test_chain_evaluator_refuses_validation_and_test() -> None:
    inner = _Inner()
    q = Question.__new__(Question)
    object.__setattr__(q, "id", "t1")
    ev = TrainOnlyEvaluator(inner, {"t1": q})
    assert ev.answer("train", None, [q]) == {}  # type: ignore[arg-type]
    for split in ("val", "test"):
        with pytest.raises(ChainSplitError):
            ev.answer(split, None, [q])  # type: ignore[arg-type]
    other = Question.__new__(Question)
    object.__setattr__(other, "id", "v9")
    with pytest.raises(ChainSplitError):
        ev.answer("train", None, [other])  # type: ignore[arg-type]
    assert inner.calls == ["train"]


def test_rule_moves_widen_and_narrow_every_branch() -> None:
    label = ReadingRule("label", key="x", bins=(1.0, 3.0), labels=("a", "b", "c"))
    assert rule_variant(label, wider=False) is None  # no band to narrow
    wide = rule_variant(label, wider=True)
    assert wide.margin == pytest.approx(0.3)
    assert rule_variant(wide, wider=False).margin == pytest.approx(0.15)
    near = ReadingRule("nearest_number", key="y", margin=0.02)
    comp = ReadingRule("branches", branches=(near, label))
    narrow = rule_variant(comp, wider=False)
    assert [b.margin for b in narrow.branches] == [pytest.approx(0.01), 0.0]
    assert [b.margin for b in rule_variant(comp, wider=True).branches] == [
        pytest.approx(0.04),
        pytest.approx(0.3),
    ]
    assert rule_variant(None, wider=True) is None


def test_ledger_counts_earlier_rounds_against_the_run_caps() -> None:
    round_caps, run_caps = Caps(10, 100, 10, 10), Caps(2, 100, 10, 10)
    assert ChainLedger().stop_reason(round_caps, run_caps) is None
    later = ChainLedger(earlier_rounds=Spend(steps=2))
    assert later.stop_reason(round_caps, run_caps) == "budget:steps"
    assert later.stop_reason(round_caps, run_caps, earlier_rounds=Spend()) is None


@pytest.mark.slow
def test_builtin_chain_runs_where_direct_attempts_miss_the_bar(
    chain_run: Path, tiny_run: Path
) -> None:
    # the shared runs: tiny preset, seed 5, one round from the empty root; chains depth 3 from
    # the last rejected attempt (MaraChainsConfig) and the same round with chains off
    layout = RunLayout(chain_run)
    saved = json.loads(layout.config.read_text())
    assert saved["protocol"]["marachain"]["depth"] == 3
    assert saved["protocol"]["marachain"]["start"] == "last"
    paths = layout.round(1)
    synthesis = json.loads(paths.synthesis.read_text())
    chained = [g for g in synthesis if "chain" in g]
    assert chained, "a group whose direct attempts all miss the bar starts a chain"
    ledger = ChainLedger(paths.chain_ledger)
    assert ledger.entries
    for g in chained:
        ch = g["chain"]
        assert ch["label"] == "builtin chain"
        assert ch["start"]["node_id"] in {a["tool_id"] for a in g["attempts"]}
        assert all(not a["passed"] for a in g["attempts"])
        for node in ch["nodes"]:
            ref = parse_node_id(node["node_id"])
            assert ref.kind == "chain" and ref.group_id == g["group_id"] and ref.chain == 1
            assert paths.candidate(node["node_id"]).meta.exists()
        # every move keeps the contract (design §1.5) and is recorded with its category/label
        v0_meta = json.loads(paths.candidate(ch["v0"]["node_id"]).meta.read_text())["tool"]
        for node in ch["nodes"]:
            meta = json.loads(paths.candidate(node["node_id"]).meta.read_text())["tool"]
            assert meta["kind"] == v0_meta["kind"]
            assert meta["contract"]["signature"] == v0_meta["contract"]["signature"]
            assert meta["scope"]["tasks"] == v0_meta["scope"]["tasks"]
            assert node["axis"] in FAMILIES and node["category"] in CATEGORIES
            entry = ledger.get(f"{node['node_id']}:score")
            assert entry is not None and entry.category == node["category"]
            assert entry.label == f"builtin chain: {node['subject']}"
        spend = ledger.total(chain_id=ch["chain_id"])
        assert spend.steps == len(ch["nodes"]) == ch["spend"]["steps"]
        assert spend.val_runs == 0
        if g["survivor"] is not None:
            assert g["survivor"] == ch["winner"]["node_id"]
    # the rescue: from the last direct attempt, loosening the scope's matcher brings g3's one
    # held-out error of the contract's kind into reach and the node repairs it without harm; the
    # chain stops there and the gate admits the node with the round's other survivors
    (g3,) = [g for g in chained if g["group_id"] == "g3"]
    assert g3["chain"]["start"]["node_id"] == g3["attempts"][-1]["tool_id"]
    (node,) = g3["chain"]["nodes"]
    assert (node["axis"], node["category"], node["outcome"]) == ("scope", "A", "passed")
    assert (node["repairs"], node["harms"]) == (1, 0)
    assert node["categories"]["out_of_contract"] == 5  # five of six are another task's
    assert g3["survivor"] == node["node_id"] and g3["chain"]["stopped"].startswith("early stop")
    assert json.loads(paths.gate.read_text())["passed"]
    assert (paths.library / "stage_1" / f"{node['node_id']}.py").exists()
    total = ledger.total()
    assert total.steps <= MaraConfig().max_steps_round

    # frames: one row per node (v0 as step 0), per node and batch question, chain funnel rows
    nodes = chain_nodes_df(chain_run)
    assert list(nodes.columns) == CHAIN_NODES_COLUMNS
    assert len(nodes) == sum(len(g["chain"]["nodes"]) + 1 for g in chained)
    assert set(nodes.loc[nodes.step == 0, "node_id"]) == {
        g["chain"]["v0"]["node_id"] for g in chained
    }
    scores = chain_scores_df(chain_run)
    assert list(scores.columns) == CHAIN_SCORES_COLUMNS
    batch = chained[0]["chain"]["batch"]
    first = scores[scores.chain_id == chained[0]["chain"]["chain_id"]]
    assert first.groupby("node_id").size().eq(batch["n_held_out"] + batch["n_probe"]).all()
    assert ((first.part == "H") | (first.credited <= first.raw)).all()
    funnel = funnel_df(chain_run).set_index("step")["count"]
    assert funnel["chain_groups"] == len(chained)
    assert funnel["chain_nodes"] == sum(len(g["chain"]["nodes"]) for g in chained)

    # chain-off, same seed: every group without a chain and every direct attempt is unchanged
    off_paths = RunLayout(tiny_run).round(1)
    assert "marachain" not in json.loads(RunLayout(tiny_run).config.read_text())["protocol"]
    assert off_paths.prefilter.read_bytes() == paths.prefilter.read_bytes()
    assert not off_paths.chains.exists()
    before = {g["group_id"]: g for g in json.loads(off_paths.synthesis.read_text())}
    for g in synthesis:
        if "chain" not in g:
            assert g == before[g["group_id"]]
        else:
            assert g["attempts"] == before[g["group_id"]]["attempts"]
    assert chain_nodes_df(tiny_run).empty and chain_scores_df(tiny_run).empty
    assert not funnel_df(tiny_run)["step"].isin(CHAIN_FUNNEL_ORDER).any()


@pytest.mark.slow
def test_group_admissions_count_what_the_gate_admitted(chain_run: Path, tiny_run: Path) -> None:
    on, off = group_admissions(chain_run), group_admissions(tiny_run)
    assert set(on) == set(ADMISSION_KEYS) == set(off)
    assert on["status"] == off["status"] == "accepted"
    # the chain rescues g3 (its node survives the prefilter and the gate admits it) ...
    assert "g3" in on["chain_admitted"] and "g3" in on["admitted"] and "g3" not in off["admitted"]
    assert set(off["admitted"]) < set(on["admitted"])
    assert on["chained"] >= 1 and off["chained"] == 0 and off["chain_steps"] == 0
    # ... by the same direct attempts as chains off, within the analytic bound
    assert on["attempts"] == off["attempts"] and on["groups"] == off["groups"]
    assert 0 < on["chain_steps"] <= on["chain_steps_bound"]
    assert on["chain_rollouts"] <= on["chain_rollouts_bound"]
    # every admitted group's artifact is in the deployed stage; a survivor of a rejected round is not
    stage = RunLayout(chain_run).round(1).library / "stage_1" / "stage.json"
    deployed = {t["id"] for t in json.loads(stage.read_text())["tools"]}
    synthesis = json.loads(RunLayout(chain_run).round(1).synthesis.read_text())
    survivor = {g["group_id"]: g["survivor"] for g in synthesis if g.get("survivor")}
    assert all(survivor[g] in deployed for g in on["admitted"])
    assert on["survivors"] == len(survivor)
