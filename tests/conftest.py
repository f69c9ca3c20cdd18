"""Shared test setup: offline by default, deterministic, nothing written outside tmp dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

try:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile("dev", max_examples=100, deadline=None)
    settings.load_profile(
        "ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev")
    )
except ImportError:  # pragma: no cover
    pass

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TESTS_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real samples in ../shared/data; skip with a reason when absent (a user's clone)."""
    p = SHARED / "data"
    if not p.is_dir():
        pytest.skip(f"real samples not present: {p} does not exist (only in the project workspace)")
    return p


@pytest.fixture(scope="session")
def tests_data() -> Path:
    return TESTS_DATA


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real tiny round (synthetic tiny preset, seed 5), shared by the xdist workers."""
    from tsevo import notebook as nb

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cfg = nb.QuickstartConfig(run_dir=str(root / "tsevo-tiny-seed5"))
    return nb.ensure_run(cfg, log=lambda _: None)


@pytest.fixture(scope="session")
def chain_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny round of ``tiny_run`` with Mara chains (depth 3, start last), shared by the workers.

    The chain notebook's config (:class:`tsevo.notebook.MaraChainsConfig`): on seed 5 group g3
    misses the bar with every direct attempt and its chain rescues it.
    """
    from tsevo import notebook as nb

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cfg = nb.MaraChainsConfig(run_dir=str(root / "tsevo-tiny-seed5-marachain-d3"))
    return nb.ensure_run(cfg, log=lambda _: None)
