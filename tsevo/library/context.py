"""What a tool may see of a question: :class:`ToolInput`, a picklable, answer-free view.

It carries the series with their roles and the question text (for ``ctx.question_mentions`` and
``ctx.question_numbers``), never the options, the gold answer, the task or the metadata.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tsevo.library._scope import question_tokens

if TYPE_CHECKING:
    from tsevo.data import Question, QuestionView

__all__ = ["ToolInput", "extract_numbers", "mentions"]

_NUM = re.compile(
    r"(?<![A-Za-z0-9_])(?<!\d\.)(?:(?<![0-9])[-+])?(?:\d+\.\d+|\.\d+|\d+)(?:[eE][-+]?\d+)?"
)
_WORD = re.compile(r"[a-z0-9_]+")


def extract_numbers(text: str) -> tuple[float, ...]:
    """Return the numbers written in ``text``, in order (e.g. window bounds ``t=120``)."""
    return tuple(float(m.group()) for m in _NUM.finditer(text))


def mentions(text: str, word: str) -> bool:
    """True when ``word`` (case-insensitive; a series name or any token) appears as a whole token."""
    w = word.strip().lower()
    if not w:
        return False
    toks = w.split()
    if len(toks) > 1:
        return (
            re.search(r"\b" + r"\s+".join(map(re.escape, toks)) + r"\b", text.lower()) is not None
        )
    return re.search(r"(?<![a-z0-9_])" + re.escape(w) + r"(?![a-z0-9_])", text.lower()) is not None


@dataclass(frozen=True)
class ToolInput:
    """The evidence a tool runs on: series by role and the question text. No options, no gold.

    Attributes:
        qid: Question id (for tracing only).
        fingerprint: Question content fingerprint (cache key).
        text: Question text followed by its context text.
        series: Named float64 arrays.
        primary: Names of the primary series.
        covariates: Names of covariate series.
        candidates: Names of candidate series.
    """

    qid: str
    fingerprint: str
    text: str
    series: Mapping[str, np.ndarray]
    primary: tuple[str, ...]
    covariates: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()

    @classmethod
    def from_question(cls, q: Question | QuestionView) -> ToolInput:
        """Build the tool view of a question."""
        text = q.question if not q.context else f"{q.question}\n{q.context}"
        return cls(
            qid=q.id,
            fingerprint=q.fingerprint,
            text=text,
            series={k: np.asarray(v) for k, v in q.series.items()},
            primary=q.primary,
            covariates=q.covariates,
            candidates=q.candidates,
        )

    def mentions(self, word: str) -> bool:
        """True when the question text mentions ``word``."""
        return mentions(self.text, word)

    def numbers(self) -> tuple[float, ...]:
        """Numbers written in the question text, in order."""
        return extract_numbers(self.text)

    def tokens(self) -> frozenset[str]:
        """Normalized word tokens of the question text (numbers masked; see ``question_tokens``)."""
        return question_tokens(self.text)
