"""The deployed library: every artifact with its metadata, source and usage; the chain of stages."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pandas as pd

from tsevo.agent import AnswerRecord

from ._runs import Run, flip_of, library_or_none, load_records, open_run, rounds_in

__all__ = ["CHAIN_COLUMNS", "TOOLS_COLUMNS", "chain_table", "tools_df"]

TOOLS_COLUMNS = [
    "stage", "round", "id", "kind", "name", "description", "measurement", "tasks", "arity",
    "options_kind", "scope", "anti_scope", "guidance", "rule", "outputs", "calibrated",
    "calibration_json", "source", "bucket", "attempt", "target",
    "fired_val", "helped_val", "harmed_val", "fired_test", "helped_test", "harmed_test",
]  # fmt: skip
CHAIN_COLUMNS = ["stage", "id", "kind", "description", "measurement", "target"]


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
        f = flip_of(b, a)
        for t in set(a.replaced_by):
            if f == "helped":
                out.setdefault(t, [0, 0, 0])[1] += 1
            elif f == "harmed":
                out.setdefault(t, [0, 0, 0])[2] += 1
    return out


def tools_df(run: Run) -> pd.DataFrame:
    """Every artifact of the deployed library with its metadata, source and usage on val and test.

    Usage counts come from the last round: ``fired_*`` = questions where the tool returned evidence,
    ``helped_*`` / ``harmed_*`` = flips where it was responsible for the replacement.

    Columns: ``stage, round, id, kind, name, description, measurement, tasks (list), arity,
    options_kind, scope, anti_scope, guidance, rule (text), outputs (list), calibrated (bool),
    calibration_json, source, bucket, attempt, target, fired_val, helped_val, harmed_val, fired_test,
    helped_test, harmed_test``.
    """
    store = open_run(run)
    lib = library_or_none(store.layout.library)
    if lib is None:
        return pd.DataFrame(columns=TOOLS_COLUMNS)
    usage_val: dict[str, list[int]] = {}
    usage_test: dict[str, list[int]] = {}
    for r in rounds_in(store):
        paths = store.layout.round(r)
        d = store.read_json(paths.summary)
        arms = d.get("arms", {})
        if d["status"] == "accepted" and "val_final" in arms:
            usage_val.update(
                _usage(
                    load_records(store, arms["val_base"]), load_records(store, arms["val_final"])
                )
            )
        if paths.test.exists():
            t = store.read_json(paths.test)["arms"]
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


def chain_table(run: Run) -> pd.DataFrame:
    """The deployed chain: one row per artifact of every stage (root stage 0 first).

    Columns: ``stage, id, kind, description, measurement, target``.
    """
    lib = library_or_none(open_run(run).layout.library)
    if lib is None:
        return pd.DataFrame(columns=CHAIN_COLUMNS)
    return pd.DataFrame(lib.summary(), columns=CHAIN_COLUMNS)
