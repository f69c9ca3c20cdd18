"""Browser tier (opt-in, ``make test-browser``): the TaxonomyBrowser in the offline HTML export.

Mirrors ``test_export_browser.py``: Debian's chromium, Playwright without its browser download and
the npm widget assets; the page is opened from ``file://`` with every network request aborted.
The run is the tiny real round with a taxonomy: builtin induction, two hand-added codes on the
draft (the tiny run's miner alone finds none, which would leave nothing to select), then the real
builtin gate. Asserts the ``taxonomy`` tab of the export renders the badge (status, the gating
metric named, κ, coverage), the codes in frequency order, and that picking another code shows its
pre-rendered panel through a front-end link (no kernel). Skipped unless ``TSEVO_BROWSER=1``, and
until ``widgets.export.build_page`` has the ``taxonomy`` tab.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.chromium_env import offline_page, skip_reason
from tsevo import notebook as nb

pytestmark = pytest.mark.browser


def _with_taxonomy(run: Path) -> None:
    """Induce, add two codes to the draft by the edit API, and gate it (all through the package)."""
    from tsevo.store import RunLayout
    from tsevo.taxonomy import Add, Code, apply_edits, load_taxonomy, save_taxonomy
    from tsevo.taxonomy.runs import gate_run, induce_run

    induce_run(run)
    tp = RunLayout(run).taxonomy
    draft = load_taxonomy(tp.draft)
    adds = [
        Add(
            Code(
                id="",
                category=axis,
                name=name,
                description=f"Traces where {feature} == {value} <i>(added by hand)</i>",
                applies_to_role=role,
                detector={"any": [{"all": [{"feature": feature, "op": "==", "value": value}]}]},
                outcome_blind=True,
                area="chain" if axis == "A" else role,
            )
        )
        for axis, name, feature, value, role in [
            ("A", "No_Tool_Shortlisted", "tool.shortlisted", False, None),
            ("B", "Answerer_Picks_First_Option", "answer.position", "first", "answerer"),
        ]
    ]
    save_taxonomy(apply_edits(draft, adds, trigger="browser test").taxonomy, tp.draft)
    gate_run(run)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    from tsevo.widgets.export import build_page, export_html

    base = tmp_path_factory.mktemp("browser-taxonomy")
    run = nb.ensure_run(nb.QuickstartConfig(run_dir=str(base / "run")), log=lambda _: None)
    _with_taxonomy(run)
    page, _ = build_page(run, max_questions=2)
    titles = [page.get_title(i) for i in range(len(page.children))]
    if "taxonomy" not in titles:
        pytest.skip("widgets.export.build_page has no taxonomy tab yet")
    return run, export_html(run, base / "export" / "run.html", max_questions=4)


def test_taxonomy_tab_renders_offline_and_selection_works(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    from tsevo.widgets.taxonomy import TaxonomyBrowser, badge_text

    run, page_path = exported
    b = TaxonomyBrowser.from_run(run)
    rows = [r for a in ("A", "B", "C") for r in b.by_axis()[a].to_dict("records")]
    assert len(rows) >= 2
    status = badge_text(b.current, b.agreement).split(" · ")[0]
    shots = Path(os.environ.get("TSEVO_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with offline_page(page_path, 1300, 1000) as (page, errors, requests):
        page.wait_for_selector(".widget-tab, .jupyter-widget-tab", timeout=20000)
        page.locator(".lm-TabBar-tabLabel", has_text="taxonomy").click()
        page.wait_for_selector("text=gated by", timeout=10000)
        visible = " ".join(page.locator(".widget-html-content:visible").all_inner_texts())
        assert status in visible and "coverage" in visible
        assert "mean pairwise Cohen κ at area level (cohen_area)" in visible
        select = page.locator("select:visible").first
        options = [o.replace("\xa0", " ") for o in select.locator("option").all_inner_texts()]
        assert [o.split(" · ")[0] for o in options] == [r["code_id"] for r in rows]
        first, second = (str(r["code_id"]) for r in rows[:2])
        panel = (
            "[...document.querySelectorAll('.widget-html-content')]"
            ".some(e => e.offsetParent !== null && e.innerText.includes(q))"
        )
        page.wait_for_function(f"q => {panel}", arg=f"{first} {rows[0]['name']}")
        select.select_option(index=1)
        page.wait_for_function(f"q => {panel}", arg=f"{second} {rows[1]['name']}", timeout=10000)
        assert "<i>(added by hand)</i>" in " ".join(
            page.locator(".widget-html-content:visible").all_inner_texts()
        )  # escaped markup shows as text, not as an element
        shot = shots / "export_taxonomy.png"
        page.screenshot(path=str(shot), full_page=True)
    assert not errors, errors
    assert not [u for u in requests if not u.startswith("file://")], "page tried the network"
    print(f"\nbrowser screenshot: {shot}")
    assert shot.stat().st_size > 10_000
