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

The arms as loose protocol parameters (:func:`chain_arm_params`, read by
:meth:`tsevo.evolve.ProtocolConfig.from_params`) are shared by the benchmark
(``tests/bench/marachain_paired.py``) and the study notebook (``97_study_marachain``).
:func:`chain_arm_row` is one arm's run as one row (the groups' fate and the round's report-only
test); :func:`chain_arms_df` pairs such rows by seed (the groups each arm admitted, the groups the
chain recovered, its cost beside the bound, each arm's test gain with helped / harmed), and
:func:`chain_arms_summary` totals them per arm; :func:`chain_recoveries_df` shows the chain nodes that
won their group, against what the other arms admitted. The test numbers are report-only: no arm's run read
them, and nothing here feeds them back.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from tsevo.marachain import parse_node_id

from ._runs import Run, library_or_none, open_run
from .marachain import chain_nodes_df

__all__ = [
    "ADMISSION_KEYS",
    "CHAIN_ARMS",
    "CHAIN_ARMS_COLUMNS",
    "CHAIN_ARM_KEYS",
    "CHAIN_RECOVERIES_COLUMNS",
    "chain_arm_params",
    "chain_arm_row",
    "chain_arms_df",
    "chain_arms_summary",
    "chain_recoveries_df",
    "group_admissions",
]

#: The three arms of the paired study, in the order they are reported.
CHAIN_ARMS: tuple[str, ...] = ("discard", "chain", "discard_k_plus_d")

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


#: Keys of :func:`chain_arm_row`'s result (after :data:`ADMISSION_KEYS`).
CHAIN_ARM_KEYS: tuple[str, ...] = (
    *ADMISSION_KEYS,
    "n_admitted",
    "gain",
    "helped",
    "harmed",
    "delta",
    "delta_lb",
    "tools",
)

#: Columns of :func:`chain_arms_df`.
CHAIN_ARMS_COLUMNS: tuple[str, ...] = (
    "seed",
    *(f"{a}_admitted" for a in CHAIN_ARMS),
    "recovered",
    "recovered_by_node",
    "lost",
    "k_plus_d_recovered",
    "chain_only",
    "chain_steps",
    "chain_steps_bound",
    "chain_rollouts",
    "chain_rollouts_bound",
    "rollouts_per_recovered",
    *(f"{a}_{k}" for a in CHAIN_ARMS for k in ("gain_pp", "helped", "harmed", "status")),
)


def chain_arm_params(
    arm: str, attempts: int = 3, depth: int = 3, start: str = ""
) -> dict[str, Any]:
    """One arm as loose protocol parameters (:meth:`~tsevo.evolve.ProtocolConfig.from_params`).

    ``discard``: ``attempts`` (K) direct attempts, chains off; ``chain``: the same K attempts, then
    a chain of ``depth`` (d) steps (``marachain.depth``; ``marachain.start`` when ``start`` is
    given, otherwise the chain's default start; with d = 0 the discard protocol itself);
    ``discard_k_plus_d``: K + d direct attempts, chains off (the same number of attempts as the
    chain's).

    Raises:
        ValueError: An arm not in :data:`CHAIN_ARMS`.
    """
    if arm not in CHAIN_ARMS:
        raise ValueError(f"unknown arm {arm!r}; one of {list(CHAIN_ARMS)}")
    if arm == "discard_k_plus_d":
        return {"max_synthesis_attempts": attempts + depth}
    params: dict[str, Any] = {"max_synthesis_attempts": attempts}
    if arm == "chain" and depth > 0:  # depth 0 is chains off: the discard protocol itself
        params["marachain.depth"] = depth
        if start:
            params["marachain.start"] = start
    return params


def chain_arm_row(run: Run, round_: int = 1) -> dict[str, Any]:
    """One arm's round as one row: :func:`group_admissions` and the round's report-only test.

    Returns:
        :data:`CHAIN_ARM_KEYS`: the admission counts, ``n_admitted`` (groups admitted), ``gain``
        (test accuracy after the round minus before; 0.0 for a rejected round, which leaves the
        incoming library; ``None`` without a test table), ``helped`` / ``harmed`` (test answers
        the round fixed / broke; 0 when rejected), the final gate's ``delta`` / ``delta_lb`` and
        ``tools`` (tools in the library the round left; a rejected round carries the last
        accepted round's count, 0 when none). For one round from the empty root this is what
        :func:`tsevo.studies.run_outcome` says of the run.
    """
    store = open_run(run)
    row = group_admissions(store, round_)
    row["n_admitted"] = len(row["admitted"])
    accepted = row["status"] == "accepted"
    paths = store.layout.round(round_)
    summary = store.read_json(paths.summary)
    gate = summary.get("final_gate") or summary.get("gate") or {}
    test = store.read_json_or(paths.test) or {}
    allrow = test["tasks"][-1] if test.get("tasks") else {}
    before = allrow.get("before")
    final = allrow.get("after") if accepted else before
    tools = 0
    for r in range(round_, 0, -1):
        lib = store.layout.round(r).library
        d = store.read_json(store.layout.round(r).summary) if r != round_ else summary
        if d.get("status") == "accepted" and (loaded := library_or_none(lib)) is not None:
            tools = sum(len(s.tools) for s in loaded.stages)
            break
    row.update(
        gain=None if before is None or final is None else final - before,
        helped=int(allrow.get("helped") or 0) if accepted else 0,
        harmed=int(allrow.get("harmed") or 0) if accepted else 0,
        delta=gate.get("delta"),
        delta_lb=gate.get("delta_lb"),
        tools=tools,
    )
    return row


def _by_seed(rows: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, Mapping[str, Any]]]:
    out: dict[int, dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        arm, seed = str(r["arm"]), int(r["seed"])
        if arm not in CHAIN_ARMS:
            raise ValueError(f"row of unknown arm {arm!r}; one of {list(CHAIN_ARMS)}")
        if arm in out.setdefault(seed, {}):
            raise ValueError(f"two rows for seed {seed}, arm {arm!r}")
        out[seed][arm] = r
    return out


def _groups(row: Mapping[str, Any] | None) -> set[str] | None:
    return None if row is None else {str(g) for g in row["admitted"]}


def _minus(a: set[str] | None, b: set[str] | None) -> list[str] | None:
    return None if a is None or b is None else sorted(a - b)


def chain_arms_df(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Arm rows (:func:`chain_arm_row` plus ``seed`` and ``arm``) paired by seed, one row per seed.

    The arms of a seed start from the same suite, split and protocol seed and differ only in
    synthesis, so a group admitted under one arm and not another is the synthesis' doing.

    Columns (:data:`CHAIN_ARMS_COLUMNS`): ``seed``; ``<arm>_admitted`` (groups the gate admitted);
    ``recovered`` (admitted with the chain, not by discard: the gate judges the library as a whole,
    so this holds direct artifacts admitted with the chain's library too), ``recovered_by_node``
    (those whose admitted artifact is a chain node), ``lost`` (admitted by discard, not
    with the chain), ``k_plus_d_recovered`` (admitted by discard with K + d attempts, not by
    discard), ``chain_only`` (admitted with the chain, not by discard with K + d); the chain arm's
    ``chain_steps`` / ``chain_rollouts`` beside ``chain_steps_bound`` / ``chain_rollouts_bound``,
    and ``rollouts_per_recovered`` (per group recovered by a chain node; ``None`` when none);
    per arm ``<arm>_gain_pp`` (report-only test gain, percentage points), ``<arm>_helped``,
    ``<arm>_harmed`` and ``<arm>_status``. Group lists are sorted ids; a column that needs an
    arm the seed lacks is ``None`` (the frame keeps Python objects: counts stay ints).

    Raises:
        ValueError: A row of an unknown arm, or two rows for one seed and arm.
    """
    out = []
    for seed, arms in sorted(_by_seed(rows).items()):
        dis, ch, kd = (_groups(arms.get(a)) for a in CHAIN_ARMS)
        chain = arms.get("chain")
        row: dict[str, Any] = {"seed": seed}
        row.update({f"{a}_admitted": _count(arms.get(a)) for a in CHAIN_ARMS})
        recovered = _minus(ch, dis)
        row.update(
            recovered=recovered,
            recovered_by_node=None
            if chain is None or recovered is None
            else sorted(set(recovered) & {str(g) for g in chain["chain_admitted"]}),
            lost=_minus(dis, ch),
            k_plus_d_recovered=_minus(kd, dis),
            chain_only=_minus(ch, kd),
        )
        for k in ("chain_steps", "chain_steps_bound", "chain_rollouts", "chain_rollouts_bound"):
            row[k] = None if chain is None else int(chain[k])
        n_rec = len(row["recovered_by_node"] or [])
        row["rollouts_per_recovered"] = round(row["chain_rollouts"] / n_rec, 1) if n_rec else None
        for a in CHAIN_ARMS:
            r = arms.get(a)
            gain = None if r is None or r["gain"] is None else round(100 * float(r["gain"]), 2)
            row[f"{a}_gain_pp"] = gain
            for k in ("helped", "harmed", "status"):
                row[f"{a}_{k}"] = None if r is None else r[k]
        out.append(row)
    return pd.DataFrame(out, columns=list(CHAIN_ARMS_COLUMNS), dtype=object)


def _count(row: Mapping[str, Any] | None) -> int | None:
    return None if row is None else len(row["admitted"])


def chain_arms_summary(
    rows: Iterable[Mapping[str, Any]], seeds: Iterable[int] | None = None
) -> dict[str, Any]:
    """Totals per arm over ``seeds`` (default: every seed of the rows), and the issue's check.

    Returns:
        ``arms``: per arm ``seeds``, ``admitted_total``, ``accepted_rounds``, ``attempts_total``,
        chain steps and rollouts with their bounds, ``test_gain_pp_mean`` / ``_sd`` (report-only)
        and ``harmed_total``; ``chain_more_than_discard_seeds``; ``check_chain_beats_discard``
        (the chain admits more groups than discard in total and on at least 3 seeds).
    """
    by = _by_seed(rows)
    order = sorted(by) if seeds is None else [int(s) for s in seeds]
    arms: dict[str, Any] = {}
    for arm in CHAIN_ARMS:
        rs = [by[s][arm] for s in order if arm in by.get(s, {})]
        gains = [100 * r["gain"] for r in rs if r["gain"] is not None]
        arms[arm] = {
            "seeds": len(rs),
            "admitted_total": sum(len(r["admitted"]) for r in rs),
            "accepted_rounds": sum(r["status"] == "accepted" for r in rs),
            "attempts_total": sum(r["attempts"] for r in rs),
            "chain_steps_total": sum(r["chain_steps"] for r in rs),
            "chain_steps_bound": sum(r["chain_steps_bound"] for r in rs),
            "chain_rollouts_total": sum(r["chain_rollouts"] for r in rs),
            "chain_rollouts_bound": sum(r["chain_rollouts_bound"] for r in rs),
            "test_gain_pp_mean": round(statistics.mean(gains), 2) if gains else None,
            "test_gain_pp_sd": round(statistics.stdev(gains), 2) if len(gains) > 1 else None,
            "harmed_total": sum(r["harmed"] for r in rs),
        }
    both = [s for s in order if {"chain", "discard"} <= set(by.get(s, {}))]
    more = [s for s in both if len(by[s]["chain"]["admitted"]) > len(by[s]["discard"]["admitted"])]
    return {
        "arms": arms,
        "chain_more_than_discard_seeds": more,
        "check_chain_beats_discard": (
            arms["chain"]["admitted_total"] > arms["discard"]["admitted_total"] and len(more) >= 3
        ),
    }


#: Columns of :func:`chain_recoveries_df`.
CHAIN_RECOVERIES_COLUMNS: tuple[str, ...] = (
    "group",
    "node_id",
    "step",
    "axis",
    "subject",
    "repairs",
    "harms",
    "chain_admitted",
    "discard_admitted",
    "k_plus_d_admitted",
)


def chain_recoveries_df(runs: Mapping[str, Run], round_: int = 1) -> pd.DataFrame:
    """The chain arm's winning nodes (a node past the bar), beside what each arm's gate admitted.

    Args:
        runs: Arm name -> its run (:data:`CHAIN_ARMS`; arms may be missing).
        round_: The round read in every run.

    Returns:
        One row per group whose surviving artifact is a chain node, columns
        :data:`CHAIN_RECOVERIES_COLUMNS`: the node (``node_id``, ``step``, the move's ``axis`` and
        ``subject``, its batch ``repairs`` / ``harms``), and whether the group was admitted with
        the chain, by discard and by discard with K + d attempts (``None`` without that arm).
        Empty without a chain arm.
    """
    cols = list(CHAIN_RECOVERIES_COLUMNS)
    if "chain" not in runs:
        return pd.DataFrame(columns=cols)
    admitted = {a: set(group_admissions(r, round_)["admitted"]) for a, r in runs.items()}
    nodes = chain_nodes_df(runs["chain"])
    won = nodes[(nodes["round"] == round_) & nodes["survivor"].astype(bool)].copy()
    won["chain_admitted"] = won["group"].isin(admitted["chain"])
    for arm, col in (("discard", "discard_admitted"), ("discard_k_plus_d", "k_plus_d_admitted")):
        won[col] = [g in admitted[arm] if arm in admitted else None for g in won["group"]]
    return won[cols].sort_values("group").reset_index(drop=True).astype(object)
