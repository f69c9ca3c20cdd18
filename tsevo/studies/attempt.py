"""One attempt of a study cell, on a Dask worker: papermill in a subprocess that dies with it.

Kept apart from :mod:`tsevo.studies.grid` so a worker imports little to run a cell (no engine, no
notebook configs): the cell, the run lock and the standard library.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

from tsevo.fileio import atomic_write_text
from tsevo.store import RunFolderBusy, RunLock
from tsevo.studies.cell import PARENT_ENV
from tsevo.studies.cells import Cell, tail

__all__ = ["now", "run_attempt"]


def now() -> str:
    """The UTC time, to the second (ISO 8601)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _worker_address() -> str | None:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return None


def run_attempt(cell: Cell, attempt: int, timeout_s: float | None = None) -> dict[str, Any]:
    """Run one attempt of a cell (the Dask task): papermill in a subprocess that dies with us.

    Returns:
        ``outcome`` (ok | exit | timeout | busy), ``exit_code``, ``wall_s``, ``worker``,
        ``worker_pid``, ``pid`` (the cell subprocess) and ``stderr_tail``.
    """
    worker = _worker_address()
    base: dict[str, Any] = {
        "worker": worker,
        "worker_pid": os.getpid(),
        "host": socket.gethostname(),
    }
    try:
        lock = RunLock(cell.folder).acquire()
    except RunFolderBusy as e:
        return {**base, "outcome": "busy", "exit_code": None, "wall_s": 0.0, "stderr_tail": str(e)}
    log = cell.log_path(attempt)
    t0 = time.monotonic()
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as fh:
            fh.write(f"--- attempt {attempt} on {worker} pid {os.getpid()} at {now()}\n".encode())
            fh.flush()
            proc = subprocess.Popen(
                [sys.executable, "-m", "tsevo.studies.cell", cell.command_payload()],
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env={**os.environ, PARENT_ENV: str(os.getpid())},
            )
            running = {**base, "attempt": attempt, "pid": proc.pid, "started": now()}
            atomic_write_text(cell.running_path, json.dumps(running) + "\n")
            outcome = "exit"
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
                outcome = "timeout"
        wall = time.monotonic() - t0
        if outcome == "exit" and rc == 0 and cell.output.exists():
            cell.write_record(attempt, wall, worker)
            outcome = "ok"
        return {
            **base,
            "outcome": outcome,
            "exit_code": rc,
            "pid": proc.pid,
            "wall_s": round(wall, 3),
            "stderr_tail": "" if outcome == "ok" else tail(log),
        }
    finally:
        with contextlib.suppress(OSError):
            cell.running_path.unlink()
        lock.release()
