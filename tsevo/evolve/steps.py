"""The step runner: a round is a list of steps, run, persisted and resumed in one place.

A step is a function ``step(ctx) -> StepResult`` over a shared :class:`RoundContext`. The runner
times it, marks it done in the run's event log (``step_done`` with the step's summary), and on a
rerun of an unfinished round either *restores* a finished step from its artifacts (when the step
has a restore function) or runs it again — a rerun is cheap because every evaluation is stored
and never spent twice. A step ends the round early by returning a :class:`RoundResult` in
:attr:`StepResult.stop`. When the round ends, its summary (``round.json``), timings and, for a round
that was not accepted, its best candidate library are written, and the round is marked done. A
step that ends the round is not marked done by itself: if the run is killed before the round is
marked, the rerun computes that step again (cheaply: its evaluations are stored).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question, Suite
from tsevo.library.library import Library
from tsevo.library.tool import Tool
from tsevo.roles import ContractCard, Dossier, RoleSet, WorkGroup
from tsevo.store import RoundPaths, RunStore

from .cluster import ClusteringResult
from .config import ProtocolConfig
from .evaluate import Evaluator
from .gate import GateDecision
from .plan import BucketSplit
from .prune import PruneRecord
from .result import Funnel, RoundResult
from .synthesize import GroupOutcome
from .views import ViewIds

__all__ = ["RoundContext", "Step", "StepResult", "run_steps"]


@dataclass
class RoundContext:
    """Everything a round's steps share: inputs, services, and what earlier steps produced.

    Inputs and services are set when the round starts (``ids``: the run's opaque ids, through
    which roles see questions); the ``# produced`` fields are filled by the steps in order (a step
    reads only what earlier steps produced).
    """

    r: int
    library: Library
    train: Suite
    val: Suite
    roles: RoleSet
    cfg: ProtocolConfig
    evaluator: Evaluator
    sandbox: Any
    store: RunStore | None
    log: Callable[[str], None]
    plan_workers: int
    ids: ViewIds
    tq: dict[str, Question] = field(default_factory=dict)
    funnel: Funnel = field(default_factory=Funnel)
    arms: dict[str, str] = field(default_factory=dict)
    # produced: base pass
    base: dict[str, AnswerRecord] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # produced: clustering
    clustering: ClusteringResult | None = None
    # produced: planning
    splits: dict[str, BucketSplit] = field(default_factory=dict)
    dossiers: dict[str, Dossier] = field(default_factory=dict)
    cards: list[ContractCard] = field(default_factory=list)
    groups: list[WorkGroup] = field(default_factory=list)
    # produced: synthesis
    outcomes: list[GroupOutcome] = field(default_factory=list)
    survivors: list[Tool] = field(default_factory=list)
    # produced: gate, prune, reconcile
    candidate: Library | None = None
    base_val: dict[str, AnswerRecord] = field(default_factory=dict)
    cand_val: dict[str, AnswerRecord] = field(default_factory=dict)
    gate: GateDecision | None = None
    accepted: Library | None = None
    accepted_val: dict[str, AnswerRecord] = field(default_factory=dict)
    decision: GateDecision | None = None
    prune: PruneRecord | None = None

    def __post_init__(self) -> None:
        if not self.tq:
            self.tq = {q.id: q for q in self.train}

    @property
    def paths(self) -> RoundPaths | None:
        """This round's files (``None`` for an in-memory run)."""
        return self.store.layout.round(self.r) if self.store is not None else None

    def write_json(self, name: str, obj: Any) -> None:
        """Write one of this round's JSON artifacts (``name``: a :class:`RoundPaths` attribute)."""
        if self.store is not None:
            self.store.write_json(getattr(self.paths, name), obj)

    def write_parquet(self, name: str, frame: Any) -> None:
        """Write one of this round's tables (``name``: a :class:`RoundPaths` attribute)."""
        if self.store is not None:
            self.store.write_parquet(getattr(self.paths, name), frame)

    def result(self, status: str, reason: str, **kw: Any) -> RoundResult:
        """A round result carrying this context's funnel and arms."""
        return RoundResult(
            self.r,
            status,
            reason,
            kw.pop("library", self.library),
            funnel=self.funnel,
            arms=dict(self.arms),
            **kw,
        )


@dataclass
class StepResult:
    """What a step reports to the runner.

    Attributes:
        summary: Small JSON counts for the step's ``step_done`` event.
        stop: A result that ends the round here (``None``: go on to the next step).
        ran: ``False`` when the step had nothing to do (e.g. no prune after a passed gate): it is
            then neither timed nor marked done.
    """

    summary: dict[str, Any] = field(default_factory=dict)
    stop: RoundResult | None = None
    ran: bool = True


@dataclass(frozen=True)
class Step:
    """A named step of a round.

    Attributes:
        name: The step's name in the event log and timings.
        run: Computes the step from the context, writes its artifacts, fills the context.
        restore: Reads a finished step's artifacts back into the context (``None``: run again).
    """

    name: str
    run: Callable[[RoundContext], StepResult]
    restore: Callable[[RoundContext], StepResult] | None = None


def run_steps(ctx: RoundContext, steps: Sequence[Step]) -> RoundResult:
    """Run (or resume) a round's steps in order; returns the round's result."""
    store = ctx.store
    if store is not None and store.step_done(ctx.r, "round") is not None:
        return RoundResult.read(store, ctx.r, ctx.library)
    timings: dict[str, float] = {}
    result: RoundResult | None = None
    for step in steps:
        t0 = time.perf_counter()
        done = store is not None and store.step_done(ctx.r, step.name) is not None
        res = step.restore(ctx) if done and step.restore is not None else step.run(ctx)
        if res.ran:
            timings[step.name] = round(time.perf_counter() - t0, 3)
        # a step that ends the round is not marked: a rerun recomputes it, then finishes the round
        if store is not None and not done and res.ran and res.stop is None:
            store.mark_done(ctx.r, step.name, **res.summary)
        if res.stop is not None:
            result = res.stop
            break
    if result is None:
        raise RuntimeError(f"round {ctx.r}: the last step did not end the round")
    return _finish(ctx, result, timings)


def _finish(ctx: RoundContext, res: RoundResult, timings: dict[str, float]) -> RoundResult:
    res.timings = timings
    store, paths = ctx.store, ctx.paths
    if store is not None and paths is not None:
        store.write_json(paths.summary, res.to_dict())
        if res.candidate is not None and res.status != "accepted":
            store.save(paths.candidate_library, res.candidate)
        store.write_json(paths.timings, res.timings)
        store.mark_done(ctx.r, "round", status=res.status)
    return res
