"""What a role may see of a question: :class:`QuestionView`, and the opaque per-run id it carries.

A view holds the text, context, options, task and the series by role of one question, under an
opaque id; never its gold answer, metadata, subtask, source or source id. Roles receive views, not
:class:`~tsevo.data.Question` records (DESIGN.md §2, "What a role may see"): the engine builds the
views, assigns the ids after the split, and maps every id a role returns back to the question.

The id is a hash of the question's content fingerprint and a per-run salt, so it carries nothing a
source encodes (``temporalbench:<row>:T1:...``, ``syn-<family>-...``) and does not change when a
suite's ids are renamed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

import numpy as np

from .question import Question

__all__ = ["QuestionView", "opaque_id"]

_ID_CHARS = 10


def opaque_id(fingerprint: str, salt: str) -> str:
    """The opaque id of a question with this content fingerprint under a run's salt.

    Example:
        >>> opaque_id("0123456789abcdef", "0")
        'qcca9988252'
    """
    h = hashlib.sha256(f"tsevo-view\x00{salt}\x00{fingerprint}".encode()).hexdigest()
    return "q" + h[:_ID_CHARS]


@dataclass(frozen=True, eq=False)
class QuestionView:
    """One question as a role sees it: no gold, no metadata, no subtask, no source id.

    Attributes:
        id: Opaque per-run id (the engine maps it back).
        question: The question text.
        context: Extra text shown with the question.
        options: The options.
        task: The benchmark task label (may appear in a scope).
        series: Named read-only float64 arrays.
        primary: Names of the one or two primary series.
        covariates: Names of covariate series.
        candidates: Names of candidate series.
        fingerprint: Content hash of everything above but the id (a cache key).
    """

    id: str
    question: str
    context: str
    options: tuple[str, ...]
    task: str
    series: Mapping[str, np.ndarray]
    primary: tuple[str, ...]
    covariates: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    fingerprint: str = ""

    @classmethod
    def of(cls, q: Question, id: str) -> QuestionView:
        """The view of ``q`` under the opaque ``id``."""
        return cls(
            id=id,
            question=q.question,
            context=q.context,
            options=q.options,
            task=q.task,
            series=q.series,
            primary=q.primary,
            covariates=q.covariates,
            candidates=q.candidates,
            fingerprint=q.fingerprint,
        )

    def __post_init__(self) -> None:
        object.__setattr__(self, "series", MappingProxyType(dict(self.series)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuestionView):
            return NotImplemented
        return self.id == other.id and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash((self.id, self.fingerprint))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # a mapping proxy does not pickle; the view is rebuilt from a plain dict of its series
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        kw["series"] = dict(self.series)
        return (_rebuild, (kw,))

    @property
    def n_options(self) -> int:
        """Number of options."""
        return len(self.options)


def _rebuild(kw: dict[str, Any]) -> QuestionView:
    return QuestionView(**kw)
