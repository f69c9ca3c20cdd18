"""nbval support: every notebook under ``notebooks/`` reads ONE prepared run folder.

``pytest --nbval-lax --current-env --nbval-sanitize-with notebooks/nbval_sanitize.cfg notebooks/``
runs each notebook's cells in a kernel. Every notebook's ``run_dir`` parameter defaults to
``$TSEVO_RUN_DIR``; when that is unset, the first session here evolves the tiny synthetic preset
(seed 5, one round) into a temporary folder and points the variable there before any kernel starts,
so the notebooks share one run instead of each evolving its own.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Prepare the shared run once, after collection and before the first kernel starts."""
    if os.environ.get("TSEVO_RUN_DIR") or not any(
        str(item.fspath).endswith(".ipynb") for item in session.items
    ):
        return
    from tsevo import notebook as nb

    run = Path(tempfile.mkdtemp(prefix="tsevo-nbval-")) / "run"
    nb.ensure_run(nb.QuickstartConfig(run_dir=str(run)), log=lambda _: None)
    os.environ["TSEVO_RUN_DIR"] = str(run)
