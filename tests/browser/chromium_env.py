"""What every browser-tier test needs: the Chromium binary, its flags, and why the tier is skipped.

The tier is opt-in (``TSEVO_BROWSER=1``, ``make test-browser``): Debian's chromium, Playwright from
PyPI without its browser download, and the npm widget assets (``.ci/fetch_widget_assets.sh``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

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
