"""MaraConfig: knob-validated, off by default, presets and loose parameters."""

from __future__ import annotations

from dataclasses import fields

import pytest

from tsevo.knobs import check_knobs as protocol_check_knobs
from tsevo.marachain import MARA_PRESETS, MaraConfig, mara_params, mara_preset


def test_default_is_off_and_every_knob_is_documented_like_the_protocols():
    cfg = MaraConfig()
    assert cfg.depth == 0 and not cfg.enabled and cfg.is_default
    assert (cfg.start, cfg.acceptance, cfg.pool_size, cfg.sampler) == (
        "strongest",
        "paper",
        3,
        "leadership",
    )
    for f in fields(MaraConfig):
        assert set(f.metadata) == {"doc", "lo", "hi", "choices", "gap"} and f.metadata["doc"]
    protocol_check_knobs(cfg, "ProtocolConfig.marachain")  # the protocol's validator agrees
    assert [r["name"] for r in cfg.describe()][:2] == ["marachain.depth", "marachain.start"]


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"depth": -1}, ValueError, "depth: must be >= 0"),
        ({"depth": 17}, ValueError, "depth: must be <= 16"),
        ({"start": "first"}, ValueError, "start: must be one of"),
        ({"acceptance": "strict"}, ValueError, "acceptance: must be one of"),
        ({"sampler": "uniform"}, ValueError, "sampler: must be one of"),
        ({"pool_size": 0}, ValueError, "pool_size: must be >= 1"),
        ({"depth": True}, TypeError, "expected int, got bool"),
        ({"depth": "3"}, TypeError, "expected int, got str"),
        ({"max_tokens_round": -5}, ValueError, "max_tokens_round"),
        ({"polish_steps": 2}, ValueError, "polish steps need a chain"),
        ({"chains_per_group": 2}, ValueError, "more chains need depth"),
    ],
)
def test_bad_values_are_refused_naming_the_knob(changes, error, match):
    with pytest.raises(error, match=match):
        MaraConfig(**changes)


def test_presets_dicts_and_params():
    paper = mara_preset("MaraChain")
    assert (paper.depth, paper.pool_size) == (5, 3) and paper.enabled and not paper.is_default
    assert mara_preset("off") == MaraConfig() and set(MARA_PRESETS) == {"off", "marachain"}
    with pytest.raises(ValueError, match="unknown marachain preset"):
        mara_preset("gepa")
    cfg = MaraConfig(depth=3, acceptance="code", polish_steps=1)
    assert MaraConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(TypeError, match=r"unknown setting\(s\) \['deep'\]"):
        MaraConfig.from_dict({"deep": 1})
    assert MaraConfig.from_params({"depth": "3", "acceptance": "code"}) == MaraConfig(
        depth=3, acceptance="code"
    )
    with pytest.raises(TypeError, match="cannot read"):
        MaraConfig.from_params({"depth": "three"})


def test_mara_params_takes_its_keys_out_of_loose_protocol_parameters():
    rest, cfg = mara_params(
        {"seed": "1", "marachain": "marachain", "marachain.acceptance": "code"}, {}
    )
    assert rest == {"seed": "1"} and cfg == MaraConfig(depth=5, acceptance="code")
    rest, cfg = mara_params({"seed": 1}, {})
    assert rest == {"seed": 1} and cfg is None
    # keys apply on top of the base config's, without resetting the others
    base = {"marachain": MaraConfig(depth=4, pool_size=5).to_dict()}
    _, cfg = mara_params({"marachain.polish_steps": "2"}, base)
    assert cfg == MaraConfig(depth=4, pool_size=5, polish_steps=2)
    with pytest.raises(TypeError, match="unknown setting"):
        mara_params({"marachain.deep": 1}, {})


def test_caps_and_the_analytic_bound():
    cfg = MaraConfig(depth=3, chains_per_group=2, polish_steps=1, max_steps_run=99)
    assert cfg.run_caps().steps == 99 and cfg.round_caps().to_dict()["tokens"] == 1_500_000
    assert cfg.bound_per_group(64) == {"steps": 7, "rollouts": 7 * 64, "calls": 42}
