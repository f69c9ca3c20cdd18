"""What a round and a run produce: the typed funnel, :class:`RoundResult`, :class:`EvolutionResult`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from tsevo.library.library import Library
from tsevo.store import RunStore

from .gate import GateDecision
from .prune import PruneRecord

__all__ = ["EvolutionResult", "Funnel", "RoundResult"]


@dataclass
class Funnel:
    """Counts through the stages of a round (a field stays ``None`` until its step ran).

    Attributes:
        train_questions: Train questions answered by the base pass.
        train_accuracy: The current library's train accuracy.
        errors: Completed, wrong train answers.
        errors_tool_fired: Errors on which a tool returned evidence.
        buckets: Failure buckets after clustering.
        unassigned: Errors no category took.
        dropped_small: Errors in buckets below the minimum size.
        contracts: Local plans (contract cards).
        groups: Work groups after coordination.
        attempts: Synthesis attempts.
        checked: Attempts that passed the mechanical checks.
        prefilter_passed: Attempts that passed the prefilter.
        survivors: Candidates (one per group at most) that went to the gate.
        gate_path: The first gate's path (``strict``, ``single_round``, ``fail``, ``invalid``).
        pruned: Updates removed by the one-shot prune.
        deployed: Artifacts the round appended.
        deployed_kinds: Their kinds.
    """

    train_questions: int | None = None
    train_accuracy: float | None = None
    errors: int | None = None
    errors_tool_fired: int | None = None
    buckets: int | None = None
    unassigned: int | None = None
    dropped_small: int | None = None
    contracts: int | None = None
    groups: int | None = None
    attempts: int | None = None
    checked: int | None = None
    prefilter_passed: int | None = None
    survivors: int | None = None
    gate_path: str | None = None
    pruned: int | None = None
    deployed: int | None = None
    deployed_kinds: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The counts that were reached (JSON-friendly)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Funnel:
        """Inverse of :meth:`to_dict` (unknown keys refused)."""
        known = {f.name for f in fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise ValueError(f"unknown funnel field(s) {bad}")
        return cls(**d)


@dataclass
class RoundResult:
    """The outcome of one round.

    Attributes:
        round: Round number.
        status: ``accepted`` | ``rejected`` | ``invalid``.
        reason: One line.
        library: The library after the round (unchanged unless accepted).
        gate: The first gate decision (``None`` when the round stopped earlier).
        final_gate: The gate decision that admitted the library (after prune / reconcile).
        prune: The prune record, if a prune ran.
        deployed: Ids of the artifacts the round appended.
        candidate: The best candidate library (for the diagnostic test run of a rejected round).
        funnel: Counts through the stages.
        timings: Seconds per step.
        arms: Names of the evaluation arms the round used (``train_base``, ``val_base``, ...).
    """

    round: int
    status: str
    reason: str
    library: Library
    gate: GateDecision | None = None
    final_gate: GateDecision | None = None
    prune: PruneRecord | None = None
    deployed: tuple[str, ...] = ()
    candidate: Library | None = None
    funnel: Funnel = field(default_factory=Funnel)
    timings: dict[str, float] = field(default_factory=dict)
    arms: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (the round's ``round.json``)."""
        return {
            "round": self.round,
            "status": self.status,
            "reason": self.reason,
            "gate": self.gate.to_dict() if self.gate else None,
            "final_gate": self.final_gate.to_dict() if self.final_gate else None,
            "pruned": self.prune.to_dict() if self.prune else None,
            "deployed": list(self.deployed),
            "library_fingerprint": self.library.fingerprint(),
            "funnel": self.funnel.to_dict(),
            "arms": self.arms,
        }

    @classmethod
    def read(cls, store: RunStore, r: int, before: Library) -> RoundResult:
        """Read a finished round back from its run folder (``before``: the library it started from)."""
        paths = store.layout.round(r)
        d = store.read_json(paths.summary)
        lib = Library.load(paths.library) if d["status"] == "accepted" else before
        cand = None
        if paths.candidate_library.exists():
            cand = Library.load(paths.candidate_library)
        elif d["status"] == "accepted":
            cand = lib
        return cls(
            d["round"],
            d["status"],
            d["reason"],
            lib,
            GateDecision.from_dict(d["gate"]) if d.get("gate") else None,
            GateDecision.from_dict(d["final_gate"]) if d.get("final_gate") else None,
            PruneRecord.from_dict(d["pruned"]) if d.get("pruned") else None,
            tuple(d.get("deployed", ())),
            cand,
            Funnel.from_dict(dict(d.get("funnel", {}))),
            store.read_json_or(paths.timings, {}),
            dict(d.get("arms", {})),
        )


@dataclass
class EvolutionResult:
    """A finished (or resumed) evolution run.

    Attributes:
        rounds: One result per round.
        library: The deployed library after the last round.
        root: The root library.
        tests: Per round, the report-only test summary (``test.json``).
        store: The run store (``None`` for in-memory runs).
    """

    rounds: list[RoundResult]
    library: Library
    root: Library
    tests: list[dict[str, Any]] = field(default_factory=list)
    store: RunStore | None = None
