"""Triage on an LLM: *define* failure categories from a sample of errors, *assign* every error.

The model sees what an :class:`~tsevo.roles.protocols.ErrorItem` holds (question text, options,
input shape, trace facts) and never a task field. *Define* returns at most ``max_categories``
categories (label + criteria); *assign* works on batches of at most :data:`ASSIGN_BATCH` ids under
a strict contract: the reply must list every id of the batch exactly once, with a known category
id or null. The validator names the missing, unknown and duplicated ids, and the re-ask feeds that
back to the model. The id and category fields are enums in the schema, so grammar-constrained
servers cannot invent ids.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import pydantic

from ...protocols import Category, ErrorItem
from ._common import RoleContext, render_rows, trim_to_budget

__all__ = ["ASSIGN_BATCH", "AssignReply", "CategoryReply", "DefineReply", "LLMTriage"]

ASSIGN_BATCH = 32
MAX_TEXT_CHARS = 400


class CategoryReply(pydantic.BaseModel):
    """One category of the define step."""

    label: str = pydantic.Field(min_length=1, max_length=120, description="short label")
    criteria: str = pydantic.Field(
        min_length=1, max_length=600, description="when an error belongs to this category"
    )


class DefineReply(pydantic.BaseModel):
    """The define step's JSON contract."""

    categories: list[CategoryReply] = pydantic.Field(min_length=1)


class Assignment(pydantic.BaseModel):
    """One error's category."""

    id: str
    category: str | None = pydantic.Field(description="category id, or null when none fits")


class AssignReply(pydantic.BaseModel):
    """The assign step's JSON contract."""

    assignments: list[Assignment]


def _assign_model(ids: Sequence[str], cat_ids: Sequence[str]) -> type[AssignReply]:
    id_t: Any = Literal[tuple(ids)]
    cat_t: Any = Literal[tuple(cat_ids)]
    item: Any = pydantic.create_model(
        "Assignment",
        __base__=Assignment,
        id=(id_t, ...),
        category=(cat_t | None, pydantic.Field(description="category id, or null")),
    )
    model: type[AssignReply] = pydantic.create_model(
        "AssignReply",
        __base__=AssignReply,
        assignments=(list[item], ...),
    )
    return model


def error_row(e: ErrorItem) -> dict[str, Any]:
    """What the triage prompt shows of one error (no task, no gold, no metadata)."""
    text = re.sub(r"\s+", " ", e.text).strip()
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + " ..."
    shape = {"primary": e.n_primary, "candidates": e.n_candidates, "covariates": e.n_covariates}
    trace = {"tool_fired": e.tool_fired, "tools": list(e.tools), "decision": e.decision or None}
    return {
        "id": e.qid,
        "question": text,
        "options": list(e.options),
        "shape": shape,
        "trace": trace,
    }


def check_assignments(reply: AssignReply, ids: Sequence[str], cat_ids: Sequence[str]) -> str | None:
    """Problems of an assign reply (None when it covers every id once with known categories)."""
    want = set(ids)
    got = [a.id for a in reply.assignments]
    missing = [i for i in ids if i not in set(got)]
    unknown = sorted({i for i in got if i not in want})
    dup = sorted({i for i in got if got.count(i) > 1})
    bad_cat = sorted(
        {str(a.category) for a in reply.assignments if a.category not in (None, *cat_ids)}
    )
    problems = []
    if missing:
        problems.append(f"these ids are missing from your reply: {', '.join(missing)}")
    if unknown:
        problems.append(f"these ids are not in the batch: {', '.join(unknown)}")
    if dup:
        problems.append(f"these ids appear more than once: {', '.join(dup)}")
    if bad_cat:
        problems.append(
            f"unknown category ids {', '.join(bad_cat)} (use one of {', '.join(cat_ids)} or null)"
        )
    return "; ".join(problems) or None


class LLMTriage:
    """Triage on an LLM (define + assign).

    Args:
        ctx: Shared role context.
        batch: Most ids per assign request (the protocol's 32).
    """

    role = "triage"

    def __init__(self, ctx: RoleContext, *, batch: int = ASSIGN_BATCH) -> None:
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        self.ctx = ctx
        self.batch = batch
        self.name = f"llm-triage:{ctx.model(self.role)}"

    def define_prompt(self, errors: Sequence[ErrorItem], max_categories: int) -> tuple[str, int]:
        """The define prompt and how many errors it shows (fewer when over the token budget)."""
        rows = [error_row(e) for e in errors]
        return trim_to_budget(
            self.ctx,
            self.role,
            lambda k: self.ctx.render(
                "triage_define",
                n=k,
                max_categories=max_categories,
                errors=render_rows(rows[:k]),
            ),
            len(rows),
            minimum=min(len(rows), 4),
        )

    def define(self, errors: Sequence[ErrorItem], max_categories: int) -> list[Category]:
        """Return at most ``max_categories`` categories (ids ``c1``, ``c2``, ...).

        Raises:
            InvalidReply: No valid reply within the retries (the engine retries, then marks the
                round invalid).
        """
        if not errors:
            return []
        prompt, _shown = self.define_prompt(errors, max_categories)

        def validate(r: DefineReply) -> str | None:
            # the engine's own checks, asked here so the model gets them fed back
            if not r.categories:
                return "give at least one category"
            if any(not c.label.strip() for c in r.categories):
                return "every category needs a non-empty label"
            if len(r.categories) > max_categories:
                return (
                    f"you gave {len(r.categories)} categories; give at most {max_categories} "
                    "(merge similar ones)"
                )
            return None

        reply, _meta = self.ctx.call(self.role, "define", prompt, DefineReply, validate=validate)
        return [
            Category(f"c{i}", c.label.strip(), c.criteria.strip())
            for i, c in enumerate(reply.categories, 1)
        ]

    def assign_prompt(self, categories: Sequence[Category], batch: Sequence[ErrorItem]) -> str:
        """The assign prompt for one batch."""
        cats = [{"id": c.id, "label": c.label, "criteria": c.criteria} for c in categories]
        return self.ctx.render(
            "triage_assign",
            categories=render_rows(cats),
            n=len(batch),
            ids=", ".join(e.qid for e in batch),
            errors=render_rows([error_row(e) for e in batch]),
        )

    def assign(
        self, categories: Sequence[Category], batch: Sequence[ErrorItem]
    ) -> dict[str, str | None]:
        """Map every qid of the batch to a category id (or None); batches above 32 are split.

        Raises:
            InvalidReply: A sub-batch got no valid reply within the retries (the engine retries
                the batch, then leaves its errors unassigned).
        """
        out: dict[str, str | None] = {}
        cat_ids = [c.id for c in categories]
        if not cat_ids:
            return {e.qid: None for e in batch}
        for i in range(0, len(batch), self.batch):
            part = list(batch[i : i + self.batch])
            ids = [e.qid for e in part]
            model = _assign_model(ids, cat_ids)

            def validate(r: AssignReply, ids: list[str] = ids) -> str | None:
                return check_assignments(r, ids, cat_ids)

            reply, _meta = self.ctx.call(
                self.role, "assign", self.assign_prompt(categories, part), model, validate=validate
            )
            for a in reply.assignments:
                out[a.id] = a.category
        return out
