"""What a server accepts, found by behaviour and remembered per (base URL, model).

JSON support is probed with tiny requests (:func:`probe_json_level`): ``response_format``
``json_schema``, then ``json_object`` with a ``schema`` (the llama.cpp extension), then plain
``json_object``; the first level whose probe returns a JSON object is used, else the highest level
the server accepted, else none (the schema is in the prompt either way). A real request that is
later refused for its format steps down the same ladder (:func:`next_json_level`). Parameters a
model refuses (a 400 naming ``reasoning_effort``, ``max_tokens`` -> ``max_completion_tokens``, an
unsupported ``temperature``) are adapted once (:func:`refusal_adaptation`). What was learned lives
in a :class:`CapabilityStore`, persisted in the response cache file.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .accounting import Accounting, Budget, Usage
from .cache import ResponseCache
from .config import LLMConfig
from .jsonreply import parse_json_or_none
from .prompts import load_prompt
from .wire import unpack_response

__all__ = [
    "JSON_LADDER",
    "PROBE_HEADER",
    "Capabilities",
    "CapabilityStore",
    "FormatRejectedError",
    "format_refused",
    "next_json_level",
    "probe_json_level",
    "refusal_adaptation",
    "request_kwargs",
]

log = logging.getLogger("tsevo.llm")

#: JSON support levels, strongest first.
JSON_LADDER = ("json_schema", "json_object_schema", "json_object", "prompt")
#: Header marking capability probes (servers ignore it; the scripted server answers it itself).
PROBE_HEADER = "X-Tsevo-Probe"
PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}
PROBE_MAX_TOKENS = 64

_FORMAT_WORDS = (
    "response_format",
    "json_schema",
    "json_object",
    "literal_error",
    "structured output",
)
_UNSUPPORTED_WORDS = (
    "unsupported",
    "not supported",
    "does not support",
    "unrecognized",
    "unknown",
    "extra",
)


class FormatRejectedError(Exception):
    """A probe's ``response_format`` was refused."""


@dataclass
class Capabilities:
    """What one (base URL, model) accepts.

    Attributes:
        json_mode: The JSON level in use (None until probed).
        reasoning_effort: Whether ``reasoning_effort`` is accepted.
        max_tokens_param: The name the token limit is sent under.
        temperature: Whether ``temperature`` is accepted.
    """

    json_mode: str | None = None
    reasoning_effort: bool = True
    max_tokens_param: str = "max_tokens"
    temperature: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (what is persisted)."""
        return dataclasses.asdict(self)


class CapabilityStore:
    """Capabilities per target (``base_url|model``), thread-safe, persisted in a response cache.

    Args:
        cache: Where capabilities are remembered across runs (None: this process only).
    """

    def __init__(self, cache: ResponseCache | None) -> None:
        self.cache = cache
        self._lock = threading.Lock()
        self._caps: dict[str, Capabilities] = {}
        self._probe_locks: dict[str, threading.Lock] = {}

    def get(self, target: str) -> Capabilities:
        """The capabilities of ``target`` (remembered, else the optimistic defaults)."""
        with self._lock:
            caps = self._caps.get(target)
            if caps is None:
                stored = self.cache.get_capability(target) if self.cache is not None else None
                caps = Capabilities(**stored) if stored else Capabilities()
                self._caps[target] = caps
            return caps

    def update(self, target: str, **changes: Any) -> None:
        """Change what is known about ``target`` and persist it."""
        with self._lock:
            caps = self._caps.setdefault(target, Capabilities())
            for k, v in changes.items():
                setattr(caps, k, v)
            snapshot = caps.to_dict()
        log.info("LLM capabilities for %s: %s", target, snapshot)
        if self.cache is not None:
            self.cache.set_capability(target, snapshot)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Every known target's capabilities as dicts."""
        with self._lock:
            return {k: v.to_dict() for k, v in self._caps.items()}

    def json_level(self, cfg: LLMConfig, target: str, probe: Callable[[], str]) -> str:
        """The JSON level to use for ``cfg``: its fixed ``json_mode``, else the probed one.

        ``probe`` runs at most once per target (concurrent callers wait for its result).
        """
        if cfg.json_mode != "auto":
            return cfg.json_mode
        caps = self.get(target)
        if caps.json_mode is not None:
            return caps.json_mode
        with self._lock:
            plock = self._probe_locks.setdefault(target, threading.Lock())
        with plock:
            if self.get(target).json_mode is None:
                self.update(target, json_mode=probe())
            return self.get(target).json_mode or "prompt"


def request_kwargs(
    cfg: LLMConfig,
    msgs: list[dict[str, str]],
    schema: Mapping[str, Any] | None,
    level: str | None,
    caps: Capabilities,
    probe: bool,
) -> dict[str, Any]:
    """Keyword arguments of ``chat.completions.create`` for what the server accepts."""
    kw: dict[str, Any] = {"model": cfg.model, "messages": msgs, "timeout": cfg.timeout_s}
    kw[caps.max_tokens_param] = cfg.max_tokens
    if caps.temperature:
        kw["temperature"] = cfg.temperature
    if cfg.reasoning_effort is not None and caps.reasoning_effort:
        kw["reasoning_effort"] = cfg.reasoning_effort
    if cfg.seed is not None:
        kw["seed"] = cfg.seed
    if schema is not None and level is not None:
        fmt = _response_format(schema, level)
        if fmt is not None:
            kw["response_format"] = fmt
    if probe:
        kw["extra_headers"] = {PROBE_HEADER: "1"}
    return kw


#: Schema keywords left out of a ``response_format`` (the reply is still validated against them):
#: servers compile the schema into a decoding grammar, and a length bound becomes one nested rule
#: per character (llama.cpp refuses ``source``'s 16,000 and its server then crashes).
GRAMMAR_DROPPED = frozenset({"maxLength", "minLength", "maxItems", "minItems"})


def grammar_schema(schema: Any) -> Any:
    """``schema`` without the length bounds of :data:`GRAMMAR_DROPPED` (a copy, at every depth)."""
    if isinstance(schema, Mapping):
        return {  # a property named like a keyword holds a schema (a dict), not a bound
            k: grammar_schema(v)
            for k, v in schema.items()
            if k not in GRAMMAR_DROPPED or not isinstance(v, int)
        }
    if isinstance(schema, list):
        return [grammar_schema(v) for v in schema]
    return schema


def _response_format(schema: Mapping[str, Any], level: str) -> dict[str, Any] | None:
    schema = grammar_schema(schema)
    if level == "json_schema":
        name = (
            "".join(
                ch if ch.isalnum() or ch in "_-" else "_"
                for ch in str(schema.get("title", "reply"))
            )[:64]
            or "reply"
        )
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": dict(schema), "strict": False},
        }
    if level == "json_object_schema":
        return {"type": "json_object", "schema": dict(schema)}
    if level == "json_object":
        return {"type": "json_object"}
    return None


def format_refused(kw: Mapping[str, Any], status: int, low: str) -> bool:
    """True when an HTTP error (``low``: its lower-cased text) refuses the ``response_format``."""
    return (
        "response_format" in kw
        and status in (400, 404, 415, 422, 500, 501)
        and any(w in low for w in _FORMAT_WORDS)
    )


def next_json_level(level: str) -> str:
    """The next weaker level of :data:`JSON_LADDER`."""
    return JSON_LADDER[JSON_LADDER.index(level) + 1]


def refusal_adaptation(kw: Mapping[str, Any], status: int, low: str) -> dict[str, Any] | None:
    """The capability change that answers a refused parameter, or None when none does.

    Each adaptation removes or renames the parameter it answers, so it applies once per kind.
    """
    if status not in (400, 422):
        return None
    if "reasoning_effort" in kw and "reasoning" in low:
        return {"reasoning_effort": False}
    if kw.get("max_tokens") is not None and "max_completion_tokens" in low:
        return {"max_tokens_param": "max_completion_tokens"}
    if "temperature" in kw and "temperature" in low and any(w in low for w in _UNSUPPORTED_WORDS):
        return {"temperature": False}
    return None


#: ``send(cfg, msgs, schema, fixed_level=...) -> (response, attempts, retries, level)``: one probe
#: at a fixed JSON level (:meth:`~tsevo.roles.llm.transport.Transport.send`).
ProbeSend = Callable[..., tuple[Any, int, int, str | None]]


def probe_json_level(
    send: ProbeSend, cfg: LLMConfig, *, accounting: Accounting, budget: Budget, target: str
) -> str:
    """Find the strongest JSON level the server honours, with tiny requests.

    Each probe is counted under role ``client``, stage ``probe``.
    """
    pcfg = cfg.replace(
        max_tokens=PROBE_MAX_TOKENS, temperature=0.0, reasoning_effort=None, seed=None
    )
    msgs = [{"role": "user", "content": load_prompt("probe_json").render()}]
    accepted: str | None = None
    for level in JSON_LADDER[:-1]:
        t0 = time.monotonic()
        try:
            resp, _att, retries, _ = send(pcfg, msgs, PROBE_SCHEMA, fixed_level=level)
        except FormatRejectedError:
            log.info("JSON probe: %s refused by %s", level, target)
            accounting.record_call("client", "probe", Usage(), latency_s=time.monotonic() - t0)
            continue
        text, usage, finish, _model = unpack_response(resp, msgs)
        budget.add_tokens(usage.total_tokens)
        accounting.record_call(
            "client", "probe", usage, latency_s=time.monotonic() - t0, retries=retries
        )
        if parse_json_or_none(text, finish) is not None:
            return level
        accepted = accepted or level
    return accepted or "prompt"
