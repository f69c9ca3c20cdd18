"""What a round's work groups came to, for comparing synthesis arms (issue 13's paired study).

:func:`group_admissions` reads one round of a run and says, per work group, whether a direct
attempt or a chain node cleared the prefilter bar, whether the gate admitted the group's artifact
(the round was accepted and the artifact is in the library it deployed, after pruning), and what
the synthesis spent: direct attempts, chain steps, rollouts and calls from the chain ledger, next
to the analytic bound each chain recorded (``MaraConfig.bound_per_group``: steps, and one scoring of
the group's batch per step).

The arms the study compares differ only in synthesis: discard (K direct attempts, chains off),
chain (K attempts, then a chain of depth d) and discard with the same number of attempts (K + d
attempts, chains off). A group counts as *admitted* only when the gate admits its artifact, not
merely when the prefilter passes it; when the gate rejects the whole library and pruning admits a
part of it, only the groups whose artifacts the pruned library keeps count.
"""

from __future__ import annotations

from typing import Any

from tsevo.marachain import parse_node_id

from ._runs import Run, open_run

__all__ = ["ADMISSION_KEYS", "group_admissions"]

#: Keys of :func:`group_admissions`' result.
ADMISSION_KEYS: tuple[str, ...] = (
    "round",
    "status",
    "groups",
    "survivors",
    "admitted",
    "chained",
    "chain_survivors",
    "chain_admitted",
    "attempts",
    "chain_steps",
    "chain_rollouts",
    "chain_calls",
    "chain_steps_bound",
    "chain_rollouts_bound",
)


def _group_of(tool_id: str) -> str:
    return parse_node_id(tool_id).group_id


def group_admissions(run: Run, round_: int = 1) -> dict[str, Any]:
    """Per-round counts of the work groups' fate (see the module docstring).

    Returns:
        ``round``; ``status`` (the round's verdict: accepted, possibly after pruning, or
        rejected); ``groups``; ``survivors`` (groups with an artifact past the prefilter);
        ``admitted`` (groups whose artifact is in the library the round deployed, sorted ids); ``chained`` (groups where a chain ran); ``chain_survivors`` /
        ``chain_admitted`` (groups whose surviving / admitted artifact is a chain node);
        ``attempts`` (direct attempts, all groups); ``chain_steps``, ``chain_rollouts``,
        ``chain_calls`` (the ledger's spend); ``chain_steps_bound``, ``chain_rollouts_bound``
        (the analytic bounds the chains recorded, summed).

    Raises:
        FileNotFoundError: When the round has not finished (no synthesis or ``round.json``).
    """
    store = open_run(run)
    paths = store.layout.round(round_)
    for p in (paths.synthesis, paths.summary):
        if not p.exists():
            raise FileNotFoundError(f"{p}: round {round_} has not finished")
    synthesis: list[dict[str, Any]] = store.read_json(paths.synthesis)
    # the round's verdict, not the first gate's: a rejected library may be pruned and admitted
    passed = store.read_json(paths.summary).get("status") == "accepted"
    deployed: set[str] = set()
    stage = paths.library / f"stage_{round_}" / "stage.json"
    if passed and stage.exists():
        deployed = {str(t["id"]) for t in store.read_json(stage)["tools"]}
    survivors = {str(g["group_id"]): str(g["survivor"]) for g in synthesis if g.get("survivor")}
    admitted = sorted(g for g, tid in survivors.items() if tid in deployed)
    chained = [g for g in synthesis if g.get("chain")]
    by_chain = {g: t for g, t in survivors.items() if parse_node_id(t).kind == "chain"}
    steps = rollouts = calls = bound_steps = bound_rollouts = 0
    for g in chained:
        ch = g["chain"]
        spend = ch.get("spend") or {}
        bound = ch.get("bound") or {}
        steps += int(spend.get("steps", 0))
        rollouts += int(spend.get("rollouts", 0))
        calls += int(spend.get("calls", 0))
        bound_steps += int(bound.get("steps", 0))
        bound_rollouts += int(bound.get("rollouts", 0))
    return {
        "round": round_,
        "status": "accepted" if passed else "rejected",
        "groups": len(synthesis),
        "survivors": len(survivors),
        "admitted": admitted,
        "chained": len(chained),
        "chain_survivors": len(by_chain),
        "chain_admitted": sorted(g for g in by_chain if by_chain[g] in deployed),
        "attempts": sum(len(g.get("attempts", [])) for g in synthesis),
        "chain_steps": steps,
        "chain_rollouts": rollouts,
        "chain_calls": calls,
        "chain_steps_bound": bound_steps,
        "chain_rollouts_bound": bound_rollouts,
    }
