"""The base pass and its errors: accuracy per task, buckets, where every error went, repairs."""

from __future__ import annotations

import pandas as pd

from ._runs import Run, open_run, run_suite

__all__ = [
    "BASE_PASS_COLUMNS",
    "BUCKETS_COLUMNS",
    "FAILURES_COLUMNS",
    "REPAIRS_COLUMNS",
    "base_pass_table",
    "buckets_table",
    "failures_df",
    "repairs_table",
]

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
BASE_PASS_COLUMNS = [
    "task", "n", "correct", "accuracy", "errors", "errors_tool_fired", "errors_no_tool",
]  # fmt: skip
BUCKETS_COLUMNS = [
    "bucket", "side", "label", "criteria", "members", "support", "held_out", "planned", "tasks",
    "first_members",
]  # fmt: skip
REPAIRS_COLUMNS = ["qid", "task", "bucket", "label", "candidate"]


def failures_df(run: Run, *, round_: int = 1) -> pd.DataFrame:
    """The round's train errors: where each went (bucket, support or held-out, planned, repaired).

    Columns: ``round, qid, task, subtask, side (tool_fired | no_tool), bucket ("" when unassigned or
    dropped), label, role (support | held_out | other | unassigned | dropped), planned (bucket got a
    contract), group (work group id), repaired_by (candidate ids with an attributable repair)``.
    """
    store = open_run(run)
    paths = store.layout.round(round_)
    if not paths.buckets.exists():
        return pd.DataFrame(columns=FAILURES_COLUMNS)
    suite = run_suite(store)
    b = store.read_json(paths.buckets)
    splits = {s["bucket_id"]: s for s in store.read_json_or(paths.splits, [])}
    cards = store.read_json_or(paths.contracts, {"cards": []})["cards"]
    planned = {c["bucket_id"] for c in cards}
    groups = store.read_json_or(paths.groups, {"groups": []})["groups"]
    group_of = {c["bucket_id"]: g["id"] for g in groups for c in g["cards"]}
    repaired: dict[str, list[str]] = {}
    for g in store.read_json_or(paths.synthesis, []):
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


def base_pass_table(run: Run, round_: int = 1) -> pd.DataFrame:
    """Per task: train questions, accuracy of the base pass, and the error partition.

    Columns: ``task, n, correct, accuracy, errors, errors_tool_fired, errors_no_tool``
    (plus an ``ALL`` row).
    """
    store = open_run(run)
    df = store.read_parquet(store.layout.round(round_).base_pass)
    rows = []
    for task, g in [*sorted(df.groupby("task")), ("ALL", df)]:
        wrong = g[~g["correct"].astype(bool)]
        rows.append(
            {
                "task": task,
                "n": len(g),
                "correct": int(g["correct"].sum()),
                "accuracy": float(g["correct"].mean()) if len(g) else float("nan"),
                "errors": len(wrong),
                "errors_tool_fired": int(wrong["tool_fired"].sum()),
                "errors_no_tool": int((~wrong["tool_fired"].astype(bool)).sum()),
            }
        )
    return pd.DataFrame(rows, columns=BASE_PASS_COLUMNS)


def buckets_table(run: Run, round_: int = 1, max_members: int = 6) -> pd.DataFrame:
    """The round's failure buckets: side, label, criteria, size, support/held-out split, members.

    Columns: ``bucket, side, label, criteria, members, support, held_out, planned, tasks,
    first_members``.
    """
    store = open_run(run)
    b = store.read_json(store.layout.round(round_).buckets)
    fails = failures_df(store, round_=round_)
    rows = []
    for bk in b["buckets"]:
        mine = fails[fails["bucket"] == bk["id"]]
        rows.append(
            {
                "bucket": bk["id"],
                "side": bk["side"],
                "label": bk["category"]["label"],
                "criteria": bk["category"].get("criteria", ""),
                "members": len(bk["members"]),
                "support": int((mine["role"] == "support").sum()),
                "held_out": int((mine["role"] == "held_out").sum()),
                "planned": bool(mine["planned"].any()) if len(mine) else False,
                "tasks": ", ".join(
                    f"{t} ({n})" for t, n in mine["task"].value_counts().sort_index().items()
                ),
                "first_members": ", ".join(bk["members"][:max_members]),
            }
        )
    return pd.DataFrame(rows, columns=BUCKETS_COLUMNS)


def repairs_table(run: Run, round_: int = 1) -> pd.DataFrame:
    """Attributable repairs found by the prefilter: one row per (held-out error, candidate).

    Columns: ``qid, task, bucket, label, candidate``.
    """
    f = failures_df(run, round_=round_)
    rows = [
        {
            "qid": r.qid,
            "task": r.task,
            "bucket": r.bucket,
            "label": r.label,
            "candidate": cand,
        }
        for r in f.itertuples(index=False)
        for cand in r.repaired_by
    ]
    return pd.DataFrame(rows, columns=REPAIRS_COLUMNS)
