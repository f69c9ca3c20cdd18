"""Running a study grid on Dask: every cell's papermill in its own subprocess, retried, recorded.

:func:`run_study` expands a spec into cells, skips the finished ones, submits the rest to a Dask
cluster (by default a :class:`distributed.LocalCluster` of one single-threaded worker process per
CPU; with ``scheduler`` an existing cluster, e.g. one started by dask-jobqueue or on Kubernetes,
whose workers can import tsevo and see the output folder) and collects every attempt:

* On the worker, :func:`tsevo.studies.attempt.run_attempt` takes the cell folder's lock, starts
  ``python -m tsevo.studies.cell`` (papermill) in a subprocess that dies with the worker, waits for
  it (optionally under a timeout) and writes the completion record when it exited 0 with its
  output notebook.
* In the study process, every attempt's result is appended to the cell's ledger: ``ok``, ``exit``
  (non-zero exit code), ``timeout``, ``lost`` (the worker died: Dask raises ``KilledWorker``; a
  local cluster is started with ``allowed_failures=0`` so each death reaches the ledger),
  ``busy`` (another study process runs the cell). A crashed attempt is resubmitted up to
  ``retries`` times; then the cell is ``failed``. Nothing is lost silently: the returned table
  (:data:`STUDY_COLUMNS`) lists every cell once with its status, also written to
  ``<out>/<name>/study.json``.

Dask is imported only inside these functions (:data:`tsevo.optional.LAZY_IMPORTS`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tsevo.fileio import atomic_write_text
from tsevo.studies.attempt import now, run_attempt
from tsevo.studies.cells import Cell, tail
from tsevo.studies.spec import StudySpec, expand_cells

__all__ = ["STATUSES", "STUDY_COLUMNS", "default_workers", "run_study"]

#: Columns of the study table (the grid's parameter names sit between ``cell`` and ``status``);
#: ``attempts``, ``exit_codes`` and ``wall_s`` count this invocation (the ledger keeps them all).
STUDY_COLUMNS = ["cell", "status", "attempts", "exit_codes", "error", "wall_s", "output"]
#: ``done`` ran now; ``finished`` was finished before (skipped); ``failed`` crashed on every
#: attempt; ``busy`` another process held the cell; ``pending`` not run (dry run).
STATUSES = ("done", "finished", "failed", "busy", "pending")


def default_workers() -> int:
    """Worker processes of the default local cluster: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def _client(
    scheduler: str | None, workers: int | None, log: Callable[[str], None]
) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler) as client:
            if workers:
                client.wait_for_workers(workers)
            info = client.scheduler_info()
            log(f"Dask scheduler {scheduler}: {len(info.get('workers', {}))} workers")
            yield client
        return
    n = workers or default_workers()
    with (
        LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            scheduler_kwargs={"allowed_failures": 0},  # a worker death reaches the ledger
        ) as cluster,
        Client(cluster) as client,
    ):
        log(f"Dask LocalCluster: {n} worker processes, 1 thread each")
        yield client


def _who_ran(cell: Cell, attempt: int) -> dict[str, Any]:
    """Worker, worker PID and cell PID of a lost attempt (its ``running.json``, then removed)."""
    try:
        run = json.loads(cell.running_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(run, dict) or run.get("attempt") != attempt:
        return {}
    with contextlib.suppress(OSError):
        cell.running_path.unlink()
    return {k: run[k] for k in ("worker", "worker_pid", "host", "pid") if k in run}


def _row(cell: Cell, status: str, tries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    last = tries[-1] if tries else {}
    err = str(last.get("error") or last.get("stderr_tail") or "") if status != "done" else ""
    return {
        "cell": cell.key,
        **{k: v for k, v in cell.parameters.items()},
        "status": status,
        "attempts": len(tries),
        "exit_codes": [t.get("exit_code") for t in tries],
        "error": err.strip().splitlines()[-1] if err.strip() else "",
        "wall_s": round(sum(float(t.get("wall_s") or 0.0) for t in tries), 3),
        "output": str(cell.output) if status in ("done", "finished") else "",
    }


def run_study(
    spec: StudySpec,
    out: str | Path = "runs/experiments",
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    retries: int = 2,
    cell_timeout_s: float | None = None,
    dry_run: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> pd.DataFrame:
    """Run every unfinished cell of a study on Dask; returns the table of every cell.

    Args:
        spec: The study (:func:`tsevo.studies.load_spec`).
        out: Output folder; cells go to ``<out>/<name>/<cell>/``.
        scheduler: Address of an existing Dask scheduler (default: a new LocalCluster).
        workers: Worker processes of the LocalCluster (default: the CPUs); with ``scheduler``,
            wait until that many workers are connected.
        retries: Resubmissions of a crashed cell (non-zero exit, timeout, worker death).
        cell_timeout_s: Kill an attempt after this many seconds (default: no limit).
        dry_run: Print what would run; start nothing.
        progress: Show a tqdm bar over the grid.
        log: Line logger (the dashboard link, the cluster).

    Returns:
        One row per cell: :data:`STUDY_COLUMNS` with the grid's parameters after ``cell``.

    Raises:
        ValueError: a cell folder holds a completion record for other parameters.
    """
    cells = expand_cells(spec, out)
    stale = [str(c.folder) for c in cells if c.stale()]
    if stale:
        raise ValueError(
            "these cell folders hold results for other parameters (spec changed?); "
            f"move them away or use another --out: {stale}"
        )
    rows: dict[str, dict[str, Any]] = {}
    todo = []
    for c in cells:
        if c.finished():
            rows[c.key] = _row(c, "finished", [])
        else:
            todo.append(c)
    if dry_run:
        for c in todo:
            log(f"would run {c.notebook.name} with {dict(c.parameters)} -> {c.folder}")
            rows[c.key] = _row(c, "pending", [])
    elif todo:
        rows.update(_run_cells(todo, scheduler, workers, retries, cell_timeout_s, progress, log))
    table = pd.DataFrame([rows[c.key] for c in cells])
    params = [k for k in table.columns if k not in STUDY_COLUMNS]
    table = table[["cell", *params, *STUDY_COLUMNS[1:]]]
    if not dry_run:
        study = Path(out) / spec.name / "study.json"
        atomic_write_text(study, table.to_json(orient="records", indent=1) + "\n")
    return table


def _run_cells(
    todo: Sequence[Cell],
    scheduler: str | None,
    workers: int | None,
    retries: int,
    timeout_s: float | None,
    progress: bool,
    log: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    from distributed import as_completed
    from tqdm import tqdm

    rows: dict[str, dict[str, Any]] = {}
    tries: dict[str, list[dict[str, Any]]] = {c.key: [] for c in todo}
    numbers = {c.key: len(c.attempts()) for c in todo}  # attempt numbers go on across reruns
    with _client(scheduler, workers, log) as client:
        log(f"Dask dashboard: {client.dashboard_link}")
        by_key: dict[str, tuple[Cell, int]] = {}

        def submit(cell: Cell) -> Any:
            numbers[cell.key] += 1
            n = numbers[cell.key]
            fut = client.submit(
                run_attempt, cell, n, timeout_s, key=f"cell-{cell.key}-{n}", pure=False
            )
            by_key[fut.key] = (cell, n)
            return fut

        bar = tqdm(
            total=len(todo), desc=f"{todo[0].study} cells", unit="cell", disable=not progress
        )
        pending = as_completed([submit(c) for c in todo])
        for fut in pending:
            cell, n = by_key.pop(fut.key)
            try:
                res = dict(fut.result())
            except Exception as e:  # the worker died (KilledWorker) or the task was lost
                res = {"outcome": "lost", "exit_code": None, "error": f"{type(e).__name__}: {e}"}
                res.update(_who_ran(cell, n))
                res["stderr_tail"] = tail(cell.log_path(n))
            fut.release()
            entry = {"attempt": n, "ended": now(), **res}
            cell.append_attempt(entry)
            tries[cell.key].append(entry)
            outcome = res["outcome"]
            if outcome in ("ok", "busy"):
                status = "done" if outcome == "ok" else "busy"
            elif len(tries[cell.key]) <= retries:
                log(
                    f"retrying {cell.key}: attempt {n} {outcome} (exit code {res.get('exit_code')})"
                )
                pending.add(submit(cell))
                continue
            else:
                status = "failed"
            rows[cell.key] = _row(cell, status, tries[cell.key])
            bar.update(1)
            bar.set_postfix_str(f"{cell.key}: {status}")
        bar.close()
    return rows
