"""JSON replies: parse the object in a reply, append the JSON contract, record each attempt.

The pieces that both the client and :func:`~tsevo.roles.llm.jsoncall.json_call` need: the client
appends the contract to a request that carries a schema and parses the reply it gets back; the JSON
call validates the parsed object and records every attempt (:class:`JsonAttempt`), whose verdict
the client stores with the cached reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .accounting import Usage
from .prompts import load_prompt

__all__ = [
    "JsonAttempt",
    "JsonCallMeta",
    "JsonReplyError",
    "extract_json",
    "parse_json_or_none",
    "with_json_contract",
]

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


def parse_json_or_none(text: str, finish_reason: str | None = None) -> dict[str, Any] | None:
    """The JSON object in a reply, or None when :func:`extract_json` rejects it."""
    try:
        return extract_json(text, finish_reason=finish_reason)
    except JsonReplyError:
        return None


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
