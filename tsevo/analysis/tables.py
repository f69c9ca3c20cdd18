"""Planning, synthesis and deployment tables of one round, and the synthetic suite's ceiling."""

from __future__ import annotations

import json

import pandas as pd

from tsevo.data import Suite
from tsevo.data.synthetic.suite import solver_report

from ._runs import Run, open_run

__all__ = [
    "CALIBRATION_COLUMNS",
    "CONTRACTS_COLUMNS",
    "TEST_DELTAS_COLUMNS",
    "attempts_table",
    "calibration_table",
    "candidate_source",
    "contracts_table",
    "solver_table",
    "test_deltas",
]

CONTRACTS_COLUMNS = [
    "bucket", "action", "kind", "failure_type", "measurement", "signature", "rule", "focus",
    "success_criterion", "calibration",
]  # fmt: skip
CALIBRATION_COLUMNS = [
    "tool_id", "accepted", "balanced_accuracy", "n_rows", "classes", "reason", "calibration_json",
]  # fmt: skip
TEST_DELTAS_COLUMNS = ["task", "n", "before", "after", "delta", "helped", "harmed"]


def contracts_table(run: Run, round_: int = 1) -> pd.DataFrame:
    """The planner's contract cards, one row per bucket.

    Columns: ``bucket, action, kind, failure_type, measurement, signature, rule, focus,
    success_criterion, calibration``.
    """
    store = open_run(run)
    cards = store.read_json_or(store.layout.round(round_).contracts, {"cards": []})["cards"]
    rows = []
    for c in cards:
        ranked = (c.get("plan") or {}).get("ranked") or []
        rows.append(
            {
                "bucket": c["bucket_id"],
                "action": c.get("action", ""),
                "kind": c.get("artifact_kind", ""),
                "failure_type": c.get("failure_type", ""),
                "measurement": c["contract"].get("measurement", ""),
                "signature": ", ".join(c["contract"].get("signature", [])),
                "rule": ranked[0]["rule"]["kind"] if ranked else "",
                "focus": c.get("focus", ""),
                "success_criterion": c["contract"].get("success_criterion", ""),
                "calibration": c["contract"].get("calibration") is not None,
            }
        )
    return pd.DataFrame(rows, columns=CONTRACTS_COLUMNS)


def attempts_table(run: Run, round_: int = 1) -> pd.DataFrame:
    """Every synthesis attempt with its checks and prefilter outcome.

    Columns: ``group, attempt, tool_id, measurement, checked, violations, n_held_out, n_in_contract
    (held-out errors the candidate answers for: a composite's, those of kinds it has a branch for),
    n_probe, repairs, harms, repair_rate, exec_errors, tool_runs, outcome, passed, survivor``.
    """
    store = open_run(run)
    return store.read_parquet(store.layout.round(round_).prefilter)


def candidate_source(run: Run, tool_id: str, round_: int = 1) -> str:
    """The generated source of one candidate."""
    store = open_run(run)
    return store.read_text(store.layout.round(round_).candidate(tool_id).source)


def calibration_table(run: Run, round_: int = 1) -> pd.DataFrame:
    """Candidates whose synthesis asked for a calibration tree, with the stored record.

    Columns: ``tool_id, accepted, balanced_accuracy, n_rows, classes, reason, calibration_json``
    (empty when no candidate was calibrated, e.g. on the tiny preset where no class reaches the
    16 train rows a tree needs).
    """
    store = open_run(run)
    paths = store.layout.round(round_)
    folders = (
        sorted(p.name for p in paths.candidates.iterdir()) if paths.candidates.is_dir() else []
    )
    rows = []
    for name in folders:
        meta = paths.candidate(name).meta
        if not meta.is_file():
            continue
        d = store.read_json(meta)
        cal = d["tool"].get("calibration") or d["attempt"].get("calibration")
        if not cal:
            continue
        rows.append(
            {
                "tool_id": d["tool"]["id"],
                "accepted": bool(cal.get("accepted")),
                "balanced_accuracy": cal.get("balanced_accuracy"),
                "n_rows": cal.get("n_rows"),
                "classes": list(cal.get("classes", [])),
                "reason": cal.get("reason", ""),
                "calibration_json": json.dumps(cal, sort_keys=True),
            }
        )
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS)


def test_deltas(run: Run, round_: int = 1) -> pd.DataFrame:
    """The round's report-only test table: accuracy before/after per task.

    Columns: ``task, n, before, after, delta, helped, harmed`` (plus an ``ALL`` row).
    """
    store = open_run(run)
    t = store.read_json(store.layout.round(round_).test)
    return pd.DataFrame(t["tasks"], columns=TEST_DELTAS_COLUMNS)


def solver_table(suite: Suite) -> pd.DataFrame:
    """Oracle, naive and chance accuracy per synthetic family and difficulty (the suite's ceiling).

    Columns: ``family, task, difficulty, n, oracle, naive, chance``.
    """
    return solver_report(suite)
