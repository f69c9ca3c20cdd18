"""The builtin Mara chain: a deterministic, delta-guided search over a rejected draft's templates.

When none of a work group's direct attempts clears the prefilter bar and chains are on
(``cfg.marachain.depth > 0``), :func:`run_builtin_chain` refines the chain's start v0 (chosen by
:func:`tsevo.marachain.chain_start`) for at most ``depth`` steps. Each step edits the parent's
draft along one axis of the builtin synthesizer's templates, chosen from what the score history
says the parent fixed and broke:

* ``reading_rule``: the abstain band of the draft's reading rule (every branch's for a composite
  tool), widened first when the parent harms probe rows beyond the cap (abstain more), narrowed
  first otherwise (answer where it abstained);
* ``measurement``: the next measurement of the group's ranked plan that the lineage has not tried
  (a second measurement or another primitive of the contract's family), drawn from the
  synthesizer with the lineage as its history.

Every node goes through the same checks as a direct attempt and the same prefilter scoring, on
one fixed batch: the group's held-out errors and v0's harm probe, train rows only (the evaluator
is wrapped by :class:`TrainOnlyEvaluator`, which raises on any other split). Spends go through
the round's :class:`~tsevo.marachain.ChainLedger` (one ``<node_id>:score`` entry per step, so a
resumed chain never counts a step twice); a step whose node scores worse than its parent (fewer net repairs)
is kept on record but the next step edits the parent again. A chain stops at the first node that
clears the bar (``paper``) or per the ``code`` variant's early stop, on an exhausted budget, or
when no move is left. The result is labelled ``builtin chain``; per node, ``synthesis.json``
records the axis, what it fixed and broke, and its raw and credited scores on the batch as 0/1
strings in batch order (``batch.qids``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.library.library import Library
from tsevo.library.tool import Tool
from tsevo.marachain import (
    Bar,
    BatchSpec,
    ChainLedger,
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
from tsevo.roles.protocols import AttemptFeedback, Example, Synthesizer, WorkGroup

__all__ = ["LABEL", "ChainSplitError", "TrainOnlyEvaluator", "rule_variant", "run_builtin_chain"]

#: How reports name this chain.
LABEL = "builtin chain"


class ChainSplitError(RuntimeError):
    """A chain asked for a split other than train (validation and test never feed a chain)."""


class TrainOnlyEvaluator:
    """An evaluator for chain scoring: answers train questions only, raises on anything else."""

    def __init__(self, inner: Any, train: Mapping[str, Question]) -> None:
        self.inner = inner
        self.train = train

    def answer(
        self, split: str, library: Library, questions: Sequence[Question]
    ) -> dict[str, AnswerRecord]:
        """The inner evaluator's records, after checking that every question is on train.

        Raises:
            ChainSplitError: For a split other than ``train`` or a question not on train.
        """
        if split != "train":
            raise ChainSplitError(
                f"a Mara chain asked for the {split!r} split; chains see train only"
            )
        off = [q.id for q in questions if q.id not in self.train]
        if off:
            raise ChainSplitError(f"a Mara chain asked for non-train questions, e.g. {off[:3]}")
        recs: dict[str, AnswerRecord] = self.inner.answer(split, library, questions)
        return recs


@dataclass
class ChainInputs:
    """What a group's chain needs from synthesis (built by ``run_group``)."""

    group: WorkGroup
    round_: int
    library: Library
    held_qs: Sequence[Question]
    base: Mapping[str, AnswerRecord]
    train: Mapping[str, Question]
    synthesizer: Synthesizer
    examples: Sequence[Example]
    #: ``(attempt record, draft)`` of every direct attempt, in order.
    tries: Sequence[tuple[Any, Tool]]
    #: The harm probe of a draft (the one synthesis uses).
    probe_of: Callable[[Tool], list[Question]]
    #: Stamp a draft with a suffix (``c1.s2``): its id, round and group.
    stamp: Callable[[Tool, str], Tool]
    #: Check (and calibrate) a draft: ``(draft, record) -> (draft, violations)``.
    check: Callable[[Tool, Any], tuple[Tool, list[str]]]
    #: Score a draft: ``(draft, probe, evaluator, record) -> records`` (the prefilter).
    score: Callable[[Tool, Sequence[Question], Any, Any], Mapping[str, AnswerRecord]]
    #: A fresh attempt record for a node ``(node_id, measurement)``.
    new_record: Callable[[str, str], Any]
    evaluator: Any
    cfg: Any
    ledger: ChainLedger
    on_candidate: Callable[[Tool, Any], None] | None = None


def _node_score(batch: BatchSpec, rec: Any, recs: Mapping[str, AnswerRecord]) -> NodeScore:
    held = batch.qids[: batch.n_held_out]
    return NodeScore.from_outcome(
        batch,
        repairs=rec.repairs,
        harms=rec.harms,
        right=[q for q in held if q in recs and recs[q].correct],
        exec_errors=rec.exec_errors,
        tool_runs=rec.tool_runs,
    )


def _hash(d: Tool) -> str:
    return hashlib.sha256(_key(d).encode("utf-8")).hexdigest()[:16]


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


def _margin(rule: Any, wider: bool) -> float | None:
    """A reading rule's next abstain band (``None`` when there is none to move to)."""
    m = float(rule.margin)
    if wider:
        if m > 0:
            return m * 2
        if rule.kind == "label" and rule.bins:
            spread = max(abs(b) for b in rule.bins) or 1.0
            return round(0.1 * spread, 6)
        return 0.1
    return round(m / 2, 6) if m > 1e-6 else None


def rule_variant(rule: Any, wider: bool) -> Any:
    """The reading rule with its abstain band widened or narrowed (``None``: nothing to move).

    A composite tool's ``branches`` rule moves every branch's band together.
    """
    if rule is None:
        return None
    if rule.kind == "branches":
        moved = [rule_variant(b, wider) for b in rule.branches]
        if all(b is None for b in moved):
            return None
        return replace(
            rule,
            branches=tuple(
                b if n is None else n for b, n in zip(rule.branches, moved, strict=True)
            ),
        )
    m = _margin(rule, wider)
    return None if m is None else replace(rule, margin=m)


@dataclass(frozen=True)
class _Move:
    axis: str
    subject: str
    draft: Tool


def _moves(
    parent: Tool, score: NodeScore, bar: Bar, inp: ChainInputs, tried: list[str], seen: set[str]
) -> list[_Move]:
    """The parent's possible edits, in the order the score history asks for them."""
    check = bar.check(score)
    rule = parent.guidance.rule if parent.guidance is not None else None
    out: list[_Move] = []
    rule_moves = []
    for wider in (check.outcome == "harmful", check.outcome != "harmful"):
        new_rule = rule_variant(rule, wider)
        if new_rule is None:
            continue
        g = parent.guidance
        assert g is not None
        d = replace(parent, guidance=replace(g, rule=new_rule))
        what = "widen" if wider else "narrow"
        rule_moves.append(_Move("reading_rule", f"{what} the reading rule's abstain band", d))
    meas: list[_Move] = []
    history = [
        AttemptFeedback(i + 1, f"chain.{i}", t, "no_repair", 0, 0, "") for i, t in enumerate(tried)
    ]
    try:
        nxt = inp.synthesizer.synthesize(inp.group, len(tried) + 1, history, inp.examples)
    except Exception:  # a synthesizer failure leaves only the rule moves
        nxt = None
    if nxt is not None and nxt.contract.measurement not in tried:
        meas.append(_Move("measurement", f"measure {nxt.contract.measurement}"[:72], nxt))
    if check.outcome == "harmful":
        out = [*rule_moves[:1], *meas, *rule_moves[1:]]
    elif check.outcome == "no_repair":
        out = [*meas, *rule_moves]
    else:
        out = [*meas, *rule_moves]
    return [m for m in out if _key(m.draft) not in seen]


def _bits(values: Sequence[int]) -> str:
    """Per-question 0/1 scores as one string, in batch order (``"0110"``)."""
    return "".join(str(int(v)) for v in values)


def _key(d: Tool) -> str:
    rule = d.guidance.rule.to_dict() if d.guidance is not None and d.guidance.rule else None
    return f"{d.source}\x00{d.contract.measurement}\x00{rule}"


def run_builtin_chain(inp: ChainInputs) -> tuple[tuple[Tool, Any] | None, dict[str, Any] | None]:
    """Run chain 1 of a group whose direct attempts all missed the bar.

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
    v0_score = _node_score(batch, rec0, inp.score(v0, probe, guarded, rec0))
    history = ScoreHistory.start(batch).extend(
        v0.id, v0_score, ChangeEntry.make(1, v0.id, "start", f"v0: direct attempt {v0.id}")
    )
    v0_node = next(n for n in direct if n.node_id == v0.id)
    chain_nodes = [replace(v0_node, score=v0_score)]
    made: dict[str, tuple[Tool, Any]] = {v0.id: (v0, rec0)}
    nodes: list[dict[str, Any]] = []
    tried = [rec.measurement for rec, _ in inp.tries]
    seen = {_key(d) for _, d in inp.tries}
    parent, parent_score = v0, v0_score
    stopped = "depth reached"
    seq = len(direct)
    for step in range(1, mara.depth + 1):
        reason = inp.ledger.stop_reason(
            mara.round_caps(), mara.run_caps(), next_step=Spend(steps=1, rollouts=len(batch.qids))
        )
        if reason is not None:
            stopped = reason
            break
        moves = _moves(parent, parent_score, bar, inp, tried, seen)
        if not moves:
            stopped = "no further move"
            break
        move = moves[0]
        nid = chain_node_id(r, gid, 1, step)
        seen.add(_key(move.draft))
        if move.axis == "measurement":
            tried.append(move.draft.contract.measurement)
        draft = inp.stamp(move.draft, f"c1.s{step}")
        rec = inp.new_record(nid, draft.contract.measurement)
        draft, violations = inp.check(draft, rec)
        node: dict[str, Any] = {
            "node_id": nid,
            "parent_id": parent.id,
            "axis": move.axis,
            "subject": move.subject,
            "measurement": draft.contract.measurement,
        }
        score: NodeScore | None = None
        if violations:
            rec.violations = list(violations)
            rec.outcome = "rejected_check"
            spend = Spend(steps=1, invalid=1)
            node.update(outcome="rejected_check", violations=list(violations))
        else:
            rec.checked = True
            score = _node_score(batch, rec, inp.score(draft, probe, guarded, rec))
            spend = Spend(steps=1, rollouts=len(batch.qids))
            path = history.extend(
                nid,
                score,
                ChangeEntry.make(
                    len(history.nodes) + 1,
                    nid,
                    move.axis,
                    move.subject,
                    resolves=tuple(history.residuals() or history.harms()),
                ),
            )
            node.update(
                outcome=rec.outcome,
                repairs=len(score.repairs),
                harms=len(score.harms),
                raw_sum=score.raw_sum,
                raw=_bits(score.raw),
                credited=_bits(score.credited),
                fixed=list(path.fixed(nid)),
                broke=list(path.broke(nid)),
            )
        inp.ledger.record(
            LedgerEntry(f"{nid}:score", r, gid, cid, nid, "step" if score else "invalid", "", spend)
        )
        chain_nodes.append(
            ChainNode(
                nid,
                gid,
                "chain",
                0,
                step,
                parent.id,
                cid,
                seq,
                _hash(draft),
                score,
                "" if score is not None else "; ".join(violations),
            )
        )
        seq += 1
        made[nid] = (draft, rec)
        nodes.append(node)
        if inp.on_candidate is not None:
            inp.on_candidate(draft, rec)
        if score is not None:
            if early_stop(score, mara.acceptance, bar).yes:
                stopped = f"early stop at {nid}"
                break
            if (score.net, len(score.repairs)) >= (parent_score.net, len(parent_score.repairs)):
                parent, parent_score = draft, score  # not worse: the next step edits this node
                history = path
            else:  # worse than its parent (what it broke outweighs what it fixed): back off
                node["kept_parent"] = True
    won = winner(chain_nodes, batch.root_score(), mara.acceptance, bar)
    result = made[won.node_id] if won.yes and won.node_id is not None else None
    record = {
        "label": LABEL,
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
        },
        "nodes": nodes,
        "stopped": stopped,
        "winner": won.to_dict(),
        "spend": inp.ledger.total(chain_id=cid).to_dict(),
        "bound": mara.bound_per_group(len(batch.qids)),
    }
    return result, record
