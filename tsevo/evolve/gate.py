"""Paired statistics and the whole-library gate (DESIGN.md §2 step 6).

The current library (*base* arm) and the candidate library (*cand* arm) answer the same
validation questions. Only questions both arms completed are compared, so helped and harmed are
counted on identical questions:

* ``h`` helped (base wrong, cand right), ``m`` harmed (base right, cand wrong), ``n`` paired;
* ``delta = (h - m) / n`` and ``delta_lb = delta - z * sqrt(max(h + m, 1)) / n``;
* strict path: ``h > 0`` and ``delta_lb > 0``;
* single-round path (only where :meth:`ProtocolConfig.single_round_applies`): ``delta > 0``,
  ``h - m >= max(3, ceil(0.02 n))`` and ``m / n <= 0.10``;
* an execution error rate ``1 - n / N`` above 2 % makes the measurement *invalid*, which is a
  rollback of the round as measurement-invalid, not a rejection.

All threshold comparisons are exact (rational arithmetic on the config's decimal values), so the
edges of the rules behave as written. The gate is mechanical code: it reads per-question outcomes
(completed, correct, answer), never a question's content.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any, Literal

from tsevo.evolve.config import ProtocolConfig, exact

__all__ = [
    "ArmOutcome",
    "FlipClass",
    "GateDecision",
    "GatePath",
    "PairedCounts",
    "decide_gate",
    "flip_class",
    "paired_counts",
    "paired_flips",
]

FlipClass = Literal["helped", "harmed", "unchanged-right", "unchanged-wrong"]
GatePath = Literal["strict", "single_round", "rejected", "invalid"]
_PATHS = ("strict", "single_round", "rejected", "invalid")


@dataclass(frozen=True)
class ArmOutcome:
    """One arm's outcome on one question.

    Attributes:
        qid: Question id.
        completed: The arm returned a final answer (a tool error inside the residual chain still
            completes: the chain falls back to the incoming answer).
        correct: The final answer equals gold (only possible when completed).
        answer: The chosen option index (``None`` when the arm did not complete).
        tool_errors: Tool executions that errored on this question (a diagnostic only).
    """

    qid: str
    completed: bool
    correct: bool
    answer: int | None
    tool_errors: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.qid, str) or not self.qid:
            raise ValueError(f"ArmOutcome.qid must be a non-empty str, got {self.qid!r}")
        if self.correct and not self.completed:
            raise ValueError(f"ArmOutcome {self.qid!r}: correct=True but completed=False")
        if self.tool_errors < 0:
            raise ValueError(f"ArmOutcome {self.qid!r}: tool_errors must be >= 0")


def flip_class(base_correct: bool, cand_correct: bool) -> FlipClass:
    """Classify one paired question.

    Args:
        base_correct: The base (current library) arm answered right.
        cand_correct: The candidate arm answered right.

    Returns:
        ``"helped"`` (wrong -> right), ``"harmed"`` (right -> wrong), ``"unchanged-right"`` or
        ``"unchanged-wrong"``.
    """
    if cand_correct and not base_correct:
        return "helped"
    if base_correct and not cand_correct:
        return "harmed"
    return "unchanged-right" if base_correct else "unchanged-wrong"


@dataclass(frozen=True)
class PairedCounts:
    """Paired counts of two arms on the same question ids.

    Attributes:
        n_attempted: N, questions attempted (the common id set of both arms).
        n: Questions both arms completed (the paired set).
        helped: Paired questions base wrong, candidate right (h).
        harmed: Paired questions base right, candidate wrong (m).
        unchanged_right: Paired questions both arms right.
        unchanged_wrong: Paired questions both arms wrong.
        base_incomplete: Questions the base arm did not complete.
        cand_incomplete: Questions the candidate arm did not complete.
        base_tool_error_questions: Questions with at least one tool error in the base arm.
        cand_tool_error_questions: Questions with at least one tool error in the candidate arm.
        helped_ids: Ids of the helped questions, sorted.
        harmed_ids: Ids of the harmed questions, sorted.
    """

    n_attempted: int
    n: int
    helped: int
    harmed: int
    unchanged_right: int
    unchanged_wrong: int
    base_incomplete: int = 0
    cand_incomplete: int = 0
    base_tool_error_questions: int = 0
    cand_tool_error_questions: int = 0
    helped_ids: tuple[str, ...] = ()
    harmed_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        parts = self.helped + self.harmed + self.unchanged_right + self.unchanged_wrong
        if min(self.n_attempted, self.n, self.helped, self.harmed) < 0:
            raise ValueError("PairedCounts: counts must be >= 0")
        if parts != self.n:
            raise ValueError(f"PairedCounts: h+m+unchanged = {parts} != n = {self.n}")
        if self.n > self.n_attempted:
            raise ValueError(f"PairedCounts: n = {self.n} > n_attempted = {self.n_attempted}")

    @property
    def delta(self) -> float:
        """Return ``(h - m) / n`` (0.0 when n = 0)."""
        return (self.helped - self.harmed) / self.n if self.n else 0.0

    @property
    def net(self) -> int:
        """Return the net repair ``h - m``."""
        return self.helped - self.harmed

    @property
    def error_rate(self) -> float:
        """Return the execution error rate ``1 - n / N`` (0.0 when N = 0)."""
        return float(self.error_fraction)

    @property
    def error_fraction(self) -> Fraction:
        """Return the execution error rate as an exact fraction."""
        if self.n_attempted == 0:
            return Fraction(0)
        return Fraction(self.n_attempted - self.n, self.n_attempted)

    @property
    def tool_error_rate(self) -> float:
        """Return the share of attempted questions with a candidate-arm tool error (diagnostic)."""
        return self.cand_tool_error_questions / self.n_attempted if self.n_attempted else 0.0

    @property
    def base_correct(self) -> int:
        """Return the base arm's correct count on the paired questions."""
        return self.unchanged_right + self.harmed

    @property
    def cand_correct(self) -> int:
        """Return the candidate arm's correct count on the paired questions."""
        return self.unchanged_right + self.helped

    def delta_lb(self, z: float) -> float:
        """Return ``delta - z * sqrt(max(h + m, 1)) / n`` (``-inf`` when n = 0)."""
        if self.n == 0:
            return -math.inf
        return self.delta - z * math.sqrt(max(self.helped + self.harmed, 1)) / self.n

    def to_dict(self) -> dict[str, Any]:
        """Return the counts as a JSON-friendly dict (id tuples as lists)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["helped_ids"] = list(self.helped_ids)
        out["harmed_ids"] = list(self.harmed_ids)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairedCounts:
        """Rebuild counts from :meth:`to_dict` output."""
        d = dict(data)
        d["helped_ids"] = tuple(d.get("helped_ids", ()))
        d["harmed_ids"] = tuple(d.get("harmed_ids", ()))
        return cls(**d)


def _check_arms(base: Mapping[str, ArmOutcome], cand: Mapping[str, ArmOutcome]) -> None:
    for name, arm in (("base", base), ("cand", cand)):
        for key, out in arm.items():
            if key != out.qid:
                raise ValueError(f"{name} arm: key {key!r} holds the outcome of {out.qid!r}")
    if base.keys() != cand.keys():
        only_b = sorted(set(base) - set(cand))
        only_c = sorted(set(cand) - set(base))
        raise ValueError(
            "paired arms must cover the same question ids: "
            f"{len(only_b)} only in base (e.g. {only_b[:5]}), "
            f"{len(only_c)} only in cand (e.g. {only_c[:5]})"
        )


def paired_flips(
    base: Mapping[str, ArmOutcome], cand: Mapping[str, ArmOutcome]
) -> dict[str, FlipClass | None]:
    """Return the flip class of every question (``None`` where an arm did not complete).

    Args:
        base: Base arm outcomes by question id.
        cand: Candidate arm outcomes by question id (same ids).

    Returns:
        Question id -> flip class, in sorted id order.

    Raises:
        ValueError: If the arms cover different ids or a key disagrees with its outcome's qid.
    """
    _check_arms(base, cand)
    out: dict[str, FlipClass | None] = {}
    for qid in sorted(base):
        b, c = base[qid], cand[qid]
        out[qid] = flip_class(b.correct, c.correct) if b.completed and c.completed else None
    return out


def paired_counts(base: Mapping[str, ArmOutcome], cand: Mapping[str, ArmOutcome]) -> PairedCounts:
    """Count helped, harmed and unchanged questions of two arms on the same question ids.

    Args:
        base: Base (current library) outcomes by question id.
        cand: Candidate library outcomes by question id; must cover exactly the same ids.

    Returns:
        The paired counts; ``n`` counts only questions both arms completed.

    Raises:
        ValueError: If the arms cover different ids or a key disagrees with its outcome's qid.
    """
    flips = paired_flips(base, cand)
    tally = {"helped": 0, "harmed": 0, "unchanged-right": 0, "unchanged-wrong": 0}
    for cls in flips.values():
        if cls is not None:
            tally[cls] += 1
    return PairedCounts(
        n_attempted=len(flips),
        n=sum(tally.values()),
        helped=tally["helped"],
        harmed=tally["harmed"],
        unchanged_right=tally["unchanged-right"],
        unchanged_wrong=tally["unchanged-wrong"],
        base_incomplete=sum(not o.completed for o in base.values()),
        cand_incomplete=sum(not o.completed for o in cand.values()),
        base_tool_error_questions=sum(o.tool_errors > 0 for o in base.values()),
        cand_tool_error_questions=sum(o.tool_errors > 0 for o in cand.values()),
        helped_ids=tuple(q for q, c in flips.items() if c == "helped"),
        harmed_ids=tuple(q for q, c in flips.items() if c == "harmed"),
    )


@dataclass(frozen=True)
class GateDecision:
    """One gate decision, saved in the run (``gate.json``) and never recomputed.

    Attributes:
        n: Paired questions (both arms completed).
        n_attempted: Questions attempted (N).
        h: Helped.
        m: Harmed.
        unchanged_right: Paired questions both arms right.
        unchanged_wrong: Paired questions both arms wrong.
        delta: ``(h - m) / n`` (0.0 when n = 0).
        delta_lb: ``delta - z * sqrt(max(h + m, 1)) / n`` (``None`` when n = 0).
        z: The Z used.
        error_rate: Execution error rate ``1 - n / N``.
        tool_error_rate: Share of questions with a candidate tool error (diagnostic only).
        rounds: The run's configured rounds (decides whether the single-round rule applies).
        single_round_applies: Whether the single-round rule was considered.
        strict_passed: The strict path's verdict on its own.
        single_round_passed: The single-round path's verdict on its own (``False`` when it does
            not apply).
        path: ``"strict"``, ``"single_round"``, ``"rejected"`` or ``"invalid"``.
        passed: The library is admitted (``path`` is strict or single_round).
        invalid: The measurement is invalid (a rollback, distinct from a rejection).
        reasons: One line per check, with its numbers.
    """

    n: int
    n_attempted: int
    h: int
    m: int
    unchanged_right: int
    unchanged_wrong: int
    delta: float
    delta_lb: float | None
    z: float
    error_rate: float
    tool_error_rate: float
    rounds: int
    single_round_applies: bool
    strict_passed: bool
    single_round_passed: bool
    path: GatePath
    passed: bool
    invalid: bool
    reasons: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.path not in _PATHS:
            raise ValueError(f"GateDecision.path must be one of {_PATHS}, got {self.path!r}")
        if self.passed != (self.path in ("strict", "single_round")):
            raise ValueError(f"GateDecision: passed={self.passed} contradicts path={self.path}")
        if self.invalid != (self.path == "invalid"):
            raise ValueError(f"GateDecision: invalid={self.invalid} contradicts path={self.path}")

    @property
    def rejected(self) -> bool:
        """Return whether the gate rejected a valid measurement."""
        return self.path == "rejected"

    def to_dict(self) -> dict[str, Any]:
        """Return the decision as a JSON-friendly dict (reasons as a list)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["reasons"] = list(self.reasons)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateDecision:
        """Rebuild a decision from :meth:`to_dict` output.

        Raises:
            TypeError: On unknown or missing keys.
            ValueError: If the record contradicts itself (e.g. passed on a rejected path).
        """
        d = dict(data)
        d["reasons"] = tuple(d.get("reasons", ()))
        return cls(**d)


def decide_gate(counts: PairedCounts, *, config: ProtocolConfig, rounds: int) -> GateDecision:
    """Decide admission of a candidate library from paired counts.

    Order: validity first (N = 0, n = 0, error rate above ``config.invalid_error_rate``), then
    the strict path, then the single-round path where it applies. Every check is recorded in
    ``reasons`` with its numbers, including checks of a path that was not needed.

    Args:
        counts: Paired counts of the current (base) and candidate libraries on validation.
        config: The protocol config (Z, single-round knobs, invalidity threshold, rule choice).
        rounds: The run's configured number of rounds (the single-round rule applies only to
            one-round runs under the protocol's ``single_round_rule``).

    Returns:
        The frozen decision.

    Raises:
        ValueError: If ``rounds`` < 1.
    """
    applies = config.single_round_applies(rounds)
    h, m, n, big_n = counts.helped, counts.harmed, counts.n, counts.n_attempted
    z = config.gate_z
    reasons: list[str] = []

    # ---- validity ------------------------------------------------------------------------
    invalid = False
    if big_n == 0:
        invalid = True
        reasons.append("invalid: no questions attempted (N = 0)")
    elif n == 0:
        invalid = True
        reasons.append(f"invalid: no question completed by both arms (n = 0 of N = {big_n})")
    err = counts.error_fraction
    cap = exact(config.invalid_error_rate)
    if big_n:
        verdict = "invalid" if err > cap else "ok"
        reasons.append(
            f"error rate {verdict}: 1 - n/N = 1 - {n}/{big_n} = {float(err):.4f} "
            f"{'>' if err > cap else '<='} {config.invalid_error_rate}"
        )
        invalid = invalid or err > cap
    reasons.append(
        f"tool errors (diagnostic): {counts.cand_tool_error_questions}/{big_n} candidate "
        f"questions, {counts.base_tool_error_questions}/{big_n} base questions"
    )

    # ---- statistics ----------------------------------------------------------------------
    delta = counts.delta
    delta_lb = counts.delta_lb(z) if n else None
    if n:
        reasons.append(
            f"delta = (h - m)/n = ({h} - {m})/{n} = {delta:.4f}; delta_lb = delta - "
            f"{z}*sqrt(max(h + m, 1))/n = {delta_lb:.4f}"
        )

    # ---- strict path (exact: h - m > z*sqrt(max(h+m,1)) <=> delta_lb > 0) ---------------------
    net = h - m
    z_exact = exact(z)
    lb_positive = n > 0 and net > 0 and Fraction(net) ** 2 > z_exact**2 * max(h + m, 1)
    strict = n > 0 and h > 0 and lb_positive
    if n:
        reasons.append(
            f"strict {'pass' if strict else 'fail'}: h = {h} {'>' if h > 0 else '<='} 0 and "
            f"delta_lb = {delta_lb:.4f} {'>' if lb_positive else '<='} 0"
        )

    # ---- single-round path ---------------------------------------------------------------
    single = False
    if not applies:
        reasons.append(
            f"single-round rule not applied (rounds = {rounds}, "
            f"single_round_rule = {config.single_round_rule!r})"
        )
    elif n:
        floor = max(
            config.single_round_net_floor, math.ceil(exact(config.single_round_net_frac) * n)
        )
        harm = Fraction(m, n)
        harm_cap = exact(config.single_round_harm_cap)
        c1, c2, c3 = net > 0, net >= floor, harm <= harm_cap
        single = c1 and c2 and c3
        reasons.append(
            f"single-round {'pass' if single else 'fail'}: delta = {delta:.4f} "
            f"{'>' if c1 else '<='} 0; h - m = {net} {'>=' if c2 else '<'} "
            f"max({config.single_round_net_floor}, ceil({config.single_round_net_frac}*{n})) "
            f"= {floor}; m/n = {m}/{n} = {float(harm):.4f} {'<=' if c3 else '>'} "
            f"{config.single_round_harm_cap}"
        )

    # ---- verdict -------------------------------------------------------------------------
    path: GatePath
    if invalid:
        path = "invalid"
        reasons.append("verdict: invalid measurement (round rolls back as measurement-invalid)")
    elif strict:
        path = "strict"
        reasons.append("verdict: admitted through the strict path")
    elif single:
        path = "single_round"
        reasons.append("verdict: admitted through the single-round rule")
    else:
        path = "rejected"
        reasons.append("verdict: rejected")
    return GateDecision(
        n=n,
        n_attempted=big_n,
        h=h,
        m=m,
        unchanged_right=counts.unchanged_right,
        unchanged_wrong=counts.unchanged_wrong,
        delta=delta,
        delta_lb=delta_lb,
        z=z,
        error_rate=counts.error_rate,
        tool_error_rate=counts.tool_error_rate,
        rounds=rounds,
        single_round_applies=applies,
        strict_passed=strict,
        single_round_passed=single,
        path=path,
        passed=path in ("strict", "single_round"),
        invalid=path == "invalid",
        reasons=tuple(reasons),
    )
