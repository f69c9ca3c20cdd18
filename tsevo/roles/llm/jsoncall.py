"""Strict JSON contracts: ask for JSON that follows a pydantic model, validate, re-ask on failure.

:func:`json_call` is the one helper every JSON-speaking role uses (triage, planners, synthesizer,
and later taxonomy and Mara-chain work). The model's JSON schema goes into the prompt through the
``json_contract`` prompt asset (the client appends it to the last user message whenever a schema
is given) and into ``response_format`` where the server supports it. The reply is parsed
(code fences and prose around the object are tolerated; truncated or malformed JSON is rejected),
validated with pydantic and an optional extra validator, and on failure re-asked with the error fed
back (``retry_feedback`` asset), at most ``retries`` times. Every invalid reply is counted in the
client's accounting; when all attempts fail, :class:`InvalidReply` carries each attempt.

Every verdict is reported to the client (:meth:`LLMClient.mark_reply`), which stores it with the
cached reply. An invalid reply is still cached (a rerun or a replay must answer the request that
got it, and the re-ask that followed), but the client's session moves past it: when the caller
asks the identical request again (the engine retrying a failed call), it gets a fresh reply, not
the same invalid one from the cache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic

from .accounting import Usage
from .config import LLMError
from .prompts import load_prompt

if TYPE_CHECKING:
    from .client import LLMClient

__all__ = [
    "InvalidReply",
    "JsonAttempt",
    "JsonCallMeta",
    "JsonReplyError",
    "extract_json",
    "json_call",
    "with_json_contract",
]

M = TypeVar("M", bound=pydantic.BaseModel)

MAX_ERRORS_SHOWN = 8
MAX_FEEDBACK_CHARS = 1500
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript)?[ \t]*\n?(.*?)```", re.DOTALL)


class JsonReplyError(ValueError):
    """A reply that is not one complete JSON object."""


def _unclosed(s: str, start: int) -> bool:
    """True when the text from ``start`` ends inside a string or with an open bracket."""
    depth = 0
    in_str = esc = False
    for c in s[start:]:
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return False
    return in_str or depth > 0


def extract_json(text: str, *, finish_reason: str | None = None) -> dict[str, Any]:
    r"""Parse the JSON object in a reply.

    Tolerates code fences and prose around the object. Rejects an empty reply, truncated JSON
    (the object never closes, or the server said the reply was cut off at ``max_tokens``),
    malformed JSON and non-object values.

    Args:
        text: Reply text.
        finish_reason: The server's finish reason (``length`` marks a cut-off reply).

    Returns:
        The object.

    Raises:
        JsonReplyError: Why the reply is unusable, in words a model can act on.

    Example:
        >>> extract_json('Sure:\n```json\n{"answer": "B"}\n```')
        {'answer': 'B'}
    """
    s = text.strip()
    if not s:
        raise JsonReplyError("the reply was empty; expected one JSON object")
    m = _FENCE.search(s)
    if m:
        s = m.group(1).strip()
    elif s.startswith("```"):  # an opening fence that never closes
        s = s.split("\n", 1)[1] if "\n" in s else ""
    start = s.find("{")
    if start < 0:
        raise JsonReplyError("the reply contains no JSON object (no '{' found)")
    try:
        obj, _end = json.JSONDecoder().raw_decode(s, start)
    except json.JSONDecodeError as e:
        cut = finish_reason == "length"
        if cut or _unclosed(s, start):
            why = "it was cut off at the token limit" if cut else "it ends before the object closes"
            raise JsonReplyError(
                f"the JSON object is truncated ({why}); reply with a shorter, complete object"
            ) from None
        raise JsonReplyError(
            f"the JSON is malformed: {e.msg} at line {e.lineno} column {e.colno}"
        ) from None
    if not isinstance(obj, dict):
        raise JsonReplyError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def with_json_contract(
    messages: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Append the JSON contract (schema rendered through ``json_contract``) to the last user turn.

    Args:
        messages: Chat messages.
        schema: JSON schema of the reply.

    Returns:
        New message list; the input is not modified.
    """
    contract = load_prompt("json_contract").render(
        schema=json.dumps(schema, sort_keys=True, ensure_ascii=False)
    )
    out = [dict(m) for m in messages]
    if out and out[-1].get("role") == "user":
        out[-1]["content"] = f"{out[-1].get('content') or ''}\n\n{contract}"
    else:
        out.append({"role": "user", "content": contract})
    return out


@dataclass(frozen=True)
class JsonAttempt:
    """One attempt of a JSON call.

    Attributes:
        text: Reply text.
        error: Why it was rejected (None when accepted).
        cached: Served from the response cache.
        usage: Tokens of the reply.
        finish_reason: The server's finish reason.
        key: The request's cache key.
        sample: Which sample of the request the reply was (see :meth:`LLMClient.mark_reply`).
    """

    text: str
    error: str | None
    cached: bool
    usage: Usage
    finish_reason: str | None = None
    key: str = ""
    sample: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "text": self.text,
            "error": self.error,
            "cached": self.cached,
            "usage": self.usage.to_dict(),
            "finish_reason": self.finish_reason,
            "key": self.key,
            "sample": self.sample,
        }


@dataclass(frozen=True)
class JsonCallMeta:
    """What a JSON call took.

    Attributes:
        attempts: Every attempt in order; the last one is the accepted reply on success.
    """

    attempts: tuple[JsonAttempt, ...]

    @property
    def n_attempts(self) -> int:
        """Number of replies asked for."""
        return len(self.attempts)

    @property
    def n_invalid(self) -> int:
        """Number of rejected replies."""
        return sum(a.error is not None for a in self.attempts)

    @property
    def usage(self) -> Usage:
        """Tokens over all attempts."""
        total = Usage()
        for a in self.attempts:
            total = total + a.usage
        return total

    @property
    def cached(self) -> bool:
        """True when every attempt came from the cache."""
        return all(a.cached for a in self.attempts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {"attempts": [a.to_dict() for a in self.attempts]}


class InvalidReply(LLMError):
    """Every attempt of a JSON call was rejected.

    Attributes:
        role: The calling role.
        stage: The stage.
        attempts: Every attempt, with its rejection reason.
    """

    def __init__(self, role: str, stage: str, attempts: Sequence[JsonAttempt]) -> None:
        self.role = role
        self.stage = stage
        self.attempts = tuple(attempts)
        last = self.attempts[-1].error if self.attempts else "no attempt"
        super().__init__(
            f"{role}/{stage}: no valid JSON reply after {len(self.attempts)} attempt(s); "
            f"last error: {last}"
        )

    @property
    def meta(self) -> JsonCallMeta:
        """The attempts as a :class:`JsonCallMeta`."""
        return JsonCallMeta(self.attempts)


def _pydantic_error_text(err: pydantic.ValidationError) -> str:
    parts = []
    for e in err.errors()[:MAX_ERRORS_SHOWN]:
        loc = ".".join(str(x) for x in e.get("loc", ())) or "(root)"
        parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    more = err.error_count() - MAX_ERRORS_SHOWN
    if more > 0:
        parts.append(f"... and {more} more error(s)")
    return "the object does not follow the schema: " + "; ".join(parts)


def _check(
    text: str,
    finish_reason: str | None,
    model_cls: type[M],
    validate: Callable[[M], str | None] | None,
) -> tuple[M | None, str | None]:
    try:
        obj = extract_json(text, finish_reason=finish_reason)
        parsed = model_cls.model_validate(obj)
    except JsonReplyError as e:
        return None, str(e)
    except pydantic.ValidationError as e:
        return None, _pydantic_error_text(e)
    if validate is not None:
        try:
            problem = validate(parsed)
        except ValueError as e:
            problem = str(e) or type(e).__name__
        if problem:
            return None, str(problem)
    return parsed, None


def json_call(
    client: LLMClient,
    role: str,
    stage: str,
    messages: Sequence[Mapping[str, Any]],
    model_cls: type[M],
    *,
    retries: int = 2,
    validate: Callable[[M], str | None] | None = None,
    **params: Any,
) -> tuple[M, JsonCallMeta]:
    """Ask for one JSON object that follows ``model_cls``; re-ask with the error on failure.

    Every reply's verdict goes to :meth:`LLMClient.mark_reply`: after an invalid reply, an
    identical call later in the session is sent afresh instead of replaying it from the cache.
    A caller that rejects the accepted object for a reason ``validate`` did not check should pass
    the check as ``validate`` (preferred: the model then gets the error fed back), or call
    :meth:`LLMClient.reject` with the returned meta before retrying.

    Args:
        client: The LLM client.
        role: Calling role (accounting, per-role config).
        stage: Round stage (accounting).
        messages: Chat messages; the schema contract is appended to the last user turn.
        model_cls: Pydantic model of the reply.
        retries: Re-asks after an invalid reply (so at most ``retries + 1`` replies).
        validate: Extra check on the parsed object: return a problem description (or raise
            ``ValueError``) to reject it, None to accept. E.g. "must cover exactly these ids".
        **params: Per-call overrides passed to :meth:`LLMClient.chat` (temperature, ...).

    Returns:
        The validated object and the call's attempts.

    Raises:
        InvalidReply: Every attempt was rejected.
        LLMCallError: A request failed for good (propagated, not an invalid reply).
        BudgetExhausted: The run's budget ran out before a request.
    """
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    schema = model_cls.model_json_schema()
    base = [dict(m) for m in messages]
    msgs = base
    attempts: list[JsonAttempt] = []
    feedback = load_prompt("retry_feedback")
    for i in range(retries + 1):
        reply = client.chat(role, stage, msgs, schema=schema, **params)
        parsed, error = _check(reply.text, reply.finish_reason, model_cls, validate)
        client.mark_reply(reply, valid=parsed is not None)
        attempts.append(
            JsonAttempt(
                reply.text,
                error,
                reply.cached,
                reply.usage,
                reply.finish_reason,
                reply.key,
                reply.sample,
            )
        )
        if parsed is not None:
            return parsed, JsonCallMeta(tuple(attempts))
        client.accounting.record_invalid(role, stage)
        assert error is not None
        err = error if len(error) <= MAX_FEEDBACK_CHARS else error[:MAX_FEEDBACK_CHARS] + " ..."
        msgs = [
            *base,
            {"role": "assistant", "content": reply.text},
            {
                "role": "user",
                "content": feedback.render(error=err, attempt=i + 2, max_attempts=retries + 1),
            },
        ]
    raise InvalidReply(role, stage, attempts)
