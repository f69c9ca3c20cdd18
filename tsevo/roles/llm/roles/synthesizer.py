"""Synthesis on an LLM: tool source for a work group's contract, one targeted repair, replan hints.

The prompt carries the contract, the scope, the planners' diagnosis, the current library (rendered
on its own, when the engine bound one with :meth:`LLMSynthesizer.for_library`), earlier attempts of
the group (with a replan hint after consecutive zero-repair outcomes) and, apart from them, the
strongest attempt so far with its source, training examples (text, options, the
correct option, series summaries), the sandbox rules and the primitives catalog, all rendered from
the live objects. The reply is a tool: source, outputs, guidance text and, when the model gives
one, a machine-readable :class:`~tsevo.library.tool.ReadingRule` (so the builtin reviewer can read
the tool too). The validator runs the sandbox's AST gate on the source and checks the reading
rule, so a source the gate refuses is re-asked with the gate's reasons before it reaches the
engine; the engine's own checks (smoke call, context selection, determinism) come after and a
violation there gets one :meth:`LLMSynthesizer.repair`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import pydantic

from tsevo.library.library import Library, slug
from tsevo.library.sandbox import check_source
from tsevo.library.tool import Contract, Guidance, Provenance, ReadingRule, Tool

from ...protocols import AttemptFeedback, Example, WorkGroup
from ._common import RoleContext, dumps, render_rows, trim_to_budget
from .catalog import render_primitives, render_sandbox_rules
from .planner import dossier_row

__all__ = ["LLMSynthesizer", "RuleReply", "SynthReply", "render_library", "tool_from_reply"]

ZERO_REPAIR_OUTCOMES = ("no_repair", "rejected_check", "exec_errors")


class RuleReply(pydantic.BaseModel):
    """A reading rule as the model writes it."""

    kind: Literal["label", "nearest_number", "extremum"]
    key: str = ""
    bins: list[float] = pydantic.Field(default_factory=list)
    labels: list[str] = pydantic.Field(default_factory=list)
    scale: float = 1.0
    offset: float = 0.0
    prefix: str = ""
    mode: Literal["min", "max"] = "min"
    margin: float = pydantic.Field(default=0.0, ge=0.0, description="abstain band")
    confidence: float = pydantic.Field(default=0.5, ge=0.0, le=1.0)


class SynthReply(pydantic.BaseModel):
    """The synthesizer's JSON contract."""

    source: str = pydantic.Field(max_length=16000)
    function_name: str = pydantic.Field(max_length=80)
    outputs: list[str] = pydantic.Field(max_length=32)
    measurement: str = pydantic.Field(max_length=160)
    description: str = pydantic.Field(max_length=300)
    guidance: str = pydantic.Field(max_length=800)
    reading_rule: RuleReply | None
    give_up: bool


def _rule(r: RuleReply | None) -> ReadingRule | None:
    if r is None:
        return None
    return ReadingRule(
        r.kind,
        key=r.key,
        bins=tuple(r.bins),
        labels=tuple(r.labels),
        scale=r.scale,
        offset=r.offset,
        prefix=r.prefix,
        mode=r.mode,
        margin=r.margin,
        confidence=r.confidence,
    )


def check_reply(r: SynthReply) -> str | None:
    """Problems of a synthesizer reply the model can fix (None when usable)."""
    if r.give_up:
        return None

    if not r.source.strip():
        return "source is empty; write the function (or set give_up to true)"
    gate = check_source(r.source)
    if not gate.ok:
        return "the source is refused by the sandbox gate: " + "; ".join(gate.reasons[:4])
    try:
        rule = _rule(r.reading_rule)
    except ValueError as e:
        return f"reading_rule is invalid: {e}"
    bad = [k for k in r.outputs if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", k)]
    if bad:
        return f"output keys must be identifiers of at most 64 characters: {bad[:4]}"
    missing = [k for k in rule.read_keys() if k not in r.outputs] if rule is not None else []
    if missing:
        return f"reading_rule reads {missing} that are not among the outputs {r.outputs}"
    return None


def tool_from_reply(
    r: SynthReply, group: WorkGroup, attempt: int, *, author: str = "", parent: str = ""
) -> Tool | None:
    """Build the draft tool of a (validated) reply; None when the model gave up."""
    if r.give_up:
        return None
    rule = _rule(r.reading_rule)
    outputs = tuple(dict.fromkeys(r.outputs))
    measurement = r.measurement.strip() or group.contract.measurement
    calibration = None
    if group.contract.calibration is not None:
        calibration = {**dict(group.contract.calibration), "features": list(outputs)}
    contract = Contract(
        measurement=measurement,
        signature=group.contract.signature,
        success_criterion=group.contract.success_criterion,
        calibration=calibration,
        params=group.contract.params,
    )
    name = r.function_name.strip() or "tool"
    return Tool(
        id=f"draft.{group.id}.a{attempt}",
        kind="tool",
        name=slug(name, 60) if not name.isidentifier() else name,
        description=r.description.strip() or f"measures {measurement}",
        source=r.source.strip() + "\n",
        scope=group.scope,
        contract=contract,
        guidance=Guidance(r.guidance.strip(), rule),
        outputs=outputs,
        provenance=Provenance(
            bucket=",".join(group.bucket_ids),
            attempt=attempt,
            parent=parent,
            action=group.cards[0].action if group.cards else "create",
            target=group.cards[0].target_tool if group.cards else "",
            author=author,
        ),
    )


def _contract_text(group: WorkGroup) -> str:
    c = group.contract
    return dumps(
        {
            "measurement": c.measurement,
            "signature": list(c.signature),
            "success_criterion": c.success_criterion,
            "params": dict(c.params),
            "calibration": (
                "a decision tree will be fitted on training rows over your outputs and compiled "
                "into the tool; return the numeric features it should use"
            )
            if c.calibration is not None
            else None,
            "reading": next(
                (str(x.plan.get("rule_kind")) for x in group.cards if x.plan.get("rule_kind")), None
            ),
        }
    )


def _diagnosis(group: WorkGroup) -> str:
    return "\n".join(
        f"- {c.bucket_id}: {c.failure_type}; root cause: {c.root_cause}; focus: {c.focus}"
        for c in group.cards
    )


def _draft_json(draft: Tool) -> str:
    return dumps(
        {
            "function_name": draft.name,
            "source": draft.source,
            "outputs": list(draft.outputs),
            "measurement": draft.contract.measurement,
            "guidance": draft.guidance.text,
            "reading_rule": draft.guidance.rule.to_dict() if draft.guidance.rule else None,
        }
    )


def render_library(library: Library | None) -> str:
    """The current library as the synthesizer sees it: one line per runnable tool, then the rest.

    Each tool: its id, stage, description, measurement and outputs, with the amendments of later
    stages applied (retired tools left out); other artifacts (guidance, overrides, patches) by what
    they amend.
    """
    if library is None:
        return "(no library bound)"
    lines = []
    for row in library.effective():
        for st in row:
            t = st.tool
            what = t.contract.measurement or "unspecified"
            outs = ", ".join(t.outputs) or "unspecified"
            lines.append(
                f"- {t.id} (stage {st.stage}): {t.description or what}; measures {what}; "
                f"outputs {outs}"
            )
    for t in library.all_artifacts():
        if t.kind != "tool":
            lines.append(
                f"- {t.id} [{t.kind}] {t.description}".rstrip()
                + (f" (amends {t.target})" if t.target else "")
            )
    return "\n".join(lines) or "(empty: the agent answers without tools)"


class LLMSynthesizer:
    """Synthesizer on an LLM (runs at the synthesizer role's reasoning effort, ``high`` by default).

    Args:
        ctx: Shared role context.
        max_attempts: Attempts the engine allows per group (shown to the model).
        max_examples: Training examples shown (fewer when over the prompt budget).
    """

    role = "synthesizer"

    def __init__(
        self,
        ctx: RoleContext,
        *,
        max_attempts: int = 3,
        max_examples: int = 8,
        library: Library | None = None,
    ) -> None:
        self.ctx = ctx
        self.max_attempts = max_attempts
        self.max_examples = max_examples
        self.library = library
        self.name = f"llm-synthesizer:{ctx.model(self.role)}"

    def for_library(self, library: Library) -> LLMSynthesizer:
        """A synthesizer that shows ``library`` (the round's current chain) in its prompts."""
        return LLMSynthesizer(
            self.ctx,
            max_attempts=self.max_attempts,
            max_examples=self.max_examples,
            library=library,
        )

    def _fit(self, build: Any, n_examples: int) -> str:
        """Full catalog first, then the compact one; examples dropped until the prompt fits."""
        text = ""
        for compact in (False, True):
            prims = render_primitives(compact)

            def build_k(k: int, p: str = prims) -> str:
                return str(build(k, p))

            text, _k = trim_to_budget(
                self.ctx, self.role, build_k, n_examples, minimum=0, reply=SynthReply
            )
            if self.ctx.fits(self.role, text, SynthReply):
                return str(text)
        return str(text)

    def prompt(
        self,
        group: WorkGroup,
        attempt: int,
        history: Sequence[AttemptFeedback],
        examples: Sequence[Example],
    ) -> str:
        """The synthesis prompt."""
        rows = [dossier_row(e) for e in examples[: self.max_examples]]
        for r in rows:
            r.pop("agent_correct", None)
            r.pop("tools_fired", None)
        hist = ""
        if history:
            hrows = [
                {
                    "attempt": h.attempt,
                    "measurement": h.measurement,
                    "outcome": h.outcome,
                    "repairs": h.repairs,
                    "harms": h.harms,
                    "detail": h.detail[:300],
                }
                for h in history
            ]
            tail = [h.outcome for h in history[-2:]]
            zero = len(tail) == 2 and all(o in ZERO_REPAIR_OUTCOMES for o in tail)
            hint = self.ctx.render("synthesizer_replan_hint") if zero else ""
            hist = self.ctx.render("synthesizer_history", history=render_rows(hrows), hint=hint)
        strongest = ""
        top = next((h for h in history if h.strongest), None)
        if top is not None:
            strongest = self.ctx.render(
                "synthesizer_strongest",
                attempt=dumps(
                    {
                        "attempt": top.attempt,
                        "measurement": top.measurement,
                        "outcome": top.outcome,
                        "repairs": top.repairs,
                        "harms": top.harms,
                        "detail": top.detail[:300],
                    }
                ),
                source=top.source.strip() or "(not available)",
            )
        library = render_library(self.library)

        def build(k: int, prims: str) -> str:
            return self.ctx.render(
                "synthesizer",
                group_id=group.id,
                buckets=", ".join(group.bucket_ids),
                attempt=attempt,
                max_attempts=self.max_attempts,
                contract=_contract_text(group),
                scope=group.scope.describe(),
                diagnosis=_diagnosis(group),
                library=library,
                history=hist,
                strongest=strongest,
                examples=render_rows(rows[:k]),
                rules=render_sandbox_rules(),
                primitives=prims,
            )

        return self._fit(build, len(rows))

    def synthesize(
        self,
        group: WorkGroup,
        attempt: int,
        history: Sequence[AttemptFeedback],
        examples: Sequence[Example],
    ) -> Tool | None:
        """Draft attempt ``attempt`` for the group (None when the model gives up).

        Raises:
            InvalidReply: No usable tool within the retries (the engine stops the group).
        """
        reply, _meta = self.ctx.call(
            self.role,
            "synthesize",
            self.prompt(group, attempt, history, examples),
            SynthReply,
            validate=check_reply,
        )
        return tool_from_reply(reply, group, attempt, author=self.ctx.model(self.role))

    def repair_prompt(self, group: WorkGroup, draft: Tool, violation: str) -> str:
        """The targeted repair prompt."""

        def build(_k: int, prims: str) -> str:
            return self.ctx.render(
                "synthesizer_repair",
                group_id=group.id,
                buckets=", ".join(group.bucket_ids),
                violation=violation[:1000],
                contract=_contract_text(group),
                scope=group.scope.describe(),
                draft=_draft_json(draft),
                rules=render_sandbox_rules(),
                primitives=prims,
            )

        return self._fit(build, 0)

    def repair(
        self, group: WorkGroup, draft: Tool, violation: str, examples: Sequence[Example]
    ) -> Tool | None:
        """One targeted repair of a contract violation (None when the model gives up).

        Raises:
            InvalidReply: No usable repair within the retries (the violation stands).
        """
        reply, _meta = self.ctx.call(
            self.role,
            "repair",
            self.repair_prompt(group, draft, violation),
            SynthReply,
            validate=check_reply,
        )
        return tool_from_reply(
            reply,
            group,
            draft.provenance.attempt,
            author=self.ctx.model(self.role),
            parent=draft.id,
        )
