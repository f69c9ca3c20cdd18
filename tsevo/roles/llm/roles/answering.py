"""The answering roles on an LLM: the base answerer and the stage reviewer.

Both see only the question at hand (rendered by :func:`~tsevo.roles.llm.render.render_question`:
text, context, series, lettered options; never gold, task, ids or metadata), and the reviewer also
sees the stage's tool evidence with each tool's guidance, plus the library's prompt patches that
are in scope for the question. Before any tool runs, the reviewer consults the scope catalog
(:meth:`LLMReviewer.choose_tools`: the candidate tools' ids, names, one-line descriptions and
scopes) and chooses the tools the agent inspects; in the ``overwrite`` ablation it reads the
evidence into an option without being shown the incoming answer (:meth:`LLMReviewer.read`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pydantic

from tsevo.data import QuestionView
from tsevo.library.library import Library, ScopedTool, scope_matches
from tsevo.library.tool import Tool

from ...protocols import BaseAnswer, Evidence, Review
from ..client import LLMCallError
from ..jsoncall import InvalidReply
from ..render import PromptTooLong, render_question
from ._common import RoleContext, fmt_outputs, letters, option_index, render_rows

__all__ = [
    "AnswerReply",
    "ChoiceReply",
    "LLMAnswerer",
    "LLMReviewer",
    "ReadReply",
    "ReviewReply",
    "answer_model",
    "read_model",
    "review_model",
]


class AnswerReply(pydantic.BaseModel):
    """The answerer's JSON contract (the letter is constrained per question, see :func:`answer_model`)."""

    option: str = pydantic.Field(description="letter of the chosen option")
    reason: str = pydantic.Field(default="", description="one short sentence", max_length=600)


class ChoiceReply(pydantic.BaseModel):
    """The answerer's choice from the scope catalog: the tools it inspects."""

    tools: list[str] = pydantic.Field(
        default_factory=list, description="ids of the tools to inspect, most useful first"
    )
    reason: str = pydantic.Field(default="", max_length=600)


class ReadReply(pydantic.BaseModel):
    """A reading of tool evidence without an answer to review (the ``overwrite`` ablation)."""

    option: str | None = pydantic.Field(
        default=None, description="letter of the option the evidence points to, else null"
    )
    tools: list[str] = pydantic.Field(default_factory=list)
    reason: str = pydantic.Field(default="", max_length=600)


class ReviewReply(pydantic.BaseModel):
    """The reviewer's JSON contract."""

    decision: Literal["keep", "replace"]
    option: str | None = pydantic.Field(
        default=None, description="letter of the replacement option (replace only), else null"
    )
    tools: list[str] = pydantic.Field(
        default_factory=list, description="ids of the tools whose evidence you relied on"
    )
    reason: str = pydantic.Field(default="", max_length=600)


@functools.lru_cache(maxsize=16)
def answer_model(n_options: int) -> type[AnswerReply]:
    """An :class:`AnswerReply` whose ``option`` is an enum of the question's letters.

    The enum reaches the server's ``response_format`` schema, so a grammar-constrained server
    (llama.cpp) can only emit a valid letter.
    """
    lit: Any = Literal[tuple(letters(n_options))]
    model: type[AnswerReply] = pydantic.create_model(
        f"AnswerReply{n_options}",
        __base__=AnswerReply,
        option=(lit, pydantic.Field(description="letter of the chosen option")),
    )
    return model


@functools.lru_cache(maxsize=16)
def review_model(n_options: int) -> type[ReviewReply]:
    """A :class:`ReviewReply` whose ``option`` is an enum of the question's letters (or null)."""
    lit: Any = Literal[tuple(letters(n_options))]
    model: type[ReviewReply] = pydantic.create_model(
        f"ReviewReply{n_options}",
        __base__=ReviewReply,
        option=(
            lit | None,
            pydantic.Field(default=None, description="replacement letter (replace only)"),
        ),
    )
    return model


@functools.lru_cache(maxsize=16)
def read_model(n_options: int) -> type[ReadReply]:
    """A :class:`ReadReply` whose ``option`` is an enum of the question's letters (or null)."""
    lit: Any = Literal[tuple(letters(n_options))]
    model: type[ReadReply] = pydantic.create_model(
        f"ReadReply{n_options}",
        __base__=ReadReply,
        option=(lit | None, pydantic.Field(default=None, description="option letter or null")),
    )
    return model


def _render_fitting(ctx: RoleContext, role: str, q: QuestionView, build: Any) -> str:
    """Render a prompt around the question, with fewer points per series until it fits."""
    points = ctx.max_points
    while True:
        text = build(render_question(q, max_points=points, sig=ctx.sig))
        if ctx.fits(role, text) or points <= 8:
            return str(text)
        points //= 2


class LLMAnswerer:
    """Base answerer on an LLM: the rendered question in, ``{"option": letter, "reason"}`` out.

    Args:
        ctx: Shared role context.
        on_invalid: ``fallback`` (default; the protocol's "a base answerer always returns an
            option"): when no valid reply comes within the retries, answer the first option and
            say so in the reason (counted in the role's ``fallbacks``); ``raise``: propagate
            :class:`InvalidReply` (the question then does not complete).
    """

    role = "answerer"

    def __init__(self, ctx: RoleContext, *, on_invalid: str = "fallback") -> None:
        if on_invalid not in ("fallback", "raise"):
            raise ValueError(f"on_invalid must be 'fallback' or 'raise', got {on_invalid!r}")
        self.ctx = ctx
        self.on_invalid = on_invalid
        self.name = f"llm-answerer:{ctx.model(self.role)}"

    def prompt(self, q: QuestionView) -> str:
        """The prompt for one question (fitted to the per-prompt token budget)."""
        return _render_fitting(
            self.ctx, self.role, q, lambda rq: self.ctx.render("answerer", question=rq)
        )

    def answer(self, q: QuestionView) -> BaseAnswer:
        """Return the base answer for one question.

        Raises:
            LLMRunStopped: The run must stop (budget, replay miss, endpoint down).
            LLMCallError: The request failed for good (the question does not complete).
        """
        return self.answer_prompt(q, self.prompt(q))

    def answer_prompt(
        self, q: QuestionView, prompt: str, stage: str = "base", **params: Any
    ) -> BaseAnswer:
        """Answer ``q`` from a given prompt (the baselines' prompts and sampled requests).

        Args:
            q: The question (its option count constrains the reply).
            prompt: The prompt to send.
            stage: Accounting stage (``base``, ``sample``, ``icl``).
            **params: Per-request overrides (``temperature``, ``seed``).
        """
        model = answer_model(q.n_options)
        try:
            reply, _meta = self.ctx.call(self.role, stage, prompt, model, **params)
        except (InvalidReply, PromptTooLong) as e:
            if self.on_invalid == "raise":
                raise
            self.ctx.role_stats(self.role).fallbacks += 1
            return BaseAnswer(0, f"fallback to option A: no valid answer ({_brief(e)})")
        idx = option_index(reply.option, q.n_options)
        assert idx is not None  # the model's enum admits valid letters only
        return BaseAnswer(idx, reply.reason.strip()[:300])


def _brief(e: BaseException) -> str:
    return str(e).splitlines()[0][:200]


@dataclass(frozen=True)
class _Patch:
    id: str
    text: str


class LLMReviewer:
    """Stage reviewer on an LLM: keeps or replaces the incoming answer given the tools' evidence.

    The incoming answer is the default. Without any evidence of status ``ok`` no request is made
    (no decision). An invalid reply after the retries gives no decision (the incoming answer is
    kept); ``replace`` naming the incoming option is a keep. A replacement names as responsible the
    tools the model cites (restricted to tools that ran ok; all of them when it cites none).

    Args:
        ctx: Shared role context.
        patches: Prompt patches (``prompt_patch`` artifacts) of the library being answered with;
            those whose scope matches the question are appended to the prompt. Use
            :meth:`for_library` to bind a library's patches.
    """

    role = "reviewer"

    def __init__(self, ctx: RoleContext, patches: Sequence[Tool] = ()) -> None:
        self.ctx = ctx
        self.patches = tuple(patches)
        self.name = f"llm-reviewer:{ctx.model(self.role)}"

    def for_library(self, library: Library) -> LLMReviewer:
        """A reviewer bound to ``library``'s prompt patches (same context and accounting)."""
        return LLMReviewer(self.ctx, library.prompt_patches())

    def _patches_for(self, q: QuestionView) -> list[_Patch]:

        out = []
        for t in self.patches:
            text = t.guidance.text.strip() or t.description.strip()
            if text and scope_matches(t.scope, q):
                out.append(_Patch(t.id, text))
        return out

    # ------------------------------------------------------------------ the scope catalog
    def choice_prompt(
        self, q: QuestionView, candidates: Sequence[ScopedTool], max_tools: int, scoped: bool
    ) -> str:
        """The catalog prompt: the candidates' ids, names, one-line descriptions (and scopes)."""
        rows = []
        for st in candidates:
            t = st.tool
            row: dict[str, Any] = {
                "id": t.id,
                "name": t.name,
                "description": t.description or t.contract.measurement,
                "measures": t.contract.measurement,
                "outputs": list(t.outputs),
            }
            if scoped:
                row["scope"] = t.scope.describe()
            rows.append(row)
        note = (
            " that applies to it: id, name, description, what it measures, outputs, scope"
            if scoped
            else ": id, name, description, what it measures, outputs"
        )
        return _render_fitting(
            self.ctx,
            self.role,
            q,
            lambda rq: self.ctx.render(
                "tool_choice",
                question=rq,
                max_tools=max_tools,
                scope_note=note,
                catalog=render_rows(rows),
            ),
        )

    def choose_tools(
        self, q: QuestionView, candidates: Sequence[ScopedTool], max_tools: int, scoped: bool
    ) -> list[str]:
        """Consult the scope catalog and choose the tools to inspect (at most ``max_tools``).

        ``candidates`` come in the builtin's reading of the catalog (scope matches ranked by the
        matcher; unscoped: every tool, ranked by its description). Without a valid choice within
        the retries the agent inspects the first ``max_tools`` of them (counted as a fallback).

        Raises:
            LLMRunStopped: The run must stop (budget, replay miss, endpoint down).
        """
        known = [st.tool.id for st in candidates]
        if not known:
            return []

        def check(r: ChoiceReply) -> str | None:
            bad = [t for t in r.tools if t not in known]
            if bad:
                return f"unknown tool ids {bad[:4]}; choose among {known}"
            if len(r.tools) > max_tools:
                return f"{len(r.tools)} tools chosen; at most {max_tools}"
            return None

        try:
            reply, _meta = self.ctx.call(
                self.role,
                "choose",
                self.choice_prompt(q, candidates, max_tools, scoped),
                ChoiceReply,
                validate=check,
            )
        except (InvalidReply, PromptTooLong, LLMCallError):
            self.ctx.role_stats(self.role).fallbacks += 1
            return known[:max_tools]
        return list(dict.fromkeys(reply.tools))[:max_tools]

    # ------------------------------------------------------------------ review
    def _evidence_rows(self, evidence: Sequence[Evidence]) -> list[dict[str, Any]]:
        rows = []
        for ev in evidence:
            t = ev.tool.tool
            row: dict[str, Any] = {
                "tool": t.id,
                "status": ev.status,
                "outputs": fmt_outputs(ev.outputs, self.ctx.sig) if ev.status == "ok" else None,
                "measures": t.contract.measurement or t.description,
                "guidance": t.guidance.text,
            }
            if t.guidance.rule is not None:
                row["reading_rule"] = t.guidance.rule.to_dict()
            rows.append(row)
        return rows

    def prompt(self, q: QuestionView, incoming: int, evidence: Sequence[Evidence]) -> str:
        """The prompt for one review (fitted to the per-prompt token budget)."""
        rows = self._evidence_rows(evidence)
        patches = self._patches_for(q)
        ptext = (
            self.ctx.render(
                "reviewer_patches", patches="\n".join(f"- ({p.id}) {p.text}" for p in patches)
            )
            if patches
            else ""
        )
        letter = letters(q.n_options)[incoming] if 0 <= incoming < q.n_options else "?"
        return _render_fitting(
            self.ctx,
            self.role,
            q,
            lambda rq: self.ctx.render(
                "reviewer",
                question=rq,
                incoming=letter,
                evidence=render_rows(rows),
                patches=ptext,
            ),
        )

    def review(self, q: QuestionView, incoming: int, evidence: Sequence[Evidence]) -> Review:
        """Return keep / replace / no_decision for one stage.

        Raises:
            LLMRunStopped: The run must stop (budget, replay miss, endpoint down).
            LLMCallError: The request failed for good (the agent then keeps the incoming answer).
        """
        ok = [ev.tool.tool.id for ev in evidence if ev.status == "ok"]
        if not ok:
            return Review("no_decision", None, "no tool returned evidence")
        model = review_model(q.n_options)
        try:
            reply, _meta = self.ctx.call(
                self.role, "review", self.prompt(q, incoming, evidence), model
            )
        except (InvalidReply, PromptTooLong) as e:
            self.ctx.role_stats(self.role).invalid_final += 1
            return Review("no_decision", None, f"no valid review ({_brief(e)})")
        cited = tuple(t for t in reply.tools if t in ok)
        responsible = tuple(sorted(cited or ok))
        reason = reply.reason.strip()[:300]
        if reply.decision == "replace":
            idx = option_index(reply.option, q.n_options)
            if idx is None:
                return Review("no_decision", None, f"replace without a valid option: {reason}")
            if idx != incoming:
                return Review("replace", idx, reason, responsible)
        return Review("keep", incoming, reason, responsible)

    def read(self, q: QuestionView, evidence: Sequence[Evidence]) -> Review:
        """Read the evidence into an option, shown no answer to review (``overwrite`` ablation).

        Returns ``replace`` with the option the evidence points to, or ``no_decision`` when it
        points to none, no tool ran ok, or no valid reply came within the retries.

        Raises:
            LLMRunStopped: The run must stop (budget, replay miss, endpoint down).
        """
        ok = [ev.tool.tool.id for ev in evidence if ev.status == "ok"]
        if not ok:
            return Review("no_decision", None, "no tool returned evidence")
        prompt = _render_fitting(
            self.ctx,
            self.role,
            q,
            lambda rq: self.ctx.render(
                "reader", question=rq, evidence=render_rows(self._evidence_rows(evidence))
            ),
        )
        try:
            reply, _meta = self.ctx.call(self.role, "read", prompt, read_model(q.n_options))
        except (InvalidReply, PromptTooLong) as e:
            self.ctx.role_stats(self.role).invalid_final += 1
            return Review("no_decision", None, f"no valid reading ({_brief(e)})")
        cited = tuple(t for t in reply.tools if t in ok)
        idx = option_index(reply.option, q.n_options)
        reason = reply.reason.strip()[:300]
        if idx is None:
            return Review("no_decision", None, reason or "the evidence points to no option")
        return Review("replace", idx, reason, tuple(sorted(cited or ok)))
