"""The Mara chain loop, and its builtin step: a deterministic, delta-guided search over templates.

:func:`run_chain` runs one chain with a step proposer: :class:`BuiltinProposer` (below) or the LLM
step (:mod:`tsevo.evolve.chain_llm`: an analysis call, then a mutation call, both checked against
tsevo's row sets); checks, scoring, the ledger, stopping and the winner are shared. The rest of
this docstring describes the builtin step.


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
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.library.tool import Tool
from tsevo.marachain import (
    Bar,
    BatchSpec,
    ChainNode,
    ChangeEntry,
    LedgerEntry,
    NodeScore,
    ScoreHistory,
    Spend,
    chain_id,
    chain_node_id,
    chain_start,
    early_stop,
    winner,
)
from tsevo.marachain.genome import Genome, genome_of
from tsevo.marachain.moves import row_facts
from tsevo.marachain.step import (
    Move,
    Parent,
    artifact_key,
    outputs_of,
    plan_of,
    rule_variant,
)

from .chain_types import (
    LABEL,
    BuiltinProposer,
    ChainInputs,
    ChainSplitError,
    Proposal,
    StepState,
    TrainOnlyEvaluator,
)

__all__ = [
    "LABEL",
    "BuiltinProposer",
    "ChainInputs",
    "ChainSplitError",
    "Proposal",
    "StepState",
    "TrainOnlyEvaluator",
    "rule_variant",
    "run_builtin_chain",
    "run_chain",
]


def _node_score(
    batch: BatchSpec,
    rec: Any,
    recs: Mapping[str, AnswerRecord],
    facts: Mapping[str, str] | None = None,
) -> NodeScore:
    held = batch.qids[: batch.n_held_out]
    return NodeScore.from_outcome(
        batch,
        repairs=rec.repairs,
        harms=rec.harms,
        right=[q for q in held if q in recs and recs[q].correct],
        facts=facts,
        exec_errors=rec.exec_errors,
        tool_runs=rec.tool_runs,
    )


def _hash(d: Tool) -> str:
    return hashlib.sha256(artifact_key(d).encode("utf-8")).hexdigest()[:16]


def _direct_nodes(tries: Sequence[tuple[Any, Tool]], group_id: str) -> list[ChainNode]:
    """Direct attempts as chain nodes for the start rule.

    Each is scored on a stand-in batch of its own size (its probe was drawn for its scope): the
    bar only reads counts, so stand-in ids for the rows it neither repaired nor harmed suffice.
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
                _hash(draft),
                score,
                "" if score is not None else ("; ".join(rec.violations) or rec.outcome),
            )
        )
    return out


def _bits(values: Sequence[int]) -> str:
    """Per-question 0/1 scores as one string, in batch order (``"0110"``)."""
    return "".join(str(int(v)) for v in values)


def _mutate(inp: ChainInputs, move: Move, step: int, nid: str) -> tuple[Tool, Any, list[str]]:
    """Stamp the move's draft as node ``nid`` and run the checks every tool passes."""
    draft = inp.stamp(move.draft, f"c1.s{step}")
    rec = inp.new_record(nid, draft.contract.measurement)
    draft, violations = inp.check(draft, rec)
    return draft, rec, violations


def _score_node(
    inp: ChainInputs,
    draft: Tool,
    probe: Sequence[Question],
    guarded: TrainOnlyEvaluator,
    rec: Any,
    batch: BatchSpec,
) -> tuple[NodeScore, dict[str, dict[str, Any]], Mapping[str, AnswerRecord]]:
    """Score a checked draft on the batch (the prefilter): score, tool outputs, answer records."""
    recs = inp.score(draft, probe, guarded, rec)
    facts = row_facts(draft, [*inp.held_qs, *probe], recs)
    return _node_score(batch, rec, recs, facts), outputs_of(draft, recs), recs


def _gain(path: ScoreHistory, nid: str) -> int:
    """Held-out rows a change fixed minus probe rows it broke (against its lineage parent)."""
    parts = dict(zip(path.batch.qids, path.batch.parts, strict=True))
    fixed = sum(parts[q] == "H" for q in path.fixed(nid))
    broke = sum(parts[q] == "P" for q in path.broke(nid))
    return fixed - broke


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
    cid = chain_id(r, gid, 1)
    # v0 rescored on the chain's batch (its own probe, so the same rollouts: cache hits)
    rec0 = inp.new_record(v0.id, v0.contract.measurement)
    rec0.checked = True
    v0_score, v0_out, v0_recs = _score_node(inp, v0, probe, guarded, rec0, batch)
    history = ScoreHistory.start(batch).extend(
        v0.id, v0_score, ChangeEntry.make(1, v0.id, "start", f"v0: direct attempt {v0.id}")
    )
    plan_rows, plan_branches = plan_of(inp.group)
    genomes: dict[str, Genome | None] = {v0.id: genome_of(v0, plan_rows, plan_branches)}
    v0_node = next(n for n in direct if n.node_id == v0.id)
    chain_nodes = [replace(v0_node, score=v0_score)]
    made: dict[str, tuple[Tool, Any]] = {v0.id: (v0, rec0)}
    scored: dict[str, tuple[Tool, NodeScore, Mapping[str, AnswerRecord]]] = {
        v0.id: (v0, v0_score, v0_recs)
    }
    analyses: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    tried = [rec.measurement for rec, _ in inp.tries]
    seen = {artifact_key(d) for _, d in inp.tries}
    # (family, gain) of every change the chain made: two without gain exhaust a family (F)
    record: list[tuple[str, int]] = []
    par = Parent(v0, v0_score, genomes[v0.id], v0_out)
    stopped = "depth reached"
    seq = len(direct)
    refused = 0
    for step in range(1, mara.depth + 1):
        nid = chain_node_id(r, gid, 1, step)
        key = f"{nid}:score"
        # a step already in the ledger was allowed when it ran (a resumed chain replays it)
        reason = None
        if not inp.ledger.has(key):
            reason = inp.ledger.stop_reason(
                mara.round_caps(), mara.run_caps(), next_step=proposer.next_spend(len(batch.qids))
            )
        if reason is not None:
            stopped = reason
            break
        st = StepState(
            step, nid, cid, par, history, bar, batch, v0, tried, seen, record, genomes, scored,
            analyses,
        )  # fmt: skip
        prop = proposer.propose(st)
        move = prop.move
        if move is None and not prop.invalid:
            stopped = prop.stop
            break
        node: dict[str, Any] = {
            "node_id": nid,
            "parent_id": par.draft.id,
            "axis": move.axis if move is not None else "llm",
            "category": prop.lead,
            "categories": dict(prop.cats),
            "families": list(prop.order),
            "subject": move.subject if move is not None else "refused reply",
            "measurement": par.draft.contract.measurement,
            **dict(prop.extra),
        }
        invalid = prop.invalid
        if not invalid and move is not None and artifact_key(move.draft) in seen:
            invalid = "repeats an artifact already scored"
        score: NodeScore | None = None
        out: dict[str, dict[str, Any]] = {}
        draft = par.draft
        if invalid or move is None:
            spend = Spend(steps=1, invalid=1)
            node.update(outcome="invalid_reply", violations=[invalid])
            violations = [invalid]
            refused += 1
        else:
            refused = 0
            seen.add(artifact_key(move.draft))
            if move.axis == "measurement":
                tried.append(move.draft.contract.measurement)
            draft, rec, violations = _mutate(inp, move, step, nid)
            node["measurement"] = draft.contract.measurement
            if violations:
                rec.violations = list(violations)
                rec.outcome = "rejected_check"
                spend = Spend(steps=1, invalid=1)
                node.update(outcome="rejected_check", violations=list(violations))
            else:
                rec.checked = True
                score, out, recs = _score_node(inp, draft, probe, guarded, rec, batch)
                scored[nid] = (draft, score, recs)
                spend = Spend(steps=1, rollouts=len(batch.qids))
                change = ChangeEntry.make(
                    len(history.nodes) + 1,
                    nid,
                    move.axis,
                    move.subject,
                    resolves=tuple(history.residuals() or history.harms()),
                )
                if move.change is not None:
                    change = replace(move.change, seq=len(history.nodes) + 1)
                path = history.extend(nid, score, change)
                gain = _gain(path, nid)
                record.append((move.axis, gain))
                node.update(
                    outcome=rec.outcome,
                    repairs=len(score.repairs),
                    harms=len(score.harms),
                    gain=gain,
                    raw_sum=score.raw_sum,
                    raw=_bits(score.raw),
                    credited=_bits(score.credited),
                    facts="".join(score.facts),
                    fixed=list(path.fixed(nid)),
                    broke=list(path.broke(nid)),
                )
            made[nid] = (draft, rec)
            genomes[nid] = move.genome
            if inp.on_candidate is not None:
                inp.on_candidate(draft, rec)
        inp.ledger.record(
            LedgerEntry(
                key,
                r,
                gid,
                cid,
                nid,
                "step" if score else "invalid",
                "",
                spend,
                category=prop.lead,
                label=f"{proposer.label}: {node['subject']}"[:120],
            )
        )
        chain_nodes.append(
            ChainNode(
                nid,
                gid,
                "chain",
                0,
                step,
                par.draft.id,
                cid,
                seq,
                _hash(draft) if move is not None and not invalid else f"invalid.{nid}",
                score,
                "" if score is not None else "; ".join(violations),
            )
        )
        seq += 1
        nodes.append(node)
        if "analysis" in prop.extra:
            analyses.append(dict(prop.extra["analysis"]))
        if refused >= 2:
            stopped = "two refused steps in a row"
            break
        if score is not None:
            if early_stop(score, mara.acceptance, bar).yes:
                stopped = f"early stop at {nid}"
                break
            if (score.net, len(score.repairs)) >= (par.score.net, len(par.score.repairs)):
                assert move is not None
                par = Parent(draft, score, move.genome, out)  # not worse: edit this node next
                history = path
            else:  # worse than its parent (what it broke outweighs what it fixed): back off
                node["kept_parent"] = True
    won = winner(chain_nodes, batch.root_score(), mara.acceptance, bar)
    result = made[won.node_id] if won.yes and won.node_id is not None else None
    record_out = {
        "label": proposer.label,
        "chain_id": cid,
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
            "raw": _bits(v0_score.raw),
            "credited": _bits(v0_score.credited),
            "facts": "".join(v0_score.facts),
            "templated": genomes[v0.id] is not None,
        },
        "nodes": nodes,
        "stopped": stopped,
        "winner": won.to_dict(),
        "spend": inp.ledger.total(chain_id=cid).to_dict(),
        "bound": mara.bound_per_group(len(batch.qids)),
    }
    return result, record_out
