"""The Mara chain loop, and its builtin step: a deterministic, delta-guided search over templates.

:func:`run_chain` runs one chain with a step proposer: :class:`BuiltinProposer` (below) or the LLM
step (:mod:`tsevo.evolve.chain_llm`: an analysis call, then a mutation call, both checked against
tsevo's row sets); checks, scoring, the ledger, stopping and the winner are shared. The rest of
this docstring describes the builtin step; further chains and polish runs come after it.

When none of a work group's direct attempts clears the prefilter bar and chains are on
(``cfg.marachain.depth > 0``), :func:`run_builtin_chain` refines the chain's start v0 (chosen by
:func:`tsevo.marachain.chain_start`, ``strongest`` or ``last``) for at most ``depth`` steps. Each
step edits the parent along one family of :mod:`tsevo.marachain.moves` (window, normalization,
primitive within the contract's family, another measurement, scope within the contract, reading
rule, revert of a lost win), keeping the signature and the artifact kind:

* the parent's per-row facts on the batch (out of scope, abstained, kept, replaced) and the score
  history give category counts (``H`` lost wins, ``A`` never triggered, ``I`` kept with the
  evidence right, ``B`` content wrong; held-out errors outside the contract's scope count apart);
* the leading category's families come first (ties H > A > I > B), families whose earlier changes
  gained more first among them; a family changed twice without gain is exhausted (F);
* among the families that change what is measured, the one whose best unseen move recovers gold
  best on the group's support rows (never the batch) is taken.

Every node goes through the same checks as a direct attempt and the same prefilter scoring, on
one fixed batch: the group's held-out errors and v0's harm probe, train rows only (the evaluator
is wrapped by :class:`TrainOnlyEvaluator`, which raises on any other split). Spends go through
the round's :class:`~tsevo.marachain.ChainLedger` (one ``<node_id>:score`` entry per step, with
the step's category and label, so a resumed chain never counts a step twice and a step already
recorded skips the cap check it passed when it ran); a step whose node scores worse than its
parent (fewer net repairs) is kept on record but the next step edits the parent again. A chain
stops at the first node that clears the bar (``paper``) or per the ``code`` variant's early stop,
on an exhausted budget, or when no move is left (``exhausted``). The result is labelled ``builtin
chain``; per node, ``synthesis.json`` records the family, category, what it fixed and broke, its
raw and credited scores and facts on the batch as strings in batch order (``batch.qids``).

After chain 1 every node scored on the batch enters the group's Pareto-filtered top-N pool
(``pool_size``; a snapshot is recorded). While no node is accepted, chains 2..``chains_per_group``
start from seeded draws of the pool (``sampler``); while the winner clears the bar but is not
strong, ``polish_steps`` one-step polish runs start from draws among the pool's passing,
not-yet-strong members. Their walks are recorded under ``further``, the pool after each under
``pools``; the winner is chosen over every node. With one chain and no polish the pool only
reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tsevo.library.tool import Tool
from tsevo.marachain import (
    Bar,
    BatchSpec,
    ChainNode,
    ChangeEntry,
    NodeScore,
    PoolMember,
    PoolUpdate,
    ScoreHistory,
    chain_start,
    sample,
    update_pool,
    winner,
)
from tsevo.marachain.genome import genome_of
from tsevo.marachain.step import artifact_key, plan_of, rule_variant

from .chain_types import LABEL, BuiltinProposer, ChainInputs, ChainSplitError, TrainOnlyEvaluator
from .chain_walk import ChainRun, bits, node_hash, score_node

__all__ = [
    "LABEL",
    "ChainSplitError",
    "TrainOnlyEvaluator",
    "rule_variant",
    "run_builtin_chain",
    "run_chain",
]


def _direct_nodes(tries: Sequence[tuple[Any, Tool]], group_id: str) -> list[ChainNode]:
    """Direct attempts as chain nodes for the start rule.

    Each is scored on a stand-in batch of its own size (its probe was drawn for its scope): the
    bar only reads counts, so stand-in ids for the rows it neither repaired nor harmed suffice
    (with the prefilter's count of held-out errors inside its contract).
    """
    out = []
    for seq, (rec, draft) in enumerate(tries):
        score = None
        if rec.checked:
            held = [*rec.repairs, *(f"~h{i}" for i in range(rec.n_held_out - len(rec.repairs)))]
            probe = [*rec.harms, *(f"~p{i}" for i in range(rec.n_probe - len(rec.harms)))]
            batch = BatchSpec.build(group_id, held, probe, lambda _q: "train")
            score = NodeScore.from_outcome(
                batch,
                repairs=rec.repairs,
                harms=rec.harms,
                exec_errors=rec.exec_errors,
                tool_runs=rec.tool_runs,
                in_contract=rec.n_in_contract,
            )
        out.append(
            ChainNode(
                draft.id,
                group_id,
                "direct",
                rec.attempt,
                0,
                "",
                "",
                seq,
                node_hash(draft),
                score,
                "" if score is not None else ("; ".join(rec.violations) or rec.outcome),
            )
        )
    return out


def run_builtin_chain(inp: ChainInputs) -> tuple[tuple[Tool, Any] | None, dict[str, Any] | None]:
    """Run chain 1 of a group whose direct attempts all missed the bar, with the builtin step."""
    return run_chain(inp, BuiltinProposer(inp))


def run_chain(
    inp: ChainInputs, proposer: Any
) -> tuple[tuple[Tool, Any] | None, dict[str, Any] | None]:
    """Run chain 1 of a group whose direct attempts all missed the bar.

    ``proposer`` picks each step's move (:class:`BuiltinProposer`, or the LLM step of
    ``tsevo.evolve.chain_llm``); everything else (checks, scoring, the ledger, stopping, the
    winner) is the same for both. Two refused steps in a row stop the chain.

    Returns:
        The winner ``(draft, record)`` (or ``None``) and the chain's record for
        ``synthesis.json`` (``None`` when no chain started).
    """
    mara = inp.cfg.marachain
    gid, r = inp.group.id, inp.round_
    bar = Bar.of(inp.cfg)

    def train_split(q: str) -> str:
        return "train" if q in inp.train else "not-train"

    try:
        direct = _direct_nodes(inp.tries, gid)
    except ValueError:  # ids outside the node grammar (a group id with dots): no chain
        return None, None
    start = chain_start(direct, mara.start, bar)
    if not start.yes:
        return None, None
    v0 = next(d for _, d in inp.tries if d.id == start.node_id)
    probe = inp.probe_of(v0)
    batch = BatchSpec.build(gid, [q.id for q in inp.held_qs], [q.id for q in probe], train_split)
    guarded = TrainOnlyEvaluator(inp.evaluator, inp.train)
    # v0 rescored on the chain's batch (its own probe, so the same rollouts: cache hits)
    rec0 = inp.new_record(v0.id, v0.contract.measurement)
    rec0.checked = True
    v0_score, v0_out, v0_recs = score_node(inp, v0, probe, guarded, rec0, batch)
    history = ScoreHistory.start(batch).extend(
        v0.id, v0_score, ChangeEntry.make(1, v0.id, "start", f"v0: direct attempt {v0.id}")
    )
    plan_rows, plan_branches = plan_of(inp.group)
    v0_node = next(n for n in direct if n.node_id == v0.id)
    run = ChainRun(
        inp, proposer, batch, probe, guarded, bar, v0, len(direct),
        chain_nodes=[replace(v0_node, score=v0_score)],
        scored={v0.id: (v0, v0_score, v0_recs)},
        made={v0.id: (v0, rec0)},
        genomes={v0.id: genome_of(v0, plan_rows, plan_branches)},
        outs={v0.id: v0_out},
        paths={v0.id: history},
        tried=[rec.measurement for rec, _ in inp.tries],
        seen={artifact_key(d) for _, d in inp.tries},
    )  # fmt: skip
    first = run.walk(1, v0.id, mara.depth)
    further, pools = _further(run, r, gid)
    won = winner(run.chain_nodes, batch.root_score(), mara.acceptance, bar)
    result = run.made[won.node_id] if won.yes and won.node_id is not None else None
    record_out = {
        "label": proposer.label,
        "chain_id": first["chain_id"],
        "acceptance": mara.acceptance,
        "start": start.to_dict(),
        "batch": {
            "fingerprint": batch.fingerprint,
            "n_held_out": batch.n_held_out,
            "n_probe": batch.n_probe,
            "qids": list(batch.qids),
        },
        "v0": {
            "node_id": v0.id,
            "measurement": v0.contract.measurement,
            "outcome": rec0.outcome,
            "repairs": len(v0_score.repairs),
            "harms": len(v0_score.harms),
            "raw_sum": v0_score.raw_sum,
            "raw": bits(v0_score.raw),
            "credited": bits(v0_score.credited),
            "facts": "".join(v0_score.facts),
            "templated": run.genomes[v0.id] is not None,
        },
        "nodes": first["nodes"],
        "stopped": first["stopped"],
        "winner": won.to_dict(),
        "spend": inp.ledger.total(chain_id=first["chain_id"]).to_dict(),
        "bound": mara.bound_per_group(len(batch.qids)),
        "pool": pools[-1],
    }
    if further:
        for w in further:
            w["spend"] = inp.ledger.total(chain_id=w["chain_id"]).to_dict()
        record_out["further"] = further
        record_out["pools"] = pools
    return result, record_out


def _pool(run: ChainRun) -> PoolUpdate:
    """The pool of every node scored on the batch (v0 and chain nodes), updated anew."""
    seqs = {n.node_id: n.local_seq for n in run.chain_nodes}
    members = [
        PoolMember(nid, score.vector, len(run.paths[nid].nodes) - 1, seqs[nid])
        for nid, (_d, score, _r) in run.scored.items()
    ]
    return update_pool(members, run.inp.cfg.marachain.pool_size)


def _further(run: ChainRun, r: int, gid: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Chains 2.. (while no node is accepted) and polish runs (while the winner is not strong).

    Each starts from a seeded draw of the pool (``marachain.sampler``); chains walk ``depth``
    steps, a polish run one step from a passing, not-yet-strong member. Returns the walks'
    records and the pool snapshots (one after each walk, the last one final).
    """
    mara, bar = run.inp.cfg.marachain, run.bar
    seed = mara.draw_seed(run.inp.cfg.seed)
    root = run.batch.root_score()
    pool = _pool(run)
    pools, walks = [pool.to_dict()], []

    def draw(members: Sequence[PoolMember], event: str) -> str | None:
        got = sample(
            members, 1, sampler=mara.sampler, seed=seed, round_=r, group_id=gid, event=event
        )
        return got[0] if got else None

    for c in range(2, mara.chains_per_group + 1):
        if winner(run.chain_nodes, root, mara.acceptance, bar).yes:
            break
        nid = draw(pool.kept, f"chain:{c}")
        if nid is None:
            break
        walks.append(run.walk(c, nid, mara.depth))
        pool = _pool(run)
        pools.append(pool.to_dict())
    for p in range(1, mara.polish_steps + 1):
        won = winner(run.chain_nodes, root, mara.acceptance, bar)
        if not won.yes or won.node_id not in run.scored:
            break
        if bar.check(run.scored[won.node_id][1]).strong:
            break
        checks = {m.node_id: bar.check(run.scored[m.node_id][1]) for m in pool.kept}
        polishable = [
            m for m in pool.kept if checks[m.node_id].passed and not checks[m.node_id].strong
        ]
        nid = draw(polishable, f"polish:{p}")
        if nid is None:
            break
        walks.append(run.walk(p, nid, 1, polish=True))
        pool = _pool(run)
        pools.append(pool.to_dict())
    return walks, pools
