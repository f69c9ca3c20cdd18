"""One cell's papermill execution, in its own process: ``python -m tsevo.studies.cell PAYLOAD``.

A Dask worker starts this process for every attempt (papermill inside a worker process is known to
hang reaping kernels). ``PAYLOAD`` is the JSON of :meth:`tsevo.studies.cells.Cell.command_payload`.
On Linux the process asks the kernel to kill it when the worker that started it dies
(``PR_SET_PDEATHSIG``), so a killed worker leaves no cell running behind it; the notebook's kernel
then exits by itself (ipykernel polls its parent). Exit codes: 0 when the notebook ran to the end,
1 when a cell raised (papermill's traceback on stderr), 70 when the parent was already gone.

Imports only the standard library at the top, then papermill: no pandas, no tsevo engine.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["PARENT_ENV", "die_with_parent", "main"]

#: Environment variable holding the PID of the process that started the cell.
PARENT_ENV = "TSEVO_STUDY_CELL_PARENT"
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent (the Dask worker) dies (Linux only)."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != int(parent):  # the parent died before the request took effect
        os._exit(70)


def main(argv: Sequence[str] | None = None) -> int:
    """Execute the notebook of one cell with papermill; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m tsevo.studies.cell PAYLOAD_JSON", file=sys.stderr)
        return 2
    die_with_parent()
    d = json.loads(args[0])
    import papermill as pm

    Path(d["output"]).parent.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(
        d["notebook"],
        d["output"],
        parameters=d["parameters"],
        kernel_name=d["kernel"],
        cwd=d["cwd"],
        progress_bar=False,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
