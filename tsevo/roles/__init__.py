"""The roles of a round as small protocols, the role set, and their two backends.

* :mod:`tsevo.roles.protocols`: what each role is given and returns (answerer, reviewer, triage,
  local and global planner, synthesizer) and the records they exchange. Roles see
  :class:`QuestionView` objects under opaque per-run ids, never the question records.
* :class:`RoleSet`: one implementation per role; :meth:`RoleSet.builtin` (offline, deterministic)
  and :meth:`RoleSet.llm` (any OpenAI-compatible endpoint), mixable per role.
* :class:`Callback` and :class:`RunStopped`: what a backend contributes to a run, and how a role
  stops one cleanly. The roles never import the engine.
"""

from tsevo.data import QuestionView

from .callbacks import Callback, RunStopped
from .protocols import (
    Answerer,
    AttemptFeedback,
    BaseAnswer,
    Category,
    ContractCard,
    Dossier,
    ErrorItem,
    Evidence,
    Example,
    GlobalPlanner,
    LocalPlanner,
    Review,
    Reviewer,
    Synthesizer,
    Triage,
    WorkGroup,
)
from .roleset import ROLE_NAMES, RoleSet

__all__ = [
    "ROLE_NAMES",
    "Answerer",
    "AttemptFeedback",
    "BaseAnswer",
    "Callback",
    "Category",
    "ContractCard",
    "Dossier",
    "ErrorItem",
    "Evidence",
    "Example",
    "GlobalPlanner",
    "LocalPlanner",
    "QuestionView",
    "Review",
    "Reviewer",
    "RoleSet",
    "RunStopped",
    "Synthesizer",
    "Triage",
    "WorkGroup",
]
