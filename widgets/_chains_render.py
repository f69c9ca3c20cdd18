"""The HTML panes of :class:`~tsevo.widgets.chains.ChainView`: badges, tree, grid, record, diff.

Pure functions from rows of the Mara chain frames (:mod:`tsevo.analysis.marachain`) to HTML;
re-exported by :mod:`tsevo.widgets.chains`. Everything the run wrote (ids, measurements,
question text, reasons, source) is escaped before it reaches HTML.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ._render import badge, esc, highlight_source, kv_table, question_html

__all__ = [
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
