"""Failure-taxonomy frames (design §6.1–6.2, §4.8): codes, firings on train traces, agreement.

* :func:`codes_df`: one row per code per stored version (the draft, then ``taxonomy.json``),
  retired ids included (``retired`` true).
* :func:`firings_df`: one row per (train trace, code whose detector fires) under the current
  taxonomy; ``question_id`` and ``task`` are mapped back from the suite here, for grouping only.
* :func:`agreement_df`: one row per gate round and metric.

Ids and text are pandas ``string``; numbers and flags nullable (``Int64``, ``Float64``,
``boolean``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tsevo.data import Suite
from tsevo.taxonomy import Taxonomy, load_taxonomy
from tsevo.taxonomy.induce import fires
from tsevo.taxonomy.runs import agreement_records
from tsevo.taxonomy.traces import read_traces, trace_id

from ._runs import Run, open_run

__all__ = [
    "AGREEMENT_COLUMNS",
    "CODES_COLUMNS",
    "FIRINGS_COLUMNS",
    "agreement_df",
    "codes_df",
    "firings_df",
]

CODES_COLUMNS: dict[str, str] = {
    "taxonomy_fp": "string",
    "version_n": "Int64",
    "status": "string",
    "code_id": "string",
    "axis": "string",
    "area": "string",
    "name": "string",
    "description": "string",
    "applies_to_role": "string",
    "severity": "string",
    "origin": "string",
    "revision": "Int64",
    "retired": "boolean",
    "merged_into": "string",
    "has_detector": "boolean",
    "judge_usable": "boolean",
    "n_evidence": "Int64",
}
FIRINGS_COLUMNS: dict[str, str] = {
    "run_id": "string",
    "round": "Int64",
    "split": "string",
    "trace_id": "string",
    "trace_kind": "string",
    "question_id": "string",
    "sample_idx": "Int64",
    "taxonomy_fp": "string",
    "code_id": "string",
    "axis": "string",
    "role": "string",
    "event_seq": "Int64",
    "confidence": "Float64",
    "severity": "string",
    "source": "string",
    "evidence": "string",
    "final_correct": "boolean",
    "task": "string",
}
AGREEMENT_COLUMNS: dict[str, str] = {
    "round": "Int64",
    "taxonomy_fp": "string",
    "metric": "string",
    "value": "Float64",
    "coverage": "Float64",
    "gating": "boolean",
    "passed": "boolean",
    "n_errors": "Int64",
}


def _frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(columns)).astype(columns)


def _versions(run: Run) -> list[Taxonomy]:
    tp = open_run(run).layout.taxonomy
    return [load_taxonomy(p) for p in (tp.draft, tp.taxonomy) if p.exists()]


def codes_df(run: Run) -> pd.DataFrame:
    """Codes of each stored version (draft, then gated), retired ids as rows with ``retired``."""
    rows: list[dict[str, Any]] = []
    for tax in _versions(run):
        head = {"taxonomy_fp": tax.fingerprint, "version_n": tax.version_n, "status": tax.status}
        for c in tax.codes:
            rows.append(
                {
                    **head,
                    "code_id": c.id,
                    "axis": c.category,
                    "area": c.area,
                    "name": c.name,
                    "description": c.description,
                    "applies_to_role": c.applies_to_role,
                    "severity": c.severity,
                    "origin": c.origin,
                    "revision": c.revision,
                    "retired": False,
                    "merged_into": None,
                    "has_detector": c.detector is not None,
                    "judge_usable": bool(c.outcome_blind) and c.detector is not None,
                    "n_evidence": len(c.evidence_trace_ids),
                }
            )
        for r in tax.retired:
            axis = r.id[:1] if r.id[:1] in ("A", "B", "C") else None
            row = {**head, "code_id": r.id, "axis": axis, "retired": True}
            rows.append({**row, "merged_into": r.merged_into})
    return _frame(rows, CODES_COLUMNS)


def firings_df(run: Run) -> pd.DataFrame:
    """Which codes of the current taxonomy fire (by detector) on which train traces."""
    store = open_run(run)
    tp = store.layout.taxonomy
    versions = _versions(store)
    if not versions or not tp.traces("train").exists():
        return _frame([], FIRINGS_COLUMNS)
    tax = versions[-1]
    source = (store.read_json_or(tp.manifest, {}) or {}).get("source", {})
    r, library = int(source.get("round", 1)), str(source.get("library", ""))
    suite = Suite.load(store.layout.suite)
    back = {trace_id(q.fingerprint, r, "train", library): q for q in suite}
    rows = []
    for t in read_traces(tp.traces("train")):
        q = back.get(t.problem_id)
        for c in tax.codes:
            if not fires(c.detector, t.features):
                continue
            rows.append(
                {
                    "run_id": store.layout.root.name,
                    "round": r,
                    "split": t.metadata.get("split"),
                    "trace_id": t.problem_id,
                    "trace_kind": t.metadata.get("kind"),
                    "question_id": q.id if q is not None else None,
                    "sample_idx": 0,
                    "taxonomy_fp": tax.fingerprint,
                    "code_id": c.id,
                    "axis": c.category,
                    "role": c.applies_to_role,
                    "event_seq": None,
                    "confidence": 1.0,
                    "severity": c.severity,
                    "source": "detector",
                    "evidence": t.raw_trajectory[:300],
                    "final_correct": None if t.outcome is None else bool(t.outcome["correct"]),
                    "task": q.task if q is not None else None,
                }
            )
    return _frame(rows, FIRINGS_COLUMNS)


def agreement_df(run: Run) -> pd.DataFrame:
    """Per gate round: both κ metrics (the gating one flagged) and the coverage."""
    rows = []
    for rnd in agreement_records(open_run(run)):
        for metric in ("cohen_area", "fleiss_code_macro"):
            rows.append(
                {
                    "round": rnd["round"],
                    "taxonomy_fp": rnd["fingerprint"],
                    "metric": metric,
                    "value": rnd.get(metric),
                    "coverage": rnd.get("coverage"),
                    "gating": metric == rnd.get("metric"),
                    "passed": rnd.get("passed"),
                    "n_errors": len(rnd.get("errors", ())),
                }
            )
    return _frame(rows, AGREEMENT_COLUMNS)
