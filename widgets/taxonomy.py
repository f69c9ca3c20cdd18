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

from ._render import badge, esc, kv_table, table_html
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

AXES: dict[str, str] = {"A": "system-level", "B": "role-specific", "C": "domain-specific"}
"""The three fixed axes and what they hold."""
METRIC_NAMES: dict[str, str] = {
    "cohen_area": "mean pairwise Cohen κ at area level",
    "fleiss_code_macro": "macro per-code Fleiss κ",
}
"""The agreement metrics, named as the badge says them."""
STATUS_COLORS: dict[str, str] = {
    "accepted": "#2e7d32",
    "review_required": "#c62828",
    "draft": "#757575",
    "baseline": "#1565c0",
}
EMPTY_MESSAGE = (
    "No taxonomy in this run yet. `tsevo taxonomy induce RUN` mines a draft from the run's train "
    "traces, then `tsevo taxonomy gate RUN` gates it by annotator agreement "
    "(in Python: tsevo.taxonomy.runs.induce_run and gate_run)."
)
"""What the browser says when the run has no taxonomy."""
MAX_EXCERPTS = 5
MAX_LINKED = 24


# --------------------------------------------------------------------------------------- frames
def _num(x: Any) -> float | None:
    return None if x is None or pd.isna(x) else float(x)


def _key(fp: Any, status: Any) -> str:
    return f"{fp}|{status}"


def _versions(codes: Any, versions: Any | None) -> list[dict[str, Any]]:
    """Version rows (``versions_df`` rows, or the distinct (fp, status) pairs of ``codes``)."""
    if versions is not None and len(versions):
        return [dict(r) for r in versions.to_dict("records")]
    seen: dict[str, dict[str, Any]] = {}
    for r in codes.to_dict("records"):
        k = _key(r["taxonomy_fp"], r["status"])
        seen.setdefault(
            k, {"taxonomy_fp": r["taxonomy_fp"], "version_n": r["version_n"], "status": r["status"]}
        )
    return list(seen.values())


def frequencies(firings: Any, fp: str) -> dict[str, int] | None:
    """Firings per code id under taxonomy ``fp`` (None: firings were computed for another version)."""
    if len(firings) == 0:
        return {}
    if fp not in set(firings["taxonomy_fp"]):
        return None
    mine = firings[firings["taxonomy_fp"] == fp]
    return {str(k): int(v) for k, v in mine["code_id"].value_counts().items()}


def codes_by_axis(
    codes: Any, firings: Any, *, fp: str, status: str, retired: bool = False
) -> dict[str, Any]:
    """The codes of one version per axis, most frequent first (ties by id), with ``firings``.

    Args:
        codes: A :func:`codes_df` frame.
        firings: A :func:`firings_df` frame.
        fp: The version's fingerprint.
        status: The version's status (a draft and its gated copy share a fingerprint).
        retired: Include retired ids.

    Returns:
        Axis -> frame of that axis's codes with a ``firings`` column (``<NA>`` when the firings
        were computed for another version), for each of A, B, C.
    """
    v = codes[(codes["taxonomy_fp"] == fp) & (codes["status"] == status)]
    if not retired:
        v = v[~v["retired"].fillna(False).astype(bool)]
    freq = frequencies(firings, fp)
    out = {}
    for axis in AXES:
        a = v[v["axis"] == axis].copy()
        n = [pd.NA if freq is None else freq.get(str(c), 0) for c in a["code_id"]]
        a["firings"] = pd.array(n, dtype="Int64")
        ids = [_id_key(str(c)) for c in a["code_id"]]
        a["_order"] = [(-(0 if pd.isna(k) else int(k)), i) for k, i in zip(n, ids, strict=True)]
        a = a.sort_values("_order", kind="stable").drop(columns="_order").reset_index(drop=True)
        out[axis] = a
    return out


def _id_key(code_id: str) -> tuple[str, int, str]:
    head, _, tail = code_id.partition(".")
    return (head, int(tail), "") if tail.isdigit() else (head, 0, code_id)


# --------------------------------------------------------------------------------------- html
def _fmt(x: float | None) -> str:
    return "undefined" if x is None else f"{x:.3f}"


def _gate_figures(
    version: Mapping[str, Any], agreement: Any | None
) -> tuple[str | None, float | None, float | None, float | None, str | None, int | None]:
    """(gating metric, its κ, coverage, the other κ, other metric, round) of a version."""
    metric = version.get("metric")
    metric = None if metric is None or pd.isna(metric) else str(metric)
    kappa, cov = _num(version.get("kappa")), _num(version.get("coverage"))
    other_name = None if metric is None else next(m for m in METRIC_NAMES if m != metric)
    other = _num(version.get(other_name)) if other_name else None
    rnd = version.get("rounds_completed")
    rnd = None if rnd is None or pd.isna(rnd) else int(rnd)
    if agreement is not None and len(agreement) and version.get("stage") != "draft":
        agr = agreement[agreement["taxonomy_fp"] == version["taxonomy_fp"]]
        if len(agr):
            last = int(agr["round"].max())
            rows = agr[agr["round"] == last]
            gating = rows[rows["gating"].fillna(False).astype(bool)]
            if len(gating) and metric is None:
                g = gating.to_dict("records")[0]
                metric = str(g["metric"])
                kappa, cov = _num(g["value"]), _num(g["coverage"])
                other_name = next(m for m in METRIC_NAMES if m != metric)
                o = rows[rows["metric"] == other_name]
                other = _num(o["value"].iloc[0]) if len(o) else None
                rnd = last
    return metric, kappa, cov, other, other_name, rnd


def badge_text(version: Mapping[str, Any] | None, agreement: Any | None = None) -> str:
    """The status badge as one line: status, κ with its metric named, coverage, the other κ."""
    if version is None:
        return "no taxonomy"
    status = str(version["status"])
    head = f"{status} · v{version['version_n']} · {str(version['taxonomy_fp'])[:19]}"
    metric, kappa, cov, other, other_name, rnd = _gate_figures(version, agreement)
    if metric is None:
        fp = version["taxonomy_fp"]
        if agreement is not None and len(agreement) and (agreement["taxonomy_fp"] == fp).any():
            return f"{head} · the induced draft, before the gate (its gate: the gated version)"
        return f"{head} · not gated yet (tsevo taxonomy gate RUN)"
    text = (
        f"{head} · gated by {METRIC_NAMES.get(metric, metric)} ({metric}): κ = {_fmt(kappa)}"
        f" · coverage {_fmt(cov)}"
    )
    if other_name:
        text += f" · {METRIC_NAMES[other_name]} ({other_name}, reported): {_fmt(other)}"
    if rnd is not None:
        text += f" · {rnd} gate round(s)"
    return text


def badge_html(version: Mapping[str, Any] | None, agreement: Any | None = None) -> str:
    """:func:`badge_text` with the status coloured."""
    if version is None:
        return f"<div>{badge('no taxonomy', '#757575')}</div>"
    status = str(version["status"])
    rest = badge_text(version, agreement).split(" · ", 1)[1]
    return (
        f"<div style='font-size:12px;margin:2px 0'>{badge(status, STATUS_COLORS.get(status, '#546e7a'))}"
        f" {esc(rest)}</div>"
    )


def gaps_html(gaps: Any | None, version: Mapping[str, Any] | None, axis: str | None = None) -> str:
    """The version's recorded coverage gaps (of one axis, or all), each with its reason."""
    if gaps is None or version is None or len(gaps) == 0:
        return ""
    g = gaps[
        (gaps["taxonomy_fp"] == version["taxonomy_fp"]) & (gaps["status"] == version["status"])
    ]
    if axis is not None:
        g = g[g["axis"] == axis]
    if len(g) == 0:
        return ""
    items = "".join(
        f"<li><b>gap {esc(r['axis'])}</b>{' (' + esc(r['role']) + ')' if not pd.isna(r['role']) else ''}"
        f": {esc(r['reason'])}</li>"
        for r in g.to_dict("records")
    )
    return (
        "<div style='font-size:12px;color:#8d6e63'>coverage gaps (recorded, not filled with "
        f"filler codes):<ul style='margin:2px 0'>{items}</ul></div>"
    )


def code_label(row: Mapping[str, Any]) -> str:
    """The one-line label of a code in the list."""
    n = row.get("firings")
    fired = "firings n/a" if n is None or pd.isna(n) else f"{int(n)} firings"
    role = row.get("applies_to_role")
    role = "" if role is None or pd.isna(role) else f" [{role}]"
    gone = " · retired" if bool(row.get("retired")) else ""
    return f"{row['code_id']} · {row.get('name') or ''}{role} · {fired}{gone}"


def questions_of(firings: Any, code_id: str, fp: str | None = None) -> list[str]:
    """The question ids a code fires on (sorted, each once)."""
    if len(firings) == 0:
        return []
    f = firings[firings["code_id"] == code_id]
    if fp is not None:
        f = f[f["taxonomy_fp"] == fp]
    return sorted({str(q) for q in f["question_id"].dropna()})


def code_panel_html(
    row: Mapping[str, Any], firings: Any, *, max_excerpts: int = MAX_EXCERPTS
) -> str:
    """One code: its fields, firings by split and round, escaped evidence, linked questions.

    Args:
        row: A row of :func:`codes_by_axis` (a :func:`codes_df` row plus ``firings``).
        firings: The :func:`firings_df` rows (any code; filtered here to this code and version).
        max_excerpts: Evidence excerpts shown.
    """
    cid = str(row["code_id"])
    f = firings
    if len(f):
        f = f[(f["code_id"] == cid) & (f["taxonomy_fp"] == row["taxonomy_fp"])]
    axis = str(row.get("axis") or "")
    axis_tag = badge(f"axis {axis} {AXES.get(axis, '')}".strip())
    head = (
        f"<div style='font-size:13px'><b>{esc(cid)}</b> {esc(row.get('name'))} {axis_tag}"
        + (f" {badge('retired', '#9e9e9e')}" if bool(row.get("retired")) else "")
        + "</div>"
    )

    def val(k: str) -> Any:
        v = row.get(k)
        return "" if v is None or (not isinstance(v, list | tuple) and pd.isna(v)) else v

    meta = kv_table(
        [
            ("description", val("description")),
            ("area", val("area")),
            ("role", val("applies_to_role") or "(any)"),
            ("severity", val("severity")),
            ("origin / revision", f"{val('origin')} / {val('revision')}"),
            ("merged into", val("merged_into") or "(none)"),
            ("detector", "yes" if bool(row.get("has_detector")) else "no"),
            ("judge usable (outcome-blind)", "yes" if bool(row.get("judge_usable")) else "no"),
        ]
    )
    if len(f) == 0:
        return head + meta + "<div style='color:#666'>no firing on the traces read</div>"
    by = (
        f.assign(wrong=~f["final_correct"].fillna(True).astype(bool))
        .groupby(["split", "round"], dropna=False)
        .agg(firings=("trace_id", "size"), wrong=("wrong", "sum"))
        .reset_index()
    )
    usage = table_html(by.to_dict("records"), ["split", "round", "firings", "wrong"])
    ex = f.sort_values("trace_id").head(max_excerpts).to_dict("records")
    excerpts = "".join(
        f"<li><code>{esc(r['trace_id'])}</code> ({esc(r['question_id'])})"
        f"<pre style='white-space:pre-wrap;font-size:11px;margin:2px 0'>{esc(r['evidence'])}</pre></li>"
        for r in ex
    )
    qids = questions_of(f, cid)
    links = ", ".join(f"<code>{esc(q)}</code>" for q in qids[:MAX_LINKED])
    if len(qids) > MAX_LINKED:
        links += f" and {len(qids) - MAX_LINKED} more"
    return (
        head
        + meta
        + "<div><b>firings by split and round</b></div>"
        + usage
        + f"<div><b>evidence</b> ({len(ex)} of {len(f)} excerpts)<ol style='margin:2px 0'>"
        + excerpts
        + "</ol></div>"
        + f"<div><b>linked questions</b> ({len(qids)}): {links}</div>"
    )


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
