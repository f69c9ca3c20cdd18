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

from collections.abc import Sequence
from typing import Any

from tsevo.library.library import Library, slug
from tsevo.library.tool import Contract, Guidance, Provenance, Tool

from ...protocols import AttemptFeedback, Example, WorkGroup
from ._common import RoleContext, dumps, render_rows, trim_to_budget
from .catalog import render_primitives, render_sandbox_rules
from .chain import LLMChainStepper
from .planner import dossier_row, render_codes
from .toolreply import RuleReply, SynthReply, check_reply, rule_of

__all__ = ["LLMSynthesizer", "RuleReply", "SynthReply", "render_library", "tool_from_reply"]

ZERO_REPAIR_OUTCOMES = ("no_repair", "rejected_check", "exec_errors")


def tool_from_reply(
    r: SynthReply, group: WorkGroup, attempt: int, *, author: str = "", parent: str = ""
) -> Tool | None:
    """Build the draft tool of a (validated) reply; None when the model gave up."""
    if r.give_up:
        return None
    rule = rule_of(r.reading_rule)
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
    """The planners' diagnosis per card: free text, coded (``taxonomy.diagnoses``), or both.

    With codes in ``instead`` mode a card shows its focus and the codes, not its failure type
    and root cause.
    """
    lines = []
    for c in group.cards:
        if not any(k.get("mode") == "instead" for k in c.codes):
            lines.append(
                f"- {c.bucket_id}: {c.failure_type}; root cause: {c.root_cause}; focus: {c.focus}"
            )
        else:
            lines.append(f"- {c.bucket_id}: focus: {c.focus}")
        if c.codes:
            lines += ["  coded diagnosis (codes of a pinned taxonomy, quoted trace lines):"]
            lines.append(render_codes(c.codes, indent="  "))
    return "\n".join(lines)


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

    def chain_stepper(self) -> LLMChainStepper:
        """The LLM Mara chain step on this synthesizer's client (an ``LLMChainStepper``).

        The round engine runs an LLM chain, instead of the builtin one, for a synthesizer that
        has this method.
        """
        return LLMChainStepper(self.ctx)

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
