"""Tidy frames with fixed schemas, read from a run folder. Notebooks and widgets read only these.

Every function takes a run folder (or an open :class:`~tsevo.store.RunStore`) and returns a pandas
DataFrame whose columns are listed in its docstring (and in the ``*_COLUMNS`` constants, which tests
check). Nothing here answers questions or changes a run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.store import RunStore

__all__ = [
    "FAILURES_COLUMNS",
    "FLIPS_COLUMNS",
    "FUNNEL_COLUMNS",
    "GATE_COLUMNS",
    "TOOLS_COLUMNS",
    "failures_df",
    "flips_df",
    "funnel_df",
    "gate_df",
    "load_records",
    "measurements_df",
    "rounds_in",
    "tools_df",
]

FLIPS_COLUMNS = [
    "round", "split", "qid", "task", "subtask", "question", "options", "gold",
    "base_answer", "final_answer", "base_correct", "final_correct", "flip",
    "tools_run", "tools_ok", "replaced_by", "decision", "reason", "evidence_json",
]  # fmt: skip
TOOLS_COLUMNS = [
    "stage", "round", "id", "kind", "name", "description", "measurement", "tasks", "arity",
    "options_kind", "scope", "anti_scope", "guidance", "rule", "outputs", "calibrated",
    "calibration_json", "source", "bucket", "attempt", "target",
    "fired_val", "helped_val", "harmed_val", "fired_test", "helped_test", "harmed_test",
]  # fmt: skip
FUNNEL_COLUMNS = ["round", "step", "order", "count"]
GATE_COLUMNS = [
    "round", "decision", "path", "passed", "invalid", "n", "n_attempted", "h", "m",
    "delta", "delta_lb", "error_rate", "reasons",
]  # fmt: skip
FAILURES_COLUMNS = [
    "round",
    "qid",
    "task",
    "subtask",
    "side",
    "bucket",
    "label",
    "role",
    "planned",
    "group",
    "repaired_by",
]

_FUNNEL_ORDER = [
    "errors",
    "buckets",
    "contracts",
    "groups",
    "attempts",
    "checked",
    "prefilter_passed",
    "survivors",
    "deployed",
]


def _store(run: str | Path | RunStore) -> RunStore:
    return run if isinstance(run, RunStore) else RunStore.open(run)


def rounds_in(run: str | Path | RunStore) -> list[int]:
    """Round numbers that finished in the run."""
    store = _store(run)
    out, r = [], 1
    while store.exists(f"rounds/r{r}/round.json"):
        out.append(r)
        r += 1
    return out


def load_records(run: str | Path | RunStore, arm: str) -> dict[str, AnswerRecord]:
    """Answer records of one stored arm (``evals/<arm>.jsonl``) by question id."""
    store = _store(run)
    return {qid: AnswerRecord.from_dict(d) for qid, d in store.records(arm).load().items()}


def _suite(store: RunStore) -> Any:
    from tsevo.data import Suite

    return Suite.load(store.path("suite.parquet"))


def _flip(b: AnswerRecord, a: AnswerRecord) -> str | None:
    if not (b.completed and a.completed):
        return None
    from tsevo.evolve.gate import flip_class

    return flip_class(bool(b.correct), bool(a.correct))


def flips_df(run: str | Path | RunStore, *, split: str = "test", round_: int | None = None) -> Any:
    """Per question: base versus new answer, gold, flip class, tools fired, review decision, evidence.

    Args:
        run: Run folder.
        split: ``test`` (report-only: the library before vs after the round) or ``val`` (the gate's
            current vs final arms).
        round_: Round (default: the last finished round).

    Columns: ``round, split, qid, task, subtask, question, options (list), gold (int),
    base_answer, final_answer (int), base_correct, final_correct (bool), flip (helped | harmed |
    unchanged-right | unchanged-wrong), tools_run, tools_ok, replaced_by (lists of tool ids), decision
    (the last stage decision, or "" when no tool was shortlisted), reason, evidence_json (JSON
    {tool_id: outputs})``.
    """
    import pandas as pd

    store = _store(run)
    rounds = rounds_in(store)
    if not rounds:
        return pd.DataFrame(columns=FLIPS_COLUMNS)
    r = round_ if round_ is not None else rounds[-1]
    if split == "test":
        arms = store.read_json(f"rounds/r{r}/test.json")["arms"]
        before_arm, after_arm = arms["before"], arms["after"]
    elif split == "val":
        arms = store.read_json(f"rounds/r{r}/round.json").get("arms", {})
        if "val_base" not in arms:
            return pd.DataFrame(columns=FLIPS_COLUMNS)
        before_arm = arms["val_base"]
        after_arm = arms.get("val_final", arms["val_candidate"])
    else:
        raise ValueError(f"split must be 'test' or 'val', not {split!r}")
    before = load_records(store, before_arm)
    after = load_records(store, after_arm)
    suite = _suite(store)
    rows = []
    for qid in sorted(after):
        if qid not in before or qid not in suite:
            continue
        q, b, a = suite[qid], before[qid], after[qid]
        last = a.steps[-1] if a.steps else None
        evidence = {
            run_.tool_id: dict(run_.outputs)
            for s in a.steps
            for run_ in s.runs
            if run_.outputs is not None
        }
        rows.append(
            {
                "round": r,
                "split": split,
                "qid": qid,
                "task": q.task,
                "subtask": q.subtask,
                "question": q.question,
                "options": list(q.options),
                "gold": q.gold,
                "base_answer": b.final_answer,
                "final_answer": a.final_answer,
                "base_correct": b.correct,
                "final_correct": a.correct,
                "flip": _flip(b, a),
                "tools_run": list(a.tools_run),
                "tools_ok": list(a.tools_ok),
                "replaced_by": list(a.replaced_by),
                "decision": last.decision if last else "",
                "reason": last.reason if last else "",
                "evidence_json": json.dumps(evidence, sort_keys=True),
            }
        )
    return pd.DataFrame(rows, columns=FLIPS_COLUMNS)


def _usage(
    records_before: Mapping[str, AnswerRecord], records_after: Mapping[str, AnswerRecord]
) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for qid, a in records_after.items():
        b = records_before.get(qid)
        for t in set(a.tools_ok):
            out.setdefault(t, [0, 0, 0])[0] += 1
        if b is None:
            continue
        f = _flip(b, a)
        for t in set(a.replaced_by):
            if f == "helped":
                out.setdefault(t, [0, 0, 0])[1] += 1
            elif f == "harmed":
                out.setdefault(t, [0, 0, 0])[2] += 1
    return out


def tools_df(run: str | Path | RunStore) -> Any:
    """Every artifact of the deployed library with its metadata, source and usage on val and test.

    Usage counts come from the last round: ``fired_*`` = questions where the tool returned evidence,
    ``helped_*`` / ``harmed_*`` = flips where it was responsible for the replacement.

    Columns: ``stage, round, id, kind, name, description, measurement, tasks (list), arity,
    options_kind, scope, anti_scope, guidance, rule (text), outputs (list), calibrated (bool),
    calibration_json, source, bucket, attempt, target, fired_val, helped_val, harmed_val, fired_test,
    helped_test, harmed_test``.
    """
    import pandas as pd

    from tsevo.library.library import Library

    store = _store(run)
    if not store.exists("library/library.json"):
        return pd.DataFrame(columns=TOOLS_COLUMNS)
    lib = Library.load(store.path("library"))
    usage_val: dict[str, list[int]] = {}
    usage_test: dict[str, list[int]] = {}
    for r in rounds_in(store):
        d = store.read_json(f"rounds/r{r}/round.json")
        arms = d.get("arms", {})
        if d["status"] == "accepted" and "val_final" in arms:
            usage_val.update(
                _usage(
                    load_records(store, arms["val_base"]), load_records(store, arms["val_final"])
                )
            )
        if store.exists(f"rounds/r{r}/test.json"):
            t = store.read_json(f"rounds/r{r}/test.json")["arms"]
            if d["status"] == "accepted":
                usage_test.update(
                    _usage(load_records(store, t["before"]), load_records(store, t["after"]))
                )
    rows = []
    for s in lib.stages:
        for t in s.tools:
            anti = list(t.scope.anti_tasks)
            if not t.scope.anti_matcher.is_trivial:
                anti.append(t.scope.anti_matcher.describe())
            if t.scope.matcher.forbid:
                anti.append("never with " + ", ".join(t.scope.matcher.forbid))
            uv = usage_val.get(t.id, [0, 0, 0])
            ut = usage_test.get(t.id, [0, 0, 0])
            rows.append(
                {
                    "stage": s.round,
                    "round": t.round,
                    "id": t.id,
                    "kind": t.kind,
                    "name": t.name,
                    "description": t.description,
                    "measurement": t.contract.measurement,
                    "tasks": list(t.scope.tasks),
                    "arity": t.scope.arity,
                    "options_kind": t.scope.options_kind,
                    "scope": t.scope.describe(),
                    "anti_scope": "; ".join(anti),
                    "guidance": t.guidance.text,
                    "rule": t.guidance.rule.describe() if t.guidance.rule else "",
                    "outputs": list(t.outputs),
                    "calibrated": t.calibration is not None,
                    "calibration_json": json.dumps(t.calibration, sort_keys=True)
                    if t.calibration
                    else "",
                    "source": t.source,
                    "bucket": t.provenance.bucket,
                    "attempt": t.provenance.attempt,
                    "target": t.target,
                    "fired_val": uv[0],
                    "helped_val": uv[1],
                    "harmed_val": uv[2],
                    "fired_test": ut[0],
                    "helped_test": ut[1],
                    "harmed_test": ut[2],
                }
            )
    return pd.DataFrame(rows, columns=TOOLS_COLUMNS)


def funnel_df(run: str | Path | RunStore) -> Any:
    """The attrition funnel per round, long format.

    Columns: ``round, step (errors | buckets | contracts | groups | attempts | checked |
    prefilter_passed | survivors | deployed), order (position in the funnel), count``.
    """
    import pandas as pd

    store = _store(run)
    rows = []
    for r in rounds_in(store):
        f = store.read_json(f"rounds/r{r}/round.json").get("funnel", {})
        for i, step in enumerate(_FUNNEL_ORDER):
            if step in f:
                rows.append({"round": r, "step": step, "order": i, "count": int(f[step])})
    return pd.DataFrame(rows, columns=FUNNEL_COLUMNS)


def gate_df(run: str | Path | RunStore) -> Any:
    """Every gate decision of the run: the first gate, the prune retest and the final gate.

    Columns: ``round, decision (gate | retest | final), path, passed, invalid, n, n_attempted, h, m,
    delta, delta_lb, error_rate, reasons (one string, lines joined)``.
    """
    import pandas as pd

    store = _store(run)
    rows = []
    for r in rounds_in(store):
        d = store.read_json(f"rounds/r{r}/round.json")
        pr = d.get("pruned") or {}
        for name, g in (
            ("gate", d.get("gate")),
            ("retest", pr.get("retest")),
            ("final", d.get("final_gate")),
        ):
            if not g:
                continue
            rows.append(
                {
                    "round": r,
                    "decision": name,
                    "path": g["path"],
                    "passed": g["passed"],
                    "invalid": g["invalid"],
                    "n": g["n"],
                    "n_attempted": g["n_attempted"],
                    "h": g["h"],
                    "m": g["m"],
                    "delta": g["delta"],
                    "delta_lb": g["delta_lb"],
                    "error_rate": g["error_rate"],
                    "reasons": "\n".join(g.get("reasons", [])),
                }
            )
    return pd.DataFrame(rows, columns=GATE_COLUMNS)


def failures_df(run: str | Path | RunStore, *, round_: int = 1) -> Any:
    """The round's train errors: where each went (bucket, support or held-out, planned, repaired).

    Columns: ``round, qid, task, subtask, side (tool_fired | no_tool), bucket ("" when unassigned or
    dropped), label, role (support | held_out | other | unassigned | dropped), planned (bucket got a
    contract), group (work group id), repaired_by (candidate ids with an attributable repair)``.
    """
    import pandas as pd

    store = _store(run)
    base = f"rounds/r{round_}"
    if not store.exists(f"{base}/buckets.json"):
        return pd.DataFrame(columns=FAILURES_COLUMNS)
    suite = _suite(store)
    b = store.read_json(f"{base}/buckets.json")
    splits = (
        {s["bucket_id"]: s for s in store.read_json(f"{base}/splits.json")}
        if store.exists(f"{base}/splits.json")
        else {}
    )
    cards = (
        store.read_json(f"{base}/contracts.json")["cards"]
        if store.exists(f"{base}/contracts.json")
        else []
    )
    planned = {c["bucket_id"] for c in cards}
    groups = (
        store.read_json(f"{base}/groups.json")["groups"]
        if store.exists(f"{base}/groups.json")
        else []
    )
    group_of = {c["bucket_id"]: g["id"] for g in groups for c in g["cards"]}
    repaired: dict[str, list[str]] = {}
    if store.exists(f"{base}/synthesis.json"):
        for g in store.read_json(f"{base}/synthesis.json"):
            for a in g["attempts"]:
                for q in a["repairs"]:
                    repaired.setdefault(q, []).append(a["tool_id"])
    rows = []

    def add(qid: str, side: str, bucket: str, label: str, role: str) -> None:
        q = suite[qid]
        rows.append(
            {
                "round": round_,
                "qid": qid,
                "task": q.task,
                "subtask": q.subtask,
                "side": side,
                "bucket": bucket,
                "label": label,
                "role": role,
                "planned": bucket in planned,
                "group": group_of.get(bucket, ""),
                "repaired_by": repaired.get(qid, []),
            }
        )

    for bk in b["buckets"]:
        sp = splits.get(bk["id"], {"support": [], "held_out": []})
        for qid in bk["members"]:
            role = (
                "support"
                if qid in sp["support"]
                else "held_out"
                if qid in sp["held_out"]
                else "other"
            )
            add(qid, bk["side"], bk["id"], bk["category"]["label"], role)
    for qid in b["unassigned"]:
        add(qid, "", "", "", "unassigned")
    for qid in b["dropped_small"]:
        add(qid, "", "", "", "dropped")
    return pd.DataFrame(rows, columns=FAILURES_COLUMNS)


MEASUREMENTS_COLUMNS = [
    "task",
    "oracle_measurement",
    "planner_measurements",
    "tools",
    "beyond_default",
]


def measurements_df(run: str | Path | RunStore) -> Any:
    """Per task: what the deployed tools measure next to what the synthetic oracle measures.

    ``beyond_default`` is true when a tool for the task needs more than one catalog call at default
    parameters: two measurements (a calibrated combination), windows read from the question, a
    non-default parameter, or a two-series feeding mode.

    Columns: ``task, oracle_measurement ("" for non-synthetic tasks), planner_measurements (list),
    tools (list of ids), beyond_default (bool)``.
    """
    import pandas as pd

    from tsevo.data.synthetic import FAMILIES

    oracle = {f.task: f.oracle_measurement for f in FAMILIES.values()}
    tools = tools_df(run)
    rows = []
    tasks = sorted({t for ts in tools["tasks"] for t in ts}) if len(tools) else []
    for task in tasks:
        sel = tools[[task in ts for ts in tools["tasks"]]]
        meas = list(sel["measurement"])
        beyond = any(_beyond_default(m) for m in meas) or bool(sel["calibrated"].any())
        rows.append(
            {
                "task": task,
                "oracle_measurement": oracle.get(task, ""),
                "planner_measurements": meas,
                "tools": list(sel["id"]),
                "beyond_default": beyond,
            }
        )
    return pd.DataFrame(rows, columns=MEASUREMENTS_COLUMNS)


def _beyond_default(measurement: str) -> bool:
    """True for two measurements, windows read from the question, or a parameter off its default."""
    import inspect
    import re

    from tsevo.library.primitives import CATALOG

    if " + " in measurement:
        return True
    m = re.fullmatch(r"([a-z_0-9]+)\.[A-Za-z_0-9]+(?:\[(.*)\])?", measurement.strip())
    if m is None:
        return False
    name, inner = m.group(1), m.group(2) or ""
    spec = CATALOG.get(name)
    if spec is None:
        return False
    defaults = {k: v.default for k, v in inspect.signature(spec.fn).parameters.items()}
    for part in (p.strip() for p in inner.split(";") if p.strip()):
        if part in ("window2", "window4"):
            return True
        if "=" in part:
            k, v = part.split("=", 1)
            if k in defaults and str(defaults[k]) != v:
                return True
    return False
