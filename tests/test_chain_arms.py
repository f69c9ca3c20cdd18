"""The paired study's frames (issue 13): what counts as admitted, and how arms pair by seed.

A group is admitted when its artifact is in the library the round deployed: the round's verdict
decides (``round.json``), not the first gate (a rejected library may be pruned and then admitted),
and a pruned group's artifact does not count even though it passed the prefilter. Arm rows pair by
seed (:func:`chain_arms_df`) and total per arm (:func:`chain_arms_summary`); on the real tiny
rounds, an arm's row says what :func:`tsevo.studies.run_outcome` says of the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tsevo.analysis.chain_arms import (
    ADMISSION_KEYS,
    CHAIN_ARM_KEYS,
    CHAIN_ARMS,
    CHAIN_ARMS_COLUMNS,
    CHAIN_RECOVERIES_COLUMNS,
    chain_arm_params,
    chain_arm_row,
    chain_arms_df,
    chain_arms_summary,
    chain_recoveries_df,
    group_admissions,
)
from tsevo.evolve import ProtocolConfig
from tsevo.marachain import MaraConfig
from tsevo.store import RunStore
from tsevo.studies import run_outcome


def _round(tmp: Path, status: str, gate_passed: bool, deployed: list[str]) -> Path:
    store = RunStore.create(tmp / "run", {"purpose": "chain_arms test"})
    paths = store.layout.round(1)
    chain: dict[str, Any] = {
        "spend": {"steps": 2, "rollouts": 20, "calls": 0},
        "bound": {"steps": 3, "rollouts": 30, "calls": 18},
        "batch": {"n_held_out": 6, "n_probe": 4},
    }
    synthesis = [
        {"group_id": "g1", "attempts": [{}], "survivor": "r1.g1.a1"},
        {"group_id": "g2", "attempts": [{}, {}, {}], "survivor": "r1.g2.c1.s2", "chain": chain},
        {"group_id": "g3", "attempts": [{}, {}], "survivor": "r1.g3.a2"},
        {"group_id": "g4", "attempts": [{}, {}, {}], "survivor": None, "chain": chain},
    ]
    store.write_json(paths.synthesis, synthesis)
    store.write_json(paths.gate, {"passed": gate_passed})
    store.write_json(paths.summary, {"round": 1, "status": status})
    store.write_json(
        paths.library / "stage_1" / "stage.json", {"tools": [{"id": t} for t in deployed]}
    )
    return store.layout.root


def test_pruned_and_admitted_counts_only_what_the_pruned_library_keeps(tmp_path: Path) -> None:
    run = _round(tmp_path, "accepted", False, ["r1.g1.a1", "r1.g2.c1.s2"])
    a = group_admissions(run)
    assert set(a) == set(ADMISSION_KEYS)
    assert a["status"] == "accepted"  # the first gate rejected; pruning admitted two of three
    assert a["admitted"] == ["g1", "g2"] and a["survivors"] == 3
    assert (a["chained"], a["chain_survivors"], a["chain_admitted"]) == (2, 1, ["g2"])
    assert a["attempts"] == 9 and a["groups"] == 4
    assert (a["chain_steps"], a["chain_rollouts"], a["chain_steps_bound"]) == (4, 40, 6)
    assert a["chain_rollouts_bound"] == 60


def test_rejected_round_admits_nothing(tmp_path: Path) -> None:
    run = _round(tmp_path, "rejected", False, ["r1.g1.a1"])
    a = group_admissions(run)
    assert a["status"] == "rejected" and a["admitted"] == [] and a["chain_admitted"] == []


def test_unfinished_round_is_refused(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "run", {"purpose": "chain_arms test"})
    with pytest.raises(FileNotFoundError, match="round 1 has not finished"):
        group_admissions(store.layout.root)


def _arm(seed: int, arm: str, admitted: list[str], gain: float | None = 0.02, **kw: Any) -> dict:
    row: dict[str, Any] = {
        "seed": seed,
        "arm": arm,
        "status": "accepted" if admitted else "rejected",
        "admitted": admitted,
        "chain_admitted": [],
        "attempts": 9,
        "chain_steps": 2 if arm == "chain" else 0,
        "chain_steps_bound": 3 if arm == "chain" else 0,
        "chain_rollouts": 20 if arm == "chain" else 0,
        "chain_rollouts_bound": 30 if arm == "chain" else 0,
        "gain": gain,
        "helped": 5,
        "harmed": 1,
    }
    return row | kw


def test_arms_pair_by_seed_into_recovered_lost_and_attempt_matched_groups() -> None:
    rows = [
        _arm(2, "discard", ["g1", "g2"], gain=0.05),
        _arm(2, "chain", ["g1", "g3", "g4"], gain=0.04, harmed=3, chain_admitted=["g1", "g3"]),
        _arm(2, "discard_k_plus_d", ["g1", "g2", "g4"]),
        _arm(1, "chain", ["g1"]),  # seed 1 lacks its other arms
    ]
    f = chain_arms_df(rows)
    assert tuple(f.columns) == CHAIN_ARMS_COLUMNS and list(f["seed"]) == [1, 2]
    two = f.set_index("seed").loc[2]
    counts = [two[f"{a}_admitted"] for a in CHAIN_ARMS]
    assert counts == [2, 3, 3]
    assert two["recovered"] == ["g3", "g4"] and two["lost"] == ["g2"]
    assert two["recovered_by_node"] == ["g3"]  # g4's admitted artifact is a direct attempt
    assert two["k_plus_d_recovered"] == ["g4"] and two["chain_only"] == ["g3"]
    assert (two["chain_steps"], two["chain_steps_bound"]) == (2, 3)
    assert (two["chain_rollouts"], two["chain_rollouts_bound"]) == (20, 30)
    assert two["rollouts_per_recovered"] == 20.0  # 20 rollouts, 1 group recovered by a node
    assert (two["discard_gain_pp"], two["chain_gain_pp"], two["chain_harmed"]) == (5.0, 4.0, 3)
    one = f.set_index("seed").loc[1]
    assert one["chain_admitted"] == 1 and one["recovered"] is None and one["discard_status"] is None
    assert one["rollouts_per_recovered"] is None
    none = chain_arms_df([_arm(3, "discard", ["g1"]), _arm(3, "chain", ["g1"])]).iloc[0]
    assert none["recovered"] == [] and none["rollouts_per_recovered"] is None


def test_recoveries_need_a_chain_arm(tmp_path: Path) -> None:
    run = _round(tmp_path, "accepted", True, ["r1.g1.a1"])
    empty = chain_recoveries_df({"discard": run})
    assert empty.empty and tuple(empty.columns) == CHAIN_RECOVERIES_COLUMNS


def test_a_seed_arm_given_twice_or_an_unknown_arm_is_refused() -> None:
    with pytest.raises(ValueError, match="two rows for seed 1"):
        chain_arms_df([_arm(1, "chain", []), _arm(1, "chain", ["g1"])])
    with pytest.raises(ValueError, match="unknown arm"):
        chain_arms_df([_arm(1, "chains", [])])
    with pytest.raises(ValueError, match="unknown arm"):
        chain_arm_params("chains")


def test_summary_checks_total_and_at_least_three_seeds() -> None:
    rows = [_arm(s, "discard", ["g1"]) for s in (1, 2, 3, 4)]
    rows += [_arm(s, "chain", ["g1", "g2"] if s < 4 else []) for s in (1, 2, 3, 4)]
    s = chain_arms_summary(rows)
    assert s["chain_more_than_discard_seeds"] == [1, 2, 3]
    assert s["arms"]["chain"]["admitted_total"] == 6 > s["arms"]["discard"]["admitted_total"] == 4
    assert s["check_chain_beats_discard"] is True
    assert s["arms"]["discard_k_plus_d"]["seeds"] == 0
    only_two = chain_arms_summary(rows, seeds=[1, 2, 4])
    assert only_two["chain_more_than_discard_seeds"] == [1, 2]
    assert only_two["check_chain_beats_discard"] is False  # more in total, but on 2 seeds only
    assert only_two["arms"]["chain"]["test_gain_pp_mean"] == 2.0


def test_arm_params_are_the_arms_protocols() -> None:
    base = ProtocolConfig(rounds=1, seed=101)
    arms = {a: ProtocolConfig.from_params(chain_arm_params(a), base=base) for a in CHAIN_ARMS}
    assert arms["discard"] == ProtocolConfig(rounds=1, seed=101, max_synthesis_attempts=3)
    assert arms["chain"] == ProtocolConfig(
        rounds=1, seed=101, max_synthesis_attempts=3, marachain=MaraConfig(depth=3)
    )
    assert arms["discard_k_plus_d"] == ProtocolConfig(rounds=1, seed=101, max_synthesis_attempts=6)
    last = ProtocolConfig.from_params(chain_arm_params("chain", 2, 4, "last"), base=base)
    assert last.marachain == MaraConfig(depth=4, start="last")
    assert last.max_synthesis_attempts == 2
    assert chain_arm_params("chain", depth=0, start="last") == chain_arm_params("discard")


def test_arm_row_without_a_test_table_or_library(tmp_path: Path) -> None:
    row = chain_arm_row(_round(tmp_path, "accepted", True, ["r1.g1.a1"]))
    assert tuple(row) == CHAIN_ARM_KEYS and row["n_admitted"] == 1
    assert row["gain"] is None and row["delta"] is None and row["tools"] == 0


@pytest.mark.slow
def test_arm_rows_of_real_rounds_pair_into_the_chains_recovery(
    tiny_run: Path, chain_run: Path
) -> None:
    rows = [
        {"seed": 5, "arm": "discard", **chain_arm_row(tiny_run)},
        {"seed": 5, "arm": "chain", **chain_arm_row(chain_run)},
    ]
    for run, row in zip((tiny_run, chain_run), rows, strict=True):
        outcome = run_outcome(run)
        assert {k: row[k] for k in CHAIN_ARM_KEYS[-6:]} == {
            k: outcome[k] for k in CHAIN_ARM_KEYS[-6:]
        }
    paired = chain_arms_df(rows).iloc[0]
    assert "g3" in paired["recovered"] and "g3" in paired["recovered_by_node"]
    assert paired["lost"] == []
    assert paired["chain_admitted"] == paired["discard_admitted"] + len(paired["recovered"])
    assert 0 < paired["chain_steps"] <= paired["chain_steps_bound"]
    assert paired["discard_k_plus_d_admitted"] is None and paired["chain_only"] is None
