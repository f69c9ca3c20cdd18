"""One walk of a Mara chain: the step loop, over state that the group's chains share.

:class:`ChainRun` holds what every chain of a group shares (the batch, the nodes scored so far
with their answer records, tool outputs and lineage paths, the artifacts already seen, the
measurements tried, the per-group ``local_seq``) and :meth:`ChainRun.walk` runs one chain from a
start node: chain 1 from v0, chains 2.. and polish runs from pool draws
(:func:`tsevo.evolve.chain.run_chain` orchestrates them). Each step asks the proposer for a move
(the builtin step or the LLM's), checks and scores it on the batch, records its spend in the
ledger once (``<node_id>:score``) and keeps editing the node unless it scored worse than its
parent. A walk stops at the first node the acceptance variant's early stop accepts, on a budget
cap, when the proposer has no move left, or after two refused steps in a row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    early_stop,
)
from tsevo.marachain.genome import Genome
from tsevo.marachain.moves import row_facts
from tsevo.marachain.step import Move, Parent, artifact_key, outputs_of

from .chain_types import ChainInputs, StepState, TrainOnlyEvaluator

__all__ = ["ChainRun", "bits", "node_hash", "score_node"]


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
        in_contract=rec.n_in_contract,
    )


def node_hash(d: Tool) -> str:
    """A draft's artifact hash (what makes two drafts the same artifact, hashed)."""
    return hashlib.sha256(artifact_key(d).encode("utf-8")).hexdigest()[:16]


def bits(values: Sequence[int]) -> str:
    """Per-question 0/1 scores as one string, in batch order (``"0110"``)."""
    return "".join(str(int(v)) for v in values)


def _mutate(inp: ChainInputs, move: Move, suffix: str, nid: str) -> tuple[Tool, Any, list[str]]:
    """Stamp the move's draft as node ``nid`` (``suffix`` ``c1.s2``) and run every tool's checks."""
    draft = inp.stamp(move.draft, suffix)
    rec = inp.new_record(nid, draft.contract.measurement)
    draft, violations = inp.check(draft, rec)
    return draft, rec, violations


def score_node(
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


@dataclass
class ChainRun:
    """What the chains of one group share, and the walk of one chain (see the module docstring)."""

    inp: ChainInputs
    proposer: Any
    batch: BatchSpec
    probe: Sequence[Question]
    guarded: TrainOnlyEvaluator
    bar: Bar
    v0: Tool
    seq: int
    chain_nodes: list[ChainNode]
    scored: dict[str, tuple[Tool, NodeScore, Mapping[str, AnswerRecord]]]
    made: dict[str, tuple[Tool, Any]]
    genomes: dict[str, Genome | None]
    outs: dict[str, dict[str, dict[str, Any]]]
    paths: dict[str, ScoreHistory]
    tried: list[str]
    seen: set[str]
    records: list[dict[str, Any]] = field(default_factory=list)

    def walk(
        self, number: int, start_id: str, depth: int, *, polish: bool = False
    ) -> dict[str, Any]:
        """Run chain ``number`` (a polish run with ``polish``) from ``start_id`` for ``depth`` steps.

        Returns the walk's record: chain id, start node, per-node records and why it stopped.
        """
        inp, proposer, batch, probe, guarded, bar, v0 = (
            self.inp, self.proposer, self.batch, self.probe, self.guarded, self.bar, self.v0,
        )  # fmt: skip
        mara = inp.cfg.marachain
        gid, r = inp.group.id, inp.round_
        kind = "p" if polish else "c"
        cid = chain_id(r, gid, number, polish=polish)
        scored, made, genomes, tried, seen = (
            self.scored, self.made, self.genomes, self.tried, self.seen,
        )  # fmt: skip
        chain_nodes = self.chain_nodes
        start_draft, start_score, _recs = scored[start_id]
        par = Parent(start_draft, start_score, genomes.get(start_id), self.outs[start_id])
        history = self.paths[start_id]
        analyses: list[dict[str, Any]] = []
        nodes: list[dict[str, Any]] = []
        # (family, gain) of every change this walk made: two without gain exhaust a family (F)
        record: list[tuple[str, int]] = []
        stopped = "depth reached"
        refused = 0
        for step in range(1, depth + 1):
            nid = chain_node_id(r, gid, number, step, polish=polish)
            key = f"{nid}:score"
            # a step already in the ledger was allowed when it ran (a resumed chain replays it)
            reason = None
            if not inp.ledger.has(key):
                reason = inp.ledger.stop_reason(
                    mara.round_caps(),
                    mara.run_caps(),
                    next_step=proposer.next_spend(len(batch.qids)),
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
                draft, rec, violations = _mutate(inp, move, f"{kind}{number}.s{step}", nid)
                node["measurement"] = draft.contract.measurement
                if violations:
                    rec.violations = list(violations)
                    rec.outcome = "rejected_check"
                    spend = Spend(steps=1, invalid=1)
                    node.update(outcome="rejected_check", violations=list(violations))
                else:
                    rec.checked = True
                    score, out, recs = score_node(inp, draft, probe, guarded, rec, batch)
                    scored[nid] = (draft, score, recs)
                    self.outs[nid] = out
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
                    self.paths[nid] = path
                    gain = _gain(path, nid)
                    record.append((move.axis, gain))
                    node.update(
                        outcome=rec.outcome,
                        repairs=len(score.repairs),
                        harms=len(score.harms),
                        gain=gain,
                        raw_sum=score.raw_sum,
                        raw=bits(score.raw),
                        credited=bits(score.credited),
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
                    self.seq,
                    node_hash(draft) if move is not None and not invalid else f"invalid.{nid}",
                    score,
                    "" if score is not None else "; ".join(violations),
                )
            )
            self.seq += 1
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
        return {"chain_id": cid, "start": start_id, "nodes": nodes, "stopped": stopped}
