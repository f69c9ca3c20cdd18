"""Notebook configs (one shared base; parameters map 1:1, unknown names raise) and the tables they show.

The tables (:mod:`tsevo.analysis`), figures (:mod:`tsevo.widgets`) and the study's comparison
(:mod:`tsevo.studies`) are checked against the run's own records on one tiny REAL round (synthetic
tiny preset, seed 5), so a table that drifts from what the round stored fails here.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import fields
from pathlib import Path

import pytest

from tsevo import analysis, studies, widgets
from tsevo import notebook as nb
from tsevo.evolve import ProtocolConfig
from tsevo.evolve.support import SupportConfig
from tsevo.roles import RoleSet
from tsevo.store import RunStore


# --------------------------------------------------------------------------------------- configs
@pytest.mark.parametrize("cls", list(nb.CONFIGS.values()), ids=list(nb.CONFIGS))
def test_config_from_params_is_strict(cls: type) -> None:
    defaults = cls()
    names = [f.name for f in fields(cls)]
    assert "run_dir" in names
    same = cls.from_params({n: getattr(defaults, n) for n in names})
    assert same == defaults and same.to_dict() == defaults.to_dict()
    with pytest.raises(TypeError, match="unknown parameters"):
        cls.from_params({"run_dri": "x"})
    with pytest.raises(TypeError, match="must be str"):
        cls.from_params({"run_dir": 3})
    with pytest.raises(dataclass_frozen_error()):
        defaults.run_dir = "x"  # type: ignore[misc]


def dataclass_frozen_error() -> type[Exception]:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError


SHARED = ["run_dir", "size", "seed", "backend", "base_url", "model", "temperature", "concurrency"]


@pytest.mark.parametrize("cls", list(nb.CONFIGS.values()), ids=list(nb.CONFIGS))
def test_every_config_shares_the_base(cls: type) -> None:
    assert issubclass(cls, nb.NotebookConfig)
    names = [f.name for f in fields(cls)]
    base = [f.name for f in fields(nb.NotebookConfig)]
    assert names[: len(base)] == base and base[: len(SHARED)] == SHARED
    assert not {n for n in names if "key" in n.lower()}  # the API key is never a parameter
    with pytest.raises(TypeError, match="unknown parameters"):
        cls.from_params({"api_key": "sk-x"})
    with pytest.raises(ValueError, match="backend"):
        cls.from_params({"backend": "gpt"})


def test_the_base_builds_the_protocol_and_the_roles(tmp_path: Path) -> None:
    cfg = nb.QuickstartConfig(seed=7, rounds=2)
    paper = SupportConfig(
        planner_requests=False, triage_bound=False
    )  # the notebooks narrate the paper's split
    assert cfg.protocol() == ProtocolConfig(rounds=2, seed=7, support=paper)
    assert nb.GateConfig(seed=3).protocol() == ProtocolConfig(rounds=1, seed=3, support=paper)
    asks = nb.QuickstartConfig(support_asks=True).protocol()
    assert asks == ProtocolConfig(rounds=1, seed=5) and asks.support.planner_requests
    assert cfg.suite_ref == "synthetic:tiny:seed=7"
    with cfg.roles() as roles:
        assert roles.backend == "builtin"
        # the tiny runs the notebooks narrate were found without pooling under shared option sets
        assert roles.local_planner.kinds.pool_option_sets is False
    with nb.QuickstartConfig(support_asks=True).roles() as roles:
        assert roles.local_planner.kinds.pool_option_sets is True
    llm = nb.DataConfig(
        backend="llm",
        base_url="http://127.0.0.1:9/v1",
        model="scripted",
        temperature=0.5,
        concurrency=2,
        cache_mode="off",
    )
    d = llm.llm_configs().default
    assert (d.base_url, d.model, d.temperature, d.concurrency, d.cache_mode) == (
        "http://127.0.0.1:9/v1",
        "scripted",
        0.5,
        2,
        "off",
    )
    with llm.roles(tmp_path / "run") as roles:
        assert isinstance(roles, RoleSet) and roles.backend == "llm"


def test_int_fields_reject_bools_and_strings() -> None:
    with pytest.raises(TypeError, match="seed must be int"):
        nb.QuickstartConfig.from_params({"seed": True})
    with pytest.raises(TypeError, match="round must be int"):
        nb.GateConfig.from_params({"round": "1"})


def test_configs_cover_the_notebooks() -> None:
    stems = {p.stem for p in studies.default_notebooks()}
    assert stems == set(nb.CONFIGS)
    assert {c.notebook for c in nb.CONFIGS.values()} == stems


def test_run_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(nb.RUN_DIR_ENV, raising=False)
    assert nb.resolve_run_dir("") == Path("runs/notebooks")
    monkeypatch.setenv(nb.RUN_DIR_ENV, str(tmp_path))
    assert nb.DataConfig().run_path() == tmp_path
    assert nb.DataConfig(run_dir="elsewhere").run_path() == Path("elsewhere")


# --------------------------------------------------------------------------------------- steps
def test_run_level_tables_agree_with_the_stored_round(tiny_run: Path) -> None:
    store = RunStore.open(tiny_run)
    rd = store.read_json("rounds/r1/round.json")
    gate = store.read_json("rounds/r1/gate.json")
    base = analysis.base_pass_table(tiny_run)
    allrow = base.iloc[-1]
    assert allrow["task"] == "ALL" and allrow["n"] == rd["funnel"]["train_questions"]
    assert allrow["errors"] == rd["funnel"]["errors"]
    assert allrow["errors_tool_fired"] + allrow["errors_no_tool"] == allrow["errors"]
    assert abs(allrow["accuracy"] - rd["funnel"]["train_accuracy"]) < 1e-6
    assert base.iloc[:-1]["n"].sum() == allrow["n"]

    buckets = analysis.buckets_table(tiny_run, max_members=3)
    stored = store.read_json("rounds/r1/buckets.json")["buckets"]
    assert list(buckets["bucket"]) == [b["id"] for b in stored]
    assert list(buckets["members"]) == [len(b["members"]) for b in stored]
    assert (buckets["support"] + buckets["held_out"] <= buckets["members"]).all()
    assert all(len(m.split(", ")) <= 3 for m in buckets["first_members"])
    assert len(buckets) == rd["funnel"]["buckets"]

    assert len(analysis.contracts_table(tiny_run)) == rd["funnel"]["contracts"]
    attempts = analysis.attempts_table(tiny_run)
    assert len(attempts) == rd["funnel"]["attempts"]
    assert int(attempts["survivor"].sum()) == rd["funnel"]["survivors"]
    src = analysis.candidate_source(tiny_run, rd["deployed"][0])
    assert src.lstrip().startswith("def ")
    assert len(analysis.calibration_table(tiny_run)) == 0  # tiny: no class reaches 16 train rows

    paired = analysis.paired_table(tiny_run).iloc[-1]
    assert (paired["helped"], paired["harmed"], paired["n"]) == (gate["h"], gate["m"], gate["n"])
    changed = analysis.paired_rows(tiny_run)
    assert len(changed) == gate["h"] + gate["m"]
    repairs = analysis.repairs_table(tiny_run)
    assert set(repairs["candidate"]) <= set(attempts["tool_id"])
    assert len(analysis.prune_df(tiny_run)) == 0  # accepted at the first gate: no prune

    chain = analysis.chain_table(tiny_run)
    assert sorted(chain["id"]) == sorted(rd["deployed"])
    m = analysis.run_metrics(tiny_run)
    assert (m["status"], m["h"], m["m"], m["n"]) == ("accepted", gate["h"], gate["m"], gate["n"])
    assert m["gate_path"] == gate["path"] and m["deployed"] == len(rd["deployed"])
    deltas = analysis.test_deltas(tiny_run)
    assert deltas.iloc[-1]["before"] == m["test_before"]
    assert (
        len(analysis.changed_flips(tiny_run))
        == deltas.iloc[-1]["helped"] + deltas.iloc[-1]["harmed"]
    )
    assert "ACCEPTED" in analysis.run_text(tiny_run)


def test_compare_libraries_reproduces_the_report(tiny_run: Path) -> None:
    """Base agent = the library before round 1 (empty root); evolved = after: same as test.json."""
    table = studies.compare_libraries(tiny_run, split="test")
    piv = studies.comparison_pivot(table)
    allrow = analysis.test_deltas(tiny_run).iloc[-1]
    assert piv.loc["ALL", "base"] == pytest.approx(allrow["before"], abs=1e-6)
    assert piv.loc["ALL", "evolved"] == pytest.approx(allrow["after"], abs=1e-6)
    assert set(piv.columns) == {"base", "evolved", "expert"}
    n_test = sum(1 for v in nb.run_suite(tiny_run).splits.values() if v == "test")
    assert set(table[table["family"] == "ALL"]["n"]) == {n_test}
    per_family = table[table["family"] != "ALL"].groupby("agent")["correct"].sum()
    assert dict(per_family) == dict(table[table["family"] == "ALL"].set_index("agent")["correct"])
    fig = widgets.comparison_figure(table)
    assert len(fig.axes) == 1


def test_prune_df_reads_a_pruned_round(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    rd = json.loads((run / "rounds/r1/round.json").read_text())
    rd["pruned"] = {
        "accepted": False,
        "outcome": "retest failed: rollback",
        "attribution": {
            "by_update": {
                "u1": {"helped": 0, "harmed": 3, "helped_ids": [], "harmed_ids": []},
                "u2": {"helped": 2, "harmed": 1, "helped_ids": [], "harmed_ids": []},
            },
            "unattributed_helped": [],
            "unattributed_harmed": [],
        },
        "plan": {
            "harmful": ["u1"],
            "removed": ["u1", "u3"],
            "kept": ["u2"],
            "reasons": {"u1": "clearly harmful", "u2": "mixed", "u3": "dependent of u1"},
            "counts": {},
        },
        "retest": None,
        "first": {},
    }
    (run / "rounds/r1/round.json").write_text(json.dumps(rd))
    df = analysis.prune_df(run)
    assert list(df.columns) == analysis.PRUNE_COLUMNS
    assert list(df["update"]) == ["u1", "u2", "u3"]
    assert list(df["harmful"]) == [True, False, False]
    assert list(df["removed"]) == [True, False, True]
    assert list(df["harmed"]) == [3, 1, 0]
    assert set(df["outcome"]) == {"retest failed: rollback"}


def test_metrics_round_trip(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    p = nb.record_metrics(run, "00_quickstart", {"a": 1, "b": 0.5})
    assert p == run / "notebook_metrics" / "00_quickstart.json"
    assert nb.read_metrics(run, "00_quickstart") == {"a": 1, "b": 0.5}
    with pytest.raises(ValueError):
        nb.record_metrics(run, "../x", {})


def test_figures_build(tiny_run: Path) -> None:
    suite = nb.run_suite(tiny_run)
    assert len(widgets.examples_figure(suite, 3).axes) == 4  # 2x2 grid, the 4th switched off
    assert analysis.suite_metrics(suite)["questions"] == len(suite)
    assert len(analysis.solver_table(suite)) > 0
    base = analysis.base_pass_table(tiny_run)
    assert len(widgets.accuracy_figure(base).axes) == 1
    assert len(widgets.deltas_figure(analysis.test_deltas(tiny_run)).axes) == 1


def test_ensure_run_reuses_a_finished_run(tiny_run: Path) -> None:
    lines: list[str] = []
    before = sorted(p.name for p in (tiny_run / "evals").iterdir())
    assert nb.ensure_run(nb.GateConfig(run_dir=str(tiny_run)), log=lines.append) == tiny_run
    assert lines == [f"reusing the finished run in {tiny_run}"]
    assert sorted(p.name for p in (tiny_run / "evals").iterdir()) == before


# ------------------------------------------------------------------------- the paired chain study
def test_chain_study_arms_reuse_the_stage_and_chain_notebooks_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(nb.RUN_DIR_ENV, str(tmp_path / "run"))
    cfg = nb.MaraChainStudyConfig()
    assert cfg.arm_list() == list(analysis.CHAIN_ARMS)
    # same protocol, same folder: discard is the stage run, chain the chain notebook's run
    assert cfg.arm_protocol("discard") == nb.QuickstartConfig().protocol()
    assert cfg.arm_run_path("discard") == nb.QuickstartConfig().run_path() == cfg.run_path()
    assert cfg.arm_protocol("chain") == nb.MaraChainsConfig().protocol()
    assert cfg.arm_run_path("chain") == nb.MaraChainsConfig().run_path()
    kd = cfg.arm_protocol("discard_k_plus_d")
    paper = SupportConfig(planner_requests=False, triage_bound=False)
    assert kd == ProtocolConfig(rounds=1, seed=5, max_synthesis_attempts=6, support=paper)
    assert cfg.arm_run_path("discard_k_plus_d") == tmp_path / "run-attempts6"
    # another protocol never lands in another protocol's folder
    strongest = nb.MaraChainStudyConfig(start="strongest", attempts=4)
    assert strongest.arm_run_path("chain") == tmp_path / "run-attempts4-marachain-d3-strongest"
    assert strongest.arm_run_path("discard") == tmp_path / "run-attempts4"
    assert strongest.arm_protocol("chain").marachain.start == "strongest"


def test_a_chain_study_cell_runs_its_one_arm_in_its_folder() -> None:
    cell = nb.MaraChainStudyConfig.from_params(
        {"run_dir": "cells/x/run", "arms": "chain", "size": "mixed", "seed": 101}
    )
    assert cell.run_path() == Path("cells/x/run") == Path(cell.arm_config("chain").run_dir)
    assert cell.protocol() == cell.arm_protocol("chain") and cell.protocol().seed == 101
    both = nb.MaraChainStudyConfig(run_dir="cells/x/run", arms="chain,discard")
    assert both.run_path() == Path("cells/x/run-marachain-d3")
    assert both.arm_run_path("discard") == Path("cells/x/run")
    for bad in ("chain,chain", "", "chains"):
        with pytest.raises(ValueError):
            nb.MaraChainStudyConfig(arms=bad)
    with pytest.raises(ValueError, match=r"marachain\.start"):
        nb.MaraChainStudyConfig(start="best")


@pytest.mark.slow
def test_chain_study_rows_pair_only_runs_of_one_seed(
    tiny_run: Path, chain_run: Path, tmp_path: Path
) -> None:
    cfg = nb.MaraChainStudyConfig()
    rows = cfg.arm_rows({"discard": tiny_run, "chain": chain_run})
    assert [(r["seed"], r["arm"]) for r in rows] == [(5, "discard"), (5, "chain")]
    assert "g3" in analysis.chain_arms_df(rows).iloc[0]["recovered"]
    won = analysis.chain_recoveries_df({"discard": tiny_run, "chain": chain_run})
    assert tuple(won.columns) == analysis.CHAIN_RECOVERIES_COLUMNS
    g3 = won.set_index("group").loc["g3"]
    assert g3["chain_admitted"] is True and g3["discard_admitted"] is False
    assert g3["k_plus_d_admitted"] is None and g3["step"] >= 1
    other = tmp_path / "other"
    shutil.copytree(tiny_run, other)
    config = json.loads((other / "config.json").read_text())
    config["protocol"]["seed"] = 6
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="do not pair"):
        cfg.arm_rows({"discard": other, "chain": chain_run})


# ---------------------------------------------------------------------- the paired taxonomy study
def test_taxonomy_study_arms_sit_beside_the_base_run_named_by_their_taxonomy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(nb.RUN_DIR_ENV, str(tmp_path / "run"))
    cfg = nb.TaxonomyStudyConfig()
    assert cfg.arm_list() == ["none", "coded"]
    # none is the stage run itself: same protocol, same folder, where the metrics go
    assert cfg.protocol() == nb.QuickstartConfig().protocol()
    assert cfg.base_path() == cfg.run_path() == nb.QuickstartConfig().run_path()
    fp = "sha256:" + "0123abcd" * 8
    pinned = {"path": str(tmp_path / "t.json"), "fingerprint": fp}
    coded = cfg.arm_config("coded", pinned)
    assert coded.run_path() == tmp_path / "run-taxonomy-coded-0123abcd"
    assert coded.protocol().taxonomy.fingerprint == fp and coded.arm_list() == ["coded"]
    assert cfg.arm_config("none", pinned).run_path() == tmp_path / "run"
    assert cfg.stage().induce_config() == nb.TaxonomyNotebookConfig().induce_config()
    for bad in ("coded,coded", "", "free_text"):
        with pytest.raises(ValueError, match="distinct arms"):
            nb.TaxonomyStudyConfig(arms=bad)
    with pytest.raises(ValueError, match="traces"):
        nb.TaxonomyStudyConfig(traces="val")
    with pytest.raises(ValueError, match="without a taxonomy_path"):
        nb.TaxonomyStudyConfig(taxonomy_fingerprint=fp)
    with pytest.raises(ValueError, match="fingerprint"):
        nb.TaxonomyStudyConfig(taxonomy_path="t.json", taxonomy_fingerprint="sha256:xyz")
