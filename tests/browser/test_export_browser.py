"""Browser tier (opt-in, ``make test-browser``): the offline HTML export in headless Chromium.

Needs Debian's chromium (``apt-get install --no-install-recommends chromium``), Playwright from PyPI
without its browser download, and the npm widget assets (``.ci/fetch_widget_assets.sh``). The page
is opened from ``file://`` with every network request aborted, so it must render from the local
assets alone. Asserts the widgets rendered, that selecting a question shows its panel (a
front-end link, no kernel), and saves a screenshot (path printed; ``TSEVO_SCREENSHOT_DIR`` keeps
it outside the temporary folder). Skipped unless ``TSEVO_BROWSER=1``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.browser.chromium_env import offline_page, skip_reason
from tsevo import notebook as nb

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    from tsevo.widgets import export_html

    base = tmp_path_factory.mktemp("browser")
    run = nb.ensure_run(nb.QuickstartConfig(run_dir=str(base / "run")), log=lambda _: None)
    page = export_html(run, base / "export" / "run.html", max_questions=12)
    return run, page


def test_export_renders_offline_and_selection_works(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    _, page_path = exported
    shots = Path(os.environ.get("TSEVO_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with offline_page(page_path, 1200, 900) as (page, errors, requests):
        page.wait_for_selector(".widget-tab, .jupyter-widget-tab", timeout=20000)
        tabs = page.locator(".lm-TabBar-tabLabel").all_inner_texts()
        assert tabs[:4] == ["flips", "library", "gate", "summary"]
        select = page.locator("select").first
        options = [o.replace("\xa0", " ") for o in select.locator("option").all_inner_texts()]
        assert len(options) == 12
        first_qid = options[0].split(" · ")[1]
        second_qid = options[1].split(" · ")[1]
        visible = page.locator(".widget-html-content:visible")
        assert first_qid in " ".join(visible.all_inner_texts())
        select.select_option(index=1)
        page.wait_for_function(
            "q => [...document.querySelectorAll('.widget-html-content')]"
            ".some(e => e.offsetParent !== null && e.innerText.includes(q))",
            arg=second_qid,
            timeout=10000,
        )
        shown = " ".join(visible.all_inner_texts())
        assert second_qid in shown and first_qid not in shown.split("tools that ran")[0]
        assert page.locator("img[src^='data:image/png']:visible").count() >= 1
        shot = shots / "export_flips.png"
        page.screenshot(path=str(shot), full_page=True)
        page.locator(".lm-TabBar-tabLabel", has_text="library").click()
        page.wait_for_selector("text=deployed library", timeout=10000)
        page.screenshot(path=str(shots / "export_library.png"), full_page=True)
    elapsed = time.perf_counter() - t0
    assert not errors, errors
    assert not [u for u in requests if not u.startswith("file://")], "page tried the network"
    print(f"\nbrowser screenshot: {shot} ({elapsed:.1f} s in the browser)")
    assert shot.stat().st_size > 10_000
