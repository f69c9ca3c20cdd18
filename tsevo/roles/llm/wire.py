"""What crosses the wire: the request description that keys the cache, the reply, the failure.

Pure shapes and conversions, no state: :func:`describe_request` is everything that affects a reply
(the input of the cache key; no URL, no credentials), :class:`LLMReply` what a caller gets back,
:class:`LLMCallError` a request that failed for good, :func:`unpack_response` what is read from the
``openai`` response object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .accounting import Usage
from .config import LLMConfig, LLMError
from .render import estimate_message_tokens, estimate_tokens

__all__ = [
    "CACHE_KEY_VERSION",
    "CHAT_PARAMS",
    "ChatRequest",
    "LLMCallError",
    "LLMReply",
    "clean_base_url",
    "describe_request",
    "normalize_messages",
    "unpack_response",
]

CACHE_KEY_VERSION = 1
#: Per-call overrides :meth:`~tsevo.roles.llm.client.LLMClient.chat` accepts.
CHAT_PARAMS = frozenset(
    {"model", "temperature", "max_tokens", "reasoning_effort", "seed", "timeout_s"}
)


class LLMCallError(LLMError):
    """A request that failed for good.

    Attributes:
        kind: ``rate_limit`` | ``server`` | ``timeout`` | ``connection`` | ``bad_request`` |
            ``auth`` | ``not_found`` | ``unsupported`` | ``invalid_response`` | ``other``.
        status: HTTP status, when there was a response.
        attempts: HTTP attempts made.
        retries: Retries among them.
        retryable: Whether the kind is transient (then the retries were exhausted).
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        attempts: int = 0,
        retries: int = 0,
        retryable: bool = False,
    ) -> None:
        self.kind = kind
        self.status = status
        self.attempts = attempts
        self.retries = retries
        self.retryable = retryable
        code = f" HTTP {status}" if status is not None else ""
        tail = f" after {attempts} attempt(s)" if attempts else ""
        super().__init__(f"LLM call failed ({kind}{code}){tail}: {message}")


@dataclass(frozen=True)
class LLMReply:
    """One chat reply.

    Attributes:
        text: Reply text (empty when the server returned no content).
        parsed: The JSON object in the reply when a schema was requested and it parses, else None.
        usage: Tokens (as recorded when first fetched, for cached replies).
        cached: Served from the response cache (no network call).
        latency_s: Seconds spent on the network (0 when cached).
        attempts: HTTP attempts (0 when cached).
        finish_reason: ``stop``, ``length`` (cut off), ...
        model: Model id the server reported.
        json_mode: JSON level used for the request (None without a schema or when cached).
        key: The request's cache key.
        sample: Which sample of the request this reply is (0 unless an earlier reply to the
            identical request was marked invalid in this session, see
            :meth:`LLMClient.mark_reply`).
    """

    text: str
    parsed: Any | None
    usage: Usage
    cached: bool
    latency_s: float
    attempts: int
    finish_reason: str | None = None
    model: str = ""
    json_mode: str | None = None
    key: str = ""
    sample: int = 0

    @property
    def truncated(self) -> bool:
        """True when the server cut the reply off at the token limit."""
        return self.finish_reason == "length"


@dataclass(frozen=True)
class ChatRequest:
    """Arguments of one :meth:`LLMClient.chat` call, for :meth:`LLMClient.map_chat`.

    Attributes:
        role: Calling role.
        stage: Round stage.
        messages: Chat messages.
        schema: Optional JSON schema of the reply.
        params: Per-call overrides.
    """

    role: str
    stage: str
    messages: Sequence[Mapping[str, Any]]
    schema: Mapping[str, Any] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


def clean_base_url(url: str) -> str:
    """The base URL without credentials, query or fragment, and without a trailing slash."""
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host = f"{host}:{p.port}"
    return urlunsplit((p.scheme, host, p.path.rstrip("/"), "", ""))


def normalize_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Plain ``{"role", "content"}`` dicts; a malformed message list raises ``ValueError``."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise ValueError(f"message {i} must be a mapping with 'role' and 'content'")
        if not isinstance(m["content"], str):
            raise ValueError(f"message {i}: content must be a string")
        out.append({"role": str(m["role"]), "content": m["content"]})
    return out


def describe_request(
    cfg: LLMConfig, msgs: list[dict[str, str]], schema: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Everything that affects the reply (the cache key's input); no URL, no credentials."""
    return {
        "v": CACHE_KEY_VERSION,
        "model": cfg.model,
        "messages": msgs,
        "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens,
        "reasoning_effort": cfg.reasoning_effort,
        "seed": cfg.seed,
        "schema": dict(schema) if schema is not None else None,
    }


def unpack_response(resp: Any, msgs: list[dict[str, str]]) -> tuple[str, Usage, str | None, str]:
    """Text, usage (estimated when the server reports none), finish reason and model of a reply."""
    choices = getattr(resp, "choices", None)
    if not choices:
        raise LLMCallError("invalid_response", f"reply without choices: {str(resp)[:200]}")
    ch = choices[0]
    text = (ch.message.content if ch.message is not None else None) or ""
    finish = getattr(ch, "finish_reason", None)
    u = getattr(resp, "usage", None)
    if u is not None and getattr(u, "prompt_tokens", None) is not None:
        usage = Usage(int(u.prompt_tokens or 0), int(u.completion_tokens or 0))
    else:
        usage = Usage(estimate_message_tokens(msgs), estimate_tokens(text), estimated=True)
    return text, usage, finish, str(getattr(resp, "model", "") or "")
