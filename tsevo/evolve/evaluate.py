"""Persistent, guarded evaluation: an agent answers questions with a library, records are stored as they come.

Every evaluation arm is identified by ``(split, library fingerprint)`` and stored as an append-only
record log in the run (``evals/<split>.<fingerprint>.jsonl``), so a rerun never re-spends an evaluation
it already stored and every step that needs the same arm (the base pass, the gate's current arm, the
final gate) reads the same records.

The test split is walled off mechanically: the :class:`Evaluator` used by a round is built with the
test question ids as *forbidden* and raises :class:`TestSplitLeak` if any of them is ever asked for.
Only the report step builds an evaluator that may answer test questions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tsevo.agent import Agent, AnswerRecord

if TYPE_CHECKING:
    from tsevo.data import Question
    from tsevo.library.library import Library
    from tsevo.store import RunStore

    from .gate import ArmOutcome

__all__ = ["Evaluator", "TestSplitLeak", "outcomes", "task_table"]


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
    from .gate import ArmOutcome

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
    from .gate import paired_flips

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
