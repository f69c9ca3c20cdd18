"""The paper's answering baselines on an LLM: self-consistency, Self-Refine, four-shot ICL.

:class:`BaselineAnswerer` wraps the base :class:`~.answering.LLMAnswerer` and is itself a base
answerer, so the baselines run through the same agent, the same residual chain and the same paired
protocol as the method. Each part is a setting (``ProtocolConfig.answer``):

* ``selection`` / ``samples``: the answerer is sampled ``samples`` times, each request with its own
  ``seed`` (and the sampling ``temperature``), so neither the server nor the response cache
  collapses them; a :mod:`~tsevo.roles.selection` rule (``majority``) chooses the answer.
* ``refine``: one reflection pass (Self-Refine): the chosen answer and its reason go back to the
  model, which critiques it and gives its final answer in the same reply.
* ``examples``: in-context examples. The one declared exception to the roles' view: train
  questions shown with their gold, labelled as train examples (chosen by the engine from train).

Every step is recorded in the answer's ``detail`` (the trace's ``base_detail``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal

import pydantic

from tsevo.data import QuestionView

from ...protocols import BaseAnswer, Example
from ...selection import resolve_selection
from ..jsoncall import InvalidReply
from ..render import PromptTooLong, option_letter, render_question
from ._common import letters, option_index
from .answering import LLMAnswerer, answer_model

__all__ = ["BaselineAnswerer", "RefineReply", "refine_model"]


class RefineReply(pydantic.BaseModel):
    """The reflection pass's JSON contract: a critique of the first answer, then the final one."""

    critique: str = pydantic.Field(default="", max_length=800, description="one or two sentences")
    option: str = pydantic.Field(description="letter of the final option")
    reason: str = pydantic.Field(default="", max_length=600, description="one short sentence")


@functools.lru_cache(maxsize=16)
def refine_model(n_options: int) -> type[RefineReply]:
    """A :class:`RefineReply` whose ``option`` is an enum of the question's letters."""
    lit: Any = Literal[tuple(letters(n_options))]
    model: type[RefineReply] = pydantic.create_model(
        f"RefineReply{n_options}",
        __base__=RefineReply,
        option=(lit, pydantic.Field(description="letter of the final option")),
    )
    return model


def _letter(i: int) -> str:
    return option_letter(i)


class BaselineAnswerer:
    """A base answerer running one of the paper's baselines around an :class:`LLMAnswerer`.

    Args:
        inner: The LLM base answerer (its context, prompt and fallback policy).
        selection: ``single`` or ``majority`` (or a :class:`~tsevo.roles.selection.Selection`).
        samples: Answers sampled per question (``majority`` only).
        temperature: Sampling temperature of the sampled answers.
        refine: One reflection pass after the answer (Self-Refine).
        examples: In-context train examples with their gold (few-shot ICL), in order of use.
        shots: Examples shown per question (default: all of them). Extra examples are spares: a
            question never sees itself as an example (answering train, its gold would be shown),
            the next example takes its place.
    """

    role = "answerer"

    def __init__(
        self,
        inner: LLMAnswerer,
        *,
        selection: Any = "single",
        samples: int = 1,
        temperature: float = 0.7,
        refine: bool = False,
        examples: Sequence[Example] = (),
        shots: int | None = None,
    ) -> None:
        self.inner = inner
        self.ctx = inner.ctx
        self.selection = resolve_selection(selection)
        self.samples = samples if self.selection.name != "single" else 1
        if self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        self.temperature = float(temperature)
        self.refine = bool(refine)
        self.examples = tuple(examples)
        if any(e.gold is None for e in self.examples):
            raise ValueError("in-context examples need their gold")
        self.shots = len(self.examples) if shots is None else int(shots)
        if not 0 <= self.shots <= len(self.examples):
            raise ValueError(f"shots must be between 0 and {len(self.examples)}, got {shots}")
        parts = []
        if self.examples:
            parts.append(f"{self.shots}shot")
        if self.selection.name != "single":
            parts.append(f"{self.selection.name}{self.samples}@t{self.temperature:g}")
        if self.refine:
            parts.append("refine")
        self.name = f"{inner.name}+{'+'.join(parts) or 'single'}"

    # ------------------------------------------------------------------ prompts
    def examples_for(self, q: QuestionView) -> tuple[Example, ...]:
        """The examples ``q`` is shown: the first ``shots`` that are not ``q`` itself."""
        return tuple(e for e in self.examples if e.question.id != q.id)[: self.shots]

    def prompt(self, q: QuestionView) -> str:
        """The answering prompt: the base answerer's, or the few-shot one with the examples."""
        examples = self.examples_for(q)
        if not examples:
            return self.inner.prompt(q)
        points = self.ctx.max_points
        while True:
            shots = "\n\n".join(
                f"--- Example {i} (train question, gold shown) ---\n"
                f"{render_question(e.question, max_points=max(8, points // 4), sig=self.ctx.sig)}\n"
                f"Gold answer (train example): {_letter(int(e.gold or 0))}"
                for i, e in enumerate(examples, 1)
            )
            text = self.ctx.render(
                "answerer_icl",
                n_examples=len(examples),
                examples=shots,
                question=render_question(q, max_points=points, sig=self.ctx.sig),
            )
            if self.ctx.fits(self.role, text, answer_model(q.n_options)) or points <= 8:
                return text
            points //= 2

    def refine_prompt(self, q: QuestionView, first: BaseAnswer) -> str:
        """The reflection prompt: the question, the first answer and its reason."""
        points = self.ctx.max_points
        while True:
            text = self.ctx.render(
                "answerer_refine",
                question=render_question(q, max_points=points, sig=self.ctx.sig),
                first=_letter(first.option),
                reason=first.reason or "(none given)",
            )
            if self.ctx.fits(self.role, text, refine_model(q.n_options)) or points <= 8:
                return text
            points //= 2

    # ------------------------------------------------------------------ answering
    def answer(self, q: QuestionView) -> BaseAnswer:
        """Answer through the configured baseline; ``detail`` records every step.

        Raises:
            LLMRunStopped: The run must stop (budget, replay miss, endpoint down).
            LLMCallError: A request failed for good (the question does not complete).
        """
        prompt = self.prompt(q)
        examples = self.examples_for(q)
        stage = "icl" if examples else "base"
        detail: dict[str, Any] = {"baseline": self.name.split("+", 1)[1]}
        if examples:
            detail["shots"] = [
                {"id": e.question.id, "gold": _letter(int(e.gold or 0))} for e in examples
            ]
        if self.selection.name == "single":
            first = self.inner.answer_prompt(q, prompt, stage)
        else:
            seed0 = self.ctx.client.roles.for_role(self.role).seed or 0
            drawn = [
                self.inner.answer_prompt(
                    q, prompt, "sample", temperature=self.temperature, seed=seed0 + i
                )
                for i in range(self.samples)
            ]
            chosen = self.selection.select(drawn)
            first = drawn[chosen.index]
            detail["samples"] = [
                {"option": _letter(a.option), "seed": seed0 + i, "reason": a.reason}
                for i, a in enumerate(drawn)
            ]
            detail["selection"] = {
                **chosen.to_dict(),
                "option": _letter(chosen.option),
                "votes": {_letter(int(o)): n for o, n in chosen.votes.items()},
                "tied": [_letter(o) for o in chosen.tied],
            }
        if not self.refine:
            return BaseAnswer(first.option, first.reason, detail=detail)
        final, record = self._reflect(q, first)
        detail["refine"] = record
        return BaseAnswer(final.option, final.reason, detail=detail)

    def _reflect(self, q: QuestionView, first: BaseAnswer) -> tuple[BaseAnswer, dict[str, Any]]:
        record: dict[str, Any] = {"first": _letter(first.option), "first_reason": first.reason}
        try:
            reply, _meta = self.ctx.call(
                self.role, "refine", self.refine_prompt(q, first), refine_model(q.n_options)
            )
        except (InvalidReply, PromptTooLong) as e:
            self.ctx.role_stats(self.role).fallbacks += 1
            record.update(critique="", final=record["first"], changed=False)
            record["error"] = str(e).splitlines()[0][:200]
            return first, record
        idx = option_index(reply.option, q.n_options)
        assert idx is not None  # the model's enum admits valid letters only
        record.update(
            critique=reply.critique.strip()[:400],
            final=_letter(idx),
            changed=idx != first.option,
        )
        return BaseAnswer(idx, reply.reason.strip()[:300]), record
