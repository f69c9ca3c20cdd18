"""nbval support: every notebook under ``notebooks/`` reads ONE prepared run folder.

``pytest --nbval-lax --current-env --nbval-sanitize-with notebooks/nbval_sanitize.cfg notebooks/``
runs each notebook's cells in a kernel. Every notebook's ``run_dir`` parameter defaults to
``$TSEVO_RUN_DIR``; when that is unset, the first session here evolves the tiny synthetic preset
(seed 5, one round) into a temporary folder and points the variable there before any kernel starts,
so the notebooks share one run instead of each evolving its own.

Study notebooks whose protocol differs from the stage notebooks' keep their run beside the shared
one (:meth:`tsevo.notebook.NotebookConfig.variant`). The multi-round study's run (two tiny rounds)
is started here in a background process while the other notebooks execute on the other core; the
notebook's own ``ensure_run`` waits on the run folder's lock and then reuses it (or evolves it
itself when the background run failed).
"""

from __future__ import annotations

import os
import subprocess
import sys
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
    # runs that only some notebooks need start in the background while the first kernels run
    for notebook, script in (
        ("35_mara_chains.ipynb", _MARA_CHAINS),
        ("97_study_marachain.ipynb", _MARA_STUDY),
        ("95_study_multi_round.ipynb", _MULTI_ROUND),
    ):
        if any(str(item.fspath).endswith(notebook) for item in session.items):
            _BACKGROUND.append(
                subprocess.Popen(
                    [sys.executable, "-c", script],
                    env=dict(os.environ),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )


_MULTI_ROUND = (
    "from tsevo import notebook as nb; nb.ensure_run(nb.MultiRoundConfig(), log=lambda _: None)"
)
_MARA_CHAINS = (
    "from tsevo import notebook as nb; nb.ensure_run(nb.MaraChainsConfig(), log=lambda _: None)"
)
_MARA_STUDY = (
    "from tsevo import notebook as nb; c = nb.MaraChainStudyConfig(); "
    "nb.ensure_run(c.arm_config('discard_k_plus_d'), log=lambda _: None)"
)
_BACKGROUND: list[subprocess.Popen[bytes]] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop a background run that is still going (the notebook no longer needs it)."""
    for p in _BACKGROUND:
        if p.poll() is None:
            p.kill()
        p.wait()
