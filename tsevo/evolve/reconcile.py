"""Scope reconciliation: narrow an accepted stage's tools to where they behaved.

Mechanical code, not a role: it reads per-question validation records only (answers, which tools
ran and replaced, their outputs, correctness), never question content. For each tool of the new
stage:

- a task in which the tool was responsible for more harmed than helped validation questions is
  removed from its scope (a tool scoped to any task gets the tasks where it fired without net
  harm);
- a composite tool (one branch per question kind, :attr:`Scope.kinds` one matcher per branch,
  output keys prefixed ``b1_``, ``b2_``...) loses the kind matcher of each branch whose outputs
  stood behind at least one harmed validation question and no more helped ones, so that kind's
  questions keep their incoming answer. A branch reads a handful of questions of its kind, so a
  tie is not evidence of help (on the development seeds of ``mixed``, 104-107, harmed test
  questions 4.8% -> 4.0% at the same gain).

A tool whose every task, or every kind, would go is left alone (the gate and the prune judge it).
The edited library must pass the same gate again before the chain write; if it fails, the edit is
discarded.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.library.library import Library, Stage
from tsevo.library.tool import Tool

__all__ = ["narrow_branches", "reconcile_scopes"]

_BRANCH = re.compile(r"^b(\d+)_")


def _flip(b: AnswerRecord, r: AnswerRecord) -> int:
    """+1 helped, -1 harmed, 0 otherwise."""
    if b.correct is False and r.correct:
        return 1
    if b.correct and r.correct is False:
        return -1
    return 0


def _branches(r: AnswerRecord, tool_id: str) -> set[int]:
    """Branch numbers whose outputs a composite tool returned on this question."""
    out: set[int] = set()
    for step in r.steps:
        for run in step.runs:
            if run.tool_id == tool_id and run.status == "ok" and run.outputs:
                out |= {int(m.group(1)) for k in run.outputs if (m := _BRANCH.match(str(k)))}
    return out


def reconcile_scopes(
    library: Library,
    base: Mapping[str, AnswerRecord],
    cand: Mapping[str, AnswerRecord],
    *,
    tasks: bool = True,
) -> tuple[Library, list[dict[str, Any]]]:
    """Return the reconciled library (last stage edited) and one edit record per changed tool.

    ``tasks=False`` narrows composite tools' branches only (:func:`narrow_branches`).
    """
    last = library.stages[-1]
    composite = {t.id for t in last.tools if t.kind == "tool" and len(t.scope.kinds) > 1}
    per: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    by_branch: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for qid, r in cand.items():
        b = base.get(qid)
        if b is None or not r.completed or not b.completed:
            continue
        fired = set(r.tools_ok)
        for t in last.tools:
            if t.id in fired:
                per[t.id][r.task][0] += 1
        flip = _flip(b, r)
        for tid in set(r.replaced_by):
            if flip:
                per[tid][r.task][1 if flip > 0 else 2] += 1
            if flip and tid in composite:
                for i in _branches(r, tid):
                    by_branch[tid][i][0 if flip > 0 else 1] += 1
    edits: list[dict[str, Any]] = []
    tools = []
    for t in last.tools:
        edit: dict[str, Any] = {}
        stats = per.get(t.id, {})
        if tasks and t.kind == "tool" and stats:
            t, edit = _narrow_tasks(t, stats)
        if t.id in by_branch:
            t, kinds_edit = _narrow_kinds(t, by_branch[t.id])
            edit.update(kinds_edit)
        tools.append(t)
        if edit:
            edits.append({"tool": t.id, **edit})
    if not edits:
        return library, []
    new_last = Stage(last.round, tuple(tools), last.label, last.notes)
    return replace(library, stages=(*library.stages[:-1], new_last)), edits


def narrow_branches(
    library: Library,
    base: Mapping[str, AnswerRecord],
    cand: Mapping[str, AnswerRecord],
) -> tuple[Library, list[dict[str, Any]]]:
    """Drop the kind matchers of composite branches that harmed on validation (no task edits).

    The one-shot prune applies it to a rejected candidate (:func:`tsevo.evolve.round.prune`):
    ``cand`` holds the candidate's validation records, so the counts are those of the library the
    branches ran in.
    """
    return reconcile_scopes(library, base, cand, tasks=False)


def _narrow_tasks(t: Tool, stats: Mapping[str, list[int]]) -> tuple[Tool, dict[str, Any]]:
    """Drop the tasks where ``t`` harmed more validation questions than it helped."""
    bad = sorted(task for task, (_, h, m) in stats.items() if m > h)
    fired_tasks = sorted(task for task, (f, _, _) in stats.items() if f > 0)
    current = list(t.scope.tasks) or fired_tasks
    keep = [task for task in current if task not in bad]
    if not bad or not keep or keep == list(t.scope.tasks):
        return t, {}
    edit = {
        "removed_tasks": bad,
        "tasks": keep,
        "stats": {k: list(v) for k, v in stats.items()},
    }
    return replace(t, scope=replace(t.scope, tasks=tuple(keep))), edit


def _narrow_kinds(t: Tool, stats: Mapping[int, list[int]]) -> tuple[Tool, dict[str, Any]]:
    """Drop the kind matchers of the branches of ``t`` that harmed more than they helped."""
    kinds = t.scope.kinds
    bad = sorted(i for i, (h, m) in stats.items() if m >= max(h, 1) and 1 <= i <= len(kinds))
    if not bad or len(bad) == len(kinds):
        return t, {}
    keep = tuple(k for i, k in enumerate(kinds, 1) if i not in bad)
    edit = {
        "removed_branches": bad,
        "kinds": len(keep),
        "branch_stats": {f"b{i}": list(v) for i, v in sorted(stats.items())},
    }
    return replace(t, scope=replace(t.scope, kinds=keep)), edit
