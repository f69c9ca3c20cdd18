"""The gate: every decision with δ and δ_lb, the paired validation rows, and the prune."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ._runs import Run, open_run, rounds_in
from .flips import FLIP_CLASSES

__all__ = [
    "GATE_COLUMNS",
    "PAIRED_TABLE_COLUMNS",
    "PRUNE_COLUMNS",
    "gate_df",
    "paired_rows",
    "paired_table",
    "prune_df",
]

GATE_COLUMNS = [
    "round", "decision", "path", "passed", "invalid", "n", "n_attempted", "h", "m",
    "delta", "delta_lb", "error_rate", "reasons",
]  # fmt: skip
PAIRED_TABLE_COLUMNS = ["task", "n", *FLIP_CLASSES]
PRUNE_COLUMNS = [
    "round",
    "update",
    "helped",
    "harmed",
    "harmful",
    "removed",
    "reason",
    "outcome",
    "accepted",
]


def gate_df(run: Run) -> pd.DataFrame:
    """Every gate decision of the run: the first gate, the prune retest and the final gate.

    Columns: ``round, decision (gate | retest | final), path, passed, invalid, n, n_attempted, h, m,
    delta, delta_lb, error_rate, reasons (one string, lines joined)``.
    """
    store = open_run(run)
    rows = []
    for r in rounds_in(store):
        d = store.read_json(store.layout.round(r).summary)
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


def paired_rows(run: Run, round_: int = 1, *, changed_only: bool = True) -> pd.DataFrame:
    """The gate's paired validation rows, by default only the flips.

    Columns: ``qid, task, base_answer, cand_answer, base_correct, cand_correct, flip, tools_ok,
    replaced_by, tool_errors``.
    """
    store = open_run(run)
    df = store.read_parquet(store.layout.round(round_).val_paired)
    if changed_only:
        df = df[df["flip"].isin(["helped", "harmed"])]
    return df.reset_index(drop=True)


def paired_table(run: Run, round_: int = 1) -> pd.DataFrame:
    """The gate's paired validation run summarized: flip counts per task (plus ``ALL``).

    Columns: ``task, n, helped, harmed, unchanged-right, unchanged-wrong``.
    """
    store = open_run(run)
    df = store.read_parquet(store.layout.round(round_).val_paired)
    rows = []
    for task, g in [*sorted(df.groupby("task")), ("ALL", df)]:
        row: dict[str, Any] = {"task": task, "n": len(g)}
        for c in FLIP_CLASSES:
            row[c] = int((g["flip"] == c).sum())
        rows.append(row)
    return pd.DataFrame(rows, columns=PAIRED_TABLE_COLUMNS)


def prune_df(run: Run) -> pd.DataFrame:
    """The one-shot attribution prune of every round that ran one, one row per update.

    Columns: ``round, update, helped (h_u), harmed (m_u), harmful (clearly harmful), removed
    (harmful or a dependent), reason, outcome (the prune's outcome line), accepted (the pruned
    library deployed)``. Empty when no gate failed.
    """
    store = open_run(run)
    rows = []
    for r in rounds_in(store):
        d = store.read_json(store.layout.round(r).summary).get("pruned")
        if not d:
            continue
        plan = d["plan"]
        by_update = d["attribution"]["by_update"]
        for u in sorted(set(by_update) | set(plan.get("reasons", {}))):
            c = by_update.get(u, {"helped": 0, "harmed": 0})
            rows.append(
                {
                    "round": r,
                    "update": u,
                    "helped": int(c["helped"]),
                    "harmed": int(c["harmed"]),
                    "harmful": u in plan.get("harmful", []),
                    "removed": u in plan.get("removed", []),
                    "reason": plan.get("reasons", {}).get(u, ""),
                    "outcome": d.get("outcome", ""),
                    "accepted": bool(d.get("accepted")),
                }
            )
    return pd.DataFrame(rows, columns=PRUNE_COLUMNS)
