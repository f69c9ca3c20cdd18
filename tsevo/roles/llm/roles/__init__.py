"""Every role of a round on an LLM, behind the same protocols as the builtin backend.

Build them around one :class:`RoleContext` (one client: cache, accounting, budget)::

    from tsevo.roles.llm import LLMClient, RoleConfigs
    from tsevo.roles.llm.roles import RoleContext, LLMAnswerer, LLMReviewer

    ctx = RoleContext(LLMClient(RoleConfigs.load(model="gpt-4o-mini")))
    answerer, reviewer = LLMAnswerer(ctx), LLMReviewer(ctx)

or get a whole :class:`~tsevo.roles.RoleSet` from :meth:`tsevo.roles.RoleSet.llm`.
Prompts are text assets in :mod:`tsevo.roles.llm.prompts`; replies follow pydantic contracts whose
JSON schema is rendered into the prompt.
"""

from ._common import LLMRunStopped, RoleContext, RoleStats
from .answering import AnswerReply, LLMAnswerer, LLMReviewer, ReviewReply
from .baselines import BaselineAnswerer, RefineReply
from .planner import CardReply, GlobalReply, LLMGlobalPlanner, LLMLocalPlanner, ScopeReply
from .synthesizer import LLMSynthesizer, RuleReply, SynthReply
from .triage import AssignReply, DefineReply, LLMTriage

__all__ = [
    "AnswerReply",
    "AssignReply",
    "BaselineAnswerer",
    "CardReply",
    "DefineReply",
    "GlobalReply",
    "LLMAnswerer",
    "LLMGlobalPlanner",
    "LLMLocalPlanner",
    "LLMReviewer",
    "LLMRunStopped",
    "LLMSynthesizer",
    "LLMTriage",
    "RefineReply",
    "ReviewReply",
    "RoleContext",
    "RoleStats",
    "RuleReply",
    "ScopeReply",
    "SynthReply",
]
