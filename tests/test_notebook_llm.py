"""The backend parameter is real: a notebook runs under nbval with ``backend="llm"``.

The quickstart (tiny preset, one round) runs in a kernel against the scripted OpenAI-compatible
server (:class:`tsevo.testing.FakeOpenAIServer` on loopback in this process, its replies computed
by the builtin roles). papermill injects the backend parameters into a copy of the notebook without
executing it; nbval then executes the copy in a subprocess, so the kernel reaches the server over
real HTTP exactly as it would reach vLLM, Ollama or OpenAI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import papermill

from tsevo import notebook as nb
from tsevo import studies
from tsevo.store import RunLayout, RunStore
from tsevo.testing import BuiltinResponder, FakeOpenAIServer

NOTEBOOK = "00_quickstart"
NBVAL = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
NBVAL += ["--nbval-lax", "--nbval-current-env"]


def scripted_responder(cfg: nb.NotebookConfig) -> BuiltinResponder:
    """The scripted server's replies: the builtin roles on the questions of the run ``cfg`` creates."""
    return BuiltinResponder(list(cfg.suite()), seed=cfg.protocol().seed)


def test_quickstart_runs_under_nbval_on_the_llm_backend(tmp_path: Path) -> None:
    (source,) = [p for p in studies.default_notebooks() if p.stem == NOTEBOOK]
    run = tmp_path / "run"
    prepared = tmp_path / f"{NOTEBOOK}_llm.ipynb"
    env = {k: v for k, v in os.environ.items() if k != nb.RUN_DIR_ENV}
    env.update(HF_HUB_OFFLINE="1", MPLBACKEND="Agg", PYTHONHASHSEED="0")
    with FakeOpenAIServer(scripted_responder(nb.QuickstartConfig())) as srv:
        params = {
            "run_dir": str(run),
            "backend": "llm",
            "base_url": srv.base_url,
            "model": "scripted",
        }
        cfg = nb.QuickstartConfig.from_params(params)  # the names are the notebook's parameters
        assert cfg.suite_ref == nb.QuickstartConfig().suite_ref  # the responder knows its questions
        papermill.execute_notebook(
            str(source), str(prepared), parameters=params, prepare_only=True, progress_bar=False
        )
        t0 = time.perf_counter()
        res = subprocess.run(
            [*NBVAL, str(prepared)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
        )
        elapsed = time.perf_counter() - t0
        requests = srv.n_requests
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert " passed" in res.stdout and "failed" not in res.stdout
    assert requests > 0, "the notebook never reached the scripted server"
    store = RunStore.open(run)
    assert store.manifest["backend"] == "llm"
    assert RunLayout(run).llm_accounting.exists()
    assert nb.read_metrics(run, NOTEBOOK)["rounds"] == 1
    print(f"nbval on the llm backend: {elapsed:.1f} s, {requests} requests")
