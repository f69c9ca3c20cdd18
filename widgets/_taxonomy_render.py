"""The TaxonomyBrowser's pure pieces: constants, frame shaping and HTML, with no widget state.

Functions of the taxonomy frames of :mod:`tsevo.analysis.taxonomy` (:func:`codes_df`,
:func:`firings_df`, :func:`agreement_df`, :func:`versions_df`, :func:`gaps_df`) that return plain
values or escaped HTML: the codes of a version per axis by firing frequency, the status badge with
its gating metric named, recorded coverage gaps, a code's label and its detail panel (fields,
firings by split and round, evidence excerpts, linked questions). :mod:`widgets.taxonomy` composes
them into the :class:`~widgets.taxonomy.TaxonomyBrowser` and re-exports the public ones; import them
from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ._render import badge, esc, kv_table, table_html

__all__ = [
    "AXES",
    "EMPTY_MESSAGE",
    "MAX_EXCERPTS",
    "MAX_LINKED",
    "METRIC_NAMES",
    "STATUS_COLORS",
    "badge_html",
    "badge_text",
    "code_label",
    "code_panel_html",
    "codes_by_axis",
    "frequencies",
    "gaps_html",
    "questions_of",
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
