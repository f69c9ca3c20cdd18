"""Planning for a bucket of many question kinds with a few training questions each: a composite card.

For every kind among the bucket's errors (recovered from wording, :mod:`.kinds`), the planner
searches a measurement and a reading rule on the train rows of that kind it sees (support errors
and background rows, right or wrong), in two passes:

1. the catalog groups the kind's words point at (:mod:`.concepts`), with the normal bar;
2. the whole catalog, with a stricter bar (a rule picked among hundreds on a handful of rows is
   usually spurious).

A kind is served when the best rule's cross-validated accuracy on its rows clears the bar and it
recovers at least ``min_gain`` more rows than the agent's current answers. The served kinds become
the branches of one composite tool (:mod:`.composite`), its scope the union of their kind matchers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tsevo.library.tool import Contract, Matcher, Scope

from ..protocols import ContractCard, Dossier, Example
from .composite import Branch, branch_rule, composite_measurement
from .concepts import groups_for
from .kinds import KindIndex

__all__ = ["KindPlanSettings", "composite_card", "plan_kinds"]


class _Ranker(Protocol):
    def rank(
        self,
        examples: Sequence[Example],
        exclude: Sequence[str] = (),
        groups: frozenset[str] | None = None,
        few: bool = False,
        words: frozenset[str] = frozenset(),
    ) -> tuple[str, str, list[Any]]: ...


@dataclass(frozen=True)
class KindPlanSettings:
    """The bars a kind's best rule must clear.

    Attributes:
        min_rows: Fewest labelled train rows of a kind to learn from.
        bar: Least cross-validated accuracy of a rule from the groups the words point at.
        strict_bar: Least cross-validated accuracy of a rule found in the whole catalog.
        min_gain: Least number of rows the rule must recover beyond the agent's current answers.
        max_branches: Most branches one composite tool holds.
    """

    min_rows: int = 3
    bar: float = 0.6
    strict_bar: float = 0.85
    min_gain: int = 1
    max_branches: int = 12


def _labelled(dossier: Dossier) -> list[Example]:
    seen: set[str] = set()
    out = []
    for e in [*dossier.support, *dossier.background]:
        if e.question.id not in seen and e.gold is not None:
            seen.add(e.question.id)
            out.append(e)
    return out


def plan_kinds(
    ranker: _Ranker, dossier: Dossier, settings: KindPlanSettings = KindPlanSettings()
) -> tuple[list[Branch], dict[str, Any]]:
    """Branches for the bucket's kinds, and a report of every kind considered (JSON-friendly)."""
    rows = _labelled(dossier)
    index = KindIndex(e.question for e in rows)
    err_kinds: dict[str, int] = {}
    for e in dossier.support:
        k = index.of.get(e.question.id)
        if k is not None:
            err_kinds[k] = err_kinds.get(k, 0) + 1
    by_kind: dict[str, list[Example]] = {}
    for e in rows:
        by_kind.setdefault(index.of[e.question.id], []).append(e)
    branches: list[Branch] = []
    report: dict[str, Any] = {}
    for kid in sorted(err_kinds, key=lambda k: (-err_kinds[k], k)):
        ex = by_kind.get(kid, [])
        kind = index.by_id[kid]
        current = sum(bool(getattr(e.record, "correct", False)) for e in ex)
        entry: dict[str, Any] = {
            "template": kind.describe(),
            "rows": len(ex),
            "errors": err_kinds[kid],
            "current_correct": current,
        }
        report[kid] = entry
        if len(ex) < settings.min_rows:
            entry["outcome"] = "too few rows"
            continue
        prior = groups_for(kind.anchor)
        passes = [(prior, settings.bar), (None, settings.strict_bar)] if prior else []
        passes = passes or [(None, settings.strict_bar)]
        chosen = None
        for groups, bar in passes:
            _, _, ranked = ranker.rank(ex, groups=groups, few=True, words=kind.anchor)
            if not ranked:
                continue
            best = ranked[0]
            correct = round(best.cv_acc * len(ex))
            if best.cv_acc >= bar and correct - current >= settings.min_gain:
                chosen = (best, "concepts" if groups else "catalog")
                break
            entry.setdefault("rejected", []).append(
                {"measurement": best.spec.describe(best.key), "cv_acc": round(best.cv_acc, 4)}
            )
        if chosen is None:
            entry["outcome"] = "no rule clears the bar"
            continue
        best, source = chosen
        require, forbid = index.dispatch(kid)
        keys = (best.key,)
        branches.append(
            Branch(
                (kid,),
                require,
                forbid,
                best.spec,
                keys,
                best.rule,
                {
                    "rows": len(ex),
                    "cv_acc": round(best.cv_acc, 4),
                    "current_correct": current,
                    "source": source,
                    "template": kind.describe(),
                },
            )
        )
        entry["outcome"] = f"branch b{len(branches)}: {best.spec.describe(best.key)}"
        if len(branches) >= settings.max_branches:
            break
    return branches, report


_SIGNATURE = {
    "primary": ("primary",),
    "window2": ("primary", "question_numbers"),
    "window4": ("primary", "question_numbers"),
    "qnum": ("primary", "question_numbers"),
    "dual_diff": ("primary", "primary"),
    "pair": ("primary", "primary"),
    "covariate": ("primary", "covariate"),
    "cand": ("reference", "candidates"),
    "cand_diff": ("reference", "candidates"),
}


def composite_card(
    dossier: Dossier, branches: Sequence[Branch], report: dict[str, Any]
) -> ContractCard:
    """The contract card of a composite tool serving ``branches``."""
    tasks = tuple(sorted({e.question.task for e in dossier.support}))
    sig: list[str] = []
    for b in branches:
        for s in _SIGNATURE[b.spec.mode]:
            if s not in sig:
                sig.append(s)
    kinds = tuple(Matcher(require=b.require, forbid=b.forbid) for b in branches)
    scope = Scope(
        tasks=tasks,
        evidence=tuple(sorted({b.spec.primitive for b in branches})),
        arity="any",
        options_kind="any",
        kinds=kinds,
    )
    measurement = composite_measurement(branches)
    rule = branch_rule(branches)
    contract = Contract(
        measurement=measurement,
        signature=tuple(sig),
        success_criterion=(
            f"each of {len(branches)} question kinds is read by its own measurement and rule "
            "(cross-validated on its train rows) and repairs held-out bucket errors"
        ),
    )
    return ContractCard(
        bucket_id=dossier.bucket_id,
        action="create",
        artifact_kind="tool",
        target_tool="",
        failure_type="missing_measurement" if dossier.side == "no_tool" else "misread_evidence",
        root_cause=(
            f"the bucket mixes {len(report)} question kinds; the agent answers every one from a "
            "global summary"
        ),
        focus="one branch per question kind: " + measurement,
        contract=contract,
        scope=scope,
        plan={
            "composite": True,
            "rule_kind": "branches",
            "branches": [b.to_dict() for b in branches],
            "rule": rule.to_dict(),
            "kinds": report,
        },
    )
