"""The workshop path in a real JupyterLab (opt-in: ``make test-lab``).

``jupyter lab`` from the venv on 127.0.0.1 (random port and token, headless) serves copies of the
notebooks; Debian's chromium opens them through Playwright, runs every cell from the menu, waits for
the kernel to go idle, and checks what a person in the room would see:

* the quickstart on the ``tsevo`` kernel, no error output, the flip explorer and the library
  browser drawn as live widgets (not their text fallback), and selecting another question (and
  another artifact) changes the detail pane: a round trip through the kernel; the widget versions
  of the venv against what the page loaded (printed, and every disagreement fails);
* a stage notebook with a widget, ``40_prefilter_and_gate``: the gate view live, and choosing
  another round redraws its panel through the kernel (on a two-round run);
* the quickstart once more with ``backend="llm"`` against ``tsevo serve-scripted`` (a child
  process, replies computed by the builtin roles): the run's manifest names the scripted model;
* the tier fails when a widget's front end cannot load: with the widget manager's lab extension
  disabled (the widgets fall back to text) and with a widget whose front-end module is not
  installed (the manager cannot create it); both are caught by the same check.

Screenshots go to ``$TSEVO_SCREENSHOT_DIR`` (``runs/lab``). Each server is stopped by its PID.
The taxonomy browser and the chain view join :data:`NOTEBOOK_WIDGETS` once they exist.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tsevo import notebook as nb
from tsevo.store import RunLayout, RunStore
from tsevo.testing import SCRIPTED_MODEL

from .conftest import notebook_copy
from .page import NotebookPage, WidgetNotLive, live_widget, select_other
from .servers import LabServer, ScriptedProcess
from .versions import version_problems, versions_table, widget_versions

pytestmark = pytest.mark.lab

#: notebook stem -> (the source of the cell that displays the widget, the widget's name).
NOTEBOOK_WIDGETS: dict[str, list[tuple[str, str]]] = {
    "00_quickstart": [
        ("FlipExplorer.from_run", "flip explorer"),
        ("LibraryBrowser.from_run", "library browser"),
    ],
    "40_prefilter_and_gate": [("GateView.from_run", "gate view")],
}

#: A notebook whose widget's front-end module is not installed anywhere.
MISSING_FRONT_END = """\
import ipywidgets as ipw
from traitlets import Unicode

class NotInstalled(ipw.DOMWidget):
    _model_name = Unicode("NotInstalledModel").tag(sync=True)
    _model_module = Unicode("tsevo-widget-front-end-that-is-not-installed").tag(sync=True)
    _model_module_version = Unicode("^9.9.9").tag(sync=True)
    _view_name = Unicode("NotInstalledView").tag(sync=True)
    _view_module = Unicode("tsevo-widget-front-end-that-is-not-installed").tag(sync=True)
    _view_module_version = Unicode("^9.9.9").tag(sync=True)

NotInstalled()
"""


def _run(page: NotebookPage) -> Any:
    report = page.run_all()
    print(
        f"\n{report.notebook}: kernel {report.kernel}, {report.cells} code cells run in "
        f"{report.run_s:.1f} s, {len(report.errors)} error output(s)"
    )
    assert report.kernel == "tsevo"
    assert not report.errors, report.errors
    assert not report.page_errors, report.page_errors
    return report


def _inspectors(page: NotebookPage, stem: str) -> None:
    """Both quickstart inspectors live; a selection in each goes through the kernel."""
    (flips_src, flips_name), (lib_src, lib_name) = NOTEBOOK_WIDGETS[stem]
    flips = live_widget(page.cell_with(flips_src), flips_name)
    page.shot("flip_explorer", flips)
    qid, rt = select_other(flips)
    assert qid in flips.locator(".widget-html-content").last.inner_text()
    page.shot("flip_explorer_selected", flips)
    print(f"flip explorer: selected {qid}, detail pane redrawn by the kernel in {rt:.2f} s")
    lib = live_widget(page.cell_with(lib_src), lib_name)
    page.shot("library_browser", lib)
    tool, rt = select_other(lib)
    page.shot("library_browser_selected", lib)
    print(f"library browser: selected {tool}, detail pane redrawn in {rt:.2f} s")


def test_quickstart_in_lab(browser: Any, lab: LabServer, shots: Path, work: Path) -> None:
    name = notebook_copy(work, "00_quickstart")
    page = NotebookPage(browser, lab, name, shots, "quickstart")
    try:
        _run(page)
        _inspectors(page, "00_quickstart")
        versions = widget_versions(lab, page.scripts)
    finally:
        page.close()
    print(versions_table(versions))
    (shots / "versions.json").write_text(json.dumps(versions, indent=2), encoding="utf-8")
    assert not version_problems(versions), version_problems(versions)
    print("screenshots:\n  " + "\n  ".join(str(p) for p in page.screenshots))
    assert RunLayout(work / "run").is_run()


def test_gate_notebook_in_lab(browser: Any, lab: LabServer, shots: Path, work: Path) -> None:
    run = work / "run2"
    t0 = time.perf_counter()
    nb.ensure_run(nb.QuickstartConfig(run_dir=str(run), rounds=2), log=lambda _: None)
    print(f"\ntwo-round run for the gate view prepared in {time.perf_counter() - t0:.1f} s")
    name = notebook_copy(work, "40_prefilter_and_gate", run_dir=str(run))
    page = NotebookPage(browser, lab, name, shots, "gate")
    try:
        _run(page)
        ((src, what),) = NOTEBOOK_WIDGETS["40_prefilter_and_gate"]
        view = live_widget(page.cell_with(src), what)
        assert view.locator("img").count() >= 1
        page.shot("gate_view", view)
        rnd, rt = select_other(view, ".widget-dropdown select", key_of=lambda s: f"round {s}")
        page.shot("gate_view_other_round", view)
        print(f"gate view: {rnd} drawn by the kernel in {rt:.2f} s")
    finally:
        page.close()


def test_quickstart_llm_backend_against_serve_scripted(
    browser: Any, lab: LabServer, shots: Path, work: Path
) -> None:
    run = work / "run-llm"
    with ScriptedProcess(work / "serve-scripted.log") as srv:
        banner = srv.text()
        assert "COMPUTED BY TSEVO'S BUILTIN ROLES, NOT BY A LANGUAGE MODEL" in banner
        name = notebook_copy(
            work,
            "00_quickstart",
            "00_quickstart_llm.ipynb",
            run_dir=str(run),
            backend="llm",
            base_url=srv.base_url,
            model=SCRIPTED_MODEL,
        )
        page = NotebookPage(browser, lab, name, shots, "quickstart_llm")
        try:
            _run(page)
            _inspectors(page, "00_quickstart")
        finally:
            page.close()
        time.sleep(2.5)  # one more status line
    log = srv.text()
    print(srv.stop_report)
    print("serve-scripted, last lines:\n  " + "\n  ".join(log.splitlines()[-2:]))
    manifest = RunStore.open(run).manifest
    assert manifest["backend"] == "llm"
    assert set(manifest["llm"]["models"].values()) == {SCRIPTED_MODEL}
    assert manifest["llm"]["base_url"] == srv.base_url
    assert RunLayout(run).llm_accounting.exists()
    assert "replies computed by the builtin roles, not a model" in log
    assert "stopped." in log


def test_unloadable_widget_front_end_fails_the_check(
    browser: Any, lab: LabServer, shots: Path, work: Path
) -> None:
    import nbformat

    note = nbformat.v4.new_notebook()
    note.metadata["kernelspec"] = {"name": "tsevo", "display_name": "tsevo", "language": "python"}
    note.cells = [nbformat.v4.new_code_cell(MISSING_FRONT_END)]
    nbformat.write(note, str(work / "root" / "missing_front_end.ipynb"))
    page = NotebookPage(browser, lab, "missing_front_end.ipynb", shots, "broken_module")
    try:
        _run(page)
        out = page.cell_with("NotInstalled()")
        with pytest.raises(WidgetNotLive) as err:
            live_widget(out, "a widget whose front end is not installed", timeout_ms=20_000)
        page.shot("output", out)
    finally:
        page.close()
    print(f"\nthe check fails as it should: {err.value}")


def test_missing_widget_manager_fails_the_check(browser: Any, shots: Path, work: Path) -> None:
    """The quickstart in a lab whose widget manager extension is disabled: the tier must fail."""
    if not RunLayout(work / "run").is_run():
        nb.ensure_run(nb.QuickstartConfig(run_dir=str(work / "run")), log=lambda _: None)
    name = notebook_copy(work, "00_quickstart", "00_quickstart_no_manager.ipynb")
    broken = LabServer(
        work / "root",
        work / "lab-home-broken",
        env={"TSEVO_RUN_DIR": str(work / "run")},
        disabled=["@jupyter-widgets/jupyterlab-manager"],
    )
    with broken:
        page = NotebookPage(browser, broken, name, shots, "broken_manager")
        try:
            _run(page)
            out = page.cell_with("FlipExplorer.from_run")
            with pytest.raises(WidgetNotLive) as err:
                live_widget(out, "flip explorer", timeout_ms=15_000)
            page.shot("flip_explorer_fallback", out)
        finally:
            page.close()
    print(f"\n{broken.stop_report}\nthe check fails as it should: {err.value}")
    assert "FlipExplorer" in str(err.value) or "VBox" in str(err.value)
