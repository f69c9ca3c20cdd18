"""group_admissions (issue 13's paired study): what counts as admitted, on hand-made round folders.

A group is admitted when its artifact is in the library the round deployed: the round's verdict
decides (``round.json``), not the first gate (a rejected library may be pruned and then admitted),
and a pruned group's artifact does not count even though it passed the prefilter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tsevo.analysis.chain_arms import ADMISSION_KEYS, group_admissions
from tsevo.store import RunStore


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
