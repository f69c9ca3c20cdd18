"""Residual-chain answering against the real sandbox."""

import numpy as np
import pytest

from tsevo.agent import Agent, AnswerRecord
from tsevo.data import Question
from tsevo.library.library import Stage, library_from_tools
from tsevo.library.sandbox import Sandbox, SandboxLimits
from tsevo.library.tool import Guidance, Matcher, ReadingRule, Scope, Tool
from tsevo.roles.protocols import BaseAnswer

SLOPE = 'def slope():\n    y = ctx.primary()\n    return {"d": float(y[-1] - y[0])}\n'
BOOM = "def boom():\n    return {'x': 1.0 / 0.0}\n"
ABSTAIN = "def nothing():\n    return None\n"


def _tool(tid, src, key="d", bins=(0.0,), labels=("downward", "upward"), **kw):
    return Tool(
        id=tid,
        source=src,
        scope=kw.pop("scope", Scope(matcher=Matcher(require=("trend",)))),
        guidance=Guidance(
            "sign of the change", ReadingRule("label", key, bins, labels, confidence=0.9)
        ),
        outputs=(key,),
        **kw,
    )


def _q(i, up=True, text="Is the trend upward or downward?"):
    y = np.linspace(0, 1, 40) * (1 if up else -1) + 0.01 * np.sin(np.arange(40) + i)
    return Question(
        id=f"q{i}",
        source="t",
        task="trend",
        question=text,
        options=("upward", "downward"),
        series={"y": y},
        primary=("y",),
        gold=0 if up else 1,
    )


class AlwaysSecond:
    name = "always-second"

    def answer(self, q):
        return BaseAnswer(1, "picks the second option")


class Exploding:
    name = "exploding"

    def review(self, q, incoming, evidence):
        raise RuntimeError("reviewer down")


class CountingExecutor:
    def __init__(self, sb):
        self.sb = sb
        self.calls = 0

    def run(self, source, inputs):
        self.calls += 1
        return self.sb.run(source, inputs)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxLimits(cpu_s_per_item=1.0, wall_s_per_item=2.0)) as sb:
        yield sb


def test_replace_only_when_a_tool_ran_and_review_replaces(sandbox):
    lib = library_from_tools("t", [_tool("slope", SLOPE)])
    agent = Agent(lib, AlwaysSecond(), executor=sandbox)
    up, down = agent.answer_many([_q(1, up=True), _q(2, up=False)])
    assert up.base_answer == 1 and up.final_answer == 0 and up.correct
    assert up.steps[0].decision == "replace" and up.replaced_by == ("slope",)
    assert down.final_answer == 1 and down.steps[0].decision == "keep" and down.replaced_by == ()
    out_of_scope = agent.answer(_q(3, text="Is the level stable?"))
    assert out_of_scope.steps == () and out_of_scope.final_answer == out_of_scope.base_answer


def test_errors_abstentions_and_reviewer_failures_keep_the_incoming_answer(sandbox):
    lib = library_from_tools("t", [_tool("boom", BOOM, key="x"), _tool("none", ABSTAIN)])
    rec = Agent(lib, AlwaysSecond(), executor=sandbox).answer(_q(4))
    assert rec.final_answer == 1 and rec.steps[0].decision == "no_tool"
    assert rec.tool_errors == 1 and not rec.tool_fired and rec.completed
    lib2 = library_from_tools("t", [_tool("slope", SLOPE)])
    rec2 = Agent(lib2, AlwaysSecond(), Exploding(), executor=sandbox).answer(_q(5))
    assert rec2.final_answer == 1 and rec2.steps[0].decision == "no_decision"
    assert "reviewer failed" in rec2.steps[0].reason


def test_at_most_three_tools_over_the_chain_and_stages_in_order(sandbox):
    tools = [_tool(f"t{i}", SLOPE.replace("slope", f"s{i}")) for i in range(3)]
    lib = library_from_tools("t", tools).append_stage(
        Stage(1, (_tool("late", SLOPE.replace("slope", "late")),))
    )
    rec = Agent(lib, AlwaysSecond(), executor=sandbox).answer(_q(6))
    assert len(rec.tools_run) == 3 and "late" not in rec.tools_run
    lib4 = library_from_tools("t", tools[:2]).append_stage(
        Stage(1, (_tool("late", SLOPE.replace("slope", "late")),))
    )
    rec4 = Agent(lib4, AlwaysSecond(), executor=sandbox).answer(_q(6))
    assert [s.stage for s in rec4.steps] == [0, 1]
    assert rec4.steps[1].answer_in == rec4.steps[0].answer_out


def test_evidence_cache_and_parallel_answers_agree(sandbox):
    ex = CountingExecutor(sandbox)
    lib = library_from_tools("t", [_tool("slope", SLOPE)])
    qs = [_q(i, up=i % 2 == 0) for i in range(12)]
    agent = Agent(lib, AlwaysSecond(), executor=ex)
    first = agent.answer_many(qs)
    assert ex.calls == 1  # one sandbox batch for one tool over all questions
    again = agent.answer_many(qs)
    assert ex.calls == 1 and all(r.steps[0].runs[0].cached for r in again)
    par = Agent(lib, AlwaysSecond(), executor=sandbox, workers=3).answer_many(qs)
    assert [r.final_answer for r in par] == [r.final_answer for r in first]


def test_answer_record_roundtrips():
    lib = library_from_tools("t", [_tool("slope", SLOPE)])
    with Sandbox() as sb:
        rec = Agent(lib, AlwaysSecond(), executor=sb).answer(_q(7))
    assert AnswerRecord.from_dict(rec.to_dict()) == rec
    row = rec.to_row(timings=False)
    assert "elapsed_ms" not in row and "elapsed_ms" not in row["steps_json"]
    back = AnswerRecord.from_row(row)
    assert back.final_answer == rec.final_answer and back.replaced_by == rec.replaced_by
