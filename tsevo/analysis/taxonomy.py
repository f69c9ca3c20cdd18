"""Failure-taxonomy frames (design §6.1–6.2, §4.8): codes, firings on train traces, agreement.

* :func:`codes_df`: one row per code per stored version (the draft, then ``taxonomy.json``),
  retired ids included (``retired`` true).
* :func:`firings_df`: one row per (train trace, code whose detector fires) under the current
  taxonomy; ``question_id`` and ``task`` are mapped back from the suite here, for grouping only.
* :func:`agreement_df`: one row per gate round and metric.
* :func:`versions_df`: one row per stored version (draft, gated): status, counts, and the gate's
  final figures with the gating metric named.
* :func:`gaps_df`: one row per coverage gap a stored version records (never filled with filler).
* :func:`taxonomy_metrics`: the headline numbers (status, gating metric, both κ, coverage, codes
  per axis, gaps, firings) as small JSON for a notebook's metrics file.
* :func:`trace_flips_df`: the questions behind the train traces as a flips frame (the base
  answerer's answer versus the chain's final answer in that base pass), so a
  :class:`~tsevo.widgets.FlipExplorer` can show the questions a code fires on.

Ids and text are pandas ``string``; numbers and flags nullable (``Int64``, ``Float64``,
``boolean``).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from tsevo.agent import AnswerRecord
from tsevo.data import Suite
from tsevo.evolve import flip_class
from tsevo.taxonomy import Taxonomy, load_taxonomy
from tsevo.taxonomy.induce import fires
from tsevo.taxonomy.runs import agreement_records, trace_source
from tsevo.taxonomy.traces import read_traces, trace_id

from ._runs import Run, open_run
from .flips import FLIPS_COLUMNS

__all__ = [
    "AGREEMENT_COLUMNS",
    "CODES_COLUMNS",
    "FIRINGS_COLUMNS",
    "GAPS_COLUMNS",
    "PHASES_COLUMNS",
    "VERSIONS_COLUMNS",
    "agreement_df",
    "codes_df",
    "firings_df",
    "gaps_df",
    "gate_phases_df",
    "taxonomy_metrics",
    "trace_flips_df",
    "versions_df",
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
PHASES_COLUMNS: dict[str, str] = {
    "round": "Int64",
    "taxonomy_fp": "string",
    "annotator": "string",
    "proposed": "Int64",
    "proposed_confirmed": "Int64",
    "votes_confirm": "Int64",
    "voted": "Int64",
    "confirmed": "Int64",
    "dropped": "Int64",
    "typed_A": "Int64",
    "typed_B": "Int64",
    "typed_C": "Int64",
    "labelled": "Int64",
    "deliberated": "Int64",
    "changed": "Int64",
}

VERSIONS_COLUMNS: dict[str, str] = {
    "taxonomy_fp": "string",
    "version_n": "Int64",
    "stage": "string",
    "status": "string",
    "n_codes": "Int64",
    "n_retired": "Int64",
    "n_gaps": "Int64",
    "metric": "string",
    "kappa": "Float64",
    "coverage": "Float64",
    "cohen_area": "Float64",
    "fleiss_code_macro": "Float64",
    "rounds_completed": "Int64",
    "reason": "string",
}
GAPS_COLUMNS: dict[str, str] = {
    "taxonomy_fp": "string",
    "version_n": "Int64",
    "status": "string",
    "axis": "string",
    "role": "string",
    "family": "string",
    "reason": "string",
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


def gate_phases_df(run: Run) -> pd.DataFrame:
    """Per event-level gate round and annotator: what each of the five phases did (design §4.2).

    ``proposed``: errors the annotator discovered (phase 1), of which ``proposed_confirmed`` were
    confirmed; ``votes_confirm`` of the round's ``voted`` keys (proposed by at least
    ``quorum_propose``) it voted to confirm, ``confirmed`` and ``dropped`` (too few proposers)
    being the round's (phase 2); ``typed_*`` its types of the confirmed errors (phase 3);
    ``labelled`` the confirmed errors it gave a code (phase 4, what κ is computed on);
    ``deliberated`` the round's split errors and ``changed`` how many of its labels deliberation
    changed (phase 5). Trace-level rounds (``unit="trace"``) have no phases and no rows.
    """
    rows = []
    for rnd in agreement_records(open_run(run)):
        ph = rnd.get("phases")
        if not ph:
            continue
        rec = ph["reconciliation"]
        confirmed = set(rec["confirmed"])
        deliberated = {e for r in ph["deliberation"] for e in r["deliberated"]}
        for name, props in ph["proposals"].items():
            mine = {f"{p['trace_id']}#{p['event_seq']}" for p in props}
            types = [t["by"].get(name) for t in ph["types"].values()]
            labels = rnd.get("labels", {}).get(name, {})
            rows.append(
                {
                    "round": rnd["round"],
                    "taxonomy_fp": rnd["fingerprint"],
                    "annotator": name,
                    "proposed": len(mine),
                    "proposed_confirmed": len(mine & confirmed),
                    "votes_confirm": sum(name in v["confirm"] for v in rec["voted"].values()),
                    "voted": len(rec["voted"]),
                    "confirmed": len(confirmed),
                    "dropped": len(rec["dropped"]),
                    **{f"typed_{a}": types.count(a) for a in "ABC"},
                    "labelled": sum(bool(v) for v in labels.values()),
                    "deliberated": len(deliberated),
                    "changed": sum(
                        c["annotator"] == name for r in ph["deliberation"] for c in r["changed"]
                    ),
                }
            )
    return _frame(rows, PHASES_COLUMNS)


def versions_df(run: Run) -> pd.DataFrame:
    """Per stored version (``stage`` draft, then gated): status, counts and the gate's figures.

    ``metric`` names the metric that gated (``cohen_area``: mean pairwise Cohen κ at area level;
    ``fleiss_code_macro``: macro per-code Fleiss κ) and ``kappa`` is its final value; both κ are
    given besides. The gate's figures are empty for a draft. No taxonomy yet: no rows.
    """
    store = open_run(run)
    tp = store.layout.taxonomy
    rows = []
    for stage, path in (("draft", tp.draft), ("gated", tp.taxonomy)):
        if not path.exists():
            continue
        tax = load_taxonomy(path)
        agr = dict(tax.generation.get("agreement") or {})
        rows.append(
            {
                "taxonomy_fp": tax.fingerprint,
                "version_n": tax.version_n,
                "stage": stage,
                "status": tax.status,
                "n_codes": len(tax.codes),
                "n_retired": len(tax.retired),
                "n_gaps": len(tax.coverage_gaps),
                "metric": agr.get("metric"),
                "kappa": agr.get("final_kappa"),
                "coverage": agr.get("final_coverage"),
                "cohen_area": agr.get("cohen_area"),
                "fleiss_code_macro": agr.get("fleiss_code_macro"),
                "rounds_completed": agr.get("rounds_completed"),
                "reason": agr.get("reason"),
            }
        )
    return _frame(rows, VERSIONS_COLUMNS)


def gaps_df(run: Run) -> pd.DataFrame:
    """The coverage gaps each stored version records: axis, role, feature family and why."""
    rows = []
    for tax in _versions(run):
        for g in tax.coverage_gaps:
            rows.append(
                {
                    "taxonomy_fp": tax.fingerprint,
                    "version_n": tax.version_n,
                    "status": tax.status,
                    "axis": g.get("axis"),
                    "role": g.get("role"),
                    "family": g.get("family"),
                    "reason": g.get("reason"),
                }
            )
    return _frame(rows, GAPS_COLUMNS)


def trace_flips_df(run: Run) -> pd.DataFrame:
    """The train questions the taxonomy's traces come from, as a flips frame (``FLIPS_COLUMNS``).

    One row per train question of the base pass the traces were read from (the round recorded
    in the taxonomy manifest, else the latest base pass): ``base_answer`` is the base
    answerer's option and ``final_answer`` the chain's, so ``flip`` says what the chain did to
    it (helped, harmed, unchanged); ``split`` is ``train``. No base pass: no rows.
    """
    store = open_run(run)
    source = (store.read_json_or(store.layout.taxonomy.manifest, {}) or {}).get("source", {})
    try:
        r = int(source["round"]) if "round" in source else trace_source(store)[0]
    except FileNotFoundError:
        return pd.DataFrame(columns=FLIPS_COLUMNS)
    path = store.layout.round(r).base_pass
    if not path.exists():
        return pd.DataFrame(columns=FLIPS_COLUMNS)
    suite = Suite.load(store.layout.suite)
    rows = []
    for row in sorted(store.read_parquet(path).to_dict("records"), key=lambda d: str(d["qid"])):
        rec = AnswerRecord.from_row(row)
        if suite.splits.get(rec.qid) != "train" or rec.qid not in suite:
            continue
        q = suite[rec.qid]
        base_ok = q.gold is not None and rec.base_answer == q.gold
        last = rec.steps[-1] if rec.steps else None
        evidence = {
            tr.tool_id: dict(tr.outputs)
            for s in rec.steps
            for tr in s.runs
            if tr.outputs is not None
        }
        rows.append(
            {
                "round": r,
                "split": "train",
                "qid": rec.qid,
                "task": q.task,
                "subtask": q.subtask,
                "question": q.question,
                "options": list(q.options),
                "gold": q.gold,
                "base_answer": rec.base_answer,
                "final_answer": rec.final_answer,
                "base_correct": base_ok,
                "final_correct": rec.correct,
                "flip": flip_class(base_ok, bool(rec.correct)) if rec.completed else None,
                "tools_run": list(rec.tools_run),
                "tools_ok": list(rec.tools_ok),
                "replaced_by": list(rec.replaced_by),
                "decision": last.decision if last else "",
                "reason": last.reason if last else "",
                "evidence_json": json.dumps(evidence, sort_keys=True),
            }
        )
    return pd.DataFrame(rows, columns=FLIPS_COLUMNS)


def taxonomy_metrics(run: Run) -> dict[str, Any]:
    """Headline numbers of the run's current taxonomy (JSON-friendly; ``{"taxonomy": "none"}``).

    Keys: ``status, version_n, fingerprint, metric`` (the gating one), ``kappa`` (its final
    value), ``cohen_area, fleiss_code_macro, coverage, rounds, codes_A, codes_B, codes_C, gaps,
    firings, traces_fired``. An undefined κ is ``None``.
    """
    versions = versions_df(run)
    if len(versions) == 0:
        return {"taxonomy": "none"}
    v = versions.iloc[-1]
    codes = codes_df(run)
    cur = codes[(codes["taxonomy_fp"] == v["taxonomy_fp"]) & (codes["status"] == v["status"])]
    cur = cur[~cur["retired"].fillna(False).astype(bool)]
    fired = firings_df(run)

    def num(x: Any) -> float | None:
        return None if pd.isna(x) else round(float(x), 6)

    return {
        "status": str(v["status"]),
        "version_n": int(v["version_n"]),
        "fingerprint": str(v["taxonomy_fp"]),
        "metric": None if pd.isna(v["metric"]) else str(v["metric"]),
        "kappa": num(v["kappa"]),
        "cohen_area": num(v["cohen_area"]),
        "fleiss_code_macro": num(v["fleiss_code_macro"]),
        "coverage": num(v["coverage"]),
        "rounds": None if pd.isna(v["rounds_completed"]) else int(v["rounds_completed"]),
        **{f"codes_{a}": int((cur["axis"] == a).sum()) for a in ("A", "B", "C")},
        "gaps": int(v["n_gaps"]),
        "firings": len(fired),
        "traces_fired": int(fired["trace_id"].nunique()),
    }
