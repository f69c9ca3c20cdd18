"""FlipExplorer: what changed, question by question, between two arms of a run.

Built from :func:`tsevo.analysis.flips_df` (and the series of the run's suite). Filters
by task, flip class and tool; selecting a question shows its series plot, the question and options,
base and final answers against gold, the tools that ran with their evidence, and the review
decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ipywidgets as ipw

from tsevo.analysis import FLIP_CLASSES, flips_df, run_suite

from ._render import FLIP_COLORS, esc, question_html, series_png, table_html

__all__ = ["ALL", "FLIP_CLASSES", "FlipExplorer", "filter_flips", "question_label"]

ALL = "(all)"

SeriesMap = Mapping[str, tuple[Mapping[str, Any], Mapping[str, str]]]
"""qid -> (series name -> values, series name -> role)."""


def filter_flips(
    flips: Any, *, task: str | None = None, flip: str | None = None, tool: str | None = None
) -> Any:
    """Rows of a flips frame matching a task, a flip class and a tool that ran (None = any)."""
    keep = [True] * len(flips)
    if task not in (None, ALL):
        keep = [k and t == task for k, t in zip(keep, flips["task"], strict=True)]
    if flip not in (None, ALL):
        keep = [k and f == flip for k, f in zip(keep, flips["flip"], strict=True)]
    if tool not in (None, ALL):
        keep = [k and tool in list(r) for k, r in zip(keep, flips["tools_run"], strict=True)]
    return flips[keep]


def question_label(row: Mapping[str, Any]) -> str:
    """The one-line label of a question in the list: flip class, id, task."""
    return f"{row.get('flip') or 'incomplete'} · {row['qid']} · {row['task']}"


def _order(flips: Any) -> Any:
    rank = {c: i for i, c in enumerate(FLIP_CLASSES)}
    key = [(rank.get(str(f), 9), q) for f, q in zip(flips["flip"], flips["qid"], strict=True)]
    order = sorted(range(len(flips)), key=lambda i: key[i])
    return flips.iloc[order].reset_index(drop=True)


class FlipExplorer:
    """Browse a flips frame: filters, a question list, and a detail panel with the series plot.

    Args:
        flips: A frame from :func:`tsevo.analysis.flips_df`.
        series: Per question id, its series and their roles (for the plot); questions without
            an entry are shown without a plot.
        title: Heading shown above the controls.

    Attributes:
        task, flip, tool: The filter dropdowns (``"(all)"`` = no filter).
        questions: The question list (value = selected question id).
        detail: HTML of the selected question.
        plot: PNG image of the selected question's series.
        view: The composed widget (what a notebook displays).
    """

    def __init__(self, flips: Any, series: SeriesMap | None = None, *, title: str = "") -> None:
        self.flips = _order(flips)
        self.series: SeriesMap = series or {}
        self.title = title
        self._busy = False
        tasks = sorted({str(t) for t in self.flips["task"]})
        tools = sorted({str(t) for r in self.flips["tools_run"] for t in r})
        self.task = ipw.Dropdown(options=[ALL, *tasks], value=ALL, description="task")
        self.flip = ipw.Dropdown(options=[ALL, *FLIP_CLASSES], value=ALL, description="flip")
        self.tool = ipw.Dropdown(options=[ALL, *tools], value=ALL, description="tool")
        self.questions = ipw.Select(options=[], rows=14, layout=ipw.Layout(width="360px"))
        self.count = ipw.HTML()
        self.detail = ipw.HTML()
        self.plot = ipw.Image(format="png", layout=ipw.Layout(max_width="560px"))
        header = ipw.HTML(f"<b>{esc(title)}</b>") if title else ipw.HTML()
        self.view = ipw.VBox(
            [
                header,
                ipw.HBox([self.task, self.flip, self.tool]),
                self.count,
                ipw.HBox([self.questions, ipw.VBox([self.plot, self.detail])]),
            ]
        )
        for w in (self.task, self.flip, self.tool):
            w.observe(self._refresh, names="value")
        self.questions.observe(self._show, names="value")
        self._refresh()

    @classmethod
    def from_run(
        cls, run: str | Path, *, split: str = "test", round_: int | None = None
    ) -> FlipExplorer:
        """Build from a run folder: ``flips_df(run, split=..., round_=...)`` plus the suite's series."""
        flips = flips_df(run, split=split, round_=round_)
        suite = run_suite(run)
        series = {
            q.id: (dict(q.series), {n: q.role_of(n) for n in q.series})
            for q in suite
            if q.id in set(flips["qid"])
        }
        r = int(flips["round"].iloc[0]) if len(flips) else 0
        return cls(flips, series, title=f"flips on {split}, round {r}")

    # ------------------------------------------------------------------ state
    @property
    def shown(self) -> Any:
        """The rows passing the current filters (in list order)."""
        return filter_flips(
            self.flips, task=self.task.value, flip=self.flip.value, tool=self.tool.value
        )

    @property
    def selected(self) -> str | None:
        """The selected question id (None when the list is empty)."""
        v = self.questions.value
        return None if v is None else str(v)

    def select(self, qid: str) -> None:
        """Select a question by id (it must pass the current filters)."""
        if qid not in set(self.shown["qid"]):
            raise KeyError(f"{qid!r} is not in the filtered list")
        self.questions.value = qid

    def counts(self) -> dict[str, int]:
        """Flip class counts over the filtered rows."""
        shown = self.shown
        return {c: int((shown["flip"] == c).sum()) for c in FLIP_CLASSES}

    def _refresh(self, _: Any = None) -> None:
        shown = self.shown
        keep = self.questions.value
        opts = [(question_label(r), str(r["qid"])) for r in shown.to_dict("records")]
        ids = [q for _, q in opts]
        self._busy = True
        try:
            self.questions.options = opts
            self.questions.value = keep if keep in ids else (ids[0] if ids else None)
        finally:
            self._busy = False
        c = self.counts()
        self.count.value = f"{len(shown)} of {len(self.flips)} questions: " + ", ".join(
            f"<span style='color:{FLIP_COLORS[k]}'>{esc(k)} {v}</span>" for k, v in c.items()
        )
        self._show()

    def _row(self, qid: str) -> dict[str, Any]:
        match = self.flips[self.flips["qid"] == qid]
        rec: dict[str, Any] = match.to_dict("records")[0]
        return rec

    def plot_png(self, qid: str) -> bytes | None:
        """PNG of the question's series plot (None without series)."""
        if qid not in self.series:
            return None
        values, roles = self.series[qid]
        return series_png(values, roles=roles, title=qid)

    def _show(self, _: Any = None) -> None:
        if self._busy:
            return
        qid = self.selected
        if qid is None:
            self.detail.value = "<i>no question matches the filters</i>"
            self.plot.value = b""
            return
        self.detail.value = question_html(self._row(qid))
        self.plot.value = self.plot_png(qid) or b""

    # ------------------------------------------------------------------ static export
    def static_view(self, *, max_questions: int | None = None) -> tuple[ipw.Widget, list[Any]]:
        """A kernel-free version: the list drives pre-rendered panels through a front-end link.

        Args:
            max_questions: Keep the first N questions of the list order (helped and harmed first).

        Returns:
            The widget and the ``jslink`` objects it needs (embed them in the page state too).
        """
        rows = self.flips.to_dict("records")[:max_questions]
        panels = [ipw.HTML(question_html(r, plot_png=self.plot_png(str(r["qid"])))) for r in rows]
        select = ipw.Select(
            options=[question_label(r) for r in rows], rows=14, layout=ipw.Layout(width="360px")
        )
        stack = ipw.Stack(panels, selected_index=0 if panels else None)
        link = ipw.jslink((select, "index"), (stack, "selected_index"))
        head = ipw.HTML(f"<b>{esc(self.title)}</b> — {len(rows)} questions; select one to see it")
        return ipw.VBox([head, ipw.HBox([select, stack])]), [link]

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.view._repr_mimebundle_(**kwargs)

    def _repr_html_(self) -> str:
        counts = self.counts()
        return f"<div><b>FlipExplorer</b> {esc(self.title)}</div>" + table_html(
            [{"flip": k, "questions": v} for k, v in counts.items()], ["flip", "questions"]
        )

    def __repr__(self) -> str:
        c = self.counts()
        return (
            f"FlipExplorer({len(self.flips)} questions: helped {c['helped']}, "
            f"harmed {c['harmed']}, unchanged-right {c['unchanged-right']}, "
            f"unchanged-wrong {c['unchanged-wrong']})"
        )
