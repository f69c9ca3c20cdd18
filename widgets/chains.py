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
The HTML of each pane comes from :mod:`tsevo.widgets._chains_render` (re-exported here).
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

from ._chains_render import (
    chain_summary_html,
    diff_html,
    grid_html,
    lineage_html,
    node_badges,
    node_label,
    record_html,
)
from ._render import esc, table_html

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
