"""The answering roles as small protocols.

Error policy: a role never raises for one bad question. A base answerer always returns an option;
a reviewer returns ``no_decision`` when it cannot decide, which keeps the incoming answer.

What a role may see: answering roles see only the question at hand, its series, the tool evidence
and the library's guidance — never gold, metadata, other questions or validation/test content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tsevo.data import Question
    from tsevo.library.library import ScopedTool

__all__ = ["Answerer", "BaseAnswer", "Decision", "Evidence", "Review", "Reviewer"]

Decision = Literal["replace", "keep", "no_decision"]


@dataclass(frozen=True)
class BaseAnswer:
    """A base answer.

    Attributes:
        option: Chosen option index.
        reason: Short explanation (shown in traces and widgets).
        scores: Optional per-option scores.
    """

    option: int
    reason: str = ""
    scores: tuple[float, ...] = ()


@dataclass(frozen=True)
class Evidence:
    """One tool run on one question, as a reviewer sees it.

    Attributes:
        tool: The tool as it applies at answer time.
        status: ``ok`` | ``abstain`` | ``error``.
        outputs: The tool's outputs (``None`` unless ``ok``).
    """

    tool: ScopedTool
    status: str
    outputs: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Review:
    """A reviewer's verdict on the incoming answer given a stage's evidence.

    Attributes:
        decision: ``replace`` (take ``option``), ``keep`` or ``no_decision``.
        option: The replacement option (``replace`` only).
        reason: Short explanation.
        responsible: Ids of the tools whose evidence drove the decision.
    """

    decision: Decision
    option: int | None = None
    reason: str = ""
    responsible: tuple[str, ...] = field(default_factory=tuple)


@runtime_checkable
class Answerer(Protocol):
    """Gives the base answer to a question from the question alone."""

    name: str

    def answer(self, q: Question) -> BaseAnswer:
        """Return the base answer."""
        ...


@runtime_checkable
class Reviewer(Protocol):
    """Reviews an incoming answer with one stage's tool evidence."""

    name: str

    def review(self, q: Question, incoming: int, evidence: Sequence[Evidence]) -> Review:
        """Return keep / replace / no_decision."""
        ...


# ---------------------------------------------------------------------------- evolution roles
@dataclass(frozen=True)
class ErrorItem:
    """One train error as the triage role sees it: no task, no gold, no metadata.

    Attributes:
        qid: Question id.
        text: Question text (and context).
        options: Option texts.
        n_primary: Number of primary series.
        n_candidates: Number of candidate series.
        n_covariates: Number of covariate series.
        tool_fired: Whether any tool returned evidence for it.
        tools: Ids of tools that ran.
        decision: Last stage decision (``replace``/``keep``/``no_decision``/``no_tool``/``""``).
    """

    qid: str
    text: str
    options: tuple[str, ...]
    n_primary: int = 1
    n_candidates: int = 0
    n_covariates: int = 0
    tool_fired: bool = False
    tools: tuple[str, ...] = ()
    decision: str = ""


@dataclass(frozen=True)
class Category:
    """A failure category from the define step.

    Attributes:
        id: Category id (``c1``, ``c2``, ...).
        label: Short label.
        criteria: When an error belongs here, in words.
        centroid: Builtin backend only: term weights of the category's centroid.
    """

    id: str
    label: str
    criteria: str
    centroid: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "id": self.id,
            "label": self.label,
            "criteria": self.criteria,
            "centroid": {k: float(v) for k, v in sorted(self.centroid.items())},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Category:
        """Inverse of :meth:`to_dict`."""
        return cls(d["id"], d["label"], d["criteria"], dict(d.get("centroid") or {}))


@runtime_checkable
class Triage(Protocol):
    """Clusters errors in two steps: define categories from a sample, then assign every error."""

    name: str

    def define(self, errors: Sequence[ErrorItem], max_categories: int) -> list[Category]:
        """Return at most ``max_categories`` categories for a sample of errors."""
        ...

    def assign(
        self, categories: Sequence[Category], batch: Sequence[ErrorItem]
    ) -> dict[str, str | None]:
        """Map every qid of the batch to a category id (or None when none fits)."""
        ...
