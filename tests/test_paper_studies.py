"""The paper's studies (issue 14): each cell's rows, the study frame across cells, the figures.

The main table and the transfer study run end to end on the builtin backend (the tiny preset's
real round) and through the scripted OpenAI-compatible server (a small suite, the LLM roles over
real HTTP), including the three LLM baselines and the builtin → LLM transfer. The rows are checked
against what the runs themselves stored, so a table that drifts from the round's records fails.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tsevo import notebook as nb
from tsevo import studies, widgets
from tsevo.data.synthetic import make_suite
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.evolve.support import SupportConfig
from tsevo.roles import RoleSet
from tsevo.roles.llm.config import LLMConfig, RoleConfigs
from tsevo.store import RunStore
from tsevo.studies import load_spec
from tsevo.testing import BuiltinResponder, FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]


def _test_record(run: Path, r: int = 1) -> dict[str, Any]:
    return json.loads((run / "rounds" / f"r{r}" / "test.json").read_text())


# ------------------------------------------------------------------------- one cell's rows
def test_rounds_table_is_the_rounds_own_records(tiny_run: Path) -> None:
    t = studies.rounds_table(tiny_run)
    store = RunStore.open(tiny_run)
    summary = store.read_json(store.layout.round(1).summary)
    test = _test_record(tiny_run)
    (row,) = t.to_dict("records")
    g = summary["final_gate"]
    assert (row["status"], row["gate_path"], row["h"], row["m"], row["n"]) == (
        summary["status"],
        g["path"],
        g["h"],
        g["m"],
        g["n"],
    )
    assert row["delta_lb"] == pytest.approx(g["delta_lb"])
    allrow = test["tasks"][-1]
    assert row["test_before"] == allrow["before"] and row["test_after"] == allrow["after"]
    assert row["test_helped"] == test["counts"]["helped"]
    assert row["test_harmed"] == test["counts"]["harmed"]
    assert row["tools"] == row["deployed"] > 0  # one round from the empty root
    out = studies.run_outcome(tiny_run)
    assert out["final"] == allrow["after"] and out["base"] == allrow["before"]
    assert out["gain"] == pytest.approx(allrow["after"] - allrow["before"])
    assert out["label"] == "full"


def test_main_table_on_the_builtin_backend_matches_the_rounds_test(tiny_run: Path) -> None:
    table = studies.main_table(tiny_run)
    assert list(table.columns) == studies.MAIN_COLUMNS
    assert list(table["method"].unique()) == list(studies.LIBRARY_METHODS)
    allrows = table[table["task"] == "ALL"].set_index("method")
    test = _test_record(tiny_run)["tasks"][-1]
    # The base agent and the evolved library answer the test split exactly as the round's
    # report-only test did (same answerer, same reviewer, same library).
    assert allrows.loc["base", "accuracy"] == pytest.approx(test["before"], abs=1e-6)
    assert allrows.loc["evolved", "accuracy"] == pytest.approx(test["after"], abs=1e-6)
    per_task = table[(table["task"] != "ALL")]
    for m, part in per_task.groupby("method"):
        assert part["n"].sum() == allrows.loc[m, "n"]
        assert part["correct"].sum() == allrows.loc[m, "correct"]
    fig = widgets.main_table_figure(table)
    assert fig.axes and fig.axes[0].get_title().startswith("gain over the base agent")
    with pytest.raises(ValueError, match="no builtin analogue"):
        studies.main_table(tiny_run, methods=["base", "self-refine"])
    with pytest.raises(ValueError, match="unknown method"):
        studies.main_table(tiny_run, methods=["base", "gpt"])
    with pytest.raises(ValueError, match="train"):
        studies.main_table(tiny_run, split="train")


def test_transfer_into_the_same_roles_is_the_runs_own_test(tiny_run: Path) -> None:
    with RoleSet.builtin() as roles:
        t = studies.transfer_table(tiny_run, roles)
    allrow = t[t["task"] == "ALL"].iloc[0]
    test = _test_record(tiny_run)
    assert allrow["base"] == pytest.approx(test["tasks"][-1]["before"], abs=1e-6)
    assert allrow["transferred"] == pytest.approx(test["tasks"][-1]["after"], abs=1e-6)
    assert (allrow["helped"], allrow["harmed"]) == (
        test["counts"]["helped"],
        test["counts"]["harmed"],
    )
    fig = widgets.transfer_figure(t.assign(target_backend="builtin"))
    assert fig.axes


# ------------------------------------------------------------------- through the scripted server
@pytest.fixture(scope="module")
def small() -> Any:
    return make_suite(8, seed=5, families=["trend", "seasonality"])


def _llm_roles(srv: FakeOpenAIServer, run_dir: Path) -> RoleSet:
    configs = RoleConfigs(
        LLMConfig(base_url=srv.base_url, model="scripted", concurrency=1, timeout_s=20.0)
    )
    return RoleSet.llm(configs, run_dir=run_dir)


def test_main_table_and_transfer_through_the_scripted_server(small: Any, tmp_path: Path) -> None:
    llm_run, builtin_run = tmp_path / "llm", tmp_path / "builtin"
    with RoleSet.builtin() as roles:
        evolve(small, roles=roles, config=ProtocolConfig(), out=builtin_run, log=str)
    methods = ["base", "evolved", "expert", "self-consistency", "self-refine", "4-shot ICL"]
    resp = BuiltinResponder(list(small))
    with FakeOpenAIServer(resp) as srv:
        with _llm_roles(srv, llm_run) as roles:
            evolve(small, roles=roles, config=ProtocolConfig(), out=llm_run, log=str)
            n_evolve = len(srv.chat_requests())
            table = studies.main_table(llm_run, roles=roles, methods=methods)
            n_table = len(srv.chat_requests()) - n_evolve
        # builtin -> LLM: the offline library installed into the language model's roles
        with _llm_roles(srv, tmp_path / "target-cache") as target:
            transfer = studies.transfer_table(builtin_run, target)
    n_test = len(small.test)
    assert n_table > 0
    assert set(table["method"]) == set(methods)
    assert set(table.loc[table["kind"] == "baseline", "method"]) == {
        "self-consistency",
        "self-refine",
        "4-shot ICL",
    }
    for _, part in table[table["task"] == "ALL"].iterrows():
        assert part["n"] == n_test
    # every baseline reports every task of the split and ALL
    tasks = set(table.loc[table["method"] == "base", "task"])
    for m in ("self-consistency", "self-refine", "4-shot ICL"):
        assert set(table.loc[table["method"] == m, "task"]) == tasks
    assert list(transfer.columns) == studies.TRANSFER_COLUMNS
    allrow = transfer[transfer["task"] == "ALL"].iloc[0]
    assert allrow["n"] == n_test
    assert allrow["delta"] == pytest.approx(allrow["transferred"] - allrow["base"])
    assert allrow["helped"] - allrow["harmed"] == round(allrow["delta"] * n_test)
    assert widgets.main_table_figure(table).axes
    assert widgets.transfer_figure(transfer.assign(target_backend="llm")).axes


# ------------------------------------------------------------------------- across cells
def _finish(cell: Any, run: Path, rows: list[dict[str, Any]]) -> None:
    """What a finished cell leaves: its run with the notebook's rows, its notebook and record."""
    shutil.copytree(run, cell.run_dir)
    nb.record_metrics(cell.run_dir, cell.notebook.stem, {"rows": rows})
    cell.output.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(cell.notebook, cell.output)
    cell.write_record(attempt=1, wall_s=1.0, worker=None)


def test_study_report_collects_every_finished_cell_and_lists_the_missing(
    tiny_run: Path, tmp_path: Path
) -> None:
    spec = load_spec(REPO / "experiments" / "gate_calibration.json")
    cells = studies.expand_cells(spec, tmp_path)
    rows = studies.frame_rows(studies.rounds_table(tiny_run))
    for cell in cells[:3]:
        _finish(cell, tiny_run, rows)
    frame = studies.study_frame(spec, tmp_path)
    assert len(frame) == 3 and list(frame.columns[:3]) == ["cell", "seed", "size"]
    assert sorted(frame["cell"]) == sorted(c.key for c in cells[:3])
    assert frame.attrs["missing"] == [c.key for c in cells[3:]]
    csv = studies.write_results(spec, tmp_path)
    meta = json.loads((csv.parent / "results.json").read_text())
    assert meta["rows"] == 3 and len(meta["missing"]) == len(cells) - 3
    assert pd.read_csv(csv)["delta_lb"].notna().all()
    assert (csv.parent / "results.png").stat().st_size > 0
    # mean ± sd over seeds per grid value (seed excepted)
    by_size = {g["size"]: g for g in meta["summary"]}
    sizes = [c.parameters["size"] for c in cells[:3]]
    assert {k: v["cells"] for k, v in by_size.items()} == {z: sizes.count(z) for z in set(sizes)}
    lb = float(rows[0]["delta_lb"])
    two = next(g for g in by_size.values() if g["cells"] == 2)
    assert two["delta_lb"]["mean"] == pytest.approx(lb, abs=1e-6) and two["delta_lb"]["sd"] == 0.0
    assert next(g for g in by_size.values() if g["cells"] == 1)["delta_lb"]["sd"] is None
    counts = json.loads((csv.parent / "calibration.json").read_text())
    assert counts["rounds"] == 3 and counts["strict"]["n"] == 3
    # a cell whose record is for other parameters is not counted
    rec = json.loads(cells[0].record_path.read_text())
    cells[0].record_path.write_text(json.dumps({**rec, "params_hash": "other"}))
    assert len(studies.study_frame(spec, tmp_path)) == 2


def test_bad_rows_name_the_file(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    nb.record_metrics(run, "94_study_gate_calibration", {"rows": "x"})
    with pytest.raises(ValueError, match=r"94_study_gate_calibration\.json"):
        studies.cell_rows(run, "94_study_gate_calibration")


# ------------------------------------------------------------------------- the paper's checks
def _abl(seed: int, name: str, final: float, helped: int, harmed: int) -> dict[str, Any]:
    return {"seed": seed, "ablation": name, "final": final, "helped": helped, "harmed": harmed}


def test_ablation_directions_report_each_cell_as_it_comes_out() -> None:
    frame = pd.DataFrame(
        [
            _abl(1, "full", 0.60, 10, 2),
            _abl(1, "w/o gate", 0.55, 12, 9),
            _abl(1, "w/ expert", 0.62, 8, 1),
            _abl(1, "w/o residual chain", 0.58, 15, 11),
            _abl(2, "full", 0.50, 5, 1),
            _abl(2, "w/o residual chain", 0.51, 4, 3),
        ]
    )
    d = studies.ablation_directions(frame).set_index(["seed", "ablation"])
    assert d.loc[(1, "w/o gate"), "below_full"] and d.loc[(1, "w/o gate"), "gap"] == pytest.approx(
        -0.05
    )
    assert not d.loc[(1, "w/ expert"), "below_full"]  # reported, not assumed
    assert d.loc[(1, "w/o residual chain"), "fixes_more"] is True
    assert d.loc[(1, "w/o residual chain"), "breaks_more"] is True
    assert d.loc[(2, "w/o residual chain"), "fixes_more"] is False
    assert d.loc[(1, "w/o gate"), "fixes_more"] is None
    assert widgets.ablation_figure(frame).axes


def test_calibration_counts_judge_accepted_by_test_and_rejected_by_diagnostic() -> None:
    def r(status: str, path: str, lb: float, test: float | None, diag: float | None) -> dict:
        return {
            "status": status,
            "gate_path": path,
            "delta_lb": lb,
            "delta": lb + 0.02,
            "test_delta": test,
            "diagnostic_delta": diag,
            "round": 1,
            "tools": 1,
        }

    rounds = pd.DataFrame(
        [
            r("accepted", "strict", 0.02, 0.05, None),
            r("accepted", "strict", 0.01, -0.01, None),
            r("accepted", "single_round", -0.01, 0.02, None),
            r("rejected", "none", -0.03, 0.0, 0.04),
            r("rejected", "none", -0.05, 0.0, None),
        ]
    )
    c = studies.calibration_counts(rounds)
    assert c["strict"] == {"n": 2, "positive": 1, "negative": 1, "flat": 0}
    assert c["borderline"]["n"] == 1 and c["rejected"] == 2
    assert c["rejected_with_diagnostic"] == 1 and c["rejected_diagnostic_positive"] == 1
    assert c["every_strict_test_positive"] is False
    assert widgets.gate_calibration_figure(rounds).axes
    assert widgets.rounds_figure(rounds.assign(round=[1, 2, 3, 1, 2])).axes


def test_study_configs_validate_and_keep_their_runs_apart(monkeypatch: Any) -> None:
    monkeypatch.delenv(nb.RUN_DIR_ENV, raising=False)
    with pytest.raises(ValueError, match="unknown ablation"):
        nb.AblationStudyConfig(ablation="w/o everything")
    full = nb.AblationStudyConfig()
    assert full.run_path() == Path(nb.DEFAULT_RUN_DIR)
    paper = SupportConfig(planner_requests=False, triage_bound=False)  # the notebooks' split
    assert full.protocol() == ProtocolConfig(seed=full.seed, support=paper)
    gate = nb.AblationStudyConfig(ablation="w/o gate")
    assert gate.protocol().ablation.gate is False
    assert gate.run_path() == Path(nb.DEFAULT_RUN_DIR + "-ablation-w-o-gate")
    assert nb.AblationStudyConfig(ablation="w/o gate", run_dir="x").run_path() == Path("x")
    assert nb.MultiRoundConfig(rounds=3).run_path() == Path(nb.DEFAULT_RUN_DIR + "-rounds3")
    assert nb.MultiRoundConfig(rounds=3).protocol().rounds == 3
    assert nb.MainTableConfig(methods=" base, evolved ,").method_list() == ["base", "evolved"]
    with pytest.raises(ValueError, match="target_backend"):
        nb.TransferConfig(target_backend="gpt")
    t = nb.TransferConfig(target_backend="llm", target_model="m", target_base_url="http://x/v1")
    assert (t.target().backend, t.target().model, t.target().base_url) == (
        "llm",
        "m",
        "http://x/v1",
    )


@pytest.mark.parametrize(
    "path", sorted((REPO / "experiments").glob("*.json")), ids=lambda p: p.stem
)
def test_every_study_spec_loads_and_names_a_figure(path: Path, tmp_path: Path) -> None:
    spec = load_spec(path)
    assert studies.expand_cells(spec, tmp_path)
    if spec.notebook.startswith("9") and spec.notebook != "90_study_base_vs_evolved_vs_expert":
        assert spec.notebook in widgets.STUDY_FIGURES


def test_the_report_command_says_what_is_missing(tmp_path: Path, capsys: Any) -> None:
    from tsevo.cli import main

    spec = REPO / "experiments" / "funnel.json"
    assert main(["study", "report", str(spec), "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "funnel: 0 rows from 0 cells" in out and "not finished (6)" in out
    meta = json.loads((tmp_path / "funnel" / "results.json").read_text())
    assert meta["cells"] == [] and len(meta["missing"]) == 6 and "figure" not in meta


def test_the_chain_and_taxonomy_study_figures_draw_their_rows() -> None:
    chain = pd.DataFrame(
        [
            {"seed": s, "arm": a, "n_admitted": n}
            for s, counts in ((101, (1, 3, 2)), (102, (0, 2, 2)))
            for a, n in zip(("discard", "chain", "discard_k_plus_d"), counts, strict=True)
        ]
    )
    fig = widgets.STUDY_FIGURES["97_study_marachain"](chain)
    assert [round(p.get_height()) for p in fig.axes[0].patches if p.get_height()] == [1, 3, 2, 2, 2]
    answers = pd.DataFrame(
        [
            {"seed": 5, "arm": arm, "label": "mechanism test", "qid": f"q{i}", "final_correct": ok}
            for arm, oks in (("none", (True, False)), ("coded", (True, True)))
            for i, ok in enumerate(oks)
        ]
    )
    fig = widgets.STUDY_FIGURES["98_study_taxonomy_coded"](answers)
    heights = sorted(round(p.get_height()) for p in fig.axes[0].patches if p.get_height())
    assert heights == [50, 100] and "mechanism test" in fig.axes[0].get_title()
