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
