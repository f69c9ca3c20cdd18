"""The builtin Mara chain: a deterministic, delta-guided search over a rejected draft's templates.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.library.library import Library, scope_matches
from tsevo.library.tool import Matcher, Tool
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
from tsevo.marachain.moves import (
    Genome,
    blame_order,
    categories,
    evidence_right,
    family_order,
    genome_draft,
    genome_of,
    refit_moves,
    revert_genome,
    row_facts,
    scope_variants,
    spec_moves,
    support_cv,
    with_rule,
)
from tsevo.roles.builtin.composite import Branch
from tsevo.roles.builtin.measure import SpecCache
from tsevo.roles.protocols import AttemptFeedback, Example, Synthesizer, WorkGroup

__all__ = ["LABEL", "ChainSplitError", "TrainOnlyEvaluator", "rule_variant", "run_builtin_chain"]

#: How reports name this chain.
LABEL = "builtin chain"
#: The families that change what is measured (compared by support-row recovery within a step).
_DIMENSIONS = frozenset({"window", "normalization", "primitive", "measurement"})
#: Measurements of support rows for the chain's fits (deterministic values, shared by groups).
_CACHE = SpecCache()


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
    genome: Genome | None = None


@dataclass
class _Parent:
    """The node a step edits, with what the step needs to know of it."""

    draft: Tool
    score: NodeScore
    genome: Genome | None
    outputs: dict[str, dict[str, Any]]


def _outputs(draft: Tool, recs: Mapping[str, AnswerRecord]) -> dict[str, dict[str, Any]]:
    """The draft's tool outputs per question (for blaming a composite tool's branches)."""
    out: dict[str, dict[str, Any]] = {}
    for q, r in recs.items():
        for s in r.steps:
            for run in s.runs:
                if run.tool_id == draft.id and run.outputs:
                    out.setdefault(q, {}).update(run.outputs)
    return out


def _family_moves(
    family: str,
    par: _Parent,
    check_outcome: str,
    inp: ChainInputs,
    tried: list[str],
    history: ScoreHistory,
    genomes: Mapping[str, Genome | None],
) -> Iterator[_Move]:
    """The moves of one family from ``par``, best first (generated lazily)."""
    g = par.genome
    harmful = check_outcome == "harmful"
    if family == "revert":
        yield from _revert_moves(par, history, genomes)
    elif family in ("window", "normalization", "primitive"):
        if g is None:
            return
        order = blame_order(g, par.score, par.outputs)
        for sg, what, _cv in spec_moves(g, family, inp.examples, _CACHE, order):
            yield _Move(family, f"{family}: {what}"[:72], genome_draft(par.draft, sg), sg)
    elif family == "measurement":
        # the K-loop's other measurements first (they were scored under their own scope), then
        # the plan's next one; each inherits the lineage's matcher edits
        others = sorted(
            ((rec, d) for rec, d in inp.tries if rec.checked and d.id != par.draft.id),
            key=lambda t: (-(len(t[0].repairs) - len(t[0].harms)), -t[0].attempt),
        )
        for _rec, d in others:
            yield _measurement_move(d, par.draft, inp.group)
        history_fb = [
            AttemptFeedback(i + 1, f"chain.{i}", t, "no_repair", 0, 0, "")
            for i, t in enumerate(tried)
        ]
        try:
            nxt = inp.synthesizer.synthesize(inp.group, len(tried) + 1, history_fb, inp.examples)
        except Exception:  # a synthesizer failure leaves the other families
            nxt = None
        if nxt is not None and nxt.contract.measurement not in tried:
            yield _measurement_move(nxt, par.draft, inp.group)
    elif family == "scope":
        support = [e for e in inp.examples if e.gold is not None]
        for wider in (not harmful, harmful):
            for sc, what in scope_variants(par.draft.scope, support, wider):
                ng: Genome | None = (
                    replace(g, scope=replace(sc, kinds=())) if g is not None else None
                )
                yield _Move("scope", f"scope: {what}"[:72], replace(par.draft, scope=sc), ng)
    elif family == "reading_rule":
        if g is not None:  # I: refit the rule on support rows first
            order = blame_order(g, par.score, par.outputs)
            for ng, what in refit_moves(g, inp.examples, _CACHE, order):
                yield _Move("reading_rule", what[:72], genome_draft(par.draft, ng), ng)
        rule = par.draft.guidance.rule if par.draft.guidance is not None else None
        for wider in (harmful, not harmful):
            new_rule = rule_variant(rule, wider)
            if new_rule is None:
                continue
            gd = par.draft.guidance
            assert gd is not None
            d = replace(par.draft, guidance=replace(gd, rule=new_rule))
            what = "widen" if wider else "narrow"
            ngr = with_rule(g, new_rule) if g is not None else None
            yield _Move("reading_rule", f"{what} the reading rule's abstain band", d, ngr)


def _measurement_move(draft: Tool, parent: Tool, group: WorkGroup) -> _Move:
    """A move to another measurement's draft, with the lineage's matcher edits inherited."""
    moved = _inherit_scope(draft, parent)
    g = genome_of(draft, *_plan_of(group))
    if g is not None:
        g = replace(g, scope=replace(moved.scope, kinds=()))
    return _Move("measurement", f"measure {draft.contract.measurement}"[:72], moved, g)


def _inherit_scope(draft: Tool, parent: Tool) -> Tool:
    """``draft`` with the parent's matcher (the lineage's scope edits) when both read one kind.

    Composite tools dispatch on their own kind matchers, and another task set is another
    contract: those keep their own scope.
    """
    a, b = draft.scope, parent.scope
    if (
        a.kinds
        or b.kinds
        or (a.tasks, a.arity, a.options_kind) != (b.tasks, b.arity, b.options_kind)
    ):
        return draft
    return replace(draft, scope=replace(a, matcher=b.matcher))


def _revert_moves(
    par: _Parent, history: ScoreHistory, genomes: Mapping[str, Genome | None]
) -> Iterator[_Move]:
    """H: revert the field whose change lost a win (:func:`~tsevo.marachain.moves.revert_genome`)."""
    if par.genome is None:
        return
    found = revert_genome(par.genome, history, genomes)
    if found is not None:
        ng, family, undone = found
        subject = f"revert the {family} change of {undone}"
        yield _Move("revert", subject[:72], genome_draft(par.draft, ng), ng)


def _unreachable(draft: Tool, held: Sequence[Question]) -> list[str]:
    """Held-out errors outside the draft's contract scope (every part of it but the matcher)."""
    fixed = replace(draft.scope, matcher=Matcher())
    return [q.id for q in held if not scope_matches(fixed, q)]


def _moves(
    par: _Parent,
    bar: Bar,
    inp: ChainInputs,
    tried: list[str],
    seen: set[str],
    history: ScoreHistory,
    record: list[tuple[str, int]],
    genomes: Mapping[str, Genome | None],
) -> tuple[_Move | None, str, dict[str, int], list[str]]:
    """The step's move: the first unseen move of the families the score history asks for.

    Returns the move (``None``: every live family is exhausted), the leading category, the
    category counts and the family order.
    """
    check = bar.check(par.score)
    right = (
        evidence_right(
            par.genome, inp.examples, _CACHE, blame_order(par.genome, par.score, par.outputs)
        )
        if par.genome is not None
        else True
    )
    cats = categories(par.score, history.lost_wins(), _unreachable(par.draft, inp.held_qs), right)
    order, lead = family_order(cats, record, harmful=check.outcome == "harmful")

    def first(fam: str) -> _Move | None:
        for m in _family_moves(fam, par, check.outcome, inp, tried, history, genomes):
            if _key(m.draft) not in seen:
                return m
        return None

    i = 0
    while i < len(order):
        fam = order[i]
        if fam not in _DIMENSIONS:
            m = first(fam)
            if m is not None:
                return m, lead, cats, order
            i += 1
            continue
        # a run of measurement dimensions (B advances the next live one): the one whose best
        # unseen move recovers gold best on support rows, the earlier family on ties
        j = i
        while j < len(order) and order[j] in _DIMENSIONS:
            j += 1
        run = order[i:j]
        best: tuple[float, int, _Move] | None = None
        for k, f in enumerate(run):
            m = first(f)
            if m is None:
                continue
            cv = support_cv(m.genome, inp.examples, _CACHE) if m.genome is not None else 0.0
            if best is None or (cv, -k) > (best[0], -best[1]):
                best = (cv, k, m)
        if best is not None:
            return best[2], lead, cats, order
        i = j
    return None, lead, cats, order


def _bits(values: Sequence[int]) -> str:
    """Per-question 0/1 scores as one string, in batch order (``"0110"``)."""
    return "".join(str(int(v)) for v in values)


def _key(d: Tool) -> str:
    rule = d.guidance.rule.to_dict() if d.guidance is not None and d.guidance.rule else None
    return f"{d.source}\x00{d.contract.measurement}\x00{rule}\x00{d.scope.to_dict()}"


def _mutate(inp: ChainInputs, move: _Move, step: int, nid: str) -> tuple[Tool, Any, list[str]]:
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
) -> tuple[NodeScore, dict[str, dict[str, Any]]]:
    """Score a checked draft on the batch (the prefilter), with per-row facts and tool outputs."""
    recs = inp.score(draft, probe, guarded, rec)
    facts = row_facts(draft, [*inp.held_qs, *probe], recs)
    return _node_score(batch, rec, recs, facts), _outputs(draft, recs)


def _plan_of(group: WorkGroup) -> tuple[list[dict[str, Any]], list[Branch]]:
    rows = [r for c in group.cards for r in c.plan.get("ranked", [])]
    branches = [Branch.from_dict(b) for c in group.cards for b in c.plan.get("branches", ())]
    return rows, branches


def _gain(path: ScoreHistory, nid: str) -> int:
    """Held-out rows a change fixed minus probe rows it broke (against its lineage parent)."""
    parts = dict(zip(path.batch.qids, path.batch.parts, strict=True))
    fixed = sum(parts[q] == "H" for q in path.fixed(nid))
    broke = sum(parts[q] == "P" for q in path.broke(nid))
    return fixed - broke


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
    v0_score, v0_out = _score_node(inp, v0, probe, guarded, rec0, batch)
    history = ScoreHistory.start(batch).extend(
        v0.id, v0_score, ChangeEntry.make(1, v0.id, "start", f"v0: direct attempt {v0.id}")
    )
    plan_rows, plan_branches = _plan_of(inp.group)
    genomes: dict[str, Genome | None] = {v0.id: genome_of(v0, plan_rows, plan_branches)}
    v0_node = next(n for n in direct if n.node_id == v0.id)
    chain_nodes = [replace(v0_node, score=v0_score)]
    made: dict[str, tuple[Tool, Any]] = {v0.id: (v0, rec0)}
    nodes: list[dict[str, Any]] = []
    tried = [rec.measurement for rec, _ in inp.tries]
    seen = {_key(d) for _, d in inp.tries}
    # (family, gain) of every change the chain made: two without gain exhaust a family (F)
    record: list[tuple[str, int]] = []
    par = _Parent(v0, v0_score, genomes[v0.id], v0_out)
    stopped = "depth reached"
    seq = len(direct)
    for step in range(1, mara.depth + 1):
        nid = chain_node_id(r, gid, 1, step)
        key = f"{nid}:score"
        # a step already in the ledger was allowed when it ran (a resumed chain replays it)
        reason = None
        if not inp.ledger.has(key):
            reason = inp.ledger.stop_reason(
                mara.round_caps(),
                mara.run_caps(),
                next_step=Spend(steps=1, rollouts=len(batch.qids)),
            )
        if reason is not None:
            stopped = reason
            break
        move, lead, cats, order = _moves(par, bar, inp, tried, seen, history, record, genomes)
        if move is None:
            stopped = "exhausted"
            break
        seen.add(_key(move.draft))
        if move.axis == "measurement":
            tried.append(move.draft.contract.measurement)
        draft, rec, violations = _mutate(inp, move, step, nid)
        node: dict[str, Any] = {
            "node_id": nid,
            "parent_id": par.draft.id,
            "axis": move.axis,
            "category": lead,
            "categories": cats,
            "families": order,
            "subject": move.subject,
            "measurement": draft.contract.measurement,
        }
        score: NodeScore | None = None
        out: dict[str, dict[str, Any]] = {}
        if violations:
            rec.violations = list(violations)
            rec.outcome = "rejected_check"
            spend = Spend(steps=1, invalid=1)
            node.update(outcome="rejected_check", violations=list(violations))
        else:
            rec.checked = True
            score, out = _score_node(inp, draft, probe, guarded, rec, batch)
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
                category=lead,
                label=f"{LABEL}: {move.subject}"[:120],
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
                _hash(draft),
                score,
                "" if score is not None else "; ".join(violations),
            )
        )
        seq += 1
        made[nid] = (draft, rec)
        genomes[nid] = move.genome
        nodes.append(node)
        if inp.on_candidate is not None:
            inp.on_candidate(draft, rec)
        if score is not None:
            if early_stop(score, mara.acceptance, bar).yes:
                stopped = f"early stop at {nid}"
                break
            if (score.net, len(score.repairs)) >= (par.score.net, len(par.score.repairs)):
                par = _Parent(draft, score, move.genome, out)  # not worse: edit this node next
                history = path
            else:  # worse than its parent (what it broke outweighs what it fixed): back off
                node["kept_parent"] = True
    won = winner(chain_nodes, batch.root_score(), mara.acceptance, bar)
    result = made[won.node_id] if won.yes and won.node_id is not None else None
    record_out = {
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
