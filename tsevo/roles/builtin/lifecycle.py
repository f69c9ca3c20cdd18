"""Lifecycle plans of the builtin planner: refine, rescope or retire an earlier tool when that clearly helps.

An append-only chain never edits an earlier stage: *refine* adds usage guidance that amends the
tool's reading at answer time, *rescope* adds a scope override that narrows where it fires, and
*retire* adds a tombstone that removes it (DESIGN.md §2, decided gaps). A rescope's anti-scope is a
forbidden word when one separates the rows it reads wrongly, else the tasks where it always reads
wrongly, else a weighted term matcher (:mod:`~tsevo.roles.builtin.antiscope`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace as _replace

import numpy as np

from tsevo.library.tool import Scope, Tool, question_tokens

from ..protocols import ContractCard, Dossier, Example
from .antiscope import HarmCounts, anti_matcher, anti_tasks, clearly_harmful_on_train, harm_counts
from .rules import Row, cross_validate, fit_rule, read_option, tune_margin

__all__ = ["coded_prior", "lifecycle_card"]

#: How the builtin planner labels what a coded diagnosis changed (it reads no prose).
CODED_LABEL = "mechanism test: builtin action prior from the top code's axis"


def coded_prior(dossier: Dossier) -> dict[str, str] | None:
    """The action prior a coded diagnosis sets (``taxonomy.diagnoses``; ``None`` without codes).

    A mechanism test, not a reading: the bucket's top code (largest share) on axis ``C``
    (domain-specific) says the agent lacks a measurement, so the planner creates a tool without
    trying to refine, rescope or retire an earlier one; on ``A`` or ``B`` (system, role) it keeps
    its usual order (an earlier tool that fired first, then create).
    """
    if not dossier.codes:
        return None
    top = dossier.codes[0]
    prior = "create" if top.get("axis") == "C" else "lifecycle_first"
    return {
        "code": str(top["id"]),
        "axis": str(top.get("axis")),
        "prior": prior,
        "label": CODED_LABEL,
    }


def lifecycle_card(dossier: Dossier, min_gain: float = 0.15) -> ContractCard | None:
    """Refine or rescope the tool that fired on most of the bucket's errors, when that clearly helps.

    *Refine*: the tool's own evidence, re-read with a rule refitted on the train rows where it
    ran, recovers gold much better than its current rule -> usage guidance with the new rule.
    *Rescope*: its current readings are mostly wrong on the bucket and a refit does not help ->
    a scope override whose anti-scope keeps it off those questions: a word shared by the wrong rows
    and absent where the tool reads right, else the tasks where it always reads wrong, else a
    term matcher over the wrong rows' words. *Retire*: its replacements on these train rows are
    clearly harmful (the prune's rule) and it reads right nowhere, or no anti-scope separates
    where it does. Otherwise None (the planner falls back to creating a new tool).
    """
    fired = Counter(t for e in dossier.support for t in getattr(e.record, "tools_ok", ()))
    if not fired:
        return None
    target_id = max(fired, key=lambda t: (fired[t], t))
    try:
        target = dossier.library.get(target_id)
    except KeyError:
        return None
    eff = {st.tool.id: st.tool for row in dossier.library.effective() for st in row}
    tool = eff.get(target_id, target)
    rule = tool.guidance.rule
    if rule is None:
        return None
    rows: list[Row] = []
    examples: list[Example] = []
    for e in {x.question.id: x for x in [*dossier.support, *dossier.background]}.values():
        q = e.question
        outs = next(
            (
                r.outputs
                for s in getattr(e.record, "steps", ())
                for r in s.runs
                if r.tool_id == target_id and r.status == "ok"
            ),
            None,
        )
        if outs is None or e.gold is None:
            continue
        rows.append(
            Row(
                q.id,
                {k: float(v) for k, v in outs.items()},
                q.options,
                q.candidates,
                e.gold,
                e.record.final_answer,
                q.question,
            )
        )
        examples.append(e)
    if len(rows) < 6:
        return None

    right = [read_option(rule, r) == r.gold for r in rows]
    acc = float(np.mean(right))
    key = rule.prefix[:-1] if rule.kind == "extremum" else rule.key
    try:
        refit = fit_rule(rule.kind, rows, key)
        cv = cross_validate(rule.kind, rows, key) if refit is not None else 0.0
    except (ValueError, ArithmeticError, np.linalg.LinAlgError):
        refit, cv = None, 0.0
    common = dict(bucket_id=dossier.bucket_id, target_tool=target_id, contract=tool.contract)
    if refit is not None and cv >= max(acc + min_gain, 0.6):
        new_rule = tune_margin(_replace(refit, confidence=round(min(0.99, cv), 4)), rows)
        return ContractCard(
            action="refine",
            artifact_kind="usage_guidance",
            failure_type="misread_evidence",
            root_cause=f"{target_id}'s evidence is right but its reading rule is off (accuracy {acc:.2f} where it runs)",
            focus=f"re-read {key} of {target_id}: {new_rule.describe()}",
            scope=tool.scope,
            plan={
                "rule_kind": rule.kind,
                "rule": new_rule.to_dict(),
                "cv_acc": round(cv, 6),
                "current_acc": round(acc, 6),
            },
            **common,
        )
    if acc >= 0.5:
        return None
    harm = harm_counts(target_id, [e.record for e in examples], [e.gold for e in examples])
    if not any(right) and clearly_harmful_on_train(harm):
        return _retire(dossier, target_id, tool, acc, harm)
    card = _word_rescope(dossier, target_id, tool, acc, examples, right)
    if card is not None:
        return card
    tasks = anti_tasks([e.question.task for e in examples], right)
    if tasks:
        scope = _replace(tool.scope, anti_tasks=tuple(sorted({*tool.scope.anti_tasks, *tasks})))
        return _rescope(dossier, target_id, tool, acc, scope, f"tasks {', '.join(tasks)}")
    am = anti_matcher([e.question.question for e in examples], right)
    if am is not None and tool.scope.anti_matcher.is_trivial:
        scope = _replace(tool.scope, anti_matcher=am)
        return _rescope(dossier, target_id, tool, acc, scope, f"questions like {am.describe(4)}")
    if clearly_harmful_on_train(harm):
        return _retire(dossier, target_id, tool, acc, harm)
    return None


def _word_rescope(
    dossier: Dossier,
    target_id: str,
    tool: Tool,
    acc: float,
    examples: list[Example],
    right: list[bool],
) -> ContractCard | None:
    """Forbid a word every wrong row shares and (almost) no right row has."""
    wrong_toks = [
        question_tokens(e.question.question)
        for e, ok in zip(examples, right, strict=True)
        if not ok
    ]
    right_toks = [
        question_tokens(e.question.question) for e, ok in zip(examples, right, strict=True) if ok
    ]
    if not wrong_toks:
        return None
    shared = set.intersection(*(set(t) for t in wrong_toks))
    words = sorted(
        w
        for w in shared
        if len(w) > 2 and sum(w in t for t in right_toks) <= 0.2 * max(len(right_toks), 1)
    )
    if not words:
        return None
    forbid = tuple(sorted({*tool.scope.matcher.forbid, words[0]}))
    new_scope = _replace(tool.scope, matcher=_replace(tool.scope.matcher, forbid=forbid))
    rule = tool.guidance.rule
    return ContractCard(
        action="rescope",
        artifact_kind="scope_override",
        failure_type="wrong_scope",
        root_cause=f"{target_id} fires on questions it reads wrongly (accuracy {acc:.2f} there)",
        focus=f"keep {target_id} away from questions mentioning {words[0]!r}",
        scope=new_scope,
        plan={
            "rule_kind": rule.kind if rule is not None else "",
            "current_acc": round(acc, 6),
            "forbid": list(forbid),
        },
        bucket_id=dossier.bucket_id,
        target_tool=target_id,
        contract=tool.contract,
    )


def _rescope(
    dossier: Dossier, target_id: str, tool: Tool, acc: float, scope: Scope, where: str
) -> ContractCard:
    """A scope override whose anti-scope (tasks or an anti-matcher) keeps the tool off ``where``."""
    rule = tool.guidance.rule
    return ContractCard(
        action="rescope",
        artifact_kind="scope_override",
        failure_type="wrong_scope",
        root_cause=f"{target_id} reads wrongly on {where} (accuracy {acc:.2f} where it runs)",
        focus=f"keep {target_id} away from {where}",
        scope=scope,
        plan={
            "rule_kind": rule.kind if rule is not None else "",
            "current_acc": round(acc, 6),
            "anti_tasks": list(scope.anti_tasks),
            "anti_matcher": scope.anti_matcher.to_dict(),
        },
        bucket_id=dossier.bucket_id,
        target_tool=target_id,
        contract=tool.contract,
    )


def _retire(
    dossier: Dossier, target_id: str, tool: Tool, acc: float, harm: HarmCounts
) -> ContractCard:
    """A tombstone: the tool's replacements broke clearly more than they repaired on train."""
    rule = tool.guidance.rule
    return ContractCard(
        action="retire",
        artifact_kind="tombstone",
        failure_type="harmful_tool",
        root_cause=(
            f"{target_id} broke {harm.harmed} right answer(s) and repaired {harm.helped} on the "
            f"train rows where it runs (its readings right on {acc:.2f}), and no narrower scope "
            "separates where it reads right"
        ),
        focus=f"retire {target_id}",
        scope=tool.scope,
        plan={
            "rule_kind": rule.kind if rule is not None else "",
            "current_acc": round(acc, 6),
            "helped": harm.helped,
            "harmed": harm.harmed,
        },
        bucket_id=dossier.bucket_id,
        target_tool=target_id,
        contract=tool.contract,
    )


# ------------------------------------------------------------------ protocol
