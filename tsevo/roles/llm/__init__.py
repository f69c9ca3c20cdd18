"""The LLM backend's client layer: config, client, cache, accounting, JSON contracts, rendering.

Roles built on an LLM (answerer, reviewer, triage, planners, synthesizer) use this small surface::

    from tsevo.roles.llm import LLMClient, LLMConfig, json_call, render_question

    client = LLMClient(LLMConfig.load(model="gpt-4o-mini"))
    obj, meta = json_call(client, "triage", "assign", messages, AssignReply, validate=covers_ids)

Importing it loads ``openai`` (the client's transport) and ``pandas`` (accounting frames) at the top
of their modules, like every dependency outside :data:`tsevo.optional.LAZY_IMPORTS`.
"""

from .accounting import Accounting, Budget, BudgetExhausted, StageStats, Usage
from .cache import CachedReply, ReplayMiss, ResponseCache, request_key
from .client import JSON_LADDER, ChatRequest, LLMCallError, LLMClient, LLMReply
from .config import (
    DEFAULT_ROLE_OVERRIDES,
    BudgetLimits,
    LLMConfig,
    LLMError,
    RoleConfigs,
    api_key_from_env,
    api_key_source,
)
from .jsoncall import (
    InvalidReply,
    JsonAttempt,
    JsonCallMeta,
    JsonReplyError,
    extract_json,
    json_call,
    with_json_contract,
)
from .prompts import PromptError, PromptTemplate, load_prompt
from .render import (
    PromptTooLong,
    check_budget,
    estimate_message_tokens,
    estimate_tokens,
    format_number,
    render_question,
    render_series,
)

__all__ = [
    "DEFAULT_ROLE_OVERRIDES",
    "JSON_LADDER",
    "Accounting",
    "Budget",
    "BudgetExhausted",
    "BudgetLimits",
    "CachedReply",
    "ChatRequest",
    "InvalidReply",
    "JsonAttempt",
    "JsonCallMeta",
    "JsonReplyError",
    "LLMCallError",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMReply",
    "PromptError",
    "PromptTemplate",
    "PromptTooLong",
    "ReplayMiss",
    "ResponseCache",
    "RoleConfigs",
    "StageStats",
    "Usage",
    "api_key_from_env",
    "api_key_source",
    "check_budget",
    "estimate_message_tokens",
    "estimate_tokens",
    "extract_json",
    "format_number",
    "json_call",
    "load_prompt",
    "render_question",
    "render_series",
    "request_key",
    "with_json_contract",
]
