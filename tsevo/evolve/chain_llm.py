"""The LLM Mara chain step: analyse the node to edit, then mutate it (design §3.1–3.2).

:class:`LLMProposer` is the step :func:`tsevo.evolve.chain.run_chain` runs when the group's
synthesizer offers an LLM chain (``synthesizer.chain_stepper()``, the LLM synthesizer's). Per step:

1. the deterministic context (:func:`tsevo.marachain.context.step_context`, capped at
   ``marachain.context_chars``): contract, lineage, the rows to account for, score table, the node
   to edit and the best node so far, the last two analyses, the changelog, raw records of the
   batch's train rows under the run's opaque ids;
2. ``chain_analyse``: the five-part analysis, re-asked (at most the role's retries) while
   :func:`~tsevo.marachain.analysis.check_analysis` refuses it (unknown category, a failed
   precondition, an unexplained residual, a quote that is not verbatim, ...);
3. ``chain_mutate``: the edited node, re-asked while its actions resolve nothing, its source is
   refused by the sandbox gate or grows beyond 1.5x v0's, or its reading rule is invalid;
4. the draft: the parent with the edited source, outputs, guidance, reading rule and scope (a
   ``narrow``/``widen`` patch moves within the contract through the builtin scope variants), and
   the changelog entry tsevo writes from the actions, the fields that changed and the diff.

A refused reply (every attempt rejected) makes an invalid node: the step is spent, nothing is
scored. Each call is booked once in the chain ledger under ``<node_id>:analyse`` and
``<node_id>:mutate`` (calls, retries, cache replays, tokens), so a resumed chain, whose calls the
response cache answers, books nothing twice; the node records the booked amounts.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.library.tool import Guidance, Tool
from tsevo.marachain import LedgerEntry, Spend, strength_key
from tsevo.marachain.analysis import StepFacts, change_of, check_analysis, check_edit, source_diff
from tsevo.marachain.context import NodeText, step_context, stored_fields
from tsevo.marachain.moves import scope_variants
from tsevo.marachain.step import Move, outputs_of
from tsevo.roles.llm.jsoncall import InvalidReply, JsonCallMeta
from tsevo.roles.llm.render import option_letter
from tsevo.roles.llm.roles.toolreply import rule_of

from .chain_types import ChainInputs, Proposal, StepState
from .chain_walk import node_hash

__all__ = ["LABEL", "LLMProposer", "edit_draft"]

#: How reports name the LLM chain.
LABEL = "LLM chain"
#: Most characters of a free-text field in a raw record.
_FIELD_CHARS = 300


def _letter(i: int | None) -> str:
    return option_letter(i) if isinstance(i, int) else "none"


def _rows(inp: ChainInputs, st: StepState, node_id: str) -> dict[str, dict[str, str]]:
    """The raw records of one scored node: per batch row, the fields a citation may quote."""
    draft, score, recs = st.scored[node_id]
    outputs_by_q = outputs_of(draft, recs)
    out: dict[str, dict[str, str]] = {}
    for j, q in enumerate(st.batch.qids):
        rec: AnswerRecord | None = recs.get(q)
        question = inp.train[q]
        reason = next((s.reason for s in reversed(rec.steps) if s.reason), "") if rec else ""
        out[inp.label(q)] = {
            "question": question.question[:_FIELD_CHARS],
            "fact": score.facts[j] if score.facts else "",
            "answer": _letter(rec.final_answer if rec is not None else None),
            "correct": _letter(question.gold),
            "reason": reason[:_FIELD_CHARS],
            "outputs": json.dumps(outputs_by_q.get(q, {}), sort_keys=True, default=str)[
                :_FIELD_CHARS
            ],
        }
    return out


def _text(inp: ChainInputs, st: StepState, node_id: str, rows: bool) -> NodeText:
    draft, score, _recs = st.scored[node_id]
    change = next((c for c in st.history.changelog() if c.node_id == node_id), None)
    rule = draft.guidance.rule.to_dict() if draft.guidance.rule is not None else None
    return NodeText(
        node_id,
        draft.source,
        draft.outputs,
        draft.guidance.text,
        rule,
        draft.scope.describe(),
        change.subject if change is not None else "",
        {"repairs": len(score.repairs), "harms": len(score.harms), "net": score.net},
        _rows(inp, st, node_id) if rows else {},
    )


def _best(st: StepState) -> str:
    """The strongest scored node so far (the earlier on ties)."""
    order = list(st.scored)
    return max(order, key=lambda n: strength_key(st.scored[n][1], order.index(n)))


def edit_draft(parent: Tool, edit: Mapping[str, Any], rule: Any, scope: Any) -> Tool:
    """The parent with an accepted edit's source, outputs, guidance, rule and scope.

    Calibration, if the contract asks for it, is refitted by the engine's checks on the new
    outputs (the parent's fitted tree is dropped).
    """
    outputs = tuple(dict.fromkeys(str(k) for k in edit["outputs"]))
    contract = parent.contract
    if contract.calibration is not None:
        contract = replace(
            contract, calibration={**contract.calibration, "features": list(outputs)}
        )
    name = str(edit["function_name"]).strip()
    return replace(
        parent,
        name=name if name.isidentifier() else parent.name,
        source=str(edit["source"]).strip() + "\n",
        outputs=outputs,
        guidance=Guidance(str(edit["guidance"]).strip(), rule),
        scope=scope,
        contract=contract,
        calibration=None,
    )


def _fields(parent: Tool, draft: Tool) -> list[str]:
    pairs = {
        "source": (parent.source, draft.source),
        "outputs": (parent.outputs, draft.outputs),
        "guidance": (parent.guidance.text, draft.guidance.text),
        "reading_rule": (parent.guidance.rule, draft.guidance.rule),
        "scope": (parent.scope, draft.scope),
    }
    return [k for k, (a, b) in pairs.items() if a != b]


class LLMProposer:
    """The LLM chain step (see the module docstring).

    Args:
        inp: The group's chain inputs.
        stepper: The LLM role with ``analyse`` and ``mutate`` (``LLMChainStepper``).
    """

    label = LABEL

    def __init__(self, inp: ChainInputs, stepper: Any) -> None:
        self.inp = inp
        self.stepper = stepper

    def next_spend(self, batch_size: int) -> Spend:
        """What a step is expected to spend: a step, the batch, two calls and some tokens."""
        return Spend(steps=1, rollouts=batch_size, calls=2, tokens=1)

    def _book(self, st: StepState, what: str, meta: JsonCallMeta) -> dict[str, int]:
        """Record one call's spend in the ledger once; the booked amounts."""
        replays = sum(a.cached for a in meta.attempts)
        spend = Spend(
            calls=meta.n_attempts - replays,
            retries=meta.n_invalid,
            replays=replays,
            tokens=meta.usage.total_tokens,
        )
        entry = self.inp.ledger.record(
            LedgerEntry(
                f"{st.nid}:{what}",
                self.inp.round_,
                self.inp.group.id,
                st.chain_id,
                st.nid,
                "call",
                f"chain_{what}",
                spend,
            )
        )
        s = entry.spend
        return {"calls": s.calls, "retries": s.retries, "replays": s.replays, "tokens": s.tokens}

    def propose(self, st: StepState) -> Proposal:
        """Analyse the node to edit, then edit it (an invalid proposal when a reply is refused)."""
        inp, mara = self.inp, self.inp.cfg.marachain
        par_id, best_id = st.par.draft.id, _best(st)
        lineage = [n for n in st.history.node_ids if n in st.scored]
        texts = {n: _text(inp, st, n, rows=n in (par_id, best_id)) for n in lineage}
        if best_id not in texts:
            texts[best_id] = _text(inp, st, best_id, rows=True)
        hashes = {n: node_hash(st.scored[n][0]) for n in lineage}
        facts = StepFacts.of(st.history, stored_fields(list(texts.values())), inp.label, hashes)
        contract = json.dumps(
            {
                "measurement": st.par.draft.contract.measurement,
                "signature": list(st.par.draft.contract.signature),
                "success_criterion": st.par.draft.contract.success_criterion,
                "scope": inp.group.scope.describe(),
                "bar": st.bar.to_dict(),
            }
        )
        context = step_context(
            contract=contract,
            history=st.history,
            parent=texts[par_id],
            best=texts[best_id],
            analyses=st.analyses,
            facts=facts,
            max_chars=mara.context_chars,
            label=inp.label,
        )
        if inp.on_step_text is not None:
            inp.on_step_text(st.nid, "context", context)
        extra: dict[str, Any] = {
            "context_chars": len(context),
            "context_sha": hashlib.sha256(context.encode("utf-8")).hexdigest()[:16],
        }
        gid = inp.group.id
        try:
            reply, meta = self.stepper.analyse(
                gid, st.step, mara.depth, context, lambda d: check_analysis(d, facts)
            )
        except InvalidReply as err:
            extra["calls"] = {"analyse": self._book(st, "analyse", err.meta)}
            return Proposal(
                None, extra=extra, invalid=f"analysis refused: {err.attempts[-1].error}"
            )
        extra["calls"] = {"analyse": self._book(st, "analyse", meta)}
        analysis = reply.model_dump()
        extra["analysis"] = analysis
        if inp.on_step_text is not None:
            inp.on_step_text(st.nid, "analysis", json.dumps(analysis, indent=1, sort_keys=True))
        cats = Counter[str]()
        for d in analysis["delta_tracing"]:
            cats[d["category"]] += max(1, len(d["rows"]))
        lead = min(cats, key=lambda c: (-cats[c], c)) if cats else ""
        v0_len = len(st.v0.source)
        try:
            edit, meta = self.stepper.mutate(
                gid,
                st.step,
                mara.depth,
                context,
                json.dumps(analysis, ensure_ascii=False),
                max(200, int(1.5 * v0_len)),
                lambda d: check_edit(d, facts),
                st.par.draft.contract.measurement,
            )
        except InvalidReply as err:
            extra["calls"]["mutate"] = self._book(st, "mutate", err.meta)
            return Proposal(
                None,
                lead,
                dict(cats),
                extra=extra,
                invalid=f"edit refused: {err.attempts[-1].error}",
            )
        extra["calls"]["mutate"] = self._book(st, "mutate", meta)
        e = edit.model_dump()
        scope = st.par.draft.scope
        if e["scope_patch"] != "keep":
            support = [x for x in inp.examples if x.gold is not None]
            moved = scope_variants(scope, support, e["scope_patch"] == "widen")
            scope = moved[0][0] if moved else scope
        draft = edit_draft(st.par.draft, e, rule_of(edit.reading_rule), scope)
        diff = source_diff(st.par.draft.source, draft.source)
        change = change_of(1, st.nid, e, _fields(st.par.draft, draft), diff, inp.real)
        return Proposal(
            Move("llm", change.subject, draft, None, change), lead, dict(cats), (), extra
        )
