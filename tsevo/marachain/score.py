"""What a chain node is scored on and how: the batch, per-question scores, and the prefilter bar.

A chain scores every node on one batch per work group (design §1.2): ``B = H ∪ P``, the group's
held-out errors ``H`` followed by its harm probe ``P``, both from train (:class:`BatchSpec`). A
node's :class:`NodeScore` holds, per question of ``B``, the raw score (the answer is right), the
credited score (on an ``H`` row 1 only for an *attributable* repair; on a ``P`` row the raw score)
and the fact of what the node's artifact did there (:data:`FACTS`). The root, the library
``L_{r-1}`` the candidates extend, scores 0 on every ``H`` row and 1 on every ``P`` row, read free
from the base pass; any other root invalidates the round (:func:`check_root`).

:class:`Bar` is the prefilter bar of a direct attempt: :func:`tsevo.evolve.synthesize.prefilter`
reads its verdict from :meth:`Bar.outcome` too (at least ``min_repairs`` attributable repairs where
its contract takes ``min_held_out`` or more held-out errors (a composite tool's: those of kinds it
has a branch for), harm within ``max(harm_cap_abs, harm_cap_frac *
|P|)``, execution errors within ``exec_error_cap`` of the node's tool runs); *strong* adds a repair
rate of ``early_stop``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tsevo.hashing import canonical_json

__all__ = [
    "FACTS",
    "PARTS",
    "Bar",
    "BarCheck",
    "BatchSpec",
    "NodeScore",
    "RootMismatchError",
    "check_root",
    "strength_key",
]

#: What a node's artifact did on a question: Out of scope, not Shortlisted, Abstained, Error,
#: Kept the incoming answer, Replaced it.
FACTS: tuple[str, ...] = ("O", "S", "A", "E", "K", "R")
#: The two parts of a batch: held-out errors (``H``) and the harm probe (``P``).
PARTS: tuple[str, ...] = ("H", "P")


class RootMismatchError(ValueError):
    """The root library does not score 0 on every held-out error and 1 on every probe row."""


@dataclass(frozen=True)
class BatchSpec:
    """The batch ``B`` of one work group: question ids (``H`` then ``P``), parts, fingerprint.

    Build it with :meth:`build`, which refuses any question that is not on train.
    """

    group_id: str
    qids: tuple[str, ...]
    parts: tuple[str, ...]
    fingerprint: str

    def __post_init__(self) -> None:
        if len(self.qids) != len(self.parts):
            raise ValueError("BatchSpec: qids and parts differ in length")
        if len(set(self.qids)) != len(self.qids):
            raise ValueError("BatchSpec: a question appears twice in the batch")
        if any(p not in PARTS for p in self.parts):
            raise ValueError(f"BatchSpec: parts must be among {list(PARTS)}")
        if list(self.parts) != sorted(self.parts):
            raise ValueError("BatchSpec: held-out errors (H) come before the harm probe (P)")
        if self.fingerprint != _fingerprint(self.group_id, self.qids, self.parts):
            raise ValueError("BatchSpec: fingerprint does not match the batch")

    @classmethod
    def build(
        cls,
        group_id: str,
        held_out: Sequence[str],
        probe: Sequence[str],
        split_of: Callable[[str], str],
    ) -> BatchSpec:
        """The batch of held-out errors ``held_out`` and harm probe ``probe``.

        Args:
            group_id: The work group.
            held_out: Its held-out error ids (already interleaved and capped).
            probe: Its harm-probe ids.
            split_of: The split a question id belongs to (``"train"`` for the only allowed one).

        Raises:
            ValueError: A question not on train (all named), or one in both parts.
        """
        qids = (*held_out, *probe)
        bad = sorted(q for q in qids if split_of(q) != "train")
        if bad:
            raise ValueError(f"BatchSpec {group_id}: not train questions {bad}")
        parts = ("H",) * len(held_out) + ("P",) * len(probe)
        return cls(group_id, tuple(qids), parts, _fingerprint(group_id, qids, parts))

    @property
    def n_held_out(self) -> int:
        """``|H|``."""
        return self.parts.count("H")

    @property
    def n_probe(self) -> int:
        """``|P|``."""
        return self.parts.count("P")

    def root_score(self) -> NodeScore:
        """The root's score: 0 on every ``H`` row, 1 on every ``P`` row (facts ``K``)."""
        vals = tuple(0 if p == "H" else 1 for p in self.parts)
        return NodeScore(self.qids, self.parts, vals, vals, ("K",) * len(self.qids))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "group_id": self.group_id,
            "qids": list(self.qids),
            "parts": list(self.parts),
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BatchSpec:
        """Inverse of :meth:`to_dict` (the fingerprint is checked)."""
        return cls(d["group_id"], tuple(d["qids"]), tuple(d["parts"]), d["fingerprint"])


def _fingerprint(group_id: str, qids: Sequence[str], parts: Sequence[str]) -> str:
    text = canonical_json([group_id, list(qids), list(parts)], compact=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_root(batch: BatchSpec, base_correct: Mapping[str, bool]) -> None:
    """Check that the root scores 0 on ``H`` and 1 on ``P`` in the base pass.

    Raises:
        RootMismatchError: Naming every row that disagrees (the round is invalid).
    """
    bad = [
        q
        for q, p in zip(batch.qids, batch.parts, strict=True)
        if bool(base_correct[q]) != (p == "P")
    ]
    if bad:
        raise RootMismatchError(
            f"root mismatch on batch {batch.group_id}: rows {bad} (the root must score 0 on every "
            "held-out error and 1 on every probe row)"
        )


@dataclass(frozen=True)
class NodeScore:
    """A node's scores on its batch, per question (0/1), and its execution-error counts.

    Attributes:
        qids: The batch's questions (``H`` then ``P``).
        parts: ``"H"`` or ``"P"`` per question.
        raw: 1 where the candidate library answers right.
        credited: On ``H`` 1 only for an attributable repair (so never above ``raw``); on ``P``
            equal to ``raw``.
        facts: What the node's artifact did per question (:data:`FACTS`).
        exec_errors: The node's tool runs that ended in an error.
        tool_runs: The node's tool runs on the batch.
        in_contract: ``H`` rows inside the node's contract, for a composite tool (its held-out
            errors of question kinds it has no branch for lie outside;
            :func:`tsevo.marachain.moves.held_in_contract`). ``None``: every one.
    """

    qids: tuple[str, ...]
    parts: tuple[str, ...]
    raw: tuple[int, ...]
    credited: tuple[int, ...]
    facts: tuple[str, ...]
    exec_errors: int = 0
    tool_runs: int = 0
    in_contract: int | None = None

    def __post_init__(self) -> None:
        n = len(self.qids)
        if not (len(self.parts) == len(self.raw) == len(self.credited) == len(self.facts) == n):
            raise ValueError("NodeScore: qids, parts, raw, credited and facts differ in length")
        for q, p, r, c, f in zip(
            self.qids, self.parts, self.raw, self.credited, self.facts, strict=True
        ):
            if p not in PARTS or f not in FACTS or r not in (0, 1) or c not in (0, 1):
                raise ValueError(
                    f"NodeScore: bad row {q}: part {p!r} raw {r!r} credited {c!r} fact {f!r}"
                )
            if (p == "P" and c != r) or (p == "H" and c > r):
                raise ValueError(f"NodeScore: row {q} credits {c} with raw {r} on part {p}")
        if not 0 <= self.exec_errors <= self.tool_runs:
            raise ValueError("NodeScore: exec_errors must lie in [0, tool_runs]")
        if self.in_contract is not None and not 0 <= self.in_contract <= self.n_held_out:
            raise ValueError("NodeScore: in_contract must lie in [0, |H|]")

    @classmethod
    def from_outcome(
        cls,
        batch: BatchSpec,
        *,
        repairs: Sequence[str],
        harms: Sequence[str],
        right: Sequence[str] = (),
        facts: Mapping[str, str] | None = None,
        exec_errors: int = 0,
        tool_runs: int = 0,
        in_contract: int | None = None,
    ) -> NodeScore:
        """Build from a prefilter outcome (an ``AttemptRecord``'s ``repairs`` and ``harms``).

        Args:
            batch: The batch scored.
            repairs: ``H`` rows repaired attributably (credited 1).
            harms: ``P`` rows the candidate gets wrong.
            right: Further ``H`` rows answered right but not attributably (raw 1, credited 0).
            facts: Fact per question (default ``R`` on repairs, ``K`` elsewhere).
            exec_errors: The node's tool runs that errored.
            tool_runs: The node's tool runs.
            in_contract: ``H`` rows inside its contract (``None``: every one).
        """
        rep, harm, ok = set(repairs), set(harms), set(right) | set(repairs)
        unknown = sorted((rep | harm | ok) - set(batch.qids))
        if unknown:
            raise ValueError(f"NodeScore: rows {unknown} are not in batch {batch.group_id}")
        raw = tuple(
            int(q in ok) if p == "H" else int(q not in harm)
            for q, p in zip(batch.qids, batch.parts, strict=True)
        )
        cred = tuple(
            int(q in rep) if p == "H" else r
            for q, p, r in zip(batch.qids, batch.parts, raw, strict=True)
        )
        fact = tuple((facts or {}).get(q, "R" if q in rep else "K") for q in batch.qids)
        return cls(batch.qids, batch.parts, raw, cred, fact, exec_errors, tool_runs, in_contract)

    @property
    def n_held_out(self) -> int:
        """``|H|``."""
        return self.parts.count("H")

    @property
    def n_probe(self) -> int:
        """``|P|``."""
        return self.parts.count("P")

    @property
    def n_in_contract(self) -> int:
        """``H`` rows inside the node's contract (``in_contract``; every one when not given)."""
        return self.n_held_out if self.in_contract is None else self.in_contract

    @property
    def repairs(self) -> tuple[str, ...]:
        """``H`` rows with an attributable repair, in batch order."""
        return tuple(
            q
            for q, p, c in zip(self.qids, self.parts, self.credited, strict=True)
            if p == "H" and c
        )

    @property
    def harms(self) -> tuple[str, ...]:
        """``P`` rows answered wrong, in batch order."""
        return tuple(
            q for q, p, r in zip(self.qids, self.parts, self.raw, strict=True) if p == "P" and not r
        )

    @property
    def net(self) -> int:
        """Repairs minus harms."""
        return len(self.repairs) - len(self.harms)

    @property
    def raw_sum(self) -> int:
        """Rows answered right (the ``code`` variant's batch score)."""
        return sum(self.raw)

    @property
    def all_right(self) -> bool:
        """Whether every row of the batch is answered right."""
        return bool(self.raw) and all(self.raw)

    @property
    def error_rate(self) -> float:
        """Execution errors per tool run (0 without runs), as the prefilter computes it."""
        return self.exec_errors / self.tool_runs if self.tool_runs else 0.0

    @property
    def repair_rate(self) -> float:
        """Attributable repairs per held-out error."""
        return len(self.repairs) / self.n_held_out if self.n_held_out else 0.0

    @property
    def vector(self) -> tuple[float, ...]:
        """The credited vector the pool compares."""
        return tuple(float(c) for c in self.credited)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "qids": list(self.qids),
            "parts": list(self.parts),
            "raw": list(self.raw),
            "credited": list(self.credited),
            "facts": list(self.facts),
            "exec_errors": self.exec_errors,
            "tool_runs": self.tool_runs,
            # only for a composite's nodes (older scores keep their bytes)
            **({} if self.in_contract is None else {"in_contract": self.in_contract}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeScore:
        """Inverse of :meth:`to_dict`."""
        return cls(
            tuple(d["qids"]),
            tuple(d["parts"]),
            tuple(int(x) for x in d["raw"]),
            tuple(int(x) for x in d["credited"]),
            tuple(d["facts"]),
            int(d.get("exec_errors", 0)),
            int(d.get("tool_runs", 0)),
            None if d.get("in_contract") is None else int(d["in_contract"]),
        )


@dataclass(frozen=True)
class BarCheck:
    """A node measured against the bar: the prefilter's outcome and the numbers behind it."""

    passed: bool
    strong: bool
    outcome: str
    repairs: int
    harms: int
    harm_cap: float
    error_rate: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Bar:
    """The prefilter bar of a direct attempt (the protocol's ``prefilter_*`` defaults).

    Build it from a protocol config with :meth:`of`, so a chain node clears exactly the bar a
    direct attempt of the same round must clear.
    """

    min_repairs: int = 1
    harm_cap_abs: int = 2
    harm_cap_frac: float = 0.10
    exec_error_cap: float = 0.05
    early_stop: float = 0.40
    min_held_out: int = 3
    count_in_contract: bool = True

    @classmethod
    def of(cls, cfg: Any) -> Bar:
        """The bar of a protocol config (read by name: ``cfg.prefilter_*``, ``cfg.support``)."""
        return cls(
            cfg.prefilter_min_repairs,
            cfg.prefilter_harm_cap_abs,
            cfg.prefilter_harm_cap_frac,
            cfg.prefilter_exec_error_cap,
            cfg.prefilter_early_stop,
            cfg.support.min_held_out,
            cfg.support.min_held_out_counts == "in_contract",
        )

    def harm_cap(self, n_probe: int) -> float:
        """``max(harm_cap_abs, harm_cap_frac * n_probe)``, in the prefilter's arithmetic."""
        return max(self.harm_cap_abs, self.harm_cap_frac * n_probe)

    def outcome(
        self,
        repairs: int,
        harms: int,
        n_held_out: int,
        n_probe: int,
        error_rate: float,
        n_in_contract: int | None = None,
    ) -> str:
        """The prefilter's verdict: ``no_repair``, ``harmful``, ``exec_errors`` or ``passed``.

        Tested in that order; a repair is asked for only from ``min_held_out`` held-out errors,
        counting only the ``n_in_contract`` inside the candidate's contract when ``count_in_contract``
        and it is given (a composite tool's errors of kinds it has a branch for; every held-out
        error of any other artifact).
        """
        counted = (
            n_in_contract if self.count_in_contract and n_in_contract is not None else n_held_out
        )
        if repairs < self.min_repairs and counted >= self.min_held_out:
            return "no_repair"
        if harms > self.harm_cap(n_probe):
            return "harmful"
        if error_rate > self.exec_error_cap:
            return "exec_errors"
        return "passed"

    def check(self, score: NodeScore) -> BarCheck:
        """Measure a node as the prefilter measures a direct attempt (same order of tests)."""
        repairs, harms = len(score.repairs), len(score.harms)
        cap, err = self.harm_cap(score.n_probe), score.error_rate
        outcome = self.outcome(
            repairs, harms, score.n_held_out, score.n_probe, err, score.n_in_contract
        )
        passed = outcome == "passed"
        strong = passed and score.repair_rate >= self.early_stop
        return BarCheck(passed, strong, outcome, repairs, harms, cap, err)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return dict(self.__dict__)


def strength_key(score: NodeScore, local_seq: int) -> tuple[int, int, int, int]:
    """The strength key ``(repairs - harm, repairs, -exec_errors, -local_seq)``: larger is stronger.

    ``local_seq`` is the node's per-group sequence number, so ties go to the earlier node and
    never depend on the clock or on scheduling.
    """
    return (score.net, len(score.repairs), -score.exec_errors, -local_seq)
