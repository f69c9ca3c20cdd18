"""LibraryBrowser: the deployed chain's stages and artifacts, with source, tree and usage.

Built from :func:`tsevo.analysis.tools_df`: per artifact its stage and round, kind, scope and
anti-scope, contract, guidance, syntax-highlighted source, calibration tree, and how often it fired,
helped and harmed on validation and test.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ipywidgets as ipw

from tsevo.analysis import brief_measurement, tools_df

from ._render import draw_calibration_tree, esc, figure_png, img_tag, table_html, tool_html

__all__ = ["LibraryBrowser", "filter_tools", "tool_label"]

ALL = "(all)"


def filter_tools(tools: Any, *, stage: int | None = None, kind: str | None = None) -> Any:
    """Rows of a tools frame in one stage and of one kind (None = any)."""
    keep = [True] * len(tools)
    if stage is not None:
        keep = [k and int(s) == stage for k, s in zip(keep, tools["stage"], strict=True)]
    if kind not in (None, ALL):
        keep = [k and x == kind for k, x in zip(keep, tools["kind"], strict=True)]
    return tools[keep]


def tool_label(row: Mapping[str, Any]) -> str:
    """The one-line label of an artifact in the list (a composite's branch list in brief)."""
    cal = " · calibrated" if row.get("calibrated") else ""
    m = brief_measurement(str(row.get("measurement") or ""))
    return f"stage {row['stage']} · {row['id']} · {row['kind']} · {m}{cal}"


def tool_panel_html(row: Mapping[str, Any]) -> str:
    """The detail panel of one artifact, with the calibration tree drawn when it has one."""
    out = tool_html(row)
    if row.get("calibrated") and row.get("calibration_json"):
        ax = draw_calibration_tree(row["calibration_json"])
        out += img_tag(figure_png(ax.figure), f"calibration tree of {row['id']}")
    return out


class LibraryBrowser:
    """Browse the artifacts of a library: filter by stage and kind, select one to see it whole.

    Args:
        tools: A frame from :func:`tsevo.analysis.tools_df`.
        title: Heading shown above the controls.

    Attributes:
        stage: Stage filter (``"(all)"`` or a stage number).
        kind: Artifact kind filter.
        artifacts: The artifact list (value = selected id).
        detail: HTML of the selected artifact.
        view: The composed widget.
    """

    def __init__(self, tools: Any, *, title: str = "") -> None:
        self.tools = tools.sort_values(["stage", "id"]).reset_index(drop=True)
        self.title = title
        self._busy = False
        stages: list[Any] = [ALL, *sorted({int(s) for s in self.tools["stage"]})]
        kinds = sorted({str(k) for k in self.tools["kind"]})
        self.stage = ipw.Dropdown(options=stages, value=ALL, description="stage")
        self.kind = ipw.Dropdown(options=[ALL, *kinds], value=ALL, description="kind")
        self.artifacts = ipw.Select(options=[], rows=12, layout=ipw.Layout(width="420px"))
        self.count = ipw.HTML()
        self.detail = ipw.HTML()
        header = ipw.HTML(f"<b>{esc(title)}</b>") if title else ipw.HTML()
        self.view = ipw.VBox(
            [
                header,
                ipw.HBox([self.stage, self.kind]),
                self.count,
                ipw.HBox([self.artifacts, self.detail]),
            ]
        )
        self.stage.observe(self._refresh, names="value")
        self.kind.observe(self._refresh, names="value")
        self.artifacts.observe(self._show, names="value")
        self._refresh()

    @classmethod
    def from_run(cls, run: str | Path) -> LibraryBrowser:
        """Build from a run folder (``tools_df(run)``: the deployed library and its usage)."""
        tools = tools_df(run)
        n = len({int(s) for s in tools["stage"]})
        return cls(tools, title=f"deployed library: {len(tools)} artifacts in {n} stage(s)")

    # ------------------------------------------------------------------ state
    @property
    def shown(self) -> Any:
        """Artifacts passing the filters."""
        st = self.stage.value
        return filter_tools(self.tools, stage=None if st == ALL else int(st), kind=self.kind.value)

    @property
    def selected(self) -> str | None:
        """The selected artifact id (None when the list is empty)."""
        v = self.artifacts.value
        return None if v is None else str(v)

    def select(self, tool_id: str) -> None:
        """Select an artifact by id (it must pass the current filters)."""
        if tool_id not in set(self.shown["id"]):
            raise KeyError(f"{tool_id!r} is not in the filtered list")
        self.artifacts.value = tool_id

    def _refresh(self, _: Any = None) -> None:
        shown = self.shown
        keep = self.artifacts.value
        opts = [(tool_label(r), str(r["id"])) for r in shown.to_dict("records")]
        ids = [i for _, i in opts]
        self._busy = True
        try:
            self.artifacts.options = opts
            self.artifacts.value = keep if keep in ids else (ids[0] if ids else None)
        finally:
            self._busy = False
        self.count.value = f"{len(shown)} of {len(self.tools)} artifacts"
        self._show()

    def _show(self, _: Any = None) -> None:
        if self._busy:
            return
        tid = self.selected
        if tid is None:
            self.detail.value = "<i>no artifact matches the filters</i>"
            return
        row = self.tools[self.tools["id"] == tid].to_dict("records")[0]
        self.detail.value = tool_panel_html(row)

    # ------------------------------------------------------------------ static export
    def static_view(self) -> tuple[ipw.Widget, list[Any]]:
        """A kernel-free version: the list drives pre-rendered panels through a front-end link."""
        rows = self.tools.to_dict("records")
        select = ipw.Select(
            options=[tool_label(r) for r in rows], rows=12, layout=ipw.Layout(width="420px")
        )
        stack = ipw.Stack(
            [ipw.HTML(tool_panel_html(r)) for r in rows], selected_index=0 if rows else None
        )
        link = ipw.jslink((select, "index"), (stack, "selected_index"))
        head = ipw.HTML(f"<b>{esc(self.title)}</b>")
        return ipw.VBox([head, ipw.HBox([select, stack])]), [link]

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.view._repr_mimebundle_(**kwargs)

    def _repr_html_(self) -> str:
        cols = ["stage", "id", "kind", "measurement", "fired_val", "helped_val", "harmed_val"]
        return f"<div><b>LibraryBrowser</b> {esc(self.title)}</div>" + table_html(
            self.tools.to_dict("records"), cols
        )

    def __repr__(self) -> str:
        n_st = len({int(s) for s in self.tools["stage"]})
        return f"LibraryBrowser({len(self.tools)} artifacts in {n_st} stage(s))"
