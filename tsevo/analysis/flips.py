"""Per question: the answer before and after a round, its flip class, the tools and the review."""

from __future__ import annotations

import json

import pandas as pd

from ._runs import Run, flip_of, load_records, open_run, rounds_in, run_suite

__all__ = ["CHANGED_FLIPS_COLUMNS", "FLIPS_COLUMNS", "FLIP_CLASSES", "changed_flips", "flips_df"]

FLIP_CLASSES = ("helped", "harmed", "unchanged-right", "unchanged-wrong")
"""The flip classes of a paired question, in display order."""

FLIPS_COLUMNS = [
    "round", "split", "qid", "task", "subtask", "question", "options", "gold",
    "base_answer", "final_answer", "base_correct", "final_correct", "flip",
    "tools_run", "tools_ok", "replaced_by", "decision", "reason", "evidence_json",
]  # fmt: skip
CHANGED_FLIPS_COLUMNS = [
    "qid", "task", "flip", "gold", "base_answer", "final_answer", "replaced_by", "reason",
]  # fmt: skip


def flips_df(run: Run, *, split: str = "test", round_: int | None = None) -> pd.DataFrame:
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
    store = open_run(run)
    rounds = rounds_in(store)
    if not rounds:
        return pd.DataFrame(columns=FLIPS_COLUMNS)
    r = round_ if round_ is not None else rounds[-1]
    paths = store.layout.round(r)
    if split == "test":
        arms = store.read_json(paths.test)["arms"]
        before_arm, after_arm = arms["before"], arms["after"]
    elif split == "val":
        arms = store.read_json(paths.summary).get("arms", {})
        if "val_base" not in arms:
            return pd.DataFrame(columns=FLIPS_COLUMNS)
        before_arm = arms["val_base"]
        after_arm = arms.get("val_final", arms["val_candidate"])
    else:
        raise ValueError(f"split must be 'test' or 'val', not {split!r}")
    before = load_records(store, before_arm)
    after = load_records(store, after_arm)
    suite = run_suite(store)
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
                "flip": flip_of(b, a),
                "tools_run": list(a.tools_run),
                "tools_ok": list(a.tools_ok),
                "replaced_by": list(a.replaced_by),
                "decision": last.decision if last else "",
                "reason": last.reason if last else "",
                "evidence_json": json.dumps(evidence, sort_keys=True),
            }
        )
    return pd.DataFrame(rows, columns=FLIPS_COLUMNS)


def changed_flips(run: Run, round_: int = 1, split: str = "test") -> pd.DataFrame:
    """Rows of :func:`flips_df` whose correctness changed (helped or harmed).

    Columns: ``qid, task, flip, gold, base_answer, final_answer, replaced_by, reason``.
    """
    f = flips_df(run, split=split, round_=round_)
    changed = f[f["flip"].isin(["helped", "harmed"])]
    return changed[CHANGED_FLIPS_COLUMNS].reset_index(drop=True)
