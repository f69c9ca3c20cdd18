"""What every browser-tier test needs: the Chromium binary, its flags, and why the tier is skipped.

The tier is opt-in (``TSEVO_BROWSER=1``, ``make test-browser``): Debian's chromium, Playwright from
PyPI without its browser download, and the npm widget assets (``.ci/fetch_widget_assets.sh``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("TSEVO_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--allow-file-access-from-files",
]


def skip_reason() -> str | None:
    """Why the browser tier cannot run here (None when it can)."""
    if os.environ.get("TSEVO_BROWSER") != "1":
        return "opt-in browser tier: set TSEVO_BROWSER=1 (make test-browser)"
    if not Path(CHROMIUM).exists():
        return f"chromium not found ({CHROMIUM}); make test-browser installs it"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright not installed; make test-browser installs it"
    from tsevo.widgets.export import default_assets_dir

    if not (default_assets_dir() / "html-manager" / "dist" / "embed-amd.js").is_file():
        return "widget assets missing; run .ci/fetch_widget_assets.sh"
    return None


@contextmanager
def offline_page(
    page_path: Path, width: int = 1200, height: int = 900
) -> Iterator[tuple[Any, list[str], list[str]]]:
    """Open ``page_path`` from ``file://`` in headless Chromium with every other request aborted.

    Yields ``(page, errors, requests)``: the Playwright page, the page errors seen and every URL
    the page asked for (a test asserts that none left ``file://``). The browser closes on exit.
    """
    from playwright.sync_api import sync_playwright

    env_home = Path(tempfile.mkdtemp(prefix="chromium-home-"))
    os.environ.setdefault("XDG_CONFIG_HOME", str(env_home / "config"))
    os.environ.setdefault("XDG_CACHE_HOME", str(env_home / "cache"))
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("pageerror", lambda e: errors.append(str(e)))

            def route(r: Any) -> None:
                requests.append(r.request.url)
                if r.request.url.startswith("file://"):
                    r.continue_()
                else:
                    r.abort()

            page.route("**/*", route)
            page.goto(page_path.resolve().as_uri())
            yield page, errors, requests
        finally:
            browser.close()
