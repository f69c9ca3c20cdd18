"""Scope reconciliation on validation records: tasks where a tool harmed, and composite branches."""

from __future__ import annotations

from tsevo.agent import AnswerRecord, StageStep, ToolRun
from tsevo.evolve.reconcile import narrow_branches, reconcile_scopes
from tsevo.library import Library, Matcher, Scope, Stage, Tool

KINDS = tuple(Matcher(require=(w,)) for w in ("trend", "spike", "cycle"))
SRC = "def tool():\n    return {'v': 1.0}\n"


def _lib(*tools: Tool) -> Library:
    return Library(stages=(Stage(0, (), "root:empty"), Stage(1, tools, "r1")))


def _pair(
    qid: str, tool: str, flip: str, outputs: dict[str, float], task: str = "t"
) -> tuple[AnswerRecord, AnswerRecord]:
    """(base, candidate) records of one validation question a tool's outputs answered."""
    base_ok = flip in ("harmed", "right")
    cand_ok = flip in ("helped", "right")
    run = ToolRun(tool, "ok", outputs)
    step = StageStep(1, (tool,), (run,), "replace", "", 0, 1 if cand_ok else 0, (tool,))
    base = AnswerRecord(qid, qid, task, 1 if base_ok else 0, "", (), 1 if base_ok else 0, base_ok)
    cand = AnswerRecord(qid, qid, task, 1 if base_ok else 0, "", (step,), step.answer_out, cand_ok)
    return base, cand


def _records(*rows: tuple[str, str, dict[str, float]]) -> tuple[dict, dict]:
    base, cand = {}, {}
    for i, (tool, flip, outputs) in enumerate(rows):
        b, c = _pair(f"q{i}", tool, flip, outputs)
        base[b.qid], cand[c.qid] = b, c
    return base, cand


def test_a_composite_tool_loses_the_kinds_of_branches_that_harmed_on_validation() -> None:
    comp = Tool("r1.g1.a1", source=SRC, scope=Scope(tasks=("t",), kinds=KINDS))
    base, cand = _records(
        ("r1.g1.a1", "helped", {"b1_slope": 1.0}),
        ("r1.g1.a1", "helped", {"b1_slope": 2.0}),
        ("r1.g1.a1", "harmed", {"b1_slope": 0.5}),  # b1: 2 helped, 1 harmed -> kept
        ("r1.g1.a1", "harmed", {"b2_z": 4.0}),  # b2: harmed only -> dropped
        ("r1.g1.a1", "helped", {"b3_period": 7.0}),
        ("r1.g1.a1", "harmed", {"b3_period": 9.0}),  # b3: a tie -> dropped
    )
    lib, edits = reconcile_scopes(_lib(comp), base, cand)
    (tool,) = lib.stages[-1].tools
    assert tool.scope.kinds == (KINDS[0],) and tool.scope.tasks == ("t",)
    assert edits == [
        {
            "tool": "r1.g1.a1",
            "removed_branches": [2, 3],
            "kinds": 1,
            "branch_stats": {"b1": [2, 1], "b2": [0, 1], "b3": [1, 1]},
        }
    ]
    assert lib.stages[0] == _lib(comp).stages[0]  # earlier stages are never edited


def test_a_composite_tool_whose_every_branch_harmed_is_left_to_the_gate() -> None:
    comp = Tool("r1.g1.a1", source=SRC, scope=Scope(tasks=("t",), kinds=KINDS[:2]))
    base, cand = _records(
        ("r1.g1.a1", "harmed", {"b1_slope": 1.0}),
        ("r1.g1.a1", "harmed", {"b2_z": 1.0}),
        ("r1.g1.a1", "helped", {"b2_z": 2.0}),
    )
    lib, edits = reconcile_scopes(_lib(comp), base, cand)
    assert edits == [] and lib.stages[-1].tools == (comp,)  # no kind left alone would match all


def test_branches_that_only_helped_or_never_flipped_stay_and_single_tools_keep_their_kinds() -> (
    None
):
    comp = Tool("r1.g1.a1", source=SRC, scope=Scope(tasks=("t",), kinds=KINDS))
    single = Tool("r1.g2.a1", source=SRC, scope=Scope(tasks=("t",)))
    base, cand = _records(
        ("r1.g1.a1", "helped", {"b1_slope": 1.0}),
        ("r1.g1.a1", "right", {"b2_z": 1.0}),  # fired, no flip
        ("r1.g2.a1", "helped", {"b1_x": 1.0}),  # a single tool's key that looks like a branch
    )
    lib, edits = reconcile_scopes(_lib(comp, single), base, cand)
    assert edits == [] and lib.stages[-1].tools == (comp, single)


def test_a_task_where_a_tool_harmed_more_than_it_helped_leaves_its_scope() -> None:
    tool = Tool("r1.g1.a1", source=SRC, scope=Scope(tasks=("a", "b")))
    base, cand = {}, {}
    for i, (task, flip) in enumerate([("a", "helped"), ("b", "harmed"), ("b", "harmed")]):
        b, c = _pair(f"q{i}", "r1.g1.a1", flip, {"v": 1.0}, task=task)
        base[b.qid], cand[c.qid] = b, c
    lib, edits = reconcile_scopes(_lib(tool), base, cand)
    assert lib.stages[-1].tools[0].scope.tasks == ("a",)
    assert edits == [
        {
            "tool": "r1.g1.a1",
            "removed_tasks": ["b"],
            "tasks": ["a"],
            "stats": {"a": [1, 1, 0], "b": [2, 0, 2]},
        }
    ]


def test_narrow_branches_leaves_tasks_to_the_accepted_librarys_reconciliation() -> None:
    comp = Tool("r1.g1.a1", source=SRC, scope=Scope(tasks=("a", "b"), kinds=KINDS))
    base, cand = {}, {}
    rows = [("a", "helped", {"b1_x": 1.0}), ("a", "helped", {"b1_x": 3.0})]
    rows += [("b", "harmed", {"b2_z": 1.0}), ("b", "harmed", {"b1_x": 2.0})]
    for i, (task, flip, outputs) in enumerate(rows):
        b, c = _pair(f"q{i}", "r1.g1.a1", flip, outputs, task=task)
        base[b.qid], cand[c.qid] = b, c
    lib, edits = narrow_branches(_lib(comp), base, cand)
    (tool,) = lib.stages[-1].tools
    assert tool.scope.tasks == ("a", "b") and tool.scope.kinds == (KINDS[0], KINDS[2])
    assert edits == [
        {
            "tool": "r1.g1.a1",
            "removed_branches": [2],
            "kinds": 2,
            "branch_stats": {"b1": [2, 1], "b2": [0, 1]},
        }
    ]
    full, _ = reconcile_scopes(_lib(comp), base, cand)
    assert full.stages[-1].tools[0].scope.tasks == ("a",)  # b: 0 helped, 2 harmed
