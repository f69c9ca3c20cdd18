"""Pure rendering helpers shared by the widgets: HTML fragments, PNG figures, trees, source.

Everything here is a function of plain data (rows of the tidy frames, dicts, arrays) and returns a
string or bytes, so the widgets stay thin and the tests can check the output directly. Every piece
of text that an LLM, a tool or a data source wrote goes through :func:`esc` before it is placed in
HTML.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "FLIP_COLORS",
    "calibration_figure",
    "calibration_tree_html",
    "calibration_tree_text",
    "draw_calibration_tree",
    "esc",
    "figure_png",
    "highlight_source",
    "img_tag",
    "kv_table",
    "question_html",
    "series_figure",
    "series_png",
    "table_html",
    "tool_html",
]

FLIP_COLORS = {
    "helped": "#2e7d32",
    "harmed": "#c62828",
    "unchanged-right": "#546e7a",
    "unchanged-wrong": "#8d6e63",
}
"""One colour per flip class (used in badges and figures)."""

_TABLE_STYLE = "border-collapse:collapse;font-size:12px;margin:4px 0"
_CELL_STYLE = "border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top"


def esc(value: Any) -> str:
    """HTML-escape any value's text (quotes too); ``None`` becomes an empty string."""
    return "" if value is None else html.escape(str(value), quote=True)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def table_html(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[str], *, max_rows: int | None = None
) -> str:
    """An HTML table of ``rows`` restricted to ``columns``; every cell is escaped.

    Args:
        rows: Row mappings (e.g. ``df.to_dict("records")``).
        columns: Column names, in order.
        max_rows: Show at most this many rows and say how many were left out.
    """
    head = "".join(f"<th style='{_CELL_STYLE}'>{esc(c)}</th>" for c in columns)
    body, n = [], 0
    for n, row in enumerate(rows, start=1):
        if max_rows is not None and n > max_rows:
            continue
        cells = "".join(f"<td style='{_CELL_STYLE}'>{esc(_fmt(row.get(c)))}</td>" for c in columns)
        body.append(f"<tr>{cells}</tr>")
    more = ""
    if max_rows is not None and n > max_rows:
        more = f"<div style='font-size:11px;color:#666'>{n - max_rows} more rows not shown</div>"
    return (
        f"<table style='{_TABLE_STYLE}'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>{more}"
    )


def kv_table(pairs: Iterable[tuple[str, Any]]) -> str:
    """A two-column key/value HTML table (escaped)."""
    rows = "".join(
        f"<tr><th style='{_CELL_STYLE};width:9em'>{esc(k)}</th>"
        f"<td style='{_CELL_STYLE}'>{esc(_fmt(v))}</td></tr>"
        for k, v in pairs
    )
    return f"<table style='{_TABLE_STYLE}'>{rows}</table>"


def badge(text: str, color: str = "#546e7a") -> str:
    """A small coloured label."""
    return (
        f"<span style='background:{color};color:white;border-radius:3px;padding:1px 5px;"
        f"font-size:11px'>{esc(text)}</span>"
    )


# --------------------------------------------------------------------------------------- figures
def figure_png(fig: Any, *, dpi: int = 72, tight: bool = True) -> bytes:
    """Render a matplotlib figure to PNG bytes (``tight``: crop to the drawn area)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    return buf.getvalue()


def img_tag(png: bytes, alt: str = "") -> str:
    """An ``<img>`` tag carrying ``png`` inline (base64), so the page needs no other file."""
    data = base64.b64encode(png).decode("ascii")
    return f"<img alt='{esc(alt)}' src='data:image/png;base64,{data}'/>"


def series_figure(
    series: Mapping[str, Sequence[float]],
    *,
    roles: Mapping[str, str] | None = None,
    title: str = "",
    size: tuple[float, float] = (6.0, 2.2),
) -> Any:
    """A line plot of a question's series (one line per named series, role in the legend).

    Args:
        series: Name -> values.
        roles: Name -> role (``primary``, ``covariate``, ``candidate``) shown in the legend.
        title: Figure title.
        size: Figure size in inches.

    Returns:
        A :class:`matplotlib.figure.Figure` (not attached to pyplot: no global state).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.2, top=0.86 if title else 0.96)
    ax = fig.subplots()
    for i, (name, values) in enumerate(series.items()):
        role = (roles or {}).get(name, "")
        label = f"{name} ({role})" if role else name
        ax.plot(range(len(values)), list(values), lw=1.2, color=f"C{i % 10}", label=label)
    ax.set_xlabel("t")
    if title:
        ax.set_title(title, fontsize=9)
    if series:
        ax.legend(fontsize=7, loc="upper left", frameon=False)
    ax.grid(alpha=0.3)
    return fig


def series_png(
    series: Mapping[str, Sequence[float]],
    *,
    roles: Mapping[str, str] | None = None,
    title: str = "",
) -> bytes:
    """PNG bytes of :func:`series_figure`."""
    return figure_png(series_figure(series, roles=roles, title=title), tight=False)


# --------------------------------------------------------------------------------------- source
def highlight_source(source: str) -> str:
    """Syntax-highlighted Python source as HTML with inline styles (works in a static page)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    formatter = HtmlFormatter(noclasses=True, nowrap=False, style="friendly")
    out: str = highlight(source, PythonLexer(), formatter)
    return f"<div style='font-size:12px;overflow-x:auto'>{out}</div>"


# --------------------------------------------------------------------------------------- trees
def _cal(cal: Mapping[str, Any] | str | None) -> Mapping[str, Any] | None:
    if cal is None or cal == "":
        return None
    if isinstance(cal, str):
        loaded: Mapping[str, Any] = json.loads(cal)
        return loaded
    return cal


def _leaf_label(node: Mapping[str, Any], classes: Sequence[Any]) -> str:
    k = int(node["class"])
    name = classes[k] if 0 <= k < len(classes) else k
    return f"→ {name!s}  (n={node.get('samples', '?')})"


def _split_label(node: Mapping[str, Any]) -> str:
    op = "<" if node.get("strict") else "≤"
    return f"{node['feature']} {op} {float(node['cut']):.4g}  (n={node.get('samples', '?')})"


def calibration_tree_text(cal: Mapping[str, Any] | str | None) -> str:
    """The calibration record as indented text (``if feature <= cut`` lines and leaf classes).

    Args:
        cal: ``CalibrationResult.to_dict()`` (or its JSON text); ``None``/``""`` for none.
    """
    c = _cal(cal)
    if c is None:
        return "no calibration"
    ba = c.get("balanced_accuracy")
    head = (
        f"{c.get('kind', '')}: {'accepted' if c.get('accepted') else 'not accepted'}"
        f" — {c.get('reason', '')}"
        + (f"; balanced accuracy {float(ba):.3f}" if ba is not None else "")
        + f"; {c.get('n_rows', 0)} rows"
    )
    tree = c.get("tree")
    if not tree:
        return head + "\n(no tree)"
    classes = list(c.get("classes", []))
    lines = [head]

    def walk(node: Mapping[str, Any], depth: int, prefix: str) -> None:
        pad = "    " * depth
        if "class" in node:
            lines.append(f"{pad}{prefix}{_leaf_label(node, classes)}")
            return
        lines.append(f"{pad}{prefix}if {_split_label(node)}:")
        walk(node["left"], depth + 1, "yes ")
        walk(node["right"], depth + 1, "no  ")

    walk(tree, 0, "")
    return "\n".join(lines)


def calibration_tree_html(cal: Mapping[str, Any] | str | None) -> str:
    """The calibration tree as nested HTML lists (escaped), with its acceptance line."""
    c = _cal(cal)
    if c is None:
        return "<i>no calibration</i>"
    text_head = calibration_tree_text(c).split("\n", 1)[0]
    tree = c.get("tree")
    if not tree:
        return f"<div>{esc(text_head)}</div><i>no tree</i>"
    classes = list(c.get("classes", []))

    def walk(node: Mapping[str, Any], prefix: str) -> str:
        if "class" in node:
            return f"<li>{esc(prefix)}<b>{esc(_leaf_label(node, classes))}</b></li>"
        inner = walk(node["left"], "yes: ") + walk(node["right"], "no: ")
        return f"<li>{esc(prefix)}<code>{esc(_split_label(node))}</code><ul>{inner}</ul></li>"

    return (
        f"<div style='font-size:12px'>{esc(text_head)}"
        f"<ul style='margin:2px 0'>{walk(tree, '')}</ul></div>"
    )


def draw_calibration_tree(cal: Mapping[str, Any] | str | None, ax: Any = None) -> Any:
    """Draw a calibration tree with matplotlib (split boxes, leaf classes, yes/no edges).

    Args:
        cal: ``CalibrationResult.to_dict()`` or its JSON text.
        ax: Axes to draw on (default: a new figure's axes).

    Returns:
        The axes.
    """
    c = _cal(cal)
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=(7.0, 3.2)).subplots()
    ax.set_axis_off()
    if c is None or not c.get("tree"):
        ax.text(0.5, 0.5, "no calibration tree", ha="center", va="center")
        return ax
    classes = list(c.get("classes", []))
    pos: dict[int, tuple[float, float]] = {}
    nodes: list[tuple[int, Mapping[str, Any], int | None, str]] = []
    leaves = [0]

    def layout(node: Mapping[str, Any], depth: int, parent: int | None, edge: str) -> float:
        i = len(nodes)
        nodes.append((i, node, parent, edge))
        if "class" in node:
            x = float(leaves[0])
            leaves[0] += 1
        else:
            xl = layout(node["left"], depth + 1, i, "yes")
            xr = layout(node["right"], depth + 1, i, "no")
            x = (xl + xr) / 2
        pos[i] = (x, -float(depth))
        return x

    layout(c["tree"], 0, None, "")
    for i, node, parent, edge in nodes:
        x, y = pos[i]
        if parent is not None:
            px, py = pos[parent]
            ax.plot([px, x], [py, y], color="#999", lw=1, zorder=1)
            ax.text((px + x) / 2, (py + y) / 2, edge, fontsize=7, color="#555", ha="center")
        label = _leaf_label(node, classes) if "class" in node else _split_label(node)
        face = "#e8f5e9" if "class" in node else "#e3f2fd"
        ax.text(
            x,
            y,
            label,
            ha="center",
            va="center",
            fontsize=7,
            zorder=2,
            bbox={"boxstyle": "round", "fc": face, "ec": "#777"},
        )
    ax.set_xlim(-0.8, max(leaves[0] - 0.2, 0.8))
    depth = max(-p[1] for p in pos.values())
    ax.set_ylim(-depth - 0.6, 0.6)
    ba = c.get("balanced_accuracy")
    ax.set_title(
        f"{c.get('kind', '')}"
        + (f" — balanced accuracy {float(ba):.2f}" if ba is not None else ""),
        fontsize=9,
    )
    return ax


def calibration_figure(
    records: Sequence[Mapping[str, Any] | str], titles: Sequence[str] | None = None
) -> Any:
    """One drawn tree per calibration record (e.g. ``calibration_table(...)["calibration_json"]``).

    Returns:
        A matplotlib figure; with no record it says so instead of drawing.
    """
    from matplotlib.figure import Figure

    recs = list(records)
    fig = Figure(figsize=(7.5, 3.2 * max(1, len(recs))))
    axes = fig.subplots(max(1, len(recs)), 1, squeeze=False).ravel()
    if not recs:
        axes[0].set_axis_off()
        axes[0].text(
            0.5,
            0.5,
            "no calibrated candidate in this round\n(a tree needs >= 16 train rows per class)",
            ha="center",
            va="center",
        )
        return fig
    for i, (ax, rec) in enumerate(zip(axes, recs, strict=True)):
        draw_calibration_tree(rec, ax=ax)
        if titles is not None:
            ax.set_title(f"{titles[i]}: {ax.get_title()}", fontsize=9)
    return fig


# --------------------------------------------------------------------------------------- panels
def _answer(options: Sequence[str], i: Any) -> str:
    if i is None or (isinstance(i, float) and math.isnan(i)):
        return "(none)"
    k = int(i)
    return f"{chr(65 + k)}. {options[k]}" if 0 <= k < len(options) else str(k)


def question_html(row: Mapping[str, Any], *, plot_png: bytes | None = None) -> str:
    """One question of a flips frame: flip class, question, options marked, answers, tools, review.

    Args:
        row: A row of :func:`tsevo.analysis.flips_df` as a mapping.
        plot_png: Optional series plot to inline above the text.
    """
    options = list(row.get("options") or [])
    gold, base, final = row.get("gold"), row.get("base_answer"), row.get("final_answer")
    flip = str(row.get("flip") or "")
    parts = [
        f"<div style='font-size:13px'><b>{esc(row.get('qid'))}</b> "
        f"{badge(flip or 'incomplete', FLIP_COLORS.get(flip, '#999'))} "
        f"<span style='color:#666'>{esc(row.get('task'))} · {esc(row.get('subtask'))}</span></div>"
    ]
    if plot_png is not None:
        parts.append(img_tag(plot_png, f"series of {row.get('qid')}"))
    parts.append(f"<p style='margin:4px 0'>{esc(row.get('question'))}</p>")
    items = []
    for k, opt in enumerate(options):
        marks = []
        if gold is not None and k == gold:
            marks.append("gold")
        if base is not None and k == base:
            marks.append("base")
        if final is not None and k == final:
            marks.append("final")
        tag = f" <i style='color:#666'>[{esc(', '.join(marks))}]</i>" if marks else ""
        style = "font-weight:bold" if "gold" in marks else ""
        items.append(f"<li style='{style}'>{esc(chr(65 + k))}. {esc(opt)}{tag}</li>")
    parts.append(f"<ol style='list-style:none;padding-left:8px;margin:2px 0'>{''.join(items)}</ol>")
    parts.append(
        kv_table(
            [
                ("gold", _answer(options, gold)),
                ("base answer", _answer(options, base)),
                ("final answer", _answer(options, final)),
                ("review decision", row.get("decision") or "(no tool shortlisted)"),
                ("reason", row.get("reason") or ""),
                ("replaced by", row.get("replaced_by") or []),
            ]
        )
    )
    evidence = row.get("evidence_json") or "{}"
    ev = json.loads(evidence) if isinstance(evidence, str) else dict(evidence)
    ran = list(row.get("tools_run") or [])
    if ran:
        ok = set(row.get("tools_ok") or [])
        lines = []
        for t in ran:
            out = ev.get(t)
            status = "ok" if t in ok else "no evidence"
            shown = json.dumps(out, sort_keys=True) if out is not None else ""
            lines.append(
                f"<li><code>{esc(t)}</code> ({esc(status)}) <code>{esc(shown)}</code></li>"
            )
        parts.append(f"<div>tools that ran:<ul style='margin:2px 0'>{''.join(lines)}</ul></div>")
    else:
        parts.append("<div style='color:#666'>no tool ran on this question</div>")
    return "".join(parts)


def tool_html(row: Mapping[str, Any]) -> str:
    """One artifact of a tools frame: metadata, usage, guidance, calibration tree and source."""
    head = (
        f"<div style='font-size:13px'><b>{esc(row.get('id'))}</b> "
        f"{badge(str(row.get('kind', '')))} "
        f"<span style='color:#666'>stage {esc(row.get('stage'))}, round {esc(row.get('round'))}"
        f"</span></div>"
    )
    meta = kv_table(
        [
            ("name", row.get("name")),
            ("description", row.get("description")),
            ("measurement (contract)", row.get("measurement")),
            ("scope", row.get("scope")),
            ("anti-scope", row.get("anti_scope") or "(none)"),
            ("tasks", row.get("tasks") or []),
            ("arity / options", f"{row.get('arity', '')} / {row.get('options_kind', '')}"),
            ("outputs", row.get("outputs") or []),
            ("reading rule", row.get("rule")),
            ("bucket / attempt", f"{row.get('bucket', '')} / {row.get('attempt', '')}"),
            ("target", row.get("target") or "(none)"),
        ]
    )
    usage = table_html(
        [
            {
                "split": sp,
                "fired": row.get(f"fired_{sp}", 0),
                "helped": row.get(f"helped_{sp}", 0),
                "harmed": row.get(f"harmed_{sp}", 0),
            }
            for sp in ("val", "test")
        ],
        ["split", "fired", "helped", "harmed"],
    )
    guidance = f"<div><b>guidance</b><pre style='white-space:pre-wrap;font-size:12px'>{esc(row.get('guidance'))}</pre></div>"
    cal = (
        f"<div><b>calibration</b>{calibration_tree_html(row.get('calibration_json'))}</div>"
        if row.get("calibrated")
        else "<div><b>calibration</b> <i>none</i></div>"
    )
    src = row.get("source") or ""
    source = (
        f"<div><b>source</b>{highlight_source(src)}</div>"
        if src
        else "<div><i>no source (not a tool)</i></div>"
    )
    return head + meta + "<div><b>usage</b></div>" + usage + guidance + cal + source
