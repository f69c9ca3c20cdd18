"""Per-update attribution and the one-shot attribution prune (DESIGN.md §2 step 7).

On a failed (rejected, not invalid) gate, every update ``u`` of the candidate stage (a tool, a
guidance refine, a rescope override, a retire tombstone) gets its own counts on validation:

* ``h_u``: helped questions where ``u`` was *responsible* for the candidate's answer;
* ``m_u``: harmed questions where ``u`` was responsible.

An update is responsible for a question when its evidence was used by a review that replaced the
incoming answer (for a rescope or retire: when its override suppressed an earlier tool and the
answer changed). A helped or harmed question counts for every responsible update. The traces say
which; this module takes them as :class:`Attribution` records.

*Clearly harmful* means ``m_u >= 2`` and ``m_u > 2 * h_u`` (``prune_min_harm``,
``prune_harm_ratio``); thin or mixed evidence is left alone. The harmful updates and their
dependents (transitively) are removed in one transaction, the pruned library is retested once, and
it deploys only on a strictly better ``delta_lb`` together with a passing gate. In the same
transaction, composite tools (one branch per question kind) lose the kind matchers of the branches
that stood behind at least one harmed validation question and no more helped ones
(:func:`tsevo.evolve.reconcile.narrow_branches`, the rule scope reconciliation applies to an
accepted library): a composite's branches read different question kinds, so one harmful branch
would otherwise sink, or be kept with, every other. There is never a
second prune: AUTO_PRUNE is off (``ProtocolConfig.auto_prune`` can only be ``False``), and
:func:`plan_prune` refuses when told a prune already ran.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.evolve.attribution import Attribution, AttributionSummary, UpdateCounts, attribute
from tsevo.evolve.config import ProtocolConfig, exact
from tsevo.evolve.gate import GateDecision
from tsevo.library.tool import Tool

__all__ = [
    "Attribution",
    "AttributionSummary",
    "PruneError",
    "PrunePlan",
    "PruneRecord",
    "UpdateCounts",
    "accept_pruned",
    "attribute",
    "clearly_harmful",
    "dependents",
    "plan_prune",
    "update_attributions",
]


class PruneError(RuntimeError):
    """A prune that the protocol forbids (a second prune, or a prune of a non-rejected gate)."""


def clearly_harmful(h_u: int, m_u: int, config: ProtocolConfig) -> bool:
    """Return whether an update is clearly harmful: ``m_u >= 2`` and ``m_u > 2 * h_u``.

    The thresholds are ``config.prune_min_harm`` and ``config.prune_harm_ratio``; the comparison
    is exact.

    Args:
        h_u: Helped questions the update was responsible for.
        m_u: Harmed questions the update was responsible for.
        config: The protocol config.
    """
    if h_u < 0 or m_u < 0:
        raise ValueError(f"counts must be >= 0, got h_u={h_u}, m_u={m_u}")
    return m_u >= config.prune_min_harm and Fraction(m_u) > exact(config.prune_harm_ratio) * h_u


def _why_kept(h: int, m: int, config: ProtocolConfig) -> str:
    if h == 0 and m == 0:
        return "kept: changed no validation answer (may have met no matching question)"
    if m < config.prune_min_harm:
        return f"kept: thin evidence of harm (m_u = {m} < {config.prune_min_harm}; h_u = {h})"
    bound = float(exact(config.prune_harm_ratio) * h)
    return (
        f"kept: mixed evidence (m_u = {m} <= {config.prune_harm_ratio}*h_u = {bound:g}; h_u = {h})"
    )


@dataclass(frozen=True)
class PrunePlan:
    """What one prune removes, in one transaction.

    Attributes:
        harmful: Clearly harmful updates, sorted.
        removed: Harmful updates and their dependents (transitively), sorted.
        kept: Every other known update, sorted.
        reasons: ``(update id, reason)`` for every known update, sorted by id.
        counts: ``(update id, h_u, m_u)`` for every counted update, sorted by id.
    """

    harmful: tuple[str, ...]
    removed: tuple[str, ...]
    kept: tuple[str, ...]
    reasons: tuple[tuple[str, str], ...]
    counts: tuple[tuple[str, int, int], ...] = ()

    @property
    def empty(self) -> bool:
        """Return whether nothing is removed (the round then rolls back without a retest)."""
        return not self.removed

    @property
    def removes_all(self) -> bool:
        """Return whether every known update is removed (the pruned library equals the base)."""
        return bool(self.removed) and not self.kept

    def reason(self, update: str) -> str:
        """Return the recorded reason for one update.

        Raises:
            KeyError: If the update is unknown to the plan.
        """
        for u, r in self.reasons:
            if u == update:
                return r
        raise KeyError(update)

    def to_dict(self) -> dict[str, Any]:
        """Return the plan as a JSON-friendly dict."""
        return {
            "harmful": list(self.harmful),
            "removed": list(self.removed),
            "kept": list(self.kept),
            "reasons": {u: r for u, r in self.reasons},
            "counts": {u: {"helped": h, "harmed": m} for u, h, m in self.counts},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrunePlan:
        """Rebuild a plan from :meth:`to_dict` output."""
        return cls(
            harmful=tuple(data["harmful"]),
            removed=tuple(data["removed"]),
            kept=tuple(data["kept"]),
            reasons=tuple(sorted((str(u), str(r)) for u, r in data["reasons"].items())),
            counts=tuple(
                sorted(
                    (str(u), int(c["helped"]), int(c["harmed"]))
                    for u, c in data.get("counts", {}).items()
                )
            ),
        )


def plan_prune(
    counts_by_update: Mapping[str, UpdateCounts | tuple[int, int]],
    dependents: Mapping[str, Iterable[str]],
    config: ProtocolConfig,
    *,
    already_pruned: bool = False,
) -> PrunePlan:
    """Plan the one-shot prune: clearly harmful updates and all their dependents.

    Args:
        counts_by_update: Update id -> :class:`UpdateCounts` or ``(h_u, m_u)``.
        dependents: Update id -> ids of the updates that depend on it (those that target it with
            a refine or rescope, and members of its merged work group sharing its measurement).
            Removal follows this relation transitively. Ids may be absent from
            ``counts_by_update`` (they then count as having changed nothing).
        config: The protocol config (``prune_min_harm``, ``prune_harm_ratio``).
        already_pruned: ``True`` when this round already ran its prune. The round engine passes
            it; AUTO_PRUNE is off, so a second prune is refused.

    Returns:
        The plan; :attr:`PrunePlan.empty` when no update is clearly harmful.

    Raises:
        PruneError: If ``already_pruned`` is true (no second prune).
    """
    if already_pruned:
        raise PruneError(
            "no second prune: this round already ran its one-shot prune (auto_prune is off; "
            "repeated retesting would fit the library to the validation split)"
        )
    if config.auto_prune:  # pragma: no cover - ProtocolConfig rejects auto_prune=True
        raise PruneError("auto_prune=True is not supported")
    counts: dict[str, tuple[int, int]] = {}
    for u, c in counts_by_update.items():
        counts[u] = (c.helped, c.harmed) if isinstance(c, UpdateCounts) else (int(c[0]), int(c[1]))
    known = set(counts)
    for u, deps in dependents.items():
        known.add(u)
        known.update(deps)

    harmful = sorted(u for u, (h, m) in counts.items() if clearly_harmful(h, m, config))
    reasons: dict[str, str] = {}
    for u in harmful:
        h, m = counts[u]
        bound = float(exact(config.prune_harm_ratio) * h)
        reasons[u] = (
            f"removed: clearly harmful (m_u = {m} >= {config.prune_min_harm} and "
            f"m_u = {m} > {config.prune_harm_ratio}*h_u = {bound:g})"
        )
    removed = set(harmful)
    frontier = list(harmful)
    while frontier:
        parent = frontier.pop()
        for child in sorted(dependents.get(parent, ())):
            if child not in removed:
                removed.add(child)
                frontier.append(child)
                reasons[child] = f"removed: depends on {parent} (which is removed)"
    kept = sorted(known - removed)
    for u in kept:
        h, m = counts.get(u, (0, 0))
        reasons[u] = _why_kept(h, m, config)
    return PrunePlan(
        harmful=tuple(harmful),
        removed=tuple(sorted(removed)),
        kept=tuple(kept),
        reasons=tuple(sorted(reasons.items())),
        counts=tuple(sorted((u, h, m) for u, (h, m) in counts.items())),
    )


def dependents(updates: Sequence[Tool]) -> dict[str, set[str]]:
    """The dependents relation of a candidate stage's updates (DESIGN.md §2, decided gaps).

    The dependents of ``u`` are the updates that target it (a refine's usage guidance, a rescope's
    override, a retire's tombstone) and the members of ``u``'s own merged work group
    (``provenance.group``) that share its measurement. Updates of other work groups are never
    linked, whatever they measure: removing a harmful tool must not take a helpful tool of another
    bucket with it. Updates without a recorded group have no group-mates.

    Args:
        updates: The candidate stage's updates.

    Returns:
        Update id -> ids of the updates removed with it (``plan_prune`` follows it transitively).
    """
    deps: dict[str, set[str]] = {t.id: set() for t in updates}
    for t in updates:
        if t.target in deps and t.target != t.id:
            deps[t.target].add(t.id)
    for t in updates:
        if not t.provenance.group:
            continue
        deps[t.id] |= {
            o.id
            for o in updates
            if o.id != t.id
            and o.provenance.group == t.provenance.group
            and o.contract.measurement == t.contract.measurement
        }
    return deps


def _lb(decision: GateDecision) -> float:
    return -math.inf if decision.delta_lb is None else decision.delta_lb


def accept_pruned(first: GateDecision, retest: GateDecision) -> bool:
    """Return whether the pruned library deploys: a passing retest with a strictly better δ_lb.

    Args:
        first: The gate decision that rejected the full candidate library.
        retest: The single retest of the pruned library (same validation split).

    Returns:
        ``True`` only when ``retest`` passed (strict or single-round) and its ``delta_lb`` is
        strictly greater than ``first.delta_lb``.

    Raises:
        PruneError: If ``first`` did not reject a valid measurement (passed or invalid gates are
            never pruned).
    """
    if first.path != "rejected":
        raise PruneError(
            f"a prune follows only a rejected gate; the first gate's path is {first.path!r}"
        )
    return retest.passed and _lb(retest) > _lb(first)


@dataclass(frozen=True)
class PruneRecord:
    """Everything about a round's one prune, as the run store saves it (``prune.json``).

    Attributes:
        first: The gate decision that rejected the candidate library.
        attribution: Per-update counts behind the plan.
        plan: The prune plan.
        retest: The retest of the pruned library (``None`` when nothing was removed).
        accepted: Whether the pruned library deploys.
        outcome: One line saying what happened.
        branches: Composite tools' branch edits of the same transaction (one per narrowed tool,
            :func:`tsevo.evolve.reconcile.narrow_branches`).
    """

    first: GateDecision
    attribution: AttributionSummary
    plan: PrunePlan
    retest: GateDecision | None
    accepted: bool
    outcome: str
    branches: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def build(
        cls,
        first: GateDecision,
        attribution: AttributionSummary,
        plan: PrunePlan,
        retest: GateDecision | None,
        branches: Sequence[Mapping[str, Any]] = (),
    ) -> PruneRecord:
        """Assemble the record and decide acceptance with :func:`accept_pruned`.

        Args:
            first: The rejecting gate decision.
            attribution: The per-update counts.
            plan: The plan from :func:`plan_prune`.
            retest: The retest decision, or ``None`` when the plan removed nothing and narrowed no
                branch, or removed everything (the pruned library is then the current one: a
                rollback without a retest).
            branches: Branch edits of composite tools in the same transaction.

        Raises:
            PruneError: If ``first`` was not a rejection.
            ValueError: If a retest is given for an empty plan or missing for a plan that removes
                some but not all updates.
        """
        if first.path != "rejected":
            raise PruneError(f"a prune follows only a rejected gate, not {first.path!r}")
        edits = tuple(dict(b) for b in branches)
        if plan.empty and not edits:
            if retest is not None:
                raise ValueError("an empty prune plan has no retest")
            return cls(first, attribution, plan, None, False, "no clearly harmful update: rollback")
        if plan.removes_all and retest is None:  # the pruned library is the current one
            return cls(
                first,
                attribution,
                plan,
                None,
                False,
                f"every update ({len(plan.removed)}) is harmful or depends on one: rollback",
            )
        if retest is None:
            raise ValueError("a non-empty prune plan needs its one retest")
        ok = accept_pruned(first, retest)
        what = f"pruned {len(plan.removed)} update(s)"
        if edits:
            n = sum(len(e.get("removed_branches", ())) for e in edits)
            what += f" and {n} branch(es) of {len(edits)} composite tool(s)"
        if ok:
            outcome = (
                f"{what}; retest passed ({retest.path}) with "
                f"delta_lb {_lb(retest):.4f} > {_lb(first):.4f}: deploy"
            )
        elif not retest.passed:
            outcome = f"{what}; retest {retest.path}: rollback"
        else:
            outcome = (
                f"{what}; retest passed but delta_lb "
                f"{_lb(retest):.4f} <= {_lb(first):.4f}: rollback"
            )
        return cls(first, attribution, plan, retest, ok, outcome, edits)

    def to_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-friendly dict."""
        return {
            "first": self.first.to_dict(),
            "attribution": self.attribution.to_dict(),
            "plan": self.plan.to_dict(),
            "retest": None if self.retest is None else self.retest.to_dict(),
            "accepted": self.accepted,
            "outcome": self.outcome,
            **({"branches": [dict(b) for b in self.branches]} if self.branches else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PruneRecord:
        """Rebuild a record from :meth:`to_dict` output."""
        retest = data.get("retest")
        return cls(
            first=GateDecision.from_dict(data["first"]),
            attribution=AttributionSummary.from_dict(data["attribution"]),
            plan=PrunePlan.from_dict(data["plan"]),
            retest=None if retest is None else GateDecision.from_dict(retest),
            accepted=bool(data["accepted"]),
            outcome=str(data["outcome"]),
            branches=tuple(dict(b) for b in data.get("branches") or ()),
        )


def update_attributions(
    survivors: Sequence[Tool], base: Mapping[str, AnswerRecord], cand: Mapping[str, AnswerRecord]
) -> list[Attribution]:
    """Which of this round's updates were responsible for each candidate answer.

    Tools and usage guidance: credited when they drove a replacement (the trace's ``replaced_by``).
    Scope overrides and tombstones: credited when the earlier tool they target decided the current
    library's answer and no longer fires (they help or harm by preventing a fire).
    """
    new_ids = {t.id for t in survivors}
    overrides = [t for t in survivors if t.kind in ("scope_override", "tombstone")]
    out = []
    for q, rec in cand.items():
        resp = set(rec.replaced_by) & new_ids
        b = base.get(q)
        if b is not None:
            for t in overrides:
                if t.target in b.replaced_by and t.target not in rec.tools_ok:
                    resp.add(t.id)
        if resp:
            out.append(Attribution(q, tuple(sorted(resp))))
    return out
