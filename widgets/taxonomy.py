"""TaxonomyBrowser: a run's failure codes by axis and frequency, its gate badge, gaps and evidence.

Built only from the taxonomy frames of :mod:`tsevo.analysis.taxonomy`: :func:`codes_df` (codes of
each stored version), :func:`firings_df` (which code fires on which train trace),
:func:`agreement_df` (the gate's rounds), :func:`versions_df` (status and final figures per
version, the gating metric named) and :func:`gaps_df` (coverage gaps, shown as gaps, never as
codes). Codes are grouped by axis (A system-level, B role-specific, C domain-specific) and sorted
by how often they fire; a selected code shows its fields, its firings by split and round, at most
five escaped evidence excerpts and the questions it fires on. Picking a question sets
:attr:`TaxonomyBrowser.selected_question`, which :meth:`TaxonomyBrowser.link` forwards to a
:class:`~tsevo.widgets.FlipExplorer` (:func:`traces_explorer` builds one over exactly the train
questions the traces come from).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import ipywidgets as ipw
import pandas as pd

from tsevo.analysis import run_suite
from tsevo.analysis.taxonomy import (
    agreement_df,
    codes_df,
    firings_df,
    gaps_df,
    trace_flips_df,
    versions_df,
)

from ._render import esc, table_html
from ._taxonomy_render import (
    AXES,
    EMPTY_MESSAGE,
    METRIC_NAMES,
    _key,
    _versions,
    badge_html,
    badge_text,
    code_label,
    code_panel_html,
    codes_by_axis,
    frequencies,
    gaps_html,
    questions_of,
)
from .flips import ALL, FlipExplorer

__all__ = [
    "AXES",
    "EMPTY_MESSAGE",
    "METRIC_NAMES",
    "TaxonomyBrowser",
    "badge_html",
    "badge_text",
    "code_label",
    "code_panel_html",
    "codes_by_axis",
    "frequencies",
    "gaps_html",
    "questions_of",
    "traces_explorer",
]


# --------------------------------------------------------------------------------------- explorer
def traces_explorer(run: str | Path) -> FlipExplorer:
    """A FlipExplorer over the train questions the taxonomy's traces come from.

    The flip there is the base answerer's answer versus the chain's final answer in that base
    pass (:func:`tsevo.analysis.taxonomy.trace_flips_df`), so every question a code fires on is
    in it and :meth:`TaxonomyBrowser.link` can select it.
    """
    flips = trace_flips_df(run)
    qids = set(flips["qid"])
    series = {
        q.id: (dict(q.series), {n: q.role_of(n) for n in q.series})
        for q in run_suite(run)
        if q.id in qids
    }
    r = int(flips["round"].iloc[0]) if len(flips) else 0
    return FlipExplorer(
        flips, series, title=f"train questions of the traces (base pass, round {r})"
    )


# --------------------------------------------------------------------------------------- widget
class TaxonomyBrowser:
    """Browse a run's failure codes: version, axis, codes by frequency, evidence, linked questions.

    Args:
        codes: A :func:`codes_df` frame.
        firings: A :func:`firings_df` frame.
        agreement: A :func:`agreement_df` frame (or None).
        gaps: A :func:`gaps_df` frame (or None).
        versions: A :func:`versions_df` frame (or None: versions are read from ``codes``).
        title: Heading shown above the controls.

    Attributes:
        version: Version dropdown (value = ``"<fingerprint>|<status>"``; default the last).
        axis: Axis buttons (A, B, C; the label counts the codes).
        show_retired: Whether retired ids are listed.
        codes_list: The selected axis's codes, most frequent first (value = code id).
        detail: HTML of the selected code.
        questions: The questions the selected code fires on (value = :attr:`selected_question`).
        view: The composed widget.
    """

    def __init__(
        self,
        codes: Any,
        firings: Any,
        agreement: Any | None = None,
        *,
        gaps: Any | None = None,
        versions: Any | None = None,
        title: str = "",
    ) -> None:
        self.codes = codes.reset_index(drop=True)
        self.firings = firings.reset_index(drop=True)
        self.agreement = agreement
        self.gaps = gaps
        self.title = title
        self.versions = _versions(self.codes, versions)
        self._busy = False
        self._refreshing = False
        self._callbacks: list[Callable[[str | None], None]] = []
        opts = [
            (
                f"v{v['version_n']} {v['status']} ({str(v['taxonomy_fp'])[7:19]})",
                _key(v["taxonomy_fp"], v["status"]),
            )
            for v in self.versions
        ]
        self.version = ipw.Dropdown(
            options=opts, value=opts[-1][1] if opts else None, description="version"
        )
        self.axis = ipw.ToggleButtons(options=[(f"{a} {n}", a) for a, n in AXES.items()], value="A")
        self.show_retired = ipw.Checkbox(value=False, description="retired ids", indent=False)
        self.codes_list = ipw.Select(options=[], rows=10, layout=ipw.Layout(width="420px"))
        self.questions = ipw.Select(options=[], rows=6, layout=ipw.Layout(width="420px"))
        self.badge = ipw.HTML()
        self.gaps_html = ipw.HTML()
        self.count = ipw.HTML()
        self.detail = ipw.HTML()
        self.link_note = ipw.HTML()
        header = ipw.HTML(f"<b>{esc(title)}</b>") if title else ipw.HTML()
        if not self.versions:
            self.view = ipw.VBox([header, ipw.HTML(f"<i>{esc(EMPTY_MESSAGE)}</i>")])
        else:
            left = ipw.VBox(
                [
                    self.codes_list,
                    ipw.HTML("<b>questions it fires on</b>"),
                    self.questions,
                    self.link_note,
                ]
            )
            self.view = ipw.VBox(
                [
                    header,
                    self.badge,
                    ipw.HBox([self.version, self.show_retired]),
                    self.axis,
                    self.count,
                    self.gaps_html,
                    ipw.HBox([left, self.detail]),
                ]
            )
        self.version.observe(self._refresh, names="value")
        self.axis.observe(self._refresh, names="value")
        self.show_retired.observe(self._refresh, names="value")
        self.codes_list.observe(self._show, names="value")
        self.questions.observe(self._question_changed, names="value")
        self._refresh()

    @classmethod
    def from_run(cls, run: str | Path) -> TaxonomyBrowser:
        """Build from a run folder (its taxonomy frames); an honest empty state without one."""
        versions = versions_df(run)
        title = f"failure taxonomy of {Path(str(run)).name}"
        return cls(
            codes_df(run),
            firings_df(run),
            agreement_df(run),
            gaps=gaps_df(run),
            versions=versions,
            title=title,
        )

    # ------------------------------------------------------------------ state
    @property
    def empty(self) -> bool:
        """True when the run has no taxonomy (neither a draft nor a gated version)."""
        return not self.versions

    @property
    def current(self) -> dict[str, Any] | None:
        """The selected version's row (None without a taxonomy)."""
        k = self.version.value
        for v in self.versions:
            if _key(v["taxonomy_fp"], v["status"]) == k:
                return v
        return None

    def by_axis(self) -> dict[str, Any]:
        """The selected version's codes per axis, most frequent first (see :func:`codes_by_axis`)."""
        v = self.current
        if v is None:
            return {
                a: self.codes.iloc[0:0].assign(firings=pd.array([], dtype="Int64")) for a in AXES
            }
        return codes_by_axis(
            self.codes,
            self.firings,
            fp=str(v["taxonomy_fp"]),
            status=str(v["status"]),
            retired=bool(self.show_retired.value),
        )

    @property
    def shown(self) -> Any:
        """The codes of the selected axis, in list order."""
        return self.by_axis()[self.axis.value]

    @property
    def selected(self) -> str | None:
        """The selected code id (None when the axis has none)."""
        v = self.codes_list.value
        return None if v is None else str(v)

    def select(self, code_id: str) -> None:
        """Select a code by id (switching to its axis)."""
        axis = code_id[:1]
        if axis not in AXES or code_id not in set(self.by_axis()[axis]["code_id"]):
            raise KeyError(f"{code_id!r} is not a listed code of this version")
        self.axis.value = axis
        self.codes_list.value = code_id

    def questions_for(self, code_id: str) -> list[str]:
        """The question ids a code of the selected version fires on (sorted)."""
        v = self.current
        return questions_of(self.firings, code_id, None if v is None else str(v["taxonomy_fp"]))

    @property
    def selected_question(self) -> str | None:
        """The question picked among the selected code's questions."""
        v = self.questions.value
        return None if v is None else str(v)

    def select_question(self, qid: str) -> None:
        """Pick one of the selected code's questions (notifies :meth:`on_question` callbacks)."""
        if qid not in self.questions.options:
            raise KeyError(f"{qid!r} is not a question the selected code fires on")
        self.questions.value = qid

    def on_question(self, callback: Callable[[str | None], None]) -> None:
        """Call ``callback(qid)`` whenever :attr:`selected_question` changes."""
        self._callbacks.append(callback)

    def link(self, explorer: FlipExplorer) -> TaxonomyBrowser:
        """Forward question picks to a FlipExplorer: the picked question becomes its selection.

        Filters of the explorer that hide the question are cleared first; a question the explorer
        does not list (e.g. a train question in a test-split explorer) is reported in
        :attr:`link_note` and leaves the explorer as it is. The current pick is forwarded now.

        Returns:
            The browser (for chaining).
        """

        def push(qid: str | None) -> None:
            if qid is None:
                return
            if qid not in set(explorer.flips["qid"]):
                self.link_note.value = (
                    f"<i>{esc(qid)} is not in the linked explorer ({esc(explorer.title)})</i>"
                )
                return
            if qid not in set(explorer.shown["qid"]):
                for w in (explorer.task, explorer.flip, explorer.tool):
                    w.value = ALL
            explorer.select(qid)
            self.link_note.value = f"selected {esc(qid)} in the flip explorer"

        self.on_question(push)
        push(self.selected_question)
        return self

    def _refresh(self, _: Any = None) -> None:
        if self._refreshing:
            return
        v = self.current
        groups = self.by_axis()
        labels = [(f"{a} {n} ({len(groups[a])})", a) for a, n in AXES.items()]
        if list(self.axis.options) != [lab for lab, _ in labels]:
            self._refreshing = True
            try:
                axis = self.axis.value
                self.axis.options = labels
                self.axis.value = axis
            finally:
                self._refreshing = False
        shown = groups[self.axis.value]
        keep = self.codes_list.value
        opts = [(code_label(r), str(r["code_id"])) for r in shown.to_dict("records")]
        ids = [i for _, i in opts]
        self._busy = True
        try:
            self.codes_list.options = opts
            self.codes_list.value = keep if keep in ids else (ids[0] if ids else None)
        finally:
            self._busy = False
        self.badge.value = badge_html(v, self.agreement)
        self.gaps_html.value = gaps_html(self.gaps, v, self.axis.value)
        total = sum(len(g) for g in groups.values())
        self.count.value = (
            f"{len(shown)} code(s) on axis {esc(self.axis.value)} "
            f"({esc(AXES[self.axis.value])}), {total} in this version"
        )
        self._show()

    def _show(self, _: Any = None) -> None:
        if self._busy:
            return
        cid = self.selected
        if cid is None:
            self.detail.value = "<i>no code on this axis of this version</i>"
            self.questions.options = []
            return
        row = self.shown[self.shown["code_id"] == cid].to_dict("records")[0]
        self.detail.value = code_panel_html(row, self.firings)
        qids = self.questions_for(cid)
        self.questions.options = qids
        if self.questions.value is None and qids:
            self.questions.value = qids[0]

    def _question_changed(self, change: Mapping[str, Any]) -> None:
        for cb in self._callbacks:
            cb(self.selected_question)

    # ------------------------------------------------------------------ static export
    def _current_rows(self) -> list[dict[str, Any]]:
        groups = self.by_axis()
        return [r for a in AXES for r in groups[a].to_dict("records")]

    def summary_html(self) -> str:
        """The current version: badge, codes per axis by frequency, gaps (or the empty state)."""
        if self.empty:
            return f"<i>{esc(EMPTY_MESSAGE)}</i>"
        v = self.current
        groups = self.by_axis()
        parts = [badge_html(v, self.agreement)]
        for a, name in AXES.items():
            g = groups[a]
            parts.append(f"<div><b>axis {esc(a)}: {esc(name)}</b> ({len(g)} code(s))</div>")
            if len(g):
                parts.append(
                    table_html(
                        g.fillna({"applies_to_role": "(any)", "severity": ""}).to_dict("records"),
                        ["code_id", "name", "applies_to_role", "severity", "firings"],
                    )
                )
            parts.append(gaps_html(self.gaps, v, a))
        return "".join(parts)

    def static_view(self) -> tuple[ipw.Widget, list[Any]]:
        """A kernel-free version of the current version: a code list driving pre-rendered panels."""
        head = ipw.HTML(f"<b>{esc(self.title)}</b>")
        summary = ipw.HTML(self.summary_html())
        rows = self._current_rows()
        if not rows:
            return ipw.VBox([head, summary]), []
        select = ipw.Select(
            options=[code_label(r) for r in rows], rows=10, layout=ipw.Layout(width="420px")
        )
        stack = ipw.Stack(
            [ipw.HTML(code_panel_html(r, self.firings)) for r in rows], selected_index=0
        )
        link = ipw.jslink((select, "index"), (stack, "selected_index"))
        return ipw.VBox([head, summary, ipw.HBox([select, stack])]), [link]

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.view._repr_mimebundle_(**kwargs)

    def _repr_html_(self) -> str:
        return f"<div><b>TaxonomyBrowser</b> {esc(self.title)}</div>" + self.summary_html()

    def __repr__(self) -> str:
        if self.empty:
            return "TaxonomyBrowser(no taxonomy: run `tsevo taxonomy induce RUN`, then `gate`)"
        v = self.current
        groups = self.by_axis()
        n = ", ".join(f"{a} {len(groups[a])}" for a in AXES)
        n_gaps = 0
        if self.gaps is not None and v is not None and len(self.gaps):
            g = self.gaps
            n_gaps = int(
                ((g["taxonomy_fp"] == v["taxonomy_fp"]) & (g["status"] == v["status"])).sum()
            )
        return f"TaxonomyBrowser({badge_text(v, self.agreement)}; codes {n}; {n_gaps} gap(s))"
