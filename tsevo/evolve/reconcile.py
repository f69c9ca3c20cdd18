"""Scope reconciliation: narrow an accepted stage's tools to the tasks where they behaved.

Mechanical code, not a role: it reads per-question validation records only (answers, which tools
ran and replaced, correctness), never question content. For each tool of the new stage, a task in
which the tool was responsible for more harmed than helped validation questions is removed from its
scope (a tool scoped to any task gets the tasks where it fired without net harm). A tool whose every
task would go is left alone (the gate and the prune judge it). The edited library must pass the same
gate again before the chain write; if it fails, the edit is discarded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.library.library import Library, Stage

__all__ = ["reconcile_scopes"]


def reconcile_scopes(
    library: Library,
    base: Mapping[str, AnswerRecord],
    cand: Mapping[str, AnswerRecord],
) -> tuple[Library, list[dict[str, Any]]]:
    """Return the reconciled library (last stage edited) and one edit record per changed tool."""
    last = library.stages[-1]
    per: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for qid, r in cand.items():
        b = base.get(qid)
        if b is None or not r.completed or not b.completed:
            continue
        fired = set(r.tools_ok)
        for t in last.tools:
            if t.id in fired:
                per[t.id][r.task][0] += 1
        for tid in set(r.replaced_by):
            if b.correct is False and r.correct:
                per[tid][r.task][1] += 1
            elif b.correct and r.correct is False:
                per[tid][r.task][2] += 1
    edits: list[dict[str, Any]] = []
    tools = []
    for t in last.tools:
        stats = per.get(t.id, {})
        if t.kind != "tool" or not stats:
            tools.append(t)
            continue
        bad = sorted(task for task, (_, h, m) in stats.items() if m > h)
        fired_tasks = sorted(task for task, (f, _, _) in stats.items() if f > 0)
        current = list(t.scope.tasks) or fired_tasks
        keep = [task for task in current if task not in bad]
        if not bad or not keep or keep == list(t.scope.tasks):
            tools.append(t)
            continue
        tools.append(replace(t, scope=replace(t.scope, tasks=tuple(keep))))
        edits.append(
            {
                "tool": t.id,
                "removed_tasks": bad,
                "tasks": keep,
                "stats": {k: list(v) for k, v in stats.items()},
            }
        )
    if not edits:
        return library, []
    new_last = Stage(last.round, tuple(tools), last.label, last.notes)
    return replace(library, stages=(*library.stages[:-1], new_last)), edits
