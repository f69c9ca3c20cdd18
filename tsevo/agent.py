"""Residual-chain answering: the base agent answers, then each stage may review with tool evidence.

For one question ``x`` and library ``L = (L_0, T_1, ..., T_r)``:

1. the base answerer gives the incoming answer;
2. for each stage in order, the tools whose scope matches ``x`` are shortlisted (at most three over
   the whole chain), run in the sandbox, and the reviewer reviews the incoming answer with their
   evidence;
3. the incoming answer is replaced only when a stage tool actually ran (status ``ok``) and the
   review explicitly decides to replace. Errors, no invocation or no decision keep it.

The :class:`AnswerRecord` is the trace everything downstream reads. :meth:`Agent.answer_many`
batches the work: tool evidence depends only on the question, so each tool runs once over all the
questions that shortlist it (one sandbox batch), and results are cached by
``(tool source hash, question fingerprint)``.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, cast

from tsevo.data import Question, QuestionView, opaque_id
from tsevo.library.context import ToolInput
from tsevo.library.library import Library, ScopedTool
from tsevo.library.sandbox import Sandbox
from tsevo.roles.builtin import GlobalSummaryAnswerer, RuleReviewer
from tsevo.roles.protocols import Answerer, BaseAnswer, Evidence, Reviewer

__all__ = [
    "Agent",
    "AnswerRecord",
    "EvidenceCache",
    "StageStep",
    "ToolExecutor",
    "ToolRun",
    "accuracy",
    "accuracy_by_task",
    "records_by_id",
]


class _ResultLike(Protocol):
    qid: str
    status: str
    outputs: Mapping[str, Any] | None
    error: str
    error_kind: str
    elapsed_ms: float


class ToolExecutor(Protocol):
    """Runs one tool's source over a batch of inputs (the sandbox implements this)."""

    def run(self, source: str, inputs: Sequence[ToolInput]) -> Sequence[Any]:
        """Return one result per input, in order (objects shaped like sandbox ``ToolResult``)."""
        ...


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
        return cls.from_dict(d)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _opt_int(v: Any) -> int | None:
    return None if _missing(v) else int(v)


@dataclass
class EvidenceCache:
    """In-memory evidence cache keyed by (tool source hash, question fingerprint)."""

    data: dict[tuple[str, str], ToolRun] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def get(self, key: tuple[str, str]) -> ToolRun | None:
        """Return a cached run, counting hits and misses."""
        r = self.data.get(key)
        if r is None:
            self.misses += 1
        else:
            self.hits += 1
        return r


class Agent:
    """An agent ``A_L``: a base answerer, a reviewer and a library, answering through the residual chain.

    Args:
        library: The library chain.
        answerer: Base answerer (default: the builtin global-summary answerer).
        reviewer: Stage reviewer (default: the builtin rule reviewer).
        executor: Tool executor (default: a :class:`~tsevo.library.sandbox.Sandbox` created lazily).
        max_tools: At most this many tools per question over the whole chain.
        evidence_cache: Shared evidence cache (pass one to share across agents and rounds).
        mode: ``residual`` (review; the protocol) or ``overwrite`` (ablation: any reading replaces).
        workers: Questions answered and reviewed concurrently (threads; useful for LLM roles, whose
            calls wait on the network). Tool evidence is batched per tool either way.
        views: How the answering roles see a question (the run's opaque ids; default: a view
            whose id is a hash of the question's content).
    """

    def __init__(
        self,
        library: Library | None = None,
        answerer: Answerer | None = None,
        reviewer: Reviewer | None = None,
        *,
        executor: ToolExecutor | None = None,
        max_tools: int = 3,
        evidence_cache: EvidenceCache | None = None,
        base_cache: dict[str, BaseAnswer] | None = None,
        mode: str = "residual",
        workers: int = 1,
        views: Callable[[Question], QuestionView] | None = None,
    ) -> None:
        self.library = library if library is not None else Library()
        self.answerer: Answerer = answerer if answerer is not None else GlobalSummaryAnswerer()
        self.reviewer: Reviewer = reviewer if reviewer is not None else RuleReviewer()
        bind = getattr(self.reviewer, "for_library", None)
        if callable(bind):  # reviewers that read library text (LLM prompt patches) see this chain
            self.reviewer = bind(self.library)
        self._executor = executor
        self.max_tools = max_tools
        self.evidence_cache = evidence_cache if evidence_cache is not None else EvidenceCache()
        self.base_cache = base_cache if base_cache is not None else {}
        if mode not in ("residual", "overwrite"):
            raise ValueError(f"unknown mode {mode!r}")
        self.mode = mode
        self.workers = max(1, int(workers))
        self.views = views if views is not None else _content_view

    @property
    def executor(self) -> ToolExecutor:
        """The tool executor (a sandbox is started on first use; :meth:`close` stops it)."""
        if self._executor is None:
            self._executor = cast(ToolExecutor, Sandbox())
            self._owns_executor = True
        return self._executor

    def close(self) -> None:
        """Stop the sandbox this agent started itself (an executor passed in is left alone)."""
        if getattr(self, "_owns_executor", False) and self._executor is not None:
            cast(Any, self._executor).close()
            self._executor = None
            self._owns_executor = False

    def with_library(self, library: Library) -> Agent:
        """Same roles, executor and caches, another library."""
        return Agent(
            library,
            self.answerer,
            self.reviewer,
            executor=self._executor,
            max_tools=self.max_tools,
            evidence_cache=self.evidence_cache,
            base_cache=self.base_cache,
            mode=self.mode,
            workers=self.workers,
            views=self.views,
        )

    # ------------------------------------------------------------------ answering
    def answer(self, q: Question) -> AnswerRecord:
        """Answer one question through the residual chain."""
        return self.answer_many([q])[0]

    def _base(self, q: Question) -> BaseAnswer:
        key = f"{self.answerer.name}:{q.fingerprint}"
        hit = self.base_cache.get(key)
        if hit is None:
            hit = self.answerer.answer(self.views(q))
            self.base_cache[key] = hit
        return hit

    def answer_many(
        self,
        questions: Iterable[Question],
        *,
        progress: Callable[[int], None] | None = None,
    ) -> list[AnswerRecord]:
        """Answer many questions; tool evidence is computed in one sandbox batch per tool.

        Args:
            questions: The questions.
            progress: Optional callback receiving the number of questions finished so far.

        Returns:
            One :class:`AnswerRecord` per question, in input order.
        """
        qs = list(questions)
        eff = self.library.effective()
        shortlists = [self.library.shortlist(q, self.max_tools, eff) for q in qs]
        runs = self._run_tools(qs, shortlists)
        if self.workers <= 1 or len(qs) <= 1:
            records = []
            for i, q in enumerate(qs):
                records.append(self._fold(q, shortlists[i], runs))
                if progress is not None:
                    progress(i + 1)
            return records
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = [pool.submit(self._fold, q, shortlists[i], runs) for i, q in enumerate(qs)]
            out = []
            for i, f in enumerate(futures):
                out.append(f.result())
                if progress is not None:
                    progress(i + 1)
        return out

    def _run_tools(
        self, qs: Sequence[Question], shortlists: Sequence[list[list[ScopedTool]]]
    ) -> dict[tuple[str, str], ToolRun]:
        need: dict[str, tuple[ScopedTool, list[Question]]] = {}
        out: dict[tuple[str, str], ToolRun] = {}
        for q, sl in zip(qs, shortlists, strict=True):
            for row in sl:
                for st in row:
                    key = (st.tool.source_hash, q.fingerprint)
                    cached = self.evidence_cache.get(key)
                    if cached is not None:
                        out[(st.tool.id, q.fingerprint)] = ToolRun(
                            st.tool.id,
                            cached.status,
                            cached.outputs,
                            cached.error,
                            cached.error_kind,
                            0.0,
                            True,
                        )
                        continue
                    slot = need.setdefault(st.tool.source_hash, (st, []))
                    if all(x.fingerprint != q.fingerprint for x in slot[1]):
                        slot[1].append(q)
        for st, batch in need.values():
            inputs = [ToolInput.from_question(q) for q in batch]
            results: Sequence[_ResultLike] = self.executor.run(st.tool.source, inputs)
            for q, res in zip(batch, results, strict=True):
                run = ToolRun(
                    st.tool.id,
                    res.status,
                    dict(res.outputs) if res.outputs is not None else None,
                    res.error,
                    res.error_kind,
                    float(res.elapsed_ms),
                )
                self.evidence_cache.data[(st.tool.source_hash, q.fingerprint)] = run
                out[(st.tool.id, q.fingerprint)] = run
        # tools sharing a source with another id reuse the same evidence
        for q, sl in zip(qs, shortlists, strict=True):
            for row in sl:
                for st in row:
                    k = (st.tool.id, q.fingerprint)
                    if k not in out:
                        c = self.evidence_cache.data[(st.tool.source_hash, q.fingerprint)]
                        out[k] = ToolRun(
                            st.tool.id, c.status, c.outputs, c.error, c.error_kind, 0.0, True
                        )
        return out

    def _fold(
        self,
        q: Question,
        shortlist: list[list[ScopedTool]],
        runs: Mapping[tuple[str, str], ToolRun],
    ) -> AnswerRecord:
        t0 = time.perf_counter()
        try:
            base = self._base(q)
        except Exception as exc:  # an answerer failure must not crash a batch
            return AnswerRecord(
                q.id,
                q.fingerprint,
                q.task,
                None,
                "",
                (),
                None,
                None,
                False,
                f"base answerer failed: {exc}",
            )
        answer = base.option
        steps: list[StageStep] = []
        for k, row in enumerate(shortlist):
            if not row:
                continue
            stage_runs = tuple(runs[(st.tool.id, q.fingerprint)] for st in row)
            evidence = [
                Evidence(st, r.status, r.outputs) for st, r in zip(row, stage_runs, strict=True)
            ]
            incoming = answer
            if not any(r.status == "ok" for r in stage_runs):
                steps.append(
                    StageStep(
                        k,
                        tuple(st.tool.id for st in row),
                        stage_runs,
                        "no_tool",
                        "no tool returned evidence",
                        incoming,
                        incoming,
                    )
                )
                continue
            try:
                review = self.reviewer.review(self.views(q), incoming, evidence)
            except Exception as exc:  # a reviewer failure keeps the incoming answer
                steps.append(
                    StageStep(
                        k,
                        tuple(st.tool.id for st in row),
                        stage_runs,
                        "no_decision",
                        f"reviewer failed: {exc}",
                        incoming,
                        incoming,
                    )
                )
                continue
            decision = review.decision
            if (
                decision == "replace"
                and review.option is not None
                and 0 <= review.option < q.n_options
            ):
                answer = review.option
            elif decision == "replace":
                decision = "no_decision"
            if self.mode == "overwrite" and decision == "keep" and review.option is not None:
                answer = review.option
            # artifacts that amended a responsible tool (refine guidance, rescope) share the credit
            amend = {st.tool.id: st.amended_by for st in row}
            responsible = tuple(review.responsible) + tuple(
                a
                for t in review.responsible
                for a in amend.get(t, ())
                if a not in review.responsible
            )
            steps.append(
                StageStep(
                    k,
                    tuple(st.tool.id for st in row),
                    stage_runs,
                    decision,
                    review.reason,
                    incoming,
                    answer,
                    responsible,
                )
            )
        correct = None if q.gold is None else answer == q.gold
        return AnswerRecord(
            q.id,
            q.fingerprint,
            q.task,
            base.option,
            base.reason,
            tuple(steps),
            answer,
            correct,
            True,
            "",
            (time.perf_counter() - t0) * 1000.0,
        )


def _content_view(q: Question) -> QuestionView:
    return QuestionView.of(q, opaque_id(q.fingerprint, ""))


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
