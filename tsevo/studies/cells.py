"""A study cell (one notebook × one parameter point) and what it leaves in its folder.

A cell's folder ``<out>/<study>/<key>/`` holds:

* ``run/``: the run folder the notebook writes (its ``run_dir`` parameter, when it declares one);
* ``notebooks/<notebook>.ipynb``: the executed notebook (papermill writes it cell by cell);
* ``cell.json``: the completion record, written atomically after an execution exited 0 with its
  output notebook in place: the parameters, their hash, the attempt, the wall time. A cell is
  *finished* when its output notebook and its completion record exist and the record's hash is
  the cell's parameters hash; a rerun of the study skips finished cells;
* ``attempts.jsonl``: one line per attempt, appended by the study process that submitted it
  (outcome ``ok | exit | timeout | lost | busy``, exit code, worker, stderr tail, wall time);
* ``logs/attempt-<n>.log``: the attempt's stdout and stderr;
* ``running.json`` while an attempt runs: the Dask worker's address and PID and the cell
  subprocess's PID (removed when the attempt ends).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsevo.fileio import atomic_write_text
from tsevo.hashing import canonical_json

__all__ = ["Cell", "tail"]

RECORD_SCHEMA = 1


def tail(path: Path, n_bytes: int = 2000) -> str:
    """The last ``n_bytes`` of a text file (``""`` when it does not exist)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n_bytes))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class Cell:
    """One notebook execution of a study grid.

    Attributes:
        study: The study's name.
        key: The cell's folder name (grid parameters as ``name=value`` joined by ``_``).
        notebook: The notebook file.
        kernel: The Jupyter kernel that executes it.
        parameters: The grid point (fixed and grid parameters; ``run_dir`` is the runner's).
        folder: The cell's folder.
        inject_run_dir: Pass ``<folder>/run`` as the notebook's ``run_dir`` parameter.
    """

    study: str
    key: str
    notebook: Path
    kernel: str
    parameters: Mapping[str, Any]
    folder: Path
    inject_run_dir: bool = True
    params_hash: str = field(init=False)

    def __post_init__(self) -> None:
        payload = {"notebook": self.notebook.stem, "parameters": dict(self.parameters)}
        digest = hashlib.sha256(canonical_json(payload, compact=True).encode()).hexdigest()
        object.__setattr__(self, "params_hash", digest[:16])

    # ------------------------------------------------------------------------------- paths
    @property
    def run_dir(self) -> Path:
        """The run folder handed to the notebook."""
        return self.folder / "run"

    @property
    def output(self) -> Path:
        """The executed notebook."""
        return self.folder / "notebooks" / self.notebook.name

    @property
    def record_path(self) -> Path:
        """The completion record."""
        return self.folder / "cell.json"

    @property
    def ledger_path(self) -> Path:
        """The attempts ledger (JSON lines)."""
        return self.folder / "attempts.jsonl"

    @property
    def running_path(self) -> Path:
        """Present while an attempt runs: who runs it."""
        return self.folder / "running.json"

    def log_path(self, attempt: int) -> Path:
        """An attempt's stdout and stderr."""
        return self.folder / "logs" / f"attempt-{attempt}.log"

    # ------------------------------------------------------------------------------- execution
    def papermill_parameters(self) -> dict[str, Any]:
        """The parameters papermill injects (the grid point, plus ``run_dir`` when declared)."""
        params = {k: v for k, v in self.parameters.items() if k != "run_dir"}
        if self.inject_run_dir:
            params = {"run_dir": str(self.run_dir.resolve()), **params}
        return params

    def command_payload(self) -> str:
        """The JSON the cell subprocess reads (``python -m tsevo.studies.cell PAYLOAD``)."""
        return json.dumps(
            {
                "notebook": str(self.notebook.resolve()),
                "output": str(self.output.resolve()),
                "parameters": self.papermill_parameters(),
                "kernel": self.kernel,
                "cwd": str(self.notebook.resolve().parent),
            }
        )

    # ------------------------------------------------------------------------------- records
    def record(self) -> dict[str, Any] | None:
        """The completion record, or ``None`` (absent or unreadable)."""
        try:
            d = json.loads(self.record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return d if isinstance(d, dict) else None

    def finished(self) -> bool:
        """Output notebook and completion record present, and the record is for these parameters."""
        rec = self.record()
        return (
            rec is not None and rec.get("params_hash") == self.params_hash and self.output.exists()
        )

    def stale(self) -> bool:
        """The folder holds a record or attempts for other parameters (the spec changed)."""
        rec = self.record()
        if rec is not None and rec.get("params_hash") != self.params_hash:
            return True
        return any(a.get("params_hash") != self.params_hash for a in self.attempts())

    def write_record(self, attempt: int, wall_s: float, worker: str | None) -> None:
        """Write the completion record (after an execution that exited 0 with its output)."""
        rec = {
            "schema": RECORD_SCHEMA,
            "study": self.study,
            "cell": self.key,
            "notebook": self.notebook.name,
            "params_hash": self.params_hash,
            "parameters": dict(self.parameters),
            "output": str(self.output),
            "attempt": attempt,
            "wall_s": round(wall_s, 3),
            "worker": worker,
        }
        atomic_write_text(self.record_path, json.dumps(rec, indent=1, default=str) + "\n")

    def attempts(self) -> list[dict[str, Any]]:
        """Every attempt recorded in the ledger, oldest first (a torn last line is skipped)."""
        try:
            lines = self.ledger_path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def append_attempt(self, entry: Mapping[str, Any]) -> None:
        """Append one attempt to the ledger (flushed and fsynced)."""
        self.ledger_path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"params_hash": self.params_hash, **entry}, default=str).encode() + b"\n"
        with self.ledger_path.open("ab+") as fh:
            end = fh.seek(0, os.SEEK_END)
            if end > 0:  # a line torn by a kill stays a line of its own
                fh.seek(end - 1)
                if fh.read(1) != b"\n":
                    line = b"\n" + line
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
