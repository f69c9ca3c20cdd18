"""The LLM Mara chain step: two strict JSON calls, an analysis of the node, then its edit.

:class:`LLMChainStepper` is what :meth:`LLMSynthesizer.chain_stepper` returns; the round engine
(``tsevo.evolve.chain_llm``) builds the step's context and its checks and calls:

* :meth:`LLMChainStepper.analyse` (stage ``chain_analyse``): the five-part analysis with
  categories A–I and verbatim citations (:class:`AnalysisReply`);
* :meth:`LLMChainStepper.mutate` (stage ``chain_mutate``): the edited node (:class:`EditReply`):
  actions with what each resolves, the tool source, guidance, reading rule and a scope patch.

Both run at the synthesizer role's settings (the chain is synthesis work) and go through
:meth:`RoleContext.call`: the JSON schema in the prompt, at most ``retries`` re-asks with the
refusal reasons fed back, the response cache (a rerun replays for free). The shape is checked
here (pydantic, the sandbox gate on the source, the reading rule); the checks against tsevo's row
sets come from the caller's ``validate`` (``tsevo.marachain.analysis``), so one re-ask loop
carries both. The changelog of an accepted edit is written by tsevo, never taken from the reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pydantic

from ..jsoncall import JsonCallMeta
from ._common import RoleContext
from .catalog import render_primitives, render_sandbox_rules
from .toolreply import RuleReply, SynthReply, check_reply

__all__ = [
    "AnalysisReply",
    "Citation",
    "Diagnosis",
    "EditAction",
    "EditReply",
    "LLMChainStepper",
]


class Citation(pydantic.BaseModel):
    """A verbatim quote of a stored field of a lineage node (``qid`` empty for a node field)."""

    node_id: str = pydantic.Field(max_length=120)
    qid: str = pydantic.Field(default="", max_length=80)
    field: str = pydantic.Field(max_length=40)
    quote: str = pydantic.Field(min_length=1, max_length=400)


class Diagnosis(pydantic.BaseModel):
    """One diagnosis: a category, the node responsible, the rows, citations and the action."""

    category: Literal["A", "B", "C", "D", "E", "F", "G", "H", "I"]
    responsible_node: str = pydantic.Field(max_length=120)
    rows: list[str] = pydantic.Field(max_length=64)
    citations: list[Citation] = pydantic.Field(default_factory=list, max_length=8)
    action: str = pydantic.Field(max_length=400)


class Credit(pydantic.BaseModel):
    """The lineage node whose change credited a row."""

    qid: str = pydantic.Field(max_length=80)
    node_id: str = pydantic.Field(max_length=120)


class Pair(pydantic.BaseModel):
    """An inconsistency pair tsevo listed, explained."""

    node_a: str = pydantic.Field(max_length=120)
    node_b: str = pydantic.Field(max_length=120)
    qid: str = pydantic.Field(max_length=80)
    explanation: str = pydantic.Field(default="", max_length=300)


class DataIssue(pydantic.BaseModel):
    """A row whose gold or data look wrong (it carries no diagnosis)."""

    qid: str = pydantic.Field(max_length=80)
    issue: str = pydantic.Field(max_length=300)


class AnalysisReply(pydantic.BaseModel):
    """The analysis contract: five required parts plus data-quality rows."""

    delta_tracing: list[Diagnosis] = pydantic.Field(max_length=16)
    success_extraction: list[Credit] = pydantic.Field(max_length=64)
    oscillation: list[Diagnosis] = pydantic.Field(max_length=16)
    inconsistency: list[Pair] = pydantic.Field(max_length=16)
    corroboration: list[Citation] = pydantic.Field(max_length=16)
    data_quality_issues: list[DataIssue] = pydantic.Field(default_factory=list, max_length=16)


class EditAction(pydantic.BaseModel):
    """One action of an edit: its target, what it changes and the rows it resolves."""

    target: Literal["source", "guidance", "reading_rule", "scope"]
    op: Literal["edit", "replace"] = "edit"
    issue: str = pydantic.Field(max_length=200)
    change: str = pydantic.Field(max_length=400)
    resolves: list[str] = pydantic.Field(max_length=64)


class EditReply(pydantic.BaseModel):
    """The mutation contract: the edited node and the actions behind it (no changelog)."""

    actions: list[EditAction] = pydantic.Field(min_length=1, max_length=8)
    source: str = pydantic.Field(max_length=16000)
    function_name: str = pydantic.Field(max_length=80)
    outputs: list[str] = pydantic.Field(max_length=32)
    guidance: str = pydantic.Field(max_length=800)
    reading_rule: RuleReply | None
    scope_patch: Literal["keep", "narrow", "widen"] = "keep"

    def as_synth(self, measurement: str) -> SynthReply:
        """The edit's tool fields in the synthesizer's contract (for its checks and builder)."""
        return SynthReply(
            source=self.source,
            function_name=self.function_name,
            outputs=self.outputs,
            measurement=measurement,
            description=f"measures {measurement}",
            guidance=self.guidance,
            reading_rule=self.reading_rule,
            give_up=False,
        )


Check = Callable[[dict[str, Any]], list[str]]


def _joined(reasons: list[str]) -> str | None:
    return "; ".join(reasons[:8]) if reasons else None


class LLMChainStepper:
    """The two calls of an LLM chain step on the synthesizer role's client and settings.

    Args:
        ctx: The shared role context.
    """

    role = "synthesizer"

    def __init__(self, ctx: RoleContext) -> None:
        self.ctx = ctx
        self.name = f"llm-chain:{ctx.model(self.role)}"

    def analyse(
        self, group_id: str, step: int, depth: int, context: str, check: Check
    ) -> tuple[AnalysisReply, JsonCallMeta]:
        """The analysis of the node to edit, re-asked while ``check`` finds reasons to refuse it.

        Raises:
            InvalidReply: No acceptable analysis within the retries.
        """
        prompt = self.ctx.render(
            "chain_analyse", group_id=group_id, step=step, depth=depth, context=context
        )

        def validate(r: AnalysisReply) -> str | None:
            return _joined(check(r.model_dump()))

        return self.ctx.call(self.role, "chain_analyse", prompt, AnalysisReply, validate=validate)

    def mutate(
        self,
        group_id: str,
        step: int,
        depth: int,
        context: str,
        analysis: str,
        max_source: int,
        check: Check,
        measurement: str,
    ) -> tuple[EditReply, JsonCallMeta]:
        """The edited node, re-asked on a refused source, rule or ``check`` reason.

        Raises:
            InvalidReply: No acceptable edit within the retries.
        """
        prompt = self.ctx.render(
            "chain_mutate",
            group_id=group_id,
            step=step,
            depth=depth,
            analysis=analysis,
            context=context,
            rules=render_sandbox_rules(),
            primitives=render_primitives(compact=True),
            max_source=max_source,
        )

        def validate(r: EditReply) -> str | None:
            reasons = check(r.model_dump())
            if len(r.source) > max_source:
                reasons.append(f"source has {len(r.source)} characters; at most {max_source}")
            problem = check_reply(r.as_synth(measurement))  # the sandbox gate, then the rule
            if problem:
                reasons.append(problem)
            return _joined(reasons)

        return self.ctx.call(self.role, "chain_mutate", prompt, EditReply, validate=validate)
