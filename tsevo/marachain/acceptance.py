"""The two acceptance variants of a chain (design §4), as pure functions returning a decision.

=============  ===============================================  ================================
               ``paper`` (the default)                           ``code`` (AntOmniEvo's release)
=============  ===============================================  ================================
early stop     the node clears the bar                          the bar, or every row right
winner         best strength key among nodes clearing the bar   best raw sum, the earlier node
                                                                on ties (direct attempts too)
accepted iff   it clears the bar                                raw sum > the parent's + 1e-8,
                                                                or every row right
=============  ===============================================  ================================

*The bar* is the prefilter bar of a direct attempt (:class:`~tsevo.marachain.score.Bar`). *The
parent* of ``code`` is the library the candidates extend, ``L_{r-1}``: its batch sum is ``|P|``
(0 on every held-out error, 1 on every probe row). ``code`` ignores attribution and the harm cap
when it accepts; the bar only stops a chain early. At depth 0 there is no chain, so the variants
coincide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .nodes import ChainNode
from .score import Bar, NodeScore, strength_key

__all__ = [
    "ACCEPTANCE_VARIANTS",
    "EPS_SUM",
    "START_RULES",
    "Decision",
    "accept",
    "chain_start",
    "decisions",
    "early_stop",
    "winner",
]

#: The variants, by their ``MaraConfig.acceptance`` name.
ACCEPTANCE_VARIANTS: tuple[str, ...] = ("paper", "code")
#: Where a chain starts (``MaraConfig.start``).
START_RULES: tuple[str, ...] = ("strongest", "last")
#: The margin by which ``code`` needs the raw sum to beat the parent's.
EPS_SUM = 1e-8


@dataclass(frozen=True)
class Decision:
    """A yes/no decision of one variant, with its reason and, for :func:`winner`, the node."""

    yes: bool
    variant: str
    reason: str
    node_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return dict(self.__dict__)


def _variant(variant: str) -> str:
    if variant not in ACCEPTANCE_VARIANTS:
        raise ValueError(
            f"acceptance variant must be one of {list(ACCEPTANCE_VARIANTS)}, got {variant!r}"
        )
    return variant


def _bar_reason(score: NodeScore, bar: Bar) -> tuple[bool, str]:
    c = bar.check(score)
    nums = (
        f"{c.repairs} repair(s) (need {bar.min_repairs}), harm {c.harms} of {score.n_probe} "
        f"(cap {c.harm_cap:g}), exec errors {c.error_rate:.2f} (cap {bar.exec_error_cap:g})"
    )
    if c.passed:
        return True, f"clears the bar: {nums}"
    return False, f"misses the bar ({c.outcome}): {nums}"


def _sum_reason(score: NodeScore, parent: NodeScore) -> tuple[bool, str]:
    if score.qids != parent.qids:
        raise ValueError("code acceptance: node and parent are scored on different batches")
    if score.all_right:
        return True, f"every row right ({score.raw_sum} of {len(score.raw)})"
    if score.raw_sum > parent.raw_sum + EPS_SUM:
        return True, f"raw sum {score.raw_sum} beats the parent's {parent.raw_sum}"
    return False, f"raw sum {score.raw_sum} does not beat the parent's {parent.raw_sum}"


def accept(score: NodeScore, parent: NodeScore, variant: str, bar: Bar) -> Decision:
    """Whether a node's score is accepted under ``variant``.

    Args:
        score: The node's batch score.
        parent: The parent library's score on the same batch (the root; ``code`` only).
        variant: ``paper`` or ``code``.
        bar: The prefilter bar (``paper`` only).
    """
    if _variant(variant) == "paper":
        ok, why = _bar_reason(score, bar)
    else:
        ok, why = _sum_reason(score, parent)
    return Decision(ok, variant, why)


def early_stop(score: NodeScore, variant: str, bar: Bar) -> Decision:
    """Whether the chain stops after this node (no further rollouts).

    Both variants stop at a node that clears the bar; ``code`` also at a node with every row right.
    """
    ok, why = _bar_reason(score, bar)
    if not ok and _variant(variant) == "code" and score.all_right:
        ok, why = True, f"every row right ({score.raw_sum} of {len(score.raw)})"
    return Decision(ok, variant, why)


def winner(nodes: Iterable[ChainNode], parent: NodeScore, variant: str, bar: Bar) -> Decision:
    """The node a group submits under ``variant``, or none (``node_id`` ``None``).

    ``paper``: the best :func:`~tsevo.marachain.score.strength_key` among scored nodes that clear
    the bar. ``code``: the best raw sum over every scored node (direct attempts included; the
    smaller ``local_seq`` on ties), accepted only if :func:`accept` accepts it. Invalid nodes never
    win.
    """
    scored = [n for n in nodes if n.score is not None]
    if _variant(variant) == "paper":
        passing = [n for n in scored if n.score is not None and bar.check(n.score).passed]
        if not passing:
            return Decision(False, variant, f"no node of {len(scored)} clears the bar")
        best = max(passing, key=_strength)
        assert best.score is not None
        return Decision(True, variant, _bar_reason(best.score, bar)[1], best.node_id)
    if not scored:
        return Decision(False, variant, "no scored node")
    best = min(scored, key=_by_raw_sum)
    assert best.score is not None
    ok, why = _sum_reason(best.score, parent)
    return Decision(
        ok, variant, f"best raw sum {best.node_id}: {why}", best.node_id if ok else None
    )


def _strength(n: ChainNode) -> tuple[int, int, int, int]:
    assert n.score is not None
    return strength_key(n.score, n.local_seq)


def _by_raw_sum(n: ChainNode) -> tuple[int, int]:
    assert n.score is not None
    return (-n.score.raw_sum, n.local_seq)


def decisions(nodes: Iterable[ChainNode], parent: NodeScore, bar: Bar) -> Mapping[str, Decision]:
    """Both variants' winners side by side (``{"paper": ..., "code": ...}``), for reports."""
    items = list(nodes)
    return {v: winner(items, parent, v, bar) for v in ACCEPTANCE_VARIANTS}


def chain_start(direct: Iterable[ChainNode], start: str, bar: Bar) -> Decision:
    """Whether a group's direct attempts spawn a chain, and from which node (v0).

    No chain when a direct attempt clears the bar (it is submitted as published) or when no
    attempt was scored (nothing to refine). Otherwise v0 is the scored attempt with the best
    strength key (``strongest``) or the last scored one (``last``, the Mara paper's choice).
    ``Decision.variant`` holds the start rule.

    Raises:
        ValueError: For an unknown rule or a node that is not a direct attempt.
    """
    if start not in START_RULES:
        raise ValueError(f"chain start must be one of {list(START_RULES)}, got {start!r}")
    nodes = list(direct)
    if any(n.kind != "direct" for n in nodes):
        raise ValueError("chain_start: only direct attempts choose v0")
    scored = [n for n in nodes if n.score is not None]
    passing = [n.node_id for n in scored if n.score is not None and bar.check(n.score).passed]
    if passing:
        return Decision(False, start, f"direct attempt {passing[0]} clears the bar: no chain")
    if not scored:
        return Decision(False, start, f"none of {len(nodes)} direct attempts was scored: no chain")
    if start == "strongest":
        v0 = max(scored, key=_strength)
    else:
        v0 = max(scored, key=lambda n: n.local_seq)
    return Decision(True, start, f"{start} rejected direct attempt of {len(scored)}", v0.node_id)
