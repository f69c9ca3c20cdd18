"""ChainView: a work group's Mara chain — lineage tree, questions × nodes grid, record, diff.

Built only from the Mara chain frames of :mod:`tsevo.analysis.marachain`:
:func:`~tsevo.analysis.marachain.chains_df` (one row per chain),
:func:`~tsevo.analysis.marachain.chain_lineage_df` (the tree: direct attempts and chain nodes),
:func:`~tsevo.analysis.chain_scores_df` (credited scores and ``d_prev`` per node and batch
question), :func:`~tsevo.analysis.marachain.chain_records_df` (each node arm's answer record and
what the node did there) and :func:`~tsevo.analysis.marachain.chain_diffs_df` (source and spec
diffs against the lineage parent). A state machine over (group, node, question): the group
dropdown picks a chain; a node in the tree list shows its diff; a cell of the grid (a button per
question and batch-scored node) opens that question's record under that node. Everything the run
wrote (ids, measurements, question text, reasons, source) is escaped before it reaches HTML.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as ipw
import pandas as pd

from tsevo.analysis import chain_scores_df
from tsevo.analysis.marachain import (
    CHAIN_DIFFS_COLUMNS,
    CHAIN_RECORDS_COLUMNS,
    chain_depth,
    chain_diffs_df,
    chain_lineage_df,
    chain_records_df,
    chains_df,
)

from ._render import badge, esc, highlight_source, kv_table, question_html, table_html

__all__ = [
    "ChainView",
    "chain_summary_html",
    "diff_html",
    "grid_html",
    "lineage_html",
    "node_badges",
    "node_label",
    "record_html",
]

_GREEN, _RED, _GREY = "#2e7d32", "#c62828", "#78909c"
_CELL = (
    "border:1px solid #ddd;padding:1px 4px;text-align:center;font-size:11px;font-family:monospace"
)
_FACTS = {
    "O": "not shortlisted (out of scope)",
    "S": "not shortlisted",
    "A": "abstained",
    "E": "error",
    "K": "kept the answer",
    "R": "replaced the answer",
}


def _num(v: Any) -> str:
    """A count for a badge (``""`` for a missing value)."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return f"{int(v):+d}" if isinstance(v, float) else str(v)


def node_label(row: Mapping[str, Any]) -> str:
    """The one-line label of a lineage node in the node list (indented by depth)."""
    pad = "  " * int(row["depth"]) + ("└ " if row["kind"] == "chain" else "")
    mark = " ★" if row.get("winner") else ""
    return f"{pad}{row['node_id']} · {row.get('axis') or row['kind']}{mark}"


def node_badges(row: Mapping[str, Any]) -> str:
    """Per-node badges: repairs, harm, net, Σ d_prev, move, categories, outcome and marks."""
    parts = [
        badge(f"repairs {row['repairs']}", _GREEN),
        badge(f"harm {row['harms']}", _RED if row["harms"] else _GREY),
        badge(f"net {int(row['net']):+d}", _GREEN if row["net"] > 0 else _GREY),
    ]
    dprev = _num(row.get("sum_d_prev"))
    if dprev:
        parts.append(badge(f"Σd_prev {dprev}", "#1565c0"))
    if row.get("axis"):
        parts.append(badge(f"move: {row['axis']}", "#6a1b9a"))
    if row.get("categories"):
        parts.append(badge(f"categories: {row['categories']}", "#ef6c00"))
    parts.append(badge(str(row.get("outcome") or "?"), "#455a64"))
    if row.get("is_start"):
        parts.append(badge("v0", "#00838f"))
    if row.get("kept_parent"):
        parts.append(badge("worse than parent: backed off", "#8d6e63"))
    if row.get("winner"):
        parts.append(badge("★ accepted (winner)", "#f9a825"))
    if row.get("survivor"):
        parts.append(badge("sent to the gate", _GREEN))
    if not row.get("valid"):
        parts.append(badge(f"invalid: {row.get('invalid_reason') or 'not scored'}", _RED))
    if row.get("scored_on") == "own probe":
        parts.append("<span style='font-size:10px;color:#666'>(own probe)</span>")
    return " ".join(parts)


def lineage_html(lineage: pd.DataFrame, *, selected: str | None = None) -> str:
    """One group's lineage tree as nested lists: root → direct attempts → chain nodes.

    Args:
        lineage: The group's rows of :func:`~tsevo.analysis.marachain.chain_lineage_df`.
        selected: Node id to highlight.
    """
    rows = lineage.to_dict("records")
    if not rows:
        return "<i>no lineage</i>"
    kids: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        kids.setdefault(str(r["parent_id"]), []).append(r)

    def walk(parent: str) -> str:
        items = []
        for r in kids.get(parent, []):
            nid = str(r["node_id"])
            style = "background:#fff3c4;" if nid == selected else ""
            what = esc(r.get("subject") or "")
            meas = esc(r.get("measurement") or "")
            items.append(
                f"<li data-node='{esc(nid)}' style='{style}margin:2px 0'><code>{esc(nid)}</code> "
                f"{node_badges(r)}<div style='font-size:11px;color:#555'>{what}"
                f"{' — ' if what and meas else ''}<code>{meas}</code></div>{walk(nid)}</li>"
            )
        return f"<ul style='margin:0;padding-left:18px'>{''.join(items)}</ul>" if items else ""

    first = rows[0]
    root = f"L<sub>{int(first['round']) - 1}</sub> (the library before round {int(first['round'])})"
    return (
        f"<div class='tsevo-chain-lineage' style='font-size:12px'><b>lineage of group "
        f"{esc(first['group'])}</b><ul style='margin:0;padding-left:12px'><li>{root}"
        f"{walk('')}</li></ul></div>"
    )


def grid_html(
    scores: pd.DataFrame,
    records: pd.DataFrame | None = None,
    *,
    selected: tuple[str, str] | None = None,
) -> str:
    """The questions × nodes grid of one chain: credited score and fact per cell.

    A cell is ``1``/``0`` (credited, bold) and the fact letter (``O S A E K R``, small); green
    where credited, red on a harmed probe row, grey on an unrepaired held-out row; an arrow marks
    ``d_prev`` (↑ fixed, ↓ broke against the lineage parent).

    Args:
        scores: The chain's rows of :func:`tsevo.analysis.chain_scores_df`.
        records: The chain's rows of :func:`~tsevo.analysis.marachain.chain_records_df` (facts).
        selected: ``(qid, node_id)`` of the cell to outline.
    """
    if len(scores) == 0:
        return "<i>no scored node in this chain</i>"
    nodes = list(dict.fromkeys(scores.sort_values("step")["node_id"]))
    qids = list(dict.fromkeys(scores["qid"]))
    cell = {(str(r["qid"]), str(r["node_id"])): r for r in scores.to_dict("records")}
    facts: dict[tuple[str, str], str] = {}
    if records is not None:
        for r in records.to_dict("records"):
            facts[(str(r["qid"]), str(r["node_id"]))] = str(r["fact"])
    head = "".join(f"<th style='{_CELL}'>{esc(n)}</th>" for n in nodes)
    body = []
    for q in qids:
        part = str(cell[(q, nodes[0])]["part"]) if (q, nodes[0]) in cell else ""
        tds = [
            f"<td style='{_CELL}'>{esc(part)}</td>",
            f"<td style='{_CELL};text-align:left'>{esc(q)}</td>",
        ]
        for n in nodes:
            r = cell.get((q, n))
            if r is None:
                tds.append(f"<td style='{_CELL}'></td>")
                continue
            cred, d = int(r["credited"]), int(r["d_prev"])
            color = "#c8e6c9" if cred else ("#ffcdd2" if r["part"] == "P" else "#eceff1")
            arrow = "↑" if d > 0 else ("↓" if d < 0 else "")
            edge = "outline:2px solid #f9a825;" if selected == (q, n) else ""
            fact = facts.get((q, n), "")
            tds.append(
                f"<td data-cell='{esc(q)}|{esc(n)}' title='{esc(_FACTS.get(fact, ''))}' "
                f"style='{_CELL};background:{color};{edge}'><b>{cred}</b>"
                f"<span style='color:#555;font-size:9px'>{esc(fact)}</span>{arrow}</td>"
            )
        body.append(f"<tr>{''.join(tds)}</tr>")
    return (
        "<table class='tsevo-chain-grid' style='border-collapse:collapse;margin:4px 0'>"
        f"<thead><tr><th style='{_CELL}'>part</th><th style='{_CELL}'>question</th>{head}"
        f"</tr></thead><tbody>{''.join(body)}</tbody></table>"
        "<div style='font-size:10px;color:#666'>cell: credited (1/0) + fact (O out of scope, "
        "S not shortlisted, A abstained, E error, K kept, R replaced); ↑/↓ d_prev against the "
        "lineage parent</div>"
    )


def record_html(row: Mapping[str, Any] | None, *, qid: str = "", node_id: str = "") -> str:
    """One question's record under one node: part, fact, then the question panel.

    Args:
        row: A row of :func:`~tsevo.analysis.marachain.chain_records_df` (``None``: not stored).
        qid: The question (for the message when ``row`` is missing).
        node_id: The node (idem).
    """
    if row is None:
        return (
            f"<i>no stored record of {esc(qid)} under {esc(node_id)} (the node was not scored, or "
            "its arm could not be rebuilt)</i>"
        )
    fact = str(row.get("fact") or "")
    head = kv_table(
        [
            ("node", row.get("node_id")),
            ("batch part", "H (held-out error)" if row.get("part") == "H" else "P (harm probe)"),
            ("fact", f"{fact}: {_FACTS.get(fact, '')}"),
            ("arm", row.get("arm")),
            ("error", row.get("error") or "(none)"),
        ]
    )
    return head + question_html(row)


def _diff_pre(text: str) -> str:
    lines = []
    for ln in text.splitlines():
        color = "#2e7d32" if ln.startswith("+") else ("#c62828" if ln.startswith("-") else "#333")
        lines.append(f"<span style='color:{color}'>{esc(ln)}</span>")
    body = "\n".join(lines)
    return f"<pre style='font-size:11px;white-space:pre-wrap;margin:2px 0'>{body}</pre>"


def diff_html(row: Mapping[str, Any] | None) -> str:
    """A node against its lineage parent: the source diff and the spec diff (or the source).

    Args:
        row: A row of :func:`~tsevo.analysis.marachain.chain_diffs_df` (``None``: not stored).
    """
    if row is None:
        return "<i>no saved candidate for this node</i>"
    nid, pid = esc(row["node_id"]), esc(row["parent_id"])
    if not row["parent_id"]:
        src = str(row.get("source") or "")
        return (
            f"<div><b>{nid}</b>: a direct attempt (its parent is the root library); "
            "its source:</div>" + (highlight_source(src) if src else "<i>no source</i>")
        )
    src_diff = str(row.get("source_diff") or "")
    spec_diff = str(row.get("spec_diff") or "")
    return (
        f"<div><b>{nid}</b> against its parent <b>{pid}</b></div>"
        "<div><b>source diff</b></div>"
        + (_diff_pre(src_diff) if src_diff else "<i>source unchanged</i>")
        + "<div><b>spec diff</b> (contract, guidance, reading rule, scope)</div>"
        + (_diff_pre(spec_diff) if spec_diff else "<i>spec unchanged</i>")
    )


def _empty(cols: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(columns=list(cols))


class ChainView:
    """Inspect the Mara chains of a run, one work group at a time.

    Args:
        chains: :func:`~tsevo.analysis.marachain.chains_df`.
        lineage: :func:`~tsevo.analysis.marachain.chain_lineage_df`.
        scores: :func:`tsevo.analysis.chain_scores_df`.
        records: :func:`~tsevo.analysis.marachain.chain_records_df` (or None: no records).
        diffs: :func:`~tsevo.analysis.marachain.chain_diffs_df` (or None: no diffs).
        depth: The run's chain depth (for the empty state).
        title: Heading.

    Attributes:
        group: Chain selector (``"r<round> · <group>"``).
        nodes: The group's lineage nodes (value = node id); selecting one shows its diff.
        cells: The questions × nodes grid, one button per (question, batch-scored node);
            clicking one selects the node and the question.
        tree: HTML of the lineage tree (selected node highlighted).
        grid: HTML of the grid (selected cell outlined).
        record: HTML of the selected question's record under the selected node.
        diff: HTML of the selected node against its parent.
        view: The composed widget.
    """

    def __init__(
        self,
        chains: pd.DataFrame,
        lineage: pd.DataFrame,
        scores: pd.DataFrame,
        records: pd.DataFrame | None = None,
        diffs: pd.DataFrame | None = None,
        *,
        depth: int | None = None,
        title: str = "Mara chains",
    ) -> None:
        self.chains = chains.reset_index(drop=True)
        self.lineage = lineage.reset_index(drop=True)
        self.scores = scores.reset_index(drop=True)
        self.records = records if records is not None else _empty(CHAIN_RECORDS_COLUMNS)
        self.diffs = diffs if diffs is not None else _empty(CHAIN_DIFFS_COLUMNS)
        self.depth = depth
        self.title = title
        self.qid: str | None = None
        self._busy = False
        keys = [self._key(r) for r in self.chains.to_dict("records")]
        self.group = ipw.Dropdown(
            options=keys, value=keys[0] if keys else None, description="chain"
        )
        self.nodes = ipw.Select(options=[], rows=10, layout=ipw.Layout(width="380px"))
        self.summary = ipw.HTML()
        self.tree = ipw.HTML()
        self.grid = ipw.HTML()
        self.cells = ipw.GridBox([])
        self.record = ipw.HTML()
        self.diff = ipw.HTML()
        header = ipw.HTML(f"<b>{esc(title)}</b>")
        if not keys:
            self.summary.value = self.empty_html()
            self.view = ipw.VBox([header, self.summary])
            return
        self.view = ipw.VBox(
            [
                header,
                self.group,
                self.summary,
                ipw.HBox([self.tree, self.nodes]),
                ipw.HTML("<b>questions × nodes</b> (click a cell to open its record)"),
                ipw.HBox([self.cells, self.grid]),
                ipw.Tab([self.record, self.diff], titles=["record", "diff against parent"]),
            ]
        )
        self.group.observe(self._on_group, names="value")
        self.nodes.observe(self._on_node, names="value")
        self._on_group()

    @classmethod
    def from_run(cls, run: str | Path, round: int | None = None) -> ChainView:
        """Build from a run folder (every chain, or the chains of one ``round``)."""
        frames = [
            chains_df(run),
            chain_lineage_df(run),
            chain_scores_df(run),
            chain_records_df(run),
            chain_diffs_df(run),
        ]
        if round is not None:
            frames = [f[f["round"] == round] for f in frames]
        return cls(*frames, depth=chain_depth(run))

    # ------------------------------------------------------------------ state
    @staticmethod
    def _key(row: Mapping[str, Any]) -> str:
        return f"r{int(row['round'])} · {row['group']}"

    def _chain(self) -> Mapping[str, Any] | None:
        for r in self.chains.to_dict("records"):
            if self._key(r) == self.group.value:
                return r
        return None

    def _of(self, frame: pd.DataFrame, chain_id: str) -> pd.DataFrame:
        return frame[frame["chain_id"] == chain_id]

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """The selected chain's lineage, scores, records and diffs rows."""
        ch = self._chain()
        cid = "" if ch is None else str(ch["chain_id"])
        return (
            self._of(self.lineage, cid),
            self._of(self.scores, cid),
            self._of(self.records, cid),
            self._of(self.diffs, cid),
        )

    @property
    def selected(self) -> tuple[str | None, str | None]:
        """``(node_id, qid)`` currently selected."""
        v = self.nodes.value
        return (None if v is None else str(v), self.qid)

    def select(self, node_id: str, qid: str | None = None) -> None:
        """Select a node of the current chain (and optionally a batch question)."""
        lineage = self.frames()[0]
        if node_id not in set(lineage["node_id"]):
            raise KeyError(f"{node_id!r} is not a node of chain {self.group.value!r}")
        if qid is not None:
            if qid not in set(self.frames()[1]["qid"]):
                raise KeyError(f"{qid!r} is not on the batch of chain {self.group.value!r}")
            self.qid = qid
        if self.nodes.value == node_id:
            self._show()
        else:
            self.nodes.value = node_id

    def cell(self, qid: str, node_id: str) -> ipw.Button:
        """The grid's button for one question and node."""
        for b in self.cells.children:
            if getattr(b, "tsevo_cell", None) == (qid, node_id):
                return b
        raise KeyError(f"no grid cell for {qid!r} × {node_id!r}")

    def _on_group(self, _: Any = None) -> None:
        lineage, scores, records, _d = self.frames()
        ch = self._chain()
        self.summary.value = chain_summary_html(ch) if ch is not None else ""
        opts = [(node_label(r), str(r["node_id"])) for r in _tree_order(lineage)]
        self.qid = str(scores["qid"].iloc[0]) if len(scores) else None
        start = next((str(r["node_id"]) for r in lineage.to_dict("records") if r["is_start"]), None)
        self._busy = True
        try:
            self.nodes.options = opts
            self.nodes.value = start if start is not None else (opts[0][1] if opts else None)
        finally:
            self._busy = False
        self.cells.children = self._buttons(scores, records)
        n_nodes = len(set(scores["node_id"])) or 1
        self.cells.layout = ipw.Layout(
            grid_template_columns=f"repeat({n_nodes}, 34px)", grid_gap="1px", width="auto"
        )
        self._show()

    def _buttons(self, scores: pd.DataFrame, records: pd.DataFrame) -> list[ipw.Button]:
        facts = {
            (str(r["qid"]), str(r["node_id"])): str(r["fact"]) for r in records.to_dict("records")
        }
        out = []
        for r in scores.sort_values(["qid", "step"], kind="stable").to_dict("records"):
            key = (str(r["qid"]), str(r["node_id"]))
            b = ipw.Button(
                description=f"{int(r['credited'])}·{facts.get(key, '')}".rstrip("·"),
                tooltip=f"{key[0]} × {key[1]}",
                layout=ipw.Layout(width="34px", height="22px", padding="0"),
            )
            b.style.button_color = (
                "#c8e6c9" if r["credited"] else ("#ffcdd2" if r["part"] == "P" else "#eceff1")
            )
            b.tsevo_cell = key
            b.on_click(self._on_cell)
            out.append(b)
        order = list(dict.fromkeys(scores["qid"]))
        out.sort(key=lambda b: order.index(b.tsevo_cell[0]))
        return out

    def _on_cell(self, b: ipw.Button) -> None:
        qid, node_id = b.tsevo_cell
        self.select(node_id, qid)

    def _on_node(self, _: Any = None) -> None:
        if not self._busy:
            self._show()

    def _show(self) -> None:
        lineage, scores, records, diffs = self.frames()
        node, qid = self.selected
        self.tree.value = lineage_html(lineage, selected=node)
        cell = None
        if node is not None and qid is not None and node in set(scores["node_id"]):
            cell = (qid, node)
        self.grid.value = grid_html(scores, records, selected=cell)
        self.record.value = self.record_html(node, qid)
        d = diffs[diffs["node_id"] == node].to_dict("records")
        self.diff.value = diff_html(d[0] if d else None)

    def record_html(self, node_id: str | None, qid: str | None) -> str:
        """HTML of one question's record under one node of the current chain."""
        if node_id is None or qid is None:
            return "<i>select a cell of the grid</i>"
        records = self.frames()[2]
        hit = records[(records["node_id"] == node_id) & (records["qid"] == qid)]
        rows = hit.to_dict("records")
        return record_html(rows[0] if rows else None, qid=qid, node_id=node_id)

    def empty_html(self) -> str:
        """The honest empty state: why this run has no chain to show."""
        if not self.depth:
            return "<i>no chains in this run: depth 0 (Mara chains off; set marachain.depth)</i>"
        return (
            f"<i>no chains in this run: depth {int(self.depth)}, but no work group started one "
            "(a chain starts only where every direct attempt misses the prefilter bar)</i>"
        )

    # ------------------------------------------------------------------ static export
    def static_panel(self, key: str, *, max_cells: int = 400) -> tuple[ipw.Widget, list[Any]]:
        """One chain, kernel-free: tree and grid as HTML, lists linked to pre-rendered panels."""
        self.group.value = key
        lineage, scores, records, diffs = self.frames()
        ch = self._chain()
        nodes = _tree_order(lineage)
        dpanels = []
        for r in nodes:
            d = diffs[diffs["node_id"] == r["node_id"]].to_dict("records")
            dpanels.append(ipw.HTML(diff_html(d[0] if d else None)))
        nsel = ipw.Select(
            options=[node_label(r) for r in nodes], rows=8, layout=ipw.Layout(width="360px")
        )
        nstack = ipw.Stack(dpanels, selected_index=0 if dpanels else None)
        cells = scores.sort_values(["step"], kind="stable").to_dict("records")[:max_cells]
        rpanels = [ipw.HTML(self.record_html(str(c["node_id"]), str(c["qid"]))) for c in cells]
        csel = ipw.Select(
            options=[f"{c['qid']} × {c['node_id']}" for c in cells],
            rows=8,
            layout=ipw.Layout(width="360px"),
        )
        cstack = ipw.Stack(rpanels, selected_index=0 if rpanels else None)
        links = [
            ipw.jslink((nsel, "index"), (nstack, "selected_index")),
            ipw.jslink((csel, "index"), (cstack, "selected_index")),
        ]
        box = ipw.VBox(
            [
                ipw.HTML(chain_summary_html(ch) if ch is not None else ""),
                ipw.HTML(lineage_html(lineage)),
                ipw.HTML(grid_html(scores, records)),
                ipw.HTML("<b>record</b> (select a question × node cell)"),
                ipw.HBox([csel, cstack]),
                ipw.HTML("<b>diff against parent</b> (select a node)"),
                ipw.HBox([nsel, nstack]),
            ]
        )
        return box, links

    def static_view(self) -> tuple[ipw.Widget, list[Any]]:
        """A kernel-free version: the chain dropdown drives pre-rendered per-chain panels."""
        head = ipw.HTML(f"<b>{esc(self.title)}</b>")
        keys = list(self.group.options)
        if not keys:
            return ipw.VBox([head, ipw.HTML(self.empty_html())]), []
        keep = self.group.value
        panels, links = [], []
        for k in keys:
            p, ls = self.static_panel(k)
            panels.append(p)
            links += ls
        self.group.value = keep
        dd = ipw.Dropdown(options=keys, description="chain")
        stack = ipw.Stack(panels, selected_index=0)
        links.append(ipw.jslink((dd, "index"), (stack, "selected_index")))
        return ipw.VBox([head, dd, stack]), links

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.view._repr_mimebundle_(**kwargs)

    def _repr_html_(self) -> str:
        head = f"<div><b>ChainView</b> {esc(self.title)}</div>"
        if len(self.chains) == 0:
            return head + self.empty_html()
        cols = ["round", "group", "node_id", "kind", "parent_id", "axis", "repairs", "harms"]
        return head + table_html(self.lineage.to_dict("records"), [*cols, "net", "winner"])

    def __repr__(self) -> str:
        if len(self.chains) == 0:
            return f"ChainView(no chains: depth {int(self.depth or 0)})"
        n_chain = int((self.lineage["kind"] == "chain").sum())
        winners = [str(w) for w in self.chains["winner"] if w]
        return (
            f"ChainView({len(self.chains)} chain(s), {n_chain} chain node(s), "
            f"{len(self.lineage) - n_chain} direct attempt(s); "
            f"winners: {', '.join(winners) or 'none'})"
        )


def _tree_order(lineage: pd.DataFrame) -> list[Mapping[str, Any]]:
    """Lineage rows depth-first from the root (direct attempts in order, chains under them)."""
    rows = lineage.to_dict("records")
    kids: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        kids.setdefault(str(r["parent_id"]), []).append(r)
    out: list[Mapping[str, Any]] = []

    def walk(parent: str) -> None:
        for r in kids.get(parent, []):
            out.append(r)
            walk(str(r["node_id"]))

    walk("")
    return out


def chain_summary_html(row: Mapping[str, Any]) -> str:
    """One chain's summary: label, variant, start, stop, winner and spend against the bound."""
    won = row.get("winner") or ""
    return kv_table(
        [
            (
                "chain",
                f"{row['chain_id']} ({row.get('label', '')}, "
                f"acceptance {row.get('acceptance', '')})",
            ),
            ("batch", f"{row['n_held_out']} held-out errors (H) + {row['n_probe']} probe rows (P)"),
            ("start v0", f"{row['start_node']} — {row.get('start_reason', '')}"),
            ("stopped", row.get("stopped", "")),
            ("winner", f"{won or 'none'} — {row.get('winner_reason', '')}"),
            ("sent to the gate", row.get("survivor") or "(nothing from this group)"),
            (
                "spend / bound",
                f"steps {row['steps']}/{row['bound_steps']}, rollouts {row['rollouts']}/"
                f"{row['bound_rollouts']}, LLM calls {row['calls']}/{row['bound_calls']}, "
                f"invalid {row['invalid']}, validation runs {row['val_runs']}",
            ),
        ]
    )
