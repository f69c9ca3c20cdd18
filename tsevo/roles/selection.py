"""How one answer is selected from several sampled answers: ``answer.selection``.

The self-consistency baseline samples the base answerer ``N`` times and keeps the majority option
(:class:`MajorityVote`); ``single`` keeps the one answer there is (the protocol). A selection is a
small strategy object addressable by name (:data:`SELECTIONS`), so another rule (a judge choosing
among the samples) plugs into the same place.

Example:
    >>> from tsevo.roles.protocols import BaseAnswer
    >>> pick = resolve_selection("majority").select([BaseAnswer(1), BaseAnswer(0), BaseAnswer(1)])
    >>> pick.option, pick.votes, pick.tied
    (1, {'0': 1, '1': 2}, ())
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .protocols import BaseAnswer

__all__ = [
    "SELECTIONS",
    "MajorityVote",
    "Selected",
    "Selection",
    "SingleAnswer",
    "resolve_selection",
]


@dataclass(frozen=True)
class Selected:
    """What a selection chose, and why.

    Attributes:
        option: The chosen option index.
        index: Which sample carries it (the one whose reason is kept).
        votes: Samples per option (keys are option indices as strings, for JSON).
        tied: The options tied at the top count when there was a tie (empty otherwise).
        rule: How the choice was made (``single``, ``majority``, ``majority, tie -> first sampled``).
    """

    option: int
    index: int
    votes: dict[str, int]
    tied: tuple[int, ...] = ()
    rule: str = "single"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "option": self.option,
            "sample": self.index,
            "votes": dict(self.votes),
            "tied": list(self.tied),
            "rule": self.rule,
        }


class Selection(Protocol):
    """Chooses one answer among sampled answers of one question."""

    name: str

    def select(self, samples: Sequence[BaseAnswer]) -> Selected:
        """Return the chosen answer (``samples`` is never empty)."""
        ...


class SingleAnswer:
    """The protocol's selection: one answer, kept as it is."""

    name = "single"

    def select(self, samples: Sequence[BaseAnswer]) -> Selected:
        """Keep the first (only) answer."""
        if not samples:
            raise ValueError("no answer to select from")
        return Selected(samples[0].option, 0, {str(samples[0].option): 1})


class MajorityVote:
    """Self-consistency: the option most samples chose.

    Ties are broken deterministically: among the tied options, the one sampled first wins (and the
    tie is recorded in :attr:`Selected.tied`).
    """

    name = "majority"

    def select(self, samples: Sequence[BaseAnswer]) -> Selected:
        """Return the majority option over ``samples``."""
        if not samples:
            raise ValueError("no answer to select from")
        counts = Counter(a.option for a in samples)
        top = max(counts.values())
        tied = [o for o, c in counts.items() if c == top]
        index = next(i for i, a in enumerate(samples) if a.option in tied)
        votes = {str(o): counts[o] for o in sorted(counts)}
        if len(tied) > 1:
            return Selected(
                samples[index].option,
                index,
                votes,
                tuple(sorted(tied)),
                "majority, tie -> first sampled",
            )
        return Selected(samples[index].option, index, votes, (), "majority")


#: Selections by name (``answer.selection``).
SELECTIONS: dict[str, Callable[[], Selection]] = {"single": SingleAnswer, "majority": MajorityVote}


def resolve_selection(spec: Selection | str) -> Selection:
    """A selection from its name, or the object itself.

    Raises:
        ValueError: For an unknown name.
    """
    if not isinstance(spec, str):
        return spec
    if spec not in SELECTIONS:
        raise ValueError(f"unknown answer selection {spec!r}; one of {sorted(SELECTIONS)}")
    return SELECTIONS[spec]()
