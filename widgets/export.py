"""Offline HTML export of a run: a static page with live widgets that renders with no internet.

The default ipywidgets export loads ``require.js`` from cdnjs and the widget manager
(``@jupyter-widgets/html-manager``'s ``embed-amd.js``) from jsDelivr, which an offline workshop
cannot reach. Setup fetches the same files from the npm registry into ``widgets/static/vendor/``
(``.ci/fetch_widget_assets.sh``, not committed); :func:`export_html` copies the few it needs
next to the page (``<page>_files/``) and references them by relative URL.

With no kernel behind the page, Python callbacks cannot run; each widget's ``static_view``
pre-renders its panels and connects the list to them with a front-end link (``jslink``), so
selecting a question or an artifact still works in the browser.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import ipywidgets as ipw

from tsevo.analysis import run_text

from ._render import esc
from .chains import ChainView
from .flips import FlipExplorer
from .gate import GateView
from .library import LibraryBrowser
from .taxonomy import TaxonomyBrowser

__all__ = ["ASSETS_ENV", "build_page", "default_assets_dir", "export_html"]

ASSETS_ENV = "TSEVO_WIDGET_ASSETS"
"""Environment variable naming the vendor folder (default ``widgets/static/vendor``)."""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<title>{title}</title>
<script src="{assets}/require.js"></script>
<script src="{assets}/embed-amd.js"></script>
<style>body {{ font-family: sans-serif; margin: 12px; }}</style>
</head>
<body>
<h2>{title}</h2>
<script type="application/vnd.jupyter.widget-state+json">
{state}
</script>
{views}
</body>
</html>
"""
_VIEW = '<script type="application/vnd.jupyter.widget-view+json">\n{spec}\n</script>'


def default_assets_dir() -> Path:
    """``$TSEVO_WIDGET_ASSETS`` or the vendor folder filled by ``.ci/fetch_widget_assets.sh``."""
    env = os.environ.get(ASSETS_ENV, "")
    return Path(env) if env else Path(__file__).resolve().parent / "static" / "vendor"


def _asset_files(vendor: Path) -> dict[str, Path]:
    """Files the page needs: require.js, embed-amd.js and the icon fonts it references."""
    req = vendor / "requirejs" / "require.js"
    dist = vendor / "html-manager" / "dist"
    embed = dist / "embed-amd.js"
    missing = [p for p in (req, embed) if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"widget assets missing ({', '.join(str(p) for p in missing)}); "
            "run .ci/fetch_widget_assets.sh (fetches them from the npm registry)"
        )
    files = {"require.js": req, "embed-amd.js": embed}
    text = embed.read_text(encoding="utf-8", errors="replace")
    for font in sorted(dist.iterdir()):
        if font.suffix in (".woff2", ".woff") and font.name in text:
            files[font.name] = font
    return files


def build_page(
    run: str | Path, *, split: str = "test", max_questions: int | None = 40
) -> tuple[ipw.Widget, list[Any]]:
    """The export's widget tree: a run summary and tabs for flips, library, gate and Mara chains.

    Args:
        run: Run folder.
        split: Flips shown (``test`` or ``val``).
        max_questions: Questions pre-rendered in the flip list (helped and harmed come first).

    Returns:
        The page widget and the front-end links it needs.
    """
    flips_w, l1 = FlipExplorer.from_run(run, split=split).static_view(max_questions=max_questions)
    lib_w, l2 = LibraryBrowser.from_run(run).static_view()
    gate_w, l3 = GateView.from_run(run).static_view()
    chains_w, l4 = ChainView.from_run(run).static_view()
    tax_w, l5 = TaxonomyBrowser.from_run(run).static_view()
    summary = ipw.HTML(
        f"<pre style='font-size:11px;white-space:pre-wrap'>{esc(run_text(run))}</pre>"
    )
    tabs = ipw.Tab([flips_w, lib_w, gate_w, summary, chains_w, tax_w])
    for i, name in enumerate(["flips", "library", "gate", "summary", "chains", "taxonomy"]):
        tabs.set_title(i, name)
    return tabs, [*l1, *l2, *l3, *l4, *l5]


def export_html(
    run: str | Path,
    out_path: str | Path,
    *,
    title: str | None = None,
    split: str = "test",
    max_questions: int | None = 40,
    assets_dir: str | Path | None = None,
) -> Path:
    """Write a static HTML page with the run's widgets that renders offline.

    The page references ``<stem>_files/require.js`` and ``<stem>_files/embed-amd.js`` (copied from
    ``assets_dir``); keep that folder next to the page when moving it.

    Args:
        run: Run folder.
        out_path: The ``.html`` file to write.
        title: Page title (default: the run folder's name).
        split: Flips shown (``test`` or ``val``).
        max_questions: Questions pre-rendered in the flip list.
        assets_dir: Vendor folder (default: :func:`default_assets_dir`).

    Returns:
        The written page.

    Raises:
        FileNotFoundError: The vendor assets are missing (run ``.ci/fetch_widget_assets.sh``).
    """
    from ipywidgets.embed import dependency_state, embed_data, escape_script

    files = _asset_files(Path(assets_dir) if assets_dir is not None else default_assets_dir())
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    asset_dir = out.parent / f"{out.stem}_files"
    asset_dir.mkdir(exist_ok=True)
    for name, src in files.items():
        dst = asset_dir / name
        if not dst.exists() or dst.stat().st_size != src.stat().st_size:
            shutil.copyfile(src, dst)
    page, links = build_page(run, split=split, max_questions=max_questions)
    try:
        state = dependency_state([page, *links], drop_defaults=False)
        data = embed_data([page], drop_defaults=False, state=state)
        views = "\n".join(
            _VIEW.format(spec=escape_script(json.dumps(spec))) for spec in data["view_specs"]
        )
        html_text = _PAGE.format(
            title=esc(title or f"tsevo run {Path(run).resolve().name}"),
            assets=asset_dir.name,
            state=escape_script(json.dumps(data["manager_state"])),
            views=views,
        )
    finally:
        for w in [*links, page]:
            _close_tree(w)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(html_text, encoding="utf-8")
    os.replace(tmp, out)
    return out


def _close_tree(w: Any) -> None:
    """Close a widget and its children (frees the models held in ``Widget.widgets``)."""
    for child in getattr(w, "children", ()) or ():
        _close_tree(child)
    w.close()
