"""Fixtures of the lab tier (``make test-lab``): the folder the lab serves, the browser, the lab.

Opt-in: every test marked ``lab`` is skipped unless ``TSEVO_LAB=1`` and Debian's chromium and
Playwright are installed (``make test-lab`` installs both, no browser download).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .servers import REPO, VENV_BIN, LabServer

CHROMIUM = os.environ.get("TSEVO_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "lab: drives a real JupyterLab in chromium (make test-lab)")


def skip_reason() -> str | None:
    """Why the lab tier cannot run here (None: it can)."""
    if os.environ.get("TSEVO_LAB") != "1":
        return "opt-in lab tier: set TSEVO_LAB=1 (make test-lab)"
    if not Path(CHROMIUM).exists():
        return f"chromium not found ({CHROMIUM}); make test-lab installs it"
    if not (VENV_BIN / "jupyter-lab").exists():
        return f"jupyter-lab not found in {VENV_BIN}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright not installed; make test-lab installs it"
    return None


@pytest.fixture(scope="session")
def lab_skip() -> None:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def shots(lab_skip: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: ``$TSEVO_SCREENSHOT_DIR`` (make test-lab: runs/lab) or a tmp dir."""
    d = Path(os.environ.get("TSEVO_SCREENSHOT_DIR") or tmp_path_factory.mktemp("shots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="session")
def work(lab_skip: None) -> Iterator[Path]:
    """A private folder: the lab's root (notebook copies), run folders, Jupyter state."""
    d = Path(tempfile.mkdtemp(prefix="tsevo-lab-"))
    (d / "root").mkdir()
    yield d
    if os.environ.get("TSEVO_LAB_KEEP") != "1":
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def browser(lab_skip: None, work: Path) -> Iterator[Any]:
    """Debian's chromium, headless, through Playwright (no browser of Playwright's own)."""
    from playwright.sync_api import sync_playwright

    from .page import CHROMIUM_FLAGS

    os.environ.setdefault("XDG_CONFIG_HOME", str(work / "chromium-config"))
    os.environ.setdefault("XDG_CACHE_HOME", str(work / "chromium-cache"))
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def lab(work: Path) -> Iterator[LabServer]:
    """One ``jupyter lab`` for the tier's notebooks; the plain quickstart's run is ``work/run``."""
    disabled = [x for x in os.environ.get("TSEVO_LAB_DISABLE", "").split(",") if x]
    server = LabServer(
        work / "root",
        work / "lab-home",
        env={"TSEVO_RUN_DIR": str(work / "run")},
        disabled=disabled,  # TSEVO_LAB_DISABLE: break the front end on purpose (see README)
    )
    server.start()
    print(
        f"\njupyter lab pid {server.proc.pid if server.proc else '?'} on {server.base} "
        f"(random port and token), up in {server.started_s:.1f} s"
    )
    try:
        yield server
    finally:
        print("\n" + server.stop())


def notebook_copy(work: Path, stem: str, name: str | None = None, **params: Any) -> str:
    """Copy ``notebooks/<stem>.ipynb`` into the lab's root (papermill injects ``params``, if any).

    The lab opens copies: running cells in the lab saves outputs, and the committed notebooks
    carry none.
    """
    src = REPO / "notebooks" / f"{stem}.ipynb"
    target = work / "root" / (name or src.name)
    if params:
        import papermill

        papermill.execute_notebook(
            str(src), str(target), parameters=params, prepare_only=True, progress_bar=False
        )
    else:
        shutil.copyfile(src, target)
    return target.name
