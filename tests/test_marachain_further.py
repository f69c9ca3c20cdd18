"""Further chains and polish runs from the Pareto pool (design §5.2), on the tiny seed-5 round.

Group g3 of tiny seed 5 misses the bar with every direct attempt. With ``start = strongest`` and
one step per chain its first chain finds no passing node, so chain 2 starts from a seeded draw of
the pool; with ``start = last`` and depth 3 its first chain clears the bar at step 1 with a
repair rate below an unreachable ``strong`` threshold, so a polish run refines a draw among the
pool's passing, not-yet-strong members. Both draws are recomputed here from the stored pool
snapshot with :func:`tsevo.marachain.sample`: the engine draws nothing but what the seed says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tsevo.analysis.chain_inspect import chain_lineage_df, chains_df
from tsevo.analysis.marachain import (
    chain_funnel_counts,
    chain_nodes_df,
    chain_scores_df,
    selection_optimism_df,
)
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.evolve.support import SupportConfig
from tsevo.marachain import ChainLedger, MaraConfig, PoolMember, sample
from tsevo.notebook import make_synthetic_suite


def _chain(out: Path, cfg: ProtocolConfig) -> dict[str, Any]:
    evolve(make_synthetic_suite("tiny", 5), config=cfg, out=out, log=lambda _s: None)
    groups = json.loads((out / "rounds" / "r1" / "synthesis.json").read_text())
    (g3,) = [g for g in groups if g.get("chain")]
    return dict(g3["chain"])


def _redraw(snapshot: dict[str, Any], cfg: ProtocolConfig, event: str, keep: Any = None) -> str:
    members = [PoolMember.from_dict(m) for m in snapshot["kept"]]
    members = [m for m in members if keep is None or keep(m)]
    mara = cfg.marachain
    (got,) = sample(
        members, 1, sampler=mara.sampler, seed=mara.draw_seed(cfg.seed), round_=1,
        group_id="g3", event=event,
    )  # fmt: skip
    return got


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("further")
    paper = SupportConfig(
        planner_requests=False, triage_bound=False
    )  # group g3's story is under the paper's split
    more = ProtocolConfig(seed=5, support=paper, marachain=MaraConfig(depth=1, chains_per_group=2))
    polish = ProtocolConfig(
        seed=5,
        support=paper,
        prefilter_early_stop=1.0,
        marachain=MaraConfig(depth=3, start="last", polish_steps=1),
    )
    return {
        "more": (more, _chain(base / "more", more), base / "more"),
        "polish": (polish, _chain(base / "polish", polish), base / "polish"),
    }


def test_chain_2_starts_from_a_seeded_pool_draw(runs: dict[str, Any]) -> None:
    cfg, chain, out = runs["more"]
    assert not chain["winner"]["yes"] and chain["stopped"] == "depth reached"
    (w,) = chain["further"]
    assert w["chain_id"] == "r1.g3.c2" and [n["node_id"] for n in w["nodes"]] == ["r1.g3.c2.s1"]
    assert w["start"] == _redraw(chain["pools"][0], cfg, "chain:2")
    assert w["nodes"][0]["parent_id"] == w["start"]
    assert w["spend"]["steps"] == 1 and chain["spend"]["steps"] == 1
    assert chain["bound"]["steps"] == 2 and len(chain["pools"]) == 2
    assert chain["pool"] == chain["pools"][-1]
    ledger = ChainLedger(out / "rounds" / "r1" / "chains" / "ledger.jsonl")
    assert ledger.has("r1.g3.c1.s1:score") and ledger.has("r1.g3.c2.s1:score")
    assert ledger.total().steps == 2


def test_a_polish_run_refines_a_passing_not_strong_member(runs: dict[str, Any]) -> None:
    cfg, chain, _out = runs["polish"]
    assert chain["stopped"] == "early stop at r1.g3.c1.s1"  # chain 2 is not needed
    (w,) = chain["further"]
    assert w["chain_id"] == "r1.g3.p1" and len(w["nodes"]) == 1
    assert w["nodes"][0]["node_id"] == "r1.g3.p1.s1"
    passing = {"r1.g3.c1.s1"}  # the only member that clears the bar (none is strong at 1.0)
    assert w["start"] == _redraw(chain["pools"][0], cfg, "polish:1", lambda m: m.node_id in passing)
    assert chain["winner"]["yes"]


def test_one_chain_without_polish_only_reports_its_pool(chain_run: Path) -> None:
    groups = json.loads((chain_run / "rounds" / "r1" / "synthesis.json").read_text())
    chains = [g["chain"] for g in groups if g.get("chain")]
    assert chains and all("further" not in c and "pools" not in c for c in chains)
    for c in chains:
        ids = {m["node_id"] for m in c["pool"]["kept"]} | {r[0] for r in c["pool"]["retired"]}
        assert ids == {c["v0"]["node_id"], *(n["node_id"] for n in c["nodes"] if "repairs" in n)}


def test_frames_show_every_walk(runs: dict[str, Any]) -> None:
    _cfg, _chain_record, out = runs["more"]
    lin = chain_lineage_df(out)
    walk = lin[lin["chain_id"] == "r1.g3.c2"]
    assert list(walk["node_id"]) == ["r1.g3.c2.s1"] and list(walk["depth"]) == [1]
    row = chains_df(out).iloc[0]
    assert row["n_nodes"] == 2 and row["steps"] == 2


def test_node_and_score_frames_and_funnel_count_every_walk(runs: dict[str, Any]) -> None:
    _cfg, _chain_record, out = runs["more"]
    nodes = chain_nodes_df(out)
    assert list(nodes["chain_id"]) == ["r1.g3.c1", "r1.g3.c1", "r1.g3.c2"]
    assert list(nodes["step"]) == [0, 1, 1]
    scores = chain_scores_df(out)
    assert set(scores["chain_id"]) == {"r1.g3.c1", "r1.g3.c2"}
    assert chain_funnel_counts(out)[1]["chain_nodes"] == 2


def test_the_optimism_probe_sets_batch_numbers_beside_validation(chain_run: Path) -> None:
    probe = selection_optimism_df(chain_run)
    groups = json.loads((chain_run / "rounds" / "r1" / "synthesis.json").read_text())
    survivors = {g["group_id"]: g["survivor"] for g in groups if g.get("survivor")}
    assert dict(zip(probe["group"], probe["node_id"], strict=True)) == survivors
    (g3,) = [g for g in groups if g["group_id"] == "g3"]
    won = g3["chain"]["winner"]["node_id"]
    row = probe[probe["node_id"] == won].iloc[0]
    node = next(n for n in g3["chain"]["nodes"] if n["node_id"] == won)
    assert row["kind"] == "chain" and row["selected_on_batch"]
    assert (row["batch_repairs"], row["batch_harms"]) == (node["repairs"], node["harms"])
    val = pd.read_parquet(chain_run / "rounds" / "r1" / "val_paired.parquet")
    mine = val[[won in list(ids) for ids in val["replaced_by"]]]
    assert row["val_helped"] == int((mine["flip"] == "helped").sum())
    assert row["val_harmed"] == int((mine["flip"] == "harmed").sum())
    assert not probe[probe["kind"] == "direct"]["selected_on_batch"].any()
