"""Residual-chain answering: the base agent answers, then each stage may review with tool evidence.

For one question ``x`` and library ``L = (L_0, T_1, ..., T_r)``:

1. the base answerer gives the incoming answer;
2. the agent consults the scope catalog: the tools whose scope matches ``x`` are its candidates,
   and it inspects at most three of them over the whole chain. A reviewer with ``choose_tools``
   (the LLM one) reads the catalog (names, scopes, one-line descriptions) and chooses; otherwise
   the builtin matcher is the reading of the catalog (the best matcher scores, stage by stage);
3. for each stage in order, its inspected tools run in the sandbox and the reviewer reviews the
   incoming answer with their evidence;
4. the incoming answer is replaced only when a stage tool actually ran (status ``ok``) and the
   review explicitly decides to replace. Errors, no invocation or no decision keep it.

Two ablations change this (``ProtocolConfig.ablation``): ``scoped=False`` (``w/o scope``) makes
every tool a candidate on every question, ranked by its description alone, and the catalog a
reviewer chooses from carries no scope; ``mode="overwrite"`` (``w/o residual chain``) skips the
review: whenever a tool ran and its reading gives an option (the reviewer's ``read``, or the
tools' reading rules), that option replaces the incoming answer; a reading that abstains keeps it.

The :class:`AnswerRecord` is the trace everything downstream reads. :meth:`Agent.answer_many`
batches the work: tool evidence depends only on the question, so each tool runs once over all the
questions that shortlist it (one sandbox batch), and results are cached by
``(tool source hash, question fingerprint)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from tsevo.data import Question, QuestionView, opaque_id
from tsevo.library.context import ToolInput
from tsevo.library.library import Library, ScopedTool
from tsevo.library.sandbox import Sandbox
from tsevo.roles.builtin import GlobalSummaryAnswerer, RuleReviewer
from tsevo.roles.protocols import Answerer, BaseAnswer, Evidence, Review, Reviewer

from .records import AnswerRecord, StageStep, ToolRun

__all__ = ["Agent", "EvidenceCache", "ToolExecutor"]


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
        mode: ``residual`` (review; the protocol) or ``overwrite`` (ablation: a tool's reading
            replaces the incoming answer without review).
        scoped: ``True`` (the protocol): scopes decide the candidate tools; ``False`` (ablation):
            every tool is a candidate, ranked by its description.
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
        scoped: bool = True,
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
        self.scoped = bool(scoped)
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
            scoped=self.scoped,
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
        shortlists = self._shortlists(qs, eff)
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

    def _shortlists(
        self, qs: Sequence[Question], eff: list[list[ScopedTool]]
    ) -> list[list[list[ScopedTool]]]:
        """Per question, per stage, the tools inspected: the reviewer's choice from the catalog."""
        choose = getattr(self.reviewer, "choose_tools", None)
        if not callable(choose) or not any(eff):
            return [self.library.shortlist(q, self.max_tools, eff, scoped=self.scoped) for q in qs]

        def one(q: Question) -> list[list[ScopedTool]]:
            cands = self.library.candidates(q, eff, scoped=self.scoped)
            if not cands:
                return [[] for _ in eff]
            known = {st.tool.id for st in cands}
            try:
                picked = list(choose(self.views(q), cands, self.max_tools, self.scoped))
            except Exception:  # a failed choice falls back to the matcher's reading
                picked = [st.tool.id for st in cands]
            ids = [t for t in dict.fromkeys(picked) if t in known][: self.max_tools]
            return Library.rows(eff, ids)

        if self.workers <= 1 or len(qs) <= 1:
            return [one(q) for q in qs]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(one, qs))

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
                if self.mode == "overwrite":
                    review = self._read(self.views(q), incoming, evidence)
                else:
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
            base.detail,
        )

    def _read(self, q: QuestionView, incoming: int, evidence: Sequence[Evidence]) -> Review:
        """``overwrite`` mode: the evidence's reading replaces the incoming answer, unreviewed.

        The reading is the reviewer's ``read`` (an LLM reads the evidence as its guidance says,
        never shown the incoming answer), or the tools' reading rules for a reviewer without one.
        A reading naming the incoming option is a keep; an abstaining reading keeps it too.
        """
        read = getattr(self.reviewer, "read", None)
        r: Review = read(q, evidence) if callable(read) else _RULES.read(q, evidence)
        if r.option is None or r.decision == "no_decision":
            return Review("no_decision", None, f"overwrite: no reading ({r.reason})", r.responsible)
        if r.option == incoming:
            return Review("keep", incoming, f"overwrite: {r.reason}", r.responsible)
        return Review("replace", r.option, f"overwrite: {r.reason}", r.responsible)


_RULES = RuleReviewer()


def _content_view(q: Question) -> QuestionView:
    return QuestionView.of(q, opaque_id(q.fingerprint, ""))
