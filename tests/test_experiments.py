import json
from pathlib import Path

import pytest

from tsevo.evolve.support import SupportConfig
from tsevo.studies import grid_points, load_spec, run_spec

#: the notebooks (and so these studies) run the paper's split unless ``support_asks`` is set
PAPER = SupportConfig(planner_requests=False, triage_bound=False)

REPO = Path(__file__).resolve().parents[1]


def test_every_committed_spec_is_valid():
    specs = sorted((REPO / "experiments").glob("*.json"))
    assert specs
    for p in specs:
        spec = load_spec(p)
        points = grid_points(spec)
        assert len(points) == max(
            1, int(__import__("math").prod(len(v) for v in spec.grid.values()))
        )


def test_unknown_parameters_and_notebooks_raise(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"name": "x", "notebook": "90_study_base_vs_evolved_vs_expert", "grid": {"sede": [1]}}
        )
    )
    with pytest.raises(TypeError):
        load_spec(bad)
    bad.write_text(json.dumps({"name": "x", "notebook": "nope"}))
    with pytest.raises(ValueError, match="unknown notebook"):
        load_spec(bad)


def test_dry_run_lists_points(tmp_path, capsys):
    spec = load_spec(REPO / "experiments" / "base_vs_evolved_vs_expert.json")
    assert run_spec(spec, tmp_path, dry_run=True) == []
    out = capsys.readouterr().out
    assert out.count("would run") == len(grid_points(spec))
    assert "reference_root=chronos_seed=11" in out


def test_marachain_spec_runs_the_benchmarks_arms_on_dev_seeds():
    from tests.bench.marachain_paired import ARMS
    from tsevo.evolve import ProtocolConfig
    from tsevo.notebook import MaraChainStudyConfig

    spec = load_spec(REPO / "experiments" / "marachain_paired.json")
    assert spec.notebook_file().stem == MaraChainStudyConfig.notebook
    points = grid_points(spec)
    assert {(p["arms"], p["seed"]) for p in points} == {
        (a, s) for a in ARMS for s in (101, 102, 103)
    }
    for p in points:
        cfg = MaraChainStudyConfig.from_params(p)  # the notebook's config takes every point
        bench = ProtocolConfig.from_params(
            ARMS[p["arms"]], base=ProtocolConfig(rounds=1, seed=p["seed"], support=PAPER)
        )
        assert cfg.protocol() == bench and cfg.suite_ref == f"synthetic:mixed:seed={p['seed']}"


def test_taxonomy_spec_runs_every_arm_of_one_dev_seed_per_cell():
    from tsevo.analysis import TAXONOMY_ARMS
    from tsevo.evolve import ProtocolConfig
    from tsevo.notebook import TaxonomyStudyConfig

    spec = load_spec(REPO / "experiments" / "taxonomy_coded.json")
    assert spec.notebook_file().stem == TaxonomyStudyConfig.notebook
    points = grid_points(spec)
    assert sorted(p["seed"] for p in points) == [101, 102, 103]
    for p in points:
        cfg = TaxonomyStudyConfig.from_params(p)  # the notebook's config takes every point
        assert cfg.arm_list()[0] == "none" and set(cfg.arm_list()) == set(TAXONOMY_ARMS)
        assert cfg.suite_ref == f"synthetic:mixed:seed={p['seed']}"
        assert cfg.base_config().protocol() == ProtocolConfig(
            rounds=1, seed=p["seed"], support=PAPER
        )
        coded = cfg.arm_protocol("coded", "t.json")
        assert coded.taxonomy.allow_unaccepted and coded.taxonomy.diagnoses == "instead"
        assert coded.replace(taxonomy=ProtocolConfig().taxonomy) == cfg.base_config().protocol()
