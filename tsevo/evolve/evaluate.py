"""Persistent, guarded evaluation: an agent answers questions with libraries, records are stored as they come.

Every evaluation arm is identified by ``(split, library fingerprint)`` and stored as an append-only
record log in the run (the layout's ``eval_log``), so a rerun never re-spends an evaluation it
already stored and every step that needs the same arm (the base pass, the gate's current arm, the
final gate) reads the same records.

The test split is walled off mechanically: the :class:`Evaluator` used by a round is built with the
test question ids as *forbidden* and raises :class:`TestSplitLeak` if any of them is ever asked for.
Only the report step builds an evaluator that may answer test questions.

This module is also the one place that answers a split with several libraries
(:func:`answer_libraries`) and turns two arms into a paired table (:func:`paired_frame`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from tsevo.agent import Agent, AnswerRecord
from tsevo.data import Question, Suite
from tsevo.library.library import Library
from tsevo.roles import Answerer, Reviewer
from tsevo.store import RunStore

from .config import ProtocolConfig
from .gate import ArmOutcome, GateDecision, decide_gate, paired_counts, paired_flips

__all__ = [
    "Evaluator",
    "TestSplitLeak",
    "answer_libraries",
    "eval_library",
    "gate_between",
    "outcomes",
    "paired_frame",
    "records_frame",
    "task_table",
]


class TestSplitLeak(RuntimeError):
    """A decision path asked for a test-split question."""


class Evaluator:
    """Answers questions with a library through one agent, persisting records per arm.

    Args:
        agent: The agent (its library is replaced per call; roles, executor and caches are shared).
        store: Run store for the record logs (``None``: in-memory only).
        forbidden: Question ids this evaluator must never answer (the test split, for decision paths).
        chunk: Records are answered and flushed in chunks of this size.
        progress: Optional callback ``(arm, done, total)``.
    """

    def __init__(
        self,
        agent: Agent,
        store: RunStore | None = None,
        *,
        forbidden: Iterable[str] = (),
        chunk: int = 256,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.agent = agent
        self.store = store
        self.forbidden = frozenset(forbidden)
        self.chunk = chunk
        self.progress = progress
        self._mem: dict[str, dict[str, AnswerRecord]] = {}
        self.answered = 0

    def arm_name(self, split: str, library: Library) -> str:
        """Stable name of an arm."""
        return f"{split}.{library.fingerprint()}"

    def answer(
        self, split: str, library: Library, questions: Sequence[Question]
    ) -> dict[str, AnswerRecord]:
        """Records for ``questions`` answered with ``library`` (stored ones are reused).

        Raises:
            TestSplitLeak: when a forbidden (test) question is requested.
        """
        leaked = [q.id for q in questions if q.id in self.forbidden]
        if leaked:
            raise TestSplitLeak(
                f"a decision path asked for {len(leaked)} test question(s), e.g. {leaked[:3]}"
            )
        name = self.arm_name(split, library)
        have = self._mem.setdefault(name, {})
        if self.store is not None and not have:
            for qid, d in self.store.records(name).load().items():
                have[qid] = AnswerRecord.from_dict(d)
        todo = [q for q in questions if q.id not in have]
        if todo:
            agent = self.agent.with_library(library)
            log = self.store.records(name) if self.store is not None else None
            done = len(questions) - len(todo)
            for i in range(0, len(todo), self.chunk):
                part = todo[i : i + self.chunk]
                recs = agent.answer_many(part)
                self.answered += len(recs)
                if log is not None:
                    log.append(r.to_dict() for r in recs)
                for r in recs:
                    have[r.qid] = r
                done += len(part)
                if self.progress is not None:
                    self.progress(name, done, len(questions))
        return {q.id: have[q.id] for q in questions}


def outcomes(records: Mapping[str, AnswerRecord]) -> dict[str, ArmOutcome]:
    """Gate inputs from answer records."""
    return {
        qid: ArmOutcome(
            qid=qid,
            completed=r.completed,
            correct=bool(r.correct) if r.completed else False,
            answer=r.final_answer,
            tool_errors=r.tool_errors,
        )
        for qid, r in records.items()
    }


def task_table(
    before: Mapping[str, AnswerRecord],
    after: Mapping[str, AnswerRecord],
    labels: tuple[str, str] = ("before", "after"),
) -> list[dict[str, Any]]:
    """Per task, then ``ALL``: n, both arms' accuracy, the paired delta, helped and harmed.

    Args:
        before: The first arm's records by question id.
        after: The second arm's records on the same question ids.
        labels: Keys of the two accuracy columns.
    """
    flips = paired_flips(outcomes(before), outcomes(after))
    rows = []
    for t in [*sorted({r.task for r in before.values()}), "ALL"]:
        ids = [q for q, r in before.items() if t == "ALL" or r.task == t]
        n = len(ids)
        b = sum(bool(before[q].correct) for q in ids)
        a = sum(bool(after[q].correct) for q in ids)
        rows.append(
            {
                "task": t,
                "n": n,
                labels[0]: round(b / n, 6) if n else None,
                labels[1]: round(a / n, 6) if n else None,
                "delta": round((a - b) / n, 6) if n else None,
                "helped": sum(flips.get(q) == "helped" for q in ids),
                "harmed": sum(flips.get(q) == "harmed" for q in ids),
            }
        )
    return rows


def gate_between(
    base: Mapping[str, AnswerRecord], cand: Mapping[str, AnswerRecord], cfg: ProtocolConfig
) -> GateDecision:
    """The gate's decision on two paired arms under the protocol config."""
    return decide_gate(paired_counts(outcomes(base), outcomes(cand)), config=cfg, rounds=cfg.rounds)


def records_frame(records: Mapping[str, AnswerRecord]) -> pd.DataFrame:
    """A parquet-ready frame of answer records by id (no timings: tables are compared byte for byte)."""
    return pd.DataFrame([records[k].to_row(timings=False) for k in sorted(records)])


def paired_frame(
    before: Mapping[str, AnswerRecord],
    after: Mapping[str, AnswerRecord],
    *,
    labels: tuple[str, str] = ("base", "cand"),
    order: Sequence[str] | None = None,
    tool_errors: bool = True,
) -> pd.DataFrame:
    """One row per question of two paired arms: both answers, correctness, flip class, the trace.

    Args:
        before: The first arm's records by question id.
        after: The second arm's records (same ids).
        labels: Column prefixes of the two arms (``base``/``cand`` for the gate's
            ``val_paired.parquet``, ``before``/``after`` for the report-only ``test.parquet``).
        order: Row order (default: sorted ids).
        tool_errors: Include the second arm's tool-error count.
    """
    flips = paired_flips(outcomes(before), outcomes(after))
    a, b = labels
    rows = []
    for qid in order if order is not None else sorted(before):
        x, y = before[qid], after[qid]
        row = {
            "qid": qid,
            "task": x.task,
            f"{a}_answer": x.final_answer,
            f"{b}_answer": y.final_answer,
            f"{a}_correct": x.correct,
            f"{b}_correct": y.correct,
            "flip": flips.get(qid),
            "tools_ok": list(y.tools_ok),
            "replaced_by": list(y.replaced_by),
        }
        if tool_errors:
            row["tool_errors"] = y.tool_errors
        rows.append(row)
    return pd.DataFrame(rows)


def answer_libraries(
    questions: Sequence[Question],
    libraries: Mapping[str, Library],
    *,
    answerer: Answerer | None = None,
    reviewer: Reviewer | None = None,
    sandbox: Any = None,
    max_tools: int = 3,
    workers: int = 1,
    mode: str = "residual",
    scoped: bool = True,
) -> dict[str, dict[str, AnswerRecord]]:
    """Answer the same questions with several libraries on one agent (roles, sandbox and caches shared).

    Args:
        questions: The questions (any split: this is reporting, not a decision path).
        libraries: Arm name -> library, e.g. ``{"bare": Library(), "evolved": lib}``.
        answerer: Base answerer (default: the builtin one).
        reviewer: Reviewer (default: the builtin one); a reviewer that reads library text is bound
            to each library in turn.
        sandbox: Tool executor (default: one the agent starts and this call closes).
        max_tools: Tools per question over the chain.
        workers: Questions answered concurrently.
        mode: ``residual`` (review; the protocol) or ``overwrite`` (a tool's reading replaces the
            answer unreviewed: the paper's Table 5 arm of the same library).
        scoped: ``False`` makes every tool a candidate on every question (``w/o scope``).

    Returns:
        Arm name -> records by question id.
    """
    agent = Agent(
        Library(),
        answerer,
        reviewer,
        executor=sandbox,
        max_tools=max_tools,
        workers=workers,
        mode=mode,
        scoped=scoped,
    )
    ev = Evaluator(agent)
    try:
        return {name: ev.answer("report", lib, list(questions)) for name, lib in libraries.items()}
    finally:
        if sandbox is None:
            agent.close()


def eval_library(
    suite: Suite,
    library: Library,
    *,
    answerer: Answerer | None = None,
    reviewer: Reviewer | None = None,
    split: str | None = "test",
    sandbox: Any = None,
    max_tools: int = 3,
    z: float = 1.96,
    mode: str = "residual",
    scoped: bool = True,
) -> dict[str, Any]:
    """Answer a split with the bare agent and with ``library`` (same roles); report paired deltas.

    The transfer study's measurement: a library evolved on one backend, installed into an agent on
    any backend (builtin or LLM answerer and reviewer).

    Args:
        suite: The suite.
        library: The library to evaluate (evolved on any backend).
        answerer: Base answerer (builtin by default).
        reviewer: Reviewer (builtin by default; an LLM reviewer is bound to the library's prompt
            patches).
        split: ``train`` | ``val`` | ``test``, or None for every question.
        sandbox: Tool executor (a new sandbox by default).
        max_tools: Tools per question over the chain.
        z: z of the paired lower bound.
        mode: How the library is applied: ``residual`` (reviewed) or ``overwrite``.
        scoped: Whether scopes decide where tools run (``False``: ``w/o scope``).

    Returns:
        ``{"split", "n", "library", "tasks": [per task and ALL: n, bare, with_library, delta,
        helped, harmed], "counts": paired counts, "delta", "delta_lb", "tools_fired",
        "replaced"}``.
    """
    if split is not None and not suite.splits:
        raise ValueError(f"the suite has no splits; use split=None instead of {split!r}")
    qs = list(getattr(suite, split)) if split is not None else list(suite)
    arms = answer_libraries(
        qs,
        {"bare": Library(), "with_library": library},
        answerer=answerer,
        reviewer=reviewer,
        sandbox=sandbox,
        max_tools=max_tools,
        mode=mode,
        scoped=scoped,
    )
    before, after = arms["bare"], arms["with_library"]
    counts = paired_counts(outcomes(before), outcomes(after))
    return {
        "split": split or "all",
        "n": len(qs),
        "library": library.fingerprint(),
        "tasks": task_table(before, after, ("bare", "with_library")),
        "counts": counts.to_dict(),
        "delta": round(counts.delta, 6) if counts.n else None,
        "delta_lb": round(counts.delta_lb(z), 6) if counts.n else None,
        "tools_fired": sum(r.tool_fired for r in after.values()),
        "replaced": sum(bool(r.replaced_by) for r in after.values()),
    }
