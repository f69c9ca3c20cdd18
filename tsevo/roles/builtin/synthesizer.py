"""The builtin synthesizer: real tool source from primitive templates, varied across attempts.

Attempt ``i`` takes the ``i``-th not-yet-tried measurement of the group's ranked plan (or the two-feature
calibration request first, when the planner made one), writes the source with
:func:`~tsevo.roles.builtin.specsource.spec_source`, and attaches guidance: text for an LLM reviewer and
the planner's fitted reading rule for the builtin reviewer. The source goes through the same gate,
checks and sandbox as any LLM-written tool. A repair for a contract violation drops the violating part
(e.g. a refused calibration falls back to the single best measurement).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tsevo.library.library import slug
from tsevo.library.sandbox.gate import MAX_SOURCE_CHARS
from tsevo.library.tool import Contract, Guidance, Matcher, Provenance, ReadingRule, Tool

from ..protocols import AttemptFeedback, Example, WorkGroup
from .composite import (
    Branch,
    branch_rule,
    composite_doc,
    composite_measurement,
    composite_source,
    within,
)
from .measure import Spec
from .specsource import spec_source

__all__ = ["COMPOSITE_BARS", "TemplateSynthesizer"]

#: Composite attempts: every branch first, then only branches cross-validated at least this well.
COMPOSITE_BARS = (0.0, 0.8, 0.9)


def _candidates(group: WorkGroup) -> list[dict[str, Any]]:
    """Ranked measurements of all cards of the group, best first, deduplicated."""
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    rows = [r for c in group.cards for r in c.plan.get("ranked", [])]
    rows.sort(key=lambda r: (-float(r["cv_acc"]), -float(r["train_acc"]), r["measurement"]))
    for r in rows:
        if r["measurement"] not in seen:
            seen.add(r["measurement"])
            out.append(r)
    return out


class TemplateSynthesizer:
    """Deterministic template synthesis from the planner's measured plan."""

    name = "builtin-template-synthesizer"

    def _draft(
        self, group: WorkGroup, attempt: int, m: dict[str, Any], combo: dict[str, Any] | None
    ) -> Tool:
        rule = ReadingRule.from_dict(m["rule"])
        if combo is not None:
            feats = [(Spec.from_dict(f["spec"]), f["key"]) for f in combo["features"]]
            specs: list[tuple[Spec, list[str]]] = []
            for s, k in feats:
                for existing in specs:
                    if existing[0] == s:
                        existing[1].append(k)
                        break
                else:
                    specs.append((s, [k]))
            outputs = tuple(k for _, k in feats)
            measurement = " + ".join(s.describe(k) for s, k in feats)
            calibration = {"kind": "binary_decision_tree_v1", "features": list(outputs)}
            text = (
                f"Computes {measurement}; a train-calibrated decision tree maps them to a class "
                "(output class_id); choose the option naming that class."
            )
        else:
            spec = Spec.from_dict(m["spec"])
            specs = [(spec, [m["key"]])]
            measurement = m["measurement"]
            outputs = (m["key"],) if rule.kind != "extremum" else ()
            calibration = None
            text = f"Computes {measurement}. How to read it: {rule.describe()}."
        fname = "measure_" + slug(measurement, 40)
        source = spec_source(specs, name=fname, doc=f"Evidence: {measurement}.")
        contract = Contract(
            measurement=measurement,
            signature=group.contract.signature,
            success_criterion=group.contract.success_criterion,
            calibration=calibration,
            params=group.contract.params,
        )
        return Tool(
            id=f"draft.{group.id}.a{attempt}",
            kind="tool",
            name=fname,
            description=f"measures {measurement}",
            source=source,
            scope=group.scope,
            contract=contract,
            guidance=Guidance(text, rule),
            outputs=outputs,
            provenance=Provenance(
                bucket=",".join(group.bucket_ids), attempt=attempt, action="create"
            ),
        )

    def synthesize(
        self,
        group: WorkGroup,
        attempt: int,
        history: Sequence[AttemptFeedback],
        examples: Sequence[Example],
    ) -> Tool | None:
        """Draft attempt ``attempt``: the next untried measurement (calibrated combo first when requested).

        Lifecycle cards become their artifact directly: ``usage_guidance`` carries the planner's
        refitted rule for the target tool, ``scope_override`` its narrowed scope (one attempt each).
        """
        tried = {h.measurement for h in history}
        card = group.cards[0]
        if card.plan.get("composite"):
            return self._composite_draft(group, attempt, tried)
        if card.artifact_kind in ("usage_guidance", "scope_override"):
            if history:
                return None
            return self._lifecycle_draft(group, attempt)
        combo = next((c.plan.get("combo") for c in group.cards if c.plan.get("combo")), None)
        ranked = _candidates(group)
        if not ranked:
            return None
        refused = any("calibration refused" in h.detail for h in history)
        if combo is not None and not refused:
            d = self._draft(group, attempt, ranked[0], combo)
            if d.contract.measurement not in tried:
                return d
        for m in ranked:
            if m["measurement"] not in tried:
                return self._draft(group, attempt, m, None)
        return None

    def _composite_draft(self, group: WorkGroup, attempt: int, tried: set[str]) -> Tool | None:
        """A composite tool; later attempts keep only the branches that cross-validated better."""
        branches = [Branch.from_dict(b) for c in group.cards for b in c.plan.get("branches", ())]

        def name(bs: Sequence[Branch]) -> str:
            return f"kinds_{len(bs)}_" + slug(group.id, 20)

        def source(bs: Sequence[Branch]) -> str:
            return composite_source(bs, name=name(bs), doc=composite_doc(bs))

        # an attempt is new only as the tool it writes: the branch list after the cut to the
        # sandbox's source bound (the same cut of the same list would write the same tool again)
        for bar in COMPOSITE_BARS:
            keep = [b for b in branches if float(b.stats.get("cv_acc", 0.0)) >= bar]
            keep = within(keep, lambda bs: len(source(bs)), MAX_SOURCE_CHARS) if keep else keep
            if keep and composite_measurement(keep) not in tried:
                break
        else:
            return None
        measurement = composite_measurement(keep)
        fname = name(keep)
        rule = branch_rule(keep)
        lines = [
            f"b{i}: {b.describe()} ({b.stats.get('template', '')})" for i, b in enumerate(keep, 1)
        ]
        text = (
            "Computes one measurement per question kind (branch); how to read each: "
            + rule.describe()
        )
        scope = replace(
            group.scope, kinds=tuple(Matcher(require=b.require, forbid=b.forbid) for b in keep)
        )
        return Tool(
            id=f"draft.{group.id}.a{attempt}",
            kind="tool",
            name=fname,
            description=f"composite of {len(keep)} branches: " + "; ".join(lines)[:400],
            source=source(keep),
            scope=scope,
            contract=replace(group.contract, measurement=measurement),
            guidance=Guidance(text, rule),
            outputs=(),
            provenance=Provenance(
                bucket=",".join(group.bucket_ids), attempt=attempt, action="create"
            ),
        )

    def _lifecycle_draft(self, group: WorkGroup, attempt: int) -> Tool:
        card = group.cards[0]
        prov = Provenance(
            bucket=",".join(group.bucket_ids),
            attempt=attempt,
            action=card.action,
            target=card.target_tool,
        )
        if card.artifact_kind == "usage_guidance":
            rule = ReadingRule.from_dict(card.plan["rule"])
            return Tool(
                id=f"draft.{group.id}.a{attempt}",
                kind="usage_guidance",
                name="refine_" + slug(card.target_tool, 40),
                description=f"refined reading of {card.target_tool}",
                scope=group.scope,
                contract=card.contract,
                guidance=Guidance(f"Read {card.target_tool} this way: {rule.describe()}.", rule),
                provenance=prov,
            )
        return Tool(
            id=f"draft.{group.id}.a{attempt}",
            kind="scope_override",
            name="rescope_" + slug(card.target_tool, 40),
            description=f"narrower scope for {card.target_tool}: {card.focus}",
            scope=card.scope,
            contract=card.contract,
            guidance=Guidance(card.focus),
            provenance=prov,
        )

    def repair(
        self, group: WorkGroup, draft: Tool, violation: str, examples: Sequence[Example]
    ) -> Tool | None:
        """Repair one violation: a refused calibration falls back to the best single measurement."""
        if draft.contract.calibration is not None:
            ranked = _candidates(group)
            if ranked:
                return self._draft(group, draft.provenance.attempt, ranked[0], None)
        return None
