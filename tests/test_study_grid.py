"""Study grids on Dask (``tsevo study run``): a real LocalCluster of worker processes, a tiny notebook.

* A two-cell grid on a 2-worker LocalCluster started by the command; the worker process running
  the first cell is SIGKILLed (by its PID) while the cell's notebook runs: the study still
  completes, every cell is in the table once, the lost attempt is in the cell's ledger, and nothing
  of the killed attempt (its cell subprocess, its kernel) keeps running.
* A rerun skips the finished cells (no cluster, no attempt); a cell whose output or record does not
  match its parameters is not finished.
* A cell that always fails is ``failed`` after the bounded retries, with its exit codes and the
  error's last line recorded.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tsevo.studies import STUDY_COLUMNS, expand_cells, load_spec, run_study
from tsevo.studies.attempt import run_attempt

REPO = Path(__file__).resolve().parents[1]
NB = REPO / "tests" / "data" / "studies" / "tiny_cell.ipynb"


def _spec(folder: Path, name: str, fixed: dict, grid: dict) -> Path:
    p = folder / f"{name}.json"
    spec = {"name": name, "notebook": str(NB), "kernel": "python3", "fixed": fixed, "grid": grid}
    p.write_text(json.dumps(spec))
    return p


def _ledger(cell: Path) -> list[dict]:
    return [json.loads(line) for line in (cell / "attempts.jsonl").read_text().splitlines()]


def _gone(pid: int, within_s: float = 15.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def _run_grid_killing_a_worker(tmp: Path) -> dict:
    """``tsevo study run`` on a two-cell grid; the worker running the first cell is killed mid-cell.

    The first cell sleeps 30 s on its first attempt (long enough to be killed in it, on any
    machine), not on a retry; the second does not sleep.
    """
    spec = _spec(tmp, "grid", {"label": "g"}, {"sleep_s": [30, 0]})
    out = tmp / "out"
    cmd = [sys.executable, "-m", "tsevo", "study", "run", str(spec), "--out", str(out)]
    cmd += ["--workers", "2", "--retries", "1", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cell_a = out / "grid" / "sleep_s=30"
    deadline = time.monotonic() + 180
    while not list((cell_a / "run").glob("started-*")):  # its kernel runs the notebook
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the first cell never started:\n" + "".join(proc.communicate()))
        time.sleep(0.05)
    kernel_pid = int(next((cell_a / "run").glob("started-*")).read_text())
    running = json.loads((cell_a / "running.json").read_text())
    os.kill(running["worker_pid"], signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=240)
    return {
        "spec": spec,
        "out": out,
        "rc": proc.returncode,
        "stdout": stdout,
        "stderr": stderr,
        "running": running,
        "kernel_pid": kernel_pid,
    }


def test_killed_worker_the_study_completes_with_every_cell_recorded_once_then_resumes(tmp_path):
    g = _run_grid_killing_a_worker(tmp_path)
    assert g["rc"] == 0, g["stdout"] + g["stderr"][-4000:]
    assert "Dask dashboard: http" in g["stdout"]
    table = json.loads((g["out"] / "grid" / "study.json").read_text())
    assert [r["cell"] for r in table] == ["sleep_s=30", "sleep_s=0"]
    assert [r["status"] for r in table] == ["done", "done"]
    assert sum(line.lstrip().startswith("sleep_s=") for line in g["stdout"].splitlines()) == 2
    a, b = (g["out"] / "grid" / "sleep_s=30", g["out"] / "grid" / "sleep_s=0")
    ledger_a = _ledger(a)
    assert [t["outcome"] for t in ledger_a] == ["lost", "ok"]
    assert [t["attempt"] for t in ledger_a] == [1, 2]
    assert "KilledWorker" in ledger_a[0]["error"]
    assert ledger_a[0]["worker_pid"] == g["running"]["worker_pid"]
    assert [t["outcome"] for t in _ledger(b)] == ["ok"]
    rows = {r["cell"]: r for r in table}
    assert rows["sleep_s=30"]["attempts"] == 2 and rows["sleep_s=0"]["attempts"] == 1
    for cell, sleep_s in ((a, 30), (b, 0)):
        assert json.loads((cell / "run" / "result.json").read_text()) == {"label": "g"}
        rec = json.loads((cell / "cell.json").read_text())
        assert rec["parameters"] == {"label": "g", "sleep_s": sleep_s}
        assert Path(rec["output"]).exists()
    # nothing of the killed attempt keeps running: its cell subprocess died with the worker and
    # its kernel noticed its parent was gone
    assert _gone(g["running"]["pid"]) and _gone(g["kernel_pid"])

    # a rerun skips the finished cells: no cluster, no attempt
    spec = load_spec(g["spec"])
    before = {c.key: c.attempts() for c in expand_cells(spec, g["out"])}
    lines: list[str] = []
    table = run_study(spec, g["out"], progress=False, log=lines.append)
    assert list(table["status"]) == ["finished", "finished"]
    assert list(table.columns) == ["cell", "label", "sleep_s", *STUDY_COLUMNS[1:]]
    assert not any("Dask" in line for line in lines)  # no cluster was started
    assert {c.key: c.attempts() for c in expand_cells(spec, g["out"])} == before


def test_a_cell_is_finished_only_with_its_output_and_a_record_for_its_parameters(tmp_path):
    spec = load_spec(_spec(tmp_path, "s", {}, {"label": ["a"]}))
    (cell,) = expand_cells(spec, tmp_path / "out")
    assert not cell.finished()
    cell.write_record(attempt=1, wall_s=1.0, worker=None)
    assert not cell.finished()  # no output notebook yet
    cell.output.parent.mkdir(parents=True)
    cell.output.write_text("{}")
    assert cell.finished()
    changed = load_spec(_spec(tmp_path, "s", {"sleep_s": 1}, {"label": ["a"]}))
    (other,) = expand_cells(changed, tmp_path / "out")
    assert other.folder == cell.folder and other.params_hash != cell.params_hash
    assert not other.finished() and other.stale()
    with pytest.raises(ValueError, match="other parameters"):
        run_study(changed, tmp_path / "out", progress=False)
    cell.record_path.unlink()  # a failed cell's ledger counts too
    cell.append_attempt({"attempt": 1, "outcome": "exit", "exit_code": 1})
    assert not cell.finished() and not cell.stale() and other.stale()


def test_a_notebook_path_spec_takes_the_names_of_its_parameters_cell(tmp_path):
    with pytest.raises(TypeError, match="sleeps"):
        load_spec(_spec(tmp_path, "s", {}, {"sleeps": [1]}))
    spec = load_spec(_spec(tmp_path, "s", {"fail": False}, {"label": ["a", "b/c"]}))
    cells = expand_cells(spec, tmp_path / "out")
    assert [c.key for c in cells] == ["label=a", "label=b-c"]
    assert cells[0].papermill_parameters() == {
        "run_dir": str(cells[0].run_dir.resolve()),
        "fail": False,
        "label": "a",
    }
    lines: list[str] = []
    table = run_study(spec, tmp_path / "out", dry_run=True, log=lines.append)
    assert list(table["status"]) == ["pending", "pending"] and len(lines) == 2
    assert not (tmp_path / "out").exists()


def test_a_cell_that_always_fails_is_recorded_failed_after_bounded_retries(tmp_path):
    """On an existing cluster (``--scheduler``): a LocalCluster started here, one worker process."""
    from distributed import LocalCluster

    spec = load_spec(_spec(tmp_path, "bad", {"fail": True}, {"label": ["c"]}))
    lines: list[str] = []
    dashboard: list[int] = []

    def log(line: str) -> None:
        lines.append(line)
        if line.startswith("Dask dashboard: "):  # the printed link answers while the grid runs
            with urllib.request.urlopen(line.split(": ", 1)[1], timeout=30) as r:
                dashboard.append(r.status)

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        address = cluster.scheduler_address
        table = run_study(
            spec, tmp_path / "out", scheduler=address, workers=1, retries=1, progress=False, log=log
        )
    assert lines[0] == f"Dask scheduler {address}: 1 workers" and dashboard == [200]
    (row,) = table.to_dict("records")
    assert row["status"] == "failed" and row["attempts"] == 2 and row["exit_codes"] == [1, 1]
    assert "fails on purpose" in row["error"]
    ledger = _ledger(tmp_path / "out" / "bad" / "label=c")
    assert [(t["attempt"], t["outcome"], t["exit_code"]) for t in ledger] == [
        (1, "exit", 1),
        (2, "exit", 1),
    ]
    assert all("cell c fails on purpose" in t["stderr_tail"] for t in ledger)
    assert not (tmp_path / "out" / "bad" / "label=c" / "cell.json").exists()


def test_an_attempt_past_its_timeout_is_killed_and_recorded(tmp_path):
    """The worker-side attempt, called directly: the subprocess is killed at the deadline."""
    spec = load_spec(_spec(tmp_path, "slow", {"sleep_s": 60}, {"label": ["d"]}))
    (cell,) = expand_cells(spec, tmp_path / "out")
    res = run_attempt(cell, 1, timeout_s=1.0)
    assert res["outcome"] == "timeout" and res["exit_code"] == -signal.SIGKILL
    assert res["worker"] is None and res["worker_pid"] == os.getpid()
    assert _gone(res["pid"], within_s=1.0)
    assert not cell.finished() and not cell.running_path.exists()


def test_dask_is_imported_only_inside_functions():
    top_level = []
    for path in sorted((REPO / "tsevo").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            top_level += [
                f"{path}: {n}" for n in names if n.split(".")[0] in ("dask", "distributed")
            ]
    assert top_level == []


def test_the_cell_subprocess_imports_neither_the_engine_nor_pandas():
    code = (
        "import sys, tsevo.studies.cell\n"
        "print(sorted(m for m in sys.modules if m.startswith('tsevo') or m in ('pandas', 'dask')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["['tsevo',", "'tsevo.studies',", "'tsevo.studies.cell']"]
