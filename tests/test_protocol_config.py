"""The frozen protocol config (Table 3): values, docs, validation, (de)serialization."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import pytest

from tsevo.evolve import ProtocolConfig
from tsevo.evolve.config import exact

TABLE_3 = {
    "rounds": 1,
    "max_synthesis_attempts": 3,
    "define_sample": 150,
    "max_categories": 8,
    "define_retries": 2,
    "assign_batch": 32,
    "assign_retries": 2,
    "assign_passes": 3,
    "resplit_above": 64,
    "resplit_times": 1,
    "min_bucket": 2,
    "planner_support": 12,
    "planner_background": 48,
    "global_planner_attempts": 2,
    "repairs_per_violation": 1,
    "replan_after_zero_repair": 2,
    "calibration_model": "binary_decision_tree_v1",
    "prefilter_errors": 32,
    "prefilter_min_repairs": 1,
    "prefilter_early_stop": 0.40,
    "prefilter_harm_probe": 32,
    "prefilter_harm_cap_abs": 2,
    "prefilter_harm_cap_frac": 0.10,
    "prefilter_exec_error_cap": 0.05,
    "gate_z": 1.96,
    "single_round_net_floor": 3,
    "single_round_net_frac": 0.02,
    "single_round_harm_cap": 0.10,
    "invalid_error_rate": 0.02,
    "prune_min_harm": 2,
    "prune_harm_ratio": 2.0,
    "auto_prune": False,
    "test_rejected_candidate": True,
    "max_tools_per_question": 3,
    "calibration_min_per_class": 16,
    "calibration_holdout": 0.2,
    "calibration_min_bal_acc": 0.55,
    "root": "empty",
    "seed": 0,
    "single_round_rule": "only_when_rounds_is_1",
}


def test_defaults_are_the_protocol() -> None:
    d = ProtocolConfig().to_dict()
    for key, value in TABLE_3.items():
        assert d[key] == value, key
        assert type(d[key]) is type(value), key


def test_every_knob_is_documented_and_gaps_are_listed() -> None:
    cfg = ProtocolConfig()
    rows = cfg.describe()
    assert [r["name"] for r in rows] == list(ProtocolConfig.field_names())
    # the nested configs (answer, marachain, taxonomy, support) are saved only when not default
    assert [*cfg.to_dict(), "answer", "marachain", "taxonomy", "support"] == list(
        ProtocolConfig.field_names()
    )
    for r in rows:
        assert len(r["doc"]) > 20, r["name"]
        assert ProtocolConfig.doc(r["name"]) == r["doc"]
    gaps = cfg.decided_gaps()
    assert gaps["single_round_rule"] == "only_when_rounds_is_1"
    assert {"completion_rule", "harmful_rule", "dependents_rule", "failed_final_gate"} <= set(gaps)
    with pytest.raises(KeyError):
        ProtocolConfig.doc("nope")


def test_frozen_and_keyword_only() -> None:
    cfg = ProtocolConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.rounds = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        ProtocolConfig(1)  # type: ignore[misc]


def test_json_round_trip(tmp_path: Path) -> None:
    cfg = ProtocolConfig(rounds=3, seed=7, gate_z=2.5)
    p = cfg.save(tmp_path / "run" / "config.json")
    assert ProtocolConfig.load(p) == cfg
    assert json.loads(p.read_text())["rounds"] == 3
    assert ProtocolConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.fingerprint() == ProtocolConfig.load(p).fingerprint()
    assert cfg.fingerprint() != ProtocolConfig().fingerprint()


def test_unknown_keys_raise_type_error_naming_them() -> None:
    with pytest.raises(TypeError, match=r"\['bogus', 'zeta'\]"):
        ProtocolConfig.from_dict({"rounds": 2, "zeta": 1, "bogus": 2})
    with pytest.raises(TypeError, match="bogus"):
        ProtocolConfig.from_params({"bogus": "1"})
    with pytest.raises(TypeError, match="bogus"):
        ProtocolConfig().replace(bogus=1)


def test_from_params_coerces_and_is_case_insensitive() -> None:
    cfg = ProtocolConfig.from_params(
        {"ROUNDS": "3", "gate_z": "2.0", "TEST_REJECTED_CANDIDATE": "false", "root": "expert"}
    )
    assert (cfg.rounds, cfg.gate_z, cfg.test_rejected_candidate, cfg.root) == (
        3,
        2.0,
        False,
        "expert",
    )
    assert ProtocolConfig.from_params({"seed": 4}, base=cfg).rounds == 3
    with pytest.raises(TypeError, match="cannot read"):
        ProtocolConfig.from_params({"rounds": "three"})
    with pytest.raises(TypeError, match="more than once"):
        ProtocolConfig.from_params({"rounds": 1, "ROUNDS": 2})


def test_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="rounds"):
        ProtocolConfig(rounds=0)
    with pytest.raises(TypeError, match="rounds"):
        ProtocolConfig(rounds=True)
    with pytest.raises(TypeError, match="define_sample"):
        ProtocolConfig.from_dict({"define_sample": 1.5})
    with pytest.raises(ValueError, match="single_round_harm_cap"):
        ProtocolConfig(single_round_harm_cap=1.5)
    with pytest.raises(ValueError, match="root"):
        ProtocolConfig(root="chronos2")
    with pytest.raises(ValueError, match="single_round_rule"):
        ProtocolConfig(single_round_rule="sometimes")
    with pytest.raises(ValueError, match="finite"):
        ProtocolConfig(gate_z=float("inf"))
    with pytest.raises(ValueError, match="auto_prune"):
        ProtocolConfig(auto_prune=True)
    assert ProtocolConfig(prune_harm_ratio=3).prune_harm_ratio == 3.0  # int accepted for float


def test_single_round_applies() -> None:
    cfg = ProtocolConfig()
    assert cfg.single_round_applies(1) and not cfg.single_round_applies(2)
    assert cfg.replace(single_round_rule="always").single_round_applies(5)
    assert not cfg.replace(single_round_rule="never").single_round_applies(1)


def test_exact_reads_decimals() -> None:
    assert exact(0.02) == Fraction(1, 50)
    assert exact(0.1) * 100 == 10
    assert exact(3) == 3
    with pytest.raises(TypeError):
        exact(True)
