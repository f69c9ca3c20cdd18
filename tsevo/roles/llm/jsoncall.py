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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pydantic

from .client import LLMClient
from .config import LLMError
from .jsonreply import (
    JsonAttempt,
    JsonCallMeta,
    JsonReplyError,
    extract_json,
    with_json_contract,
)
from .prompts import load_prompt

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
