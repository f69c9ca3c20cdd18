"""The answer record: the trace of answering one question with one library.

:class:`AnswerRecord` (with its :class:`StageStep` and :class:`ToolRun` entries) is what every
step downstream reads: the gate, the prune, the failure clustering, the analysis frames and the
widgets. It round-trips through JSON (the run store's record logs) and flat parquet rows.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "AnswerRecord",
    "StageStep",
    "ToolRun",
    "accuracy",
    "accuracy_by_task",
    "records_by_id",
]


@dataclass(frozen=True)
class ToolRun:
    """One tool invocation on one question.

    Attributes:
        tool_id: The tool.
        status: ``ok`` | ``abstain`` | ``error``.
        outputs: Outputs when ``ok``.
        error: Error text when ``error``.
        error_kind: Sandbox error class (``timeout``, ``contract``, ...).
        elapsed_ms: Execution time (0 when served from the cache).
        cached: True when served from the evidence cache.
    """

    tool_id: str
    status: str
    outputs: Mapping[str, Any] | None = None
    error: str = ""
    error_kind: str = ""
    elapsed_ms: float = 0.0
    cached: bool = False


@dataclass(frozen=True)
class StageStep:
    """What one stage did to one question.

    Attributes:
        stage: Stage index (0 = root).
        shortlisted: Ids of tools whose scope matched.
        runs: Tool runs.
        decision: ``replace`` | ``keep`` | ``no_decision`` | ``no_tool`` (nothing ran ok).
        reason: Review reason.
        answer_in: Incoming answer.
        answer_out: Outgoing answer.
        responsible: Tools whose evidence drove a replace/keep decision, plus the artifacts that
            amended them (usage guidance, scope overrides).
    """

    stage: int
    shortlisted: tuple[str, ...]
    runs: tuple[ToolRun, ...]
    decision: str
    reason: str
    answer_in: int
    answer_out: int
    responsible: tuple[str, ...] = ()


@dataclass(frozen=True)
class AnswerRecord:
    """The trace of answering one question with one library.

    Attributes:
        qid: Question id.
        fingerprint: Question fingerprint.
        task: Question task.
        base_answer: The base answerer's option.
        base_reason: Its reason.
        steps: One :class:`StageStep` per stage that shortlisted a tool.
        final_answer: The answer after the chain (``None`` if the question did not complete).
        correct: Correctness when gold is known.
        completed: True when a final answer was produced.
        error: Why it did not complete.
        elapsed_ms: Wall time spent on this question (excluding cached evidence).
        base_detail: What a baseline answerer did (samples and votes, the reflection pass, the
            in-context examples' ids); ``None`` for the protocol's answerer, and then absent from
            :meth:`to_dict` and :meth:`to_row` (their output is unchanged).
    """

    qid: str
    fingerprint: str
    task: str
    base_answer: int | None
    base_reason: str
    steps: tuple[StageStep, ...]
    final_answer: int | None
    correct: bool | None
    completed: bool = True
    error: str = ""
    elapsed_ms: float = 0.0
    base_detail: Mapping[str, Any] | None = None

    @property
    def tools_run(self) -> tuple[str, ...]:
        """Ids of tools that ran (any status)."""
        return tuple(r.tool_id for s in self.steps for r in s.runs)

    @property
    def tools_ok(self) -> tuple[str, ...]:
        """Ids of tools that ran and returned evidence."""
        return tuple(r.tool_id for s in self.steps for r in s.runs if r.status == "ok")

    @property
    def tool_errors(self) -> int:
        """Number of tool runs that errored."""
        return sum(r.status == "error" for s in self.steps for r in s.runs)

    @property
    def tool_fired(self) -> bool:
        """True when any tool returned evidence for this question (the failure partition key)."""
        return bool(self.tools_ok)

    @property
    def replaced_by(self) -> tuple[str, ...]:
        """Tools responsible for replacements of the incoming answer."""
        return tuple(t for s in self.steps if s.decision == "replace" for t in s.responsible)

    @property
    def changed(self) -> bool:
        """True when the chain changed the base answer."""
        return self.final_answer != self.base_answer

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        d = asdict(self)
        for s in d["steps"]:
            for r in s["runs"]:
                r["outputs"] = dict(r["outputs"]) if r["outputs"] is not None else None
        if d["base_detail"] is None:
            del d["base_detail"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AnswerRecord:
        """Inverse of :meth:`to_dict`."""
        steps = tuple(
            StageStep(
                stage=s["stage"],
                shortlisted=tuple(s["shortlisted"]),
                runs=tuple(ToolRun(**r) for r in s["runs"]),
                decision=s["decision"],
                reason=s["reason"],
                answer_in=s["answer_in"],
                answer_out=s["answer_out"],
                responsible=tuple(s.get("responsible", ())),
            )
            for s in d["steps"]
        )
        kw = {k: d[k] for k in d if k != "steps"}
        return cls(steps=steps, **kw)

    def to_row(self, *, timings: bool = True) -> dict[str, Any]:
        """A flat row for parquet tables (steps serialized as JSON).

        Args:
            timings: Include wall-clock timings. Tables that are compared byte for byte across
                reruns leave them out (timings live beside the artifacts, not inside them).
        """
        steps = self.to_dict()["steps"]
        if not timings:
            for s in steps:
                for r in s["runs"]:
                    r.pop("elapsed_ms", None)
                    r.pop("cached", None)
        row: dict[str, Any] = {
            "qid": self.qid,
            "fingerprint": self.fingerprint,
            "task": self.task,
            "base_answer": self.base_answer,
            "final_answer": self.final_answer,
            "correct": self.correct,
            "completed": self.completed,
            "error": self.error,
            "tool_fired": self.tool_fired,
            "tools_run": list(self.tools_run),
            "tools_ok": list(self.tools_ok),
            "tool_errors": self.tool_errors,
            "replaced_by": list(self.replaced_by),
            "base_reason": self.base_reason,
            "steps_json": json.dumps(steps, sort_keys=True),
        }
        if timings:
            row["elapsed_ms"] = self.elapsed_ms
        if self.base_detail is not None:
            row["base_detail_json"] = json.dumps(self.base_detail, sort_keys=True)
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AnswerRecord:
        """Inverse of :meth:`to_row`."""
        d = {
            "qid": row["qid"],
            "fingerprint": row["fingerprint"],
            "task": row["task"],
            "base_answer": _opt_int(row["base_answer"]),
            "base_reason": row.get("base_reason", ""),
            "steps": [
                {**st, "runs": [{"elapsed_ms": 0.0, "cached": False, **r} for r in st["runs"]]}
                for st in json.loads(row["steps_json"])
            ],
            "final_answer": _opt_int(row["final_answer"]),
            "correct": None if _missing(row["correct"]) else bool(row["correct"]),
            "completed": bool(row["completed"]),
            "error": row.get("error") or "",
            "elapsed_ms": float(row.get("elapsed_ms") or 0.0),
        }
        detail = row.get("base_detail_json")
        if isinstance(detail, str) and detail:
            d["base_detail"] = json.loads(detail)
        return cls.from_dict(d)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _opt_int(v: Any) -> int | None:
    return None if _missing(v) else int(v)


def records_by_id(records: Iterable[AnswerRecord]) -> dict[str, AnswerRecord]:
    """Index records by question id."""
    return {r.qid: r for r in records}


def accuracy(records: Iterable[AnswerRecord]) -> float:
    """Fraction correct among completed, labeled records."""
    rs = [r for r in records if r.completed and r.correct is not None]
    return sum(bool(r.correct) for r in rs) / len(rs) if rs else float("nan")


def accuracy_by_task(records: Iterable[AnswerRecord]) -> dict[str, float]:
    """Accuracy per task."""
    by: dict[str, list[AnswerRecord]] = defaultdict(list)
    for r in records:
        by[r.task].append(r)
    return {t: accuracy(v) for t, v in sorted(by.items())}
