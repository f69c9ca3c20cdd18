"""Browser tier (opt-in, ``make test-browser``): the static ChainView renders offline in Chromium.

Mirrors ``test_export_browser.py`` (and skips where it skips): Debian's chromium, Playwright
without its browser download and the npm widget assets; the page is opened from ``file://`` with
every network request aborted. The run is the tiny real round with Mara chains
(``MaraChainsConfig``: seed 5, depth 3, where group ``g3``'s direct attempts all miss the bar).
The page is written by the real offline export (:func:`tsevo.widgets.export_html`) with its page
builder narrowed to one ``chains`` tab holding ``ChainView.static_view()``, so the test does not
depend on which tabs the run export carries. Asserts the lineage tree and the questions × nodes
grid rendered, that picking a cell shows that question's record and picking a node shows its diff
against its parent (front-end links, no kernel), that the page made no network request, and
saves screenshots (``TSEVO_SCREENSHOT_DIR`` keeps them outside the temporary folder). Skipped
unless ``TSEVO_BROWSER=1``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.chromium_env import offline_page, skip_reason
from tsevo import notebook as nb

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    import ipywidgets as ipw
    from tsevo.widgets import export as export_mod
    from tsevo.widgets.chains import ChainView

    base = tmp_path_factory.mktemp("browser-chains")
    run = nb.ensure_run(nb.MaraChainsConfig(run_dir=str(base / "run")), log=lambda _: None)

    def chains_page(run_: Any, **_: Any) -> tuple[Any, list[Any]]:
        view, links = ChainView.from_run(run_).static_view()
        tabs = ipw.Tab([view])
        tabs.set_title(0, "chains")
        return tabs, links

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(export_mod, "build_page", chains_page)
        page = export_mod.export_html(run, base / "export" / "chains.html", title="Mara chains")
    return run, page


def test_static_chainview_renders_offline_and_links_work(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    from tsevo.analysis import chain_scores_df
    from tsevo.analysis.marachain import chain_lineage_df

    run, page_path = exported
    lineage = chain_lineage_df(run)
    scores = chain_scores_df(run)
    assert len(lineage) and len(scores), "the seed-5 depth-3 run has a chain"
    shots = Path(os.environ.get("TSEVO_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with offline_page(page_path, 1400, 1000) as (page, errors, requests):
        page.wait_for_selector(".tsevo-chain-lineage", timeout=20000)
        assert page.locator(".lm-TabBar-tabLabel").all_inner_texts() == ["chains"]
        tree = page.locator(".tsevo-chain-lineage").first.inner_text()
        assert all(str(n) in tree for n in lineage["node_id"])
        grid = page.locator(".tsevo-chain-grid").first
        assert grid.is_visible()
        n_q = scores["qid"].nunique()
        assert grid.locator("tbody tr").count() == n_q
        assert grid.locator("td[data-cell]").count() == len(scores)
        # selects in page order: the chain dropdown, the cell list, the node list
        selects = page.locator("select")
        assert selects.count() == 3
        cells = [o.replace("\xa0", " ") for o in _options(selects.nth(1))]
        assert len(cells) == len(scores)
        last_q, last_node = cells[-1].split(" × ")
        selects.nth(1).select_option(index=len(cells) - 1)
        page.wait_for_function(
            "([q, n]) => [...document.querySelectorAll('.widget-html-content')]"
            ".some(e => e.offsetParent !== null && e.innerText.includes(q)"
            " && e.innerText.includes(n) && e.innerText.includes('batch part'))",
            arg=[last_q, last_node],
            timeout=10000,
        )
        page.screenshot(path=str(shots / "chainview_record.png"), full_page=True)
        nodes = [o.replace("\xa0", " ") for o in _options(selects.nth(2))]
        step = next(i for i, o in enumerate(nodes) if "└" in o)
        selects.nth(2).select_option(index=step)
        page.wait_for_function(
            "() => [...document.querySelectorAll('.widget-html-content')]"
            ".some(e => e.offsetParent !== null && e.innerText.includes('against its parent'))",
            timeout=10000,
        )
        shot = shots / "chainview_diff.png"
        page.screenshot(path=str(shot), full_page=True)
    elapsed = time.perf_counter() - t0
    assert not errors, errors
    assert not [u for u in requests if not u.startswith("file://")], "page tried the network"
    print(f"\nbrowser screenshots: {shots} ({elapsed:.1f} s in the browser)")
    assert shot.stat().st_size > 10_000


def _options(select: Any) -> list[str]:
    """The option texts of a ``<select>`` locator."""
    texts: list[str] = select.locator("option").all_inner_texts()
    return texts
