"""The ablation switches (issue 14): one config nested in the protocol, each switch changing a round.

Config: the switches validate, document and (de)serialize like the protocol's knobs, the paper's
names map to config values, a run records its ablation in the manifest and refuses to resume under
other switches.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsevo.evolve import ProtocolConfig
from tsevo.evolve.ablation import PAPER_ABLATIONS, AblationConfig, ablation_manifest


# --------------------------------------------------------------------------- the config
def test_switches_default_on_documented_and_validated() -> None:
    cfg = ProtocolConfig()
    assert cfg.ablation == AblationConfig() and cfg.ablation.is_default
    assert cfg.to_dict()["ablation"] == {
        "calibration": True,
        "gate": True,
        "scope": True,
        "residual_chain": True,
    }
    for row in cfg.ablation.describe():
        assert row["name"].startswith("ablation.") and len(row["doc"]) > 40
    assert "w/o residual chain" in ProtocolConfig.doc("ablation")
    with pytest.raises(TypeError, match=r"ProtocolConfig\.ablation\.gate"):
        AblationConfig(gate="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown switch"):
        ProtocolConfig(ablation={"gates": False})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown knob"):
        ProtocolConfig.from_params({"ablations.gate": "off"})


def test_named_ablations_map_to_config_values_and_round_trip(tmp_path: Path) -> None:
    seen = set()
    for name in PAPER_ABLATIONS:
        cfg = ProtocolConfig(seed=3).ablated(name)
        assert cfg.ablation_name == name and cfg.seed == 3
        assert ProtocolConfig.load(cfg.save(tmp_path / f"{len(seen)}.json")) == cfg
        assert ProtocolConfig.from_params({"ablation": name}) == ProtocolConfig().ablated(name)
        seen.add(cfg.fingerprint())
    assert len(seen) == len(PAPER_ABLATIONS)  # seven distinct configs
    assert ProtocolConfig().ablated("W/O Cali").ablation.calibration is False
    assert ProtocolConfig().ablated("w/ chronos").root == "chronos"
    p = ProtocolConfig.from_params({"ablation.gate": "off", "ABLATION.SCOPE": "0"})
    assert (p.ablation.gate, p.ablation.scope, p.ablation.calibration) == (False, False, True)
    assert p.ablation_name == "custom"
    with pytest.raises(ValueError, match="unknown ablation"):
        ProtocolConfig().ablated("w/o planner")
    with pytest.raises(ValueError, match="sets root"):
        ProtocolConfig.from_params({"ablation": "w/ expert", "root": "chronos"})


def test_the_chronos_root_is_labelled_when_it_runs_on_the_statistical_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TSEVO_CHRONOS_MODEL", raising=False)
    man = ablation_manifest("chronos", AblationConfig())
    assert man["name"] == "w/ chronos" and man["forecaster"]["backend"] == "stat"
    assert "statistical fallback" in man["label"]
    full = ablation_manifest("empty", AblationConfig())
    assert full["label"] == "full" and "forecaster" not in full


def test_manifest_records_the_ablation_and_resume_under_other_switches_is_refused(
    tmp_path: Path,
) -> None:
    from tests import round_fixtures as rf
    from tsevo.data.synthetic import make_suite
    from tsevo.evolve.run import evolve

    suite = make_suite(2, seed=rf.SEED)
    out = tmp_path / "run"
    cfg = ProtocolConfig(seed=rf.SEED).ablated("w/o gate")
    # a builtin round on 2 questions per family: cheap, and it reaches no gate or an empty one
    evolve(suite, config=cfg, out=out, log=lambda s: None)
    man = json.loads((out / "manifest.json").read_text())
    assert man["ablation"]["name"] == "w/o gate" and man["ablation"]["switches"]["gate"] is False
    assert json.loads((out / "config.json").read_text())["protocol"]["ablation"]["gate"] is False
    with pytest.raises(ValueError, match="different config"):
        evolve(suite, config=ProtocolConfig(seed=rf.SEED), out=out, log=lambda s: None)
    evolve(suite, config=cfg, out=out, log=lambda s: None)  # the same switches resume


def test_a_run_folder_saved_before_the_switches_existed_resumes_under_the_defaults(
    tmp_path: Path,
) -> None:
    from tsevo.evolve.run import _protocol_record

    old = ProtocolConfig(seed=4).to_dict()
    del old["ablation"]
    (tmp_path / "config.json").write_text(json.dumps({"protocol": old}))
    assert _protocol_record(tmp_path, ProtocolConfig(seed=4), True) == old
    ablated = ProtocolConfig(seed=4).ablated("w/o scope")
    assert _protocol_record(tmp_path, ablated, True)["ablation"]["scope"] is False
