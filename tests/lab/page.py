"""A notebook open in JupyterLab, driven the way a person does it, and the tier's checks on it.

:class:`NotebookPage` opens a notebook in headless Chromium, checks it got the ``tsevo`` kernel,
runs every cell through the menu (Run → Run All Cells), waits until every code cell has an
execution count and the kernel is idle (in the page and on the server), saves the notebook through
the menu and reads it back from the server to find error outputs.

:func:`live_widget` is the check that a cell's output rendered as a live widget: a widget view
drawn by the widget manager (``.jupyter-widgets`` in the output), not the text or HTML fallback a
notebook shows when the widget front end is missing, and not the "Error displaying widget" that
the manager shows (its error view) when a widget's front-end module cannot be loaded. It raises
:class:`WidgetNotLive` with what the output showed instead.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .servers import LabServer

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
#: Text the widget manager shows instead of a view it could not create.
WIDGET_ERRORS = (
    "Error displaying widget",
    "Error creating widget",
    "Failed to load model class",
    "Click to show javascript error",
)

#: The notebook panel in front (others of the workspace stay in the DOM, hidden).
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
_ALL_EXECUTED = """() => {
  const panel = document.querySelector(PANEL);
  if (!panel) return false;
  const ps = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
    .map(e => e.textContent.trim());
  const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  return ps.length > 0 && ps.every(t => /^\\[\\d+\\]:$/.test(t))
    && (!ind || ind.getAttribute('data-status') === 'idle');
}"""


class WidgetNotLive(AssertionError):
    """A cell's output is not a live widget (fallback text, a widget error, or nothing)."""


@dataclass
class RunReport:
    """What running a notebook in the lab gave."""

    notebook: str
    kernel: str
    run_s: float
    cells: int
    errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)


class NotebookPage:
    """One notebook in one browser page of a :class:`LabServer`.

    Args:
        browser: A Playwright browser.
        lab: The running lab.
        notebook: Path of the notebook relative to the lab's root.
        shots: Folder for screenshots.
        prefix: File-name prefix of this page's screenshots.
    """

    def __init__(
        self, browser: Any, lab: LabServer, notebook: str, shots: Path, prefix: str
    ) -> None:
        self.lab, self.notebook, self.shots, self.prefix = lab, notebook, Path(shots), prefix
        self.page = browser.new_page(viewport={"width": 1440, "height": 2000})
        self.page_errors: list[str] = []
        self.scripts: list[str] = []
        self.page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        self.page.on(
            "response",
            lambda r: self.scripts.append(r.url) if r.ok and r.url.endswith(".js") else None,
        )
        self.screenshots: list[Path] = []

    # ------------------------------------------------------------------ driving
    def open(self, timeout_ms: int = 90_000) -> str:
        """Open the notebook, wait for its kernel to be idle; returns the kernel's name."""
        self.page.goto(self.lab.url(self.notebook))
        self.page.wait_for_selector(f"{PANEL} .jp-Notebook", timeout=timeout_ms)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:  # the kernel starts after the page shows the notebook
            try:
                session = self.session()
                if session["kernel"]["execution_state"] == "idle":
                    break
            except AssertionError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"no idle kernel for {self.notebook}: {self.sessions()}")
            time.sleep(0.5)
        self.page.wait_for_selector(
            f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout_ms
        )
        return str(session["kernel"]["name"])

    def sessions(self) -> list[dict[str, Any]]:
        """Every kernel session on the server."""
        return list(self.lab.api("GET", "/api/sessions"))

    def session(self) -> dict[str, Any]:
        """The server's session of this notebook (its kernel id, name and state)."""
        for s in self.sessions():
            if s.get("path") == self.notebook:
                return dict(s)
        raise AssertionError(f"no kernel session for {self.notebook}")

    def menu(self, top: str, item: str) -> None:
        """Click a menu entry, as a person does."""
        self.page.get_by_role("menuitem", name=top, exact=True).click()
        # an entry's accessible name ends with its shortcut ("Save Notebook Ctrl+S")
        entry = re.compile(rf"^{re.escape(item)}(\s|$)")
        self.page.get_by_role("menuitem", name=entry).first.click()

    def run_all(self, timeout_s: float = 600.0) -> RunReport:
        """Run All Cells; wait for every execution count and an idle kernel; save; check errors."""
        kernel = self.open()
        t0 = time.perf_counter()
        self.menu("Run", "Run All Cells")
        self.page.wait_for_function(
            _ALL_EXECUTED.replace("PANEL", repr(PANEL)), timeout=timeout_s * 1000, polling=500
        )
        deadline = time.monotonic() + 60
        while self.session()["kernel"]["execution_state"] != "idle":
            if time.monotonic() > deadline:
                raise AssertionError("the kernel never went idle on the server")
            time.sleep(0.5)
        run_s = time.perf_counter() - t0
        nb = self.save_and_read()
        cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
        errors = [
            f"cell {i}: {o.get('ename')}: {o.get('evalue')}"
            for i, c in enumerate(nb["cells"])
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        unexecuted = [
            i for i, c in enumerate(nb["cells"]) if c in cells and not c["execution_count"]
        ]
        errors += [f"cell {i}: not executed" for i in unexecuted]
        self.shot("notebook")
        return RunReport(self.notebook, kernel, run_s, len(cells), errors, list(self.page_errors))

    def save_and_read(self) -> dict[str, Any]:
        """Save through the menu, wait for the server's copy, and return it (outputs included)."""
        before = self.lab.api("GET", f"/api/contents/{self.notebook}?content=0")["last_modified"]
        self.menu("File", "Save Notebook")
        # Reading the file while the server writes it makes the server restore its backup, so
        # wait until the page says it is saved and the file's time moved (stat only), then read.
        self.page.wait_for_selector(".lm-TabBar-tab.jp-mod-current:not(.jp-mod-dirty)")
        deadline = time.monotonic() + 30
        while (
            self.lab.api("GET", f"/api/contents/{self.notebook}?content=0")["last_modified"]
            == before
        ):
            if time.monotonic() > deadline:
                raise AssertionError("saving the notebook did not reach the server")
            time.sleep(0.3)
        time.sleep(0.5)
        return dict(self.lab.api("GET", f"/api/contents/{self.notebook}?content=1")["content"])

    # ------------------------------------------------------------------ cells
    def cell_with(self, source: str) -> Any:
        """The output area of the first code cell whose source contains ``source``."""
        cells = self.page.locator(f"{PANEL} .jp-CodeCell")
        for i in range(cells.count()):
            cell = cells.nth(i)
            if source in cell.locator(".jp-InputArea").inner_text():
                return cell.locator(".jp-OutputArea").first
        raise AssertionError(f"no code cell contains {source!r}")

    def shot(self, name: str, locator: Any = None) -> Path:
        """A screenshot of the page, or of one element scrolled into view."""
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{self.prefix}_{name}.png"
        if locator is None:
            self.page.screenshot(path=str(path))
        else:
            locator.scroll_into_view_if_needed()
            locator.screenshot(path=str(path))
        self.screenshots.append(path)
        return path

    def close(self) -> None:
        """Shut the notebook's kernel down on the server and close the page."""
        try:
            kid = self.session()["kernel"]["id"]
            self.lab.api("DELETE", f"/api/kernels/{kid}")
        except AssertionError:
            pass
        self.page.close()


# ---------------------------------------------------------------------- widget checks
def live_widget(output: Any, what: str, timeout_ms: int = 30_000) -> Any:
    """The live widget view in a cell's output area; raises :class:`WidgetNotLive` otherwise.

    Args:
        output: The output area locator (:meth:`NotebookPage.cell_with`).
        what: The widget's name, for the message.
        timeout_ms: How long the manager may take to draw the view.
    """
    view = output.locator(".jupyter-widgets").first
    try:
        view.wait_for(state="visible", timeout=timeout_ms)
    except Exception as e:  # playwright's TimeoutError: report what was shown instead
        mimes = output.locator(".jp-OutputArea-output").evaluate_all(
            "els => els.map(e => e.getAttribute('data-mime-type') || 'widget')"
        )
        text = output.inner_text()[:300]
        raise WidgetNotLive(
            f"{what} did not render as a live widget; the output showed {mimes}: {text!r}"
        ) from e
    failed = output.locator(".jupyter-widgets-error-widget")
    if failed.count():  # the manager's error view: clicking it shows the JavaScript error
        failed.first.click()
        raise WidgetNotLive(
            f"{what}: the widget manager failed: {failed.first.inner_text()[:300]!r}"
        )
    text = output.inner_text()
    for marker in WIDGET_ERRORS:
        if marker in text:
            raise WidgetNotLive(f"{what}: the widget manager failed: {text[:300]!r}")
    return view


def detail_text(view: Any) -> str:
    """The text of the last HTML pane of a widget (the detail pane of both inspectors)."""
    return str(view.locator(".widget-html-content").last.inner_text())


def _id_in_label(label: str) -> str:
    return label.split(" · ")[1].strip()


def select_other(
    view: Any,
    list_selector: str = ".widget-select select",
    key_of: Callable[[str], str] = _id_in_label,
) -> tuple[str, float]:
    """Select another entry of the widget's list and wait until the detail pane shows it.

    The list and the pane are linked only through the kernel (the live view has no front-end
    link), so the pane changes only after a round trip: the new value goes to the kernel, the
    widget's Python callback renders the pane, and the front end receives it.

    Args:
        view: The widget view (:func:`live_widget`).
        list_selector: The list (or dropdown) inside it.
        key_of: What the detail pane must show for an entry, from the entry's label.

    Returns:
        The newly selected entry's key and the seconds the round trip took.
    """
    sel = view.locator(list_selector).first
    values = sel.evaluate("s => [...s.options].map(o => o.value)")
    current = sel.evaluate("s => s.value")
    before = detail_text(view)
    target = next(v for v in reversed(values) if v != current)
    label = sel.evaluate("(s, v) => [...s.options].find(o => o.value === v).textContent", target)
    key = key_of(label.replace("\xa0", " "))
    images = view.locator("img.widget-image").evaluate_all("els => els.map(e => e.src)")
    t0 = time.perf_counter()
    sel.select_option(value=target)
    # the pane and the plot are separate messages from the kernel: wait for both
    view.page.wait_for_function(
        "([el, key, before, images]) => {"
        " const panes = el.querySelectorAll('.widget-html-content');"
        " const t = panes[panes.length - 1].innerText;"
        " const now = [...el.querySelectorAll('img.widget-image')].map(e => e.src);"
        " const redrawn = images.length === 0 || now.some((s, i) => s !== images[i]);"
        " return t !== before && t.includes(key) && redrawn; }",
        arg=[view.element_handle(), key, before, images],
        timeout=30_000,
        polling=100,
    )
    return key, time.perf_counter() - t0
