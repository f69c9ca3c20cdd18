"""The LLM client: one object per run that every LLM role talks through.

:class:`LLMClient` wraps the ``openai`` package's client (real HTTP to any OpenAI-compatible
endpoint) and adds what a research run needs:

* **Per-role configuration** (:class:`~tsevo.roles.llm.config.RoleConfigs`): all roles share one
  config unless overridden.
* **Response cache** (:class:`~tsevo.roles.llm.cache.ResponseCache`): a hit makes no network call;
  replay mode fails loudly on an unseen request. Callers report whether a reply passed their
  checks (:meth:`LLMClient.mark_reply`; :func:`json_call` does it for every reply): after an
  invalid verdict the next identical request in the session gets the request's next *sample*
  (fetched afresh and counted as a call in ``read_write`` mode, the recorded one in ``replay``
  mode) instead of the known-bad reply, while a rerun walks the same samples with zero calls.
  Concurrent identical requests are fetched once (the others wait and are served the reply).
* **Capability detection by behaviour**, remembered per (base URL, model) and persisted in the
  cache file. JSON support: a tiny probe request tries ``response_format`` ``json_schema``, then
  ``json_object`` with a ``schema`` (the llama.cpp extension), then plain ``json_object``; the
  first level whose probe returns a JSON object is used, else the highest level the server
  accepted, else none (the schema is in the prompt either way). A real request that is later
  refused for its format steps down the same ladder. Parameters a model refuses (400 naming
  ``reasoning_effort``, ``max_tokens`` -> ``max_completion_tokens``, an unsupported
  ``temperature``) are adapted once and remembered. ``reasoning_effort`` is sent only when set.
* **Bounded retries** with exponential backoff and jitter on 429 (Retry-After honoured, capped at
  ``backoff_cap_s``), 408/409, 5xx, timeouts and connection errors; other errors fail at once.
  Every failure is an :class:`LLMCallError` with a ``kind``.
* **Budget** (:class:`~tsevo.roles.llm.accounting.Budget`): checked before every request;
  :class:`~tsevo.roles.llm.accounting.BudgetExhausted` is raised before anything is sent.
* **Accounting** per role and stage, and a bounded thread pool (:meth:`LLMClient.map`,
  :meth:`LLMClient.map_chat`) whose results come back in input order.

The API key is read from the environment when the client is built and kept in memory only.
"""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, overload
from urllib.parse import urlsplit, urlunsplit

from .accounting import Accounting, Budget, Usage
from .cache import CachedReply, ResponseCache, request_key, sample_key
from .config import LLMConfig, LLMError, RoleConfigs, api_key_from_env
from .jsoncall import (
    JsonAttempt,
    JsonCallMeta,
    JsonReplyError,
    extract_json,
    with_json_contract,
)
from .prompts import load_prompt
from .render import check_budget, estimate_message_tokens, estimate_tokens

__all__ = ["JSON_LADDER", "ChatRequest", "LLMCallError", "LLMClient", "LLMReply"]

log = logging.getLogger("tsevo.llm")

T = TypeVar("T")
R = TypeVar("R")

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
CACHE_KEY_VERSION = 1
CHAT_PARAMS = frozenset(
    {"model", "temperature", "max_tokens", "reasoning_effort", "seed", "timeout_s"}
)

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


@dataclass
class _Caps:
    json_mode: str | None = None
    reasoning_effort: bool = True
    max_tokens_param: str = "max_tokens"
    temperature: bool = True

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _Flight:
    """Internal: the lock of one (request, sample) being fetched, and how many wait on it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0


class _FormatRejectedError(Exception):
    """Internal: a probe's response_format was refused."""


def clean_base_url(url: str) -> str:
    """The base URL without credentials, query or fragment, and without a trailing slash."""
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host = f"{host}:{p.port}"
    return urlunsplit((p.scheme, host, p.path.rstrip("/"), "", ""))


def _error_text(e: Any) -> str:
    parts = [str(getattr(e, "message", "") or e)]
    body = getattr(e, "body", None)
    if body is not None:
        parts.append(str(body))
    return " ".join(parts)


def _retry_after(e: Any) -> float | None:
    resp = getattr(e, "response", None)
    headers = getattr(resp, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    return max(0.0, dt.timestamp() - time.time())


def _normalize_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
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


class LLMClient:
    """Talks to an OpenAI-compatible endpoint for every role of a run.

    Args:
        config: One config for all roles, or per-role configs. A plain :class:`LLMConfig` gets the
            default role overrides (synthesizer at high reasoning effort).
        cache: Response cache; by default one is opened from the default config's ``cache_path``
            and ``cache_mode`` (in memory when no path is set; none when the mode is ``off``).
        accounting: Where counts go (a new one by default).
        budget: Per-run budget (by default from the default config's ``budget``).

    Example:
        >>> from tsevo.testing import FakeOpenAIServer
        >>> with FakeOpenAIServer(["hello"]) as srv:
        ...     client = LLMClient(LLMConfig(base_url=srv.base_url, model="scripted"))
        ...     client.chat("answerer", "base", [{"role": "user", "content": "hi"}]).text
        'hello'
    """

    def __init__(
        self,
        config: LLMConfig | RoleConfigs,
        *,
        cache: ResponseCache | None = None,
        accounting: Accounting | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.roles = config if isinstance(config, RoleConfigs) else RoleConfigs(config)
        d = self.roles.default
        self.accounting = accounting if accounting is not None else Accounting()
        self.budget = budget if budget is not None else Budget(d.budget)
        self._own_cache = cache is None and d.cache_mode != "off"
        self.cache = ResponseCache(d.cache_path, d.cache_mode) if self._own_cache else cache
        self._sem = threading.BoundedSemaphore(d.concurrency)
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        self._caps: dict[str, _Caps] = {}
        self._probe_locks: dict[str, threading.Lock] = {}
        self._rng = random.Random()
        self._cursor_lock = threading.Lock()
        self._cursor: dict[str, int] = {}
        self._flights: dict[str, _Flight] = {}
        self._api_key = api_key_from_env()
        self.sleep: Callable[[float], None] = time.sleep

    # ------------------------------------------------------------------ public
    @property
    def config(self) -> LLMConfig:
        """The default config."""
        return self.roles.default

    def capabilities(self) -> dict[str, dict[str, Any]]:
        """Detected capabilities per ``base_url|model`` (JSON level and parameter adaptations)."""
        with self._lock:
            return {k: v.to_dict() for k, v in self._caps.items()}

    def chat(
        self,
        role: str,
        stage: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        schema: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> LLMReply:
        """Send one chat request (or serve it from the cache).

        Args:
            role: Calling role; selects the role's config and the accounting row.
            stage: Round stage (accounting).
            messages: Chat messages (``{"role", "content"}``).
            schema: JSON schema of the reply: the contract is appended to the last user turn and
                ``response_format`` is set as the server supports it.
            **params: Per-call overrides of ``model``, ``temperature``, ``max_tokens``,
                ``reasoning_effort``, ``seed``, ``timeout_s``.

        Returns:
            The reply.

        Raises:
            ReplayMiss: Replay mode and the request is not in the cassette.
            BudgetExhausted: The run's budget is spent (nothing was sent).
            PromptTooLong: The estimated prompt exceeds ``max_prompt_tokens``.
            LLMCallError: The request failed for good.
        """
        cfg = self._role_config(role, params)
        msgs = _normalize_messages(messages)
        if schema is not None:
            msgs = with_json_contract(msgs, schema)
        check_budget(msgs, cfg.max_prompt_tokens)
        req = self._describe(cfg, msgs, schema)
        key = request_key(req)
        cache = self.cache
        if cache is None or cache.mode == "off":
            return self._fetch(role, stage, cfg, msgs, schema, req, key, 0)
        sample = self.sample_index(key)
        if cache.mode == "replay":
            recorded = cache.require(
                key, f"role={role}, stage={stage}, model={cfg.model}", sample=sample
            )
            return self._from_cache(role, stage, recorded, key, schema)
        # one fetch per (request, sample) at a time: a concurrent identical request waits and is
        # served the stored reply, so a replay sees exactly what the run saw
        with self._single_flight(sample_key(key, sample)):
            hit = cache.get(key, sample)
            if hit is not None:
                return self._from_cache(role, stage, hit, key, schema)
            if sample:
                log.info(
                    "%s/%s: request %s had an invalid reply; asking afresh (sample %d)",
                    role,
                    stage,
                    key[:12],
                    sample,
                )
            return self._fetch(role, stage, cfg, msgs, schema, req, key, sample)

    def mark_reply(self, reply: LLMReply | JsonAttempt, *, valid: bool) -> None:
        """Record whether a reply passed the caller's checks.

        :func:`~tsevo.roles.llm.jsoncall.json_call` calls this for every reply it validates. An
        invalid verdict moves this client's session on to the request's next sample, so the next
        identical request (an engine-level retry) is sent afresh in ``read_write`` mode (and
        counted as a call) instead of being served the known-bad reply; in ``replay`` mode it is
        served the next recorded sample. The verdict is stored with the reply (``read_write``
        only) for inspection (:meth:`ResponseCache.verdicts`). A valid verdict keeps the sample:
        identical requests reuse the reply for free, as before.

        Args:
            reply: A reply from :meth:`chat` (or a :class:`JsonAttempt`, which carries its key and
                sample).
            valid: The verdict.
        """
        key, sample = reply.key, reply.sample
        if not key or self.cache is None or self.cache.mode == "off":
            return
        if not valid:
            with self._cursor_lock:
                if self._cursor.get(key, 0) <= sample:
                    self._cursor[key] = sample + 1
        if self.cache.mode == "read_write":
            self.cache.mark(key, sample, valid=valid)

    def reject(self, meta: JsonCallMeta) -> None:
        """Mark a JSON call's accepted reply invalid after a check the call did not make.

        For a caller (a role or the engine) that rejects a reply :func:`json_call` accepted, e.g.
        categories that fail an engine-level rule: the retry of the identical call then gets a
        fresh reply instead of the same one from the cache.

        Args:
            meta: The call's attempts (its last attempt is the accepted reply).
        """
        if meta.attempts and meta.attempts[-1].error is None:
            self.mark_reply(meta.attempts[-1], valid=False)

    def sample_index(self, key: str) -> int:
        """The sample of request ``key`` this session serves next (0 until one is rejected)."""
        with self._cursor_lock:
            return self._cursor.get(key, 0)

    @overload
    def map(
        self,
        fn: Callable[[T], R],
        items: Iterable[T],
        *,
        return_exceptions: Literal[False] = False,
    ) -> list[R]: ...

    @overload
    def map(
        self, fn: Callable[[T], R], items: Iterable[T], *, return_exceptions: Literal[True]
    ) -> list[R | Exception]: ...

    def map(
        self, fn: Callable[[T], R], items: Iterable[T], *, return_exceptions: bool = False
    ) -> list[R] | list[R | Exception]:
        """Apply ``fn`` to every item on a bounded thread pool; results in input order.

        At most ``concurrency`` requests are in flight at once whatever ``fn`` does (the client
        bounds its network sends), so ``fn`` may itself call :func:`json_call` or :meth:`chat`.

        Args:
            fn: Function of one item (e.g. a lambda around :func:`json_call`).
            items: Inputs.
            return_exceptions: Return an exception in its item's place instead of raising. When
                False, the first exception (in input order) is raised after cancelling the items
                not yet started; items already in flight finish (and land in the cache).

        Returns:
            One result (or exception) per item, in input order.
        """
        xs = list(items)
        workers = min(self.config.concurrency, len(xs))
        if workers <= 1:
            out: list[Any] = []
            for x in xs:
                try:
                    out.append(fn(x))
                except Exception as e:
                    if not return_exceptions:
                        raise
                    out.append(e)
            return out
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tsevo-llm")
        futures: list[Future[R]] = [pool.submit(fn, x) for x in xs]
        results: list[Any] = []
        try:
            for f in futures:
                try:
                    results.append(f.result())
                except Exception as e:
                    if not return_exceptions:
                        raise
                    results.append(e)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return results

    def map_chat(
        self, requests: Iterable[ChatRequest], *, return_exceptions: bool = False
    ) -> list[Any]:
        """:meth:`chat` for many requests on the bounded pool; replies in input order.

        Args:
            requests: The requests.
            return_exceptions: As in :meth:`map`.

        Returns:
            One :class:`LLMReply` (or exception) per request.
        """

        def one(r: ChatRequest) -> LLMReply:
            return self.chat(r.role, r.stage, r.messages, schema=r.schema, **dict(r.params))

        if return_exceptions:
            return self.map(one, requests, return_exceptions=True)
        return self.map(one, requests)

    def close(self) -> None:
        """Close HTTP clients and the cache this client opened."""
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for c in clients:
            c.close()
        if self._own_cache and self.cache is not None:
            self.cache.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        d = self.config
        return f"LLMClient({clean_base_url(d.base_url)!r}, model={d.model!r}, cache={self.cache!r})"

    # ------------------------------------------------------------------ internals
    @contextmanager
    def _single_flight(self, skey: str) -> Iterator[None]:
        with self._cursor_lock:
            flight = self._flights.get(skey)
            if flight is None:
                flight = self._flights[skey] = _Flight()
            flight.waiting += 1
        try:
            with flight.lock:
                yield
        finally:
            with self._cursor_lock:
                flight.waiting -= 1
                if flight.waiting == 0:
                    del self._flights[skey]

    def _from_cache(
        self,
        role: str,
        stage: str,
        hit: CachedReply,
        key: str,
        schema: Mapping[str, Any] | None,
    ) -> LLMReply:
        self.accounting.record_cache_hit(role, stage)
        return LLMReply(
            text=hit.text,
            parsed=_try_parse(hit.text, hit.finish_reason) if schema is not None else None,
            usage=hit.usage,
            cached=True,
            latency_s=0.0,
            attempts=0,
            finish_reason=hit.finish_reason,
            model=hit.model,
            key=key,
            sample=hit.sample,
        )

    def _fetch(
        self,
        role: str,
        stage: str,
        cfg: LLMConfig,
        msgs: list[dict[str, str]],
        schema: Mapping[str, Any] | None,
        req: Mapping[str, Any],
        key: str,
        sample: int,
    ) -> LLMReply:
        """Send the request (a fresh call, budget and accounting included) and store the reply."""
        if sample and cfg.seed is not None:
            # a seeded server repeats itself on an identical request: draw the next sample
            # with the next seed (recorded in the stored request description)
            cfg = cfg.replace(seed=cfg.seed + sample)
        t0 = time.monotonic()
        try:
            resp, attempts, retries, level = self._send(cfg, msgs, schema)
            text, usage, finish, model = self._unpack(resp, msgs)
        except LLMCallError as e:
            self.accounting.record_error(
                role, stage, latency_s=time.monotonic() - t0, retries=e.retries
            )
            raise
        latency = time.monotonic() - t0
        self.budget.add_tokens(usage.total_tokens)
        if self.cache is not None and self.cache.mode == "read_write":
            stored = dict(req) if not sample else {**req, "sample": sample, "seed": cfg.seed}
            self.cache.put(key, stored, CachedReply(text, usage, finish, model, sample), sample)
        self.accounting.record_call(role, stage, usage, latency_s=latency, retries=retries)
        return LLMReply(
            text=text,
            parsed=_try_parse(text, finish) if schema is not None else None,
            usage=usage,
            cached=False,
            latency_s=latency,
            attempts=attempts,
            finish_reason=finish,
            model=model,
            json_mode=level,
            key=key,
            sample=sample,
        )

    def _role_config(self, role: str, params: Mapping[str, Any]) -> LLMConfig:
        unknown = set(params) - CHAT_PARAMS
        if unknown:
            raise TypeError(
                f"unknown chat parameters {sorted(unknown)}; allowed: {sorted(CHAT_PARAMS)}"
            )
        cfg = self.roles.for_role(role)
        if params:
            cfg = cfg.replace(**dict(params))
        if not cfg.model:
            raise ValueError(
                f"no model configured for role {role!r}: set --model, TSEVO_LLM_MODEL or "
                "LLMConfig(model=...)"
            )
        return cfg

    @staticmethod
    def _describe(
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

    def _target(self, cfg: LLMConfig) -> str:
        return f"{clean_base_url(cfg.base_url)}|{cfg.model}"

    def _caps_for(self, target: str) -> _Caps:
        with self._lock:
            caps = self._caps.get(target)
            if caps is None:
                stored = self.cache.get_capability(target) if self.cache is not None else None
                caps = _Caps(**stored) if stored else _Caps()
                self._caps[target] = caps
            return caps

    def _update_caps(self, target: str, **changes: Any) -> None:
        with self._lock:
            caps = self._caps.setdefault(target, _Caps())
            for k, v in changes.items():
                setattr(caps, k, v)
            snapshot = caps.to_dict()
        log.info("LLM capabilities for %s: %s", target, snapshot)
        if self.cache is not None:
            self.cache.set_capability(target, snapshot)

    def _openai(self, cfg: LLMConfig) -> Any:
        url = cfg.base_url.rstrip("/")
        with self._lock:
            c = self._clients.get(url)
            if c is None:
                from openai import OpenAI

                c = self._clients[url] = OpenAI(
                    base_url=url,
                    api_key=self._api_key or "no-key",
                    max_retries=0,
                    timeout=cfg.timeout_s,
                )
            return c

    def _json_level(self, cfg: LLMConfig, target: str) -> str:
        if cfg.json_mode != "auto":
            return cfg.json_mode
        caps = self._caps_for(target)
        if caps.json_mode is not None:
            return caps.json_mode
        with self._lock:
            plock = self._probe_locks.setdefault(target, threading.Lock())
        with plock:
            caps = self._caps_for(target)
            if caps.json_mode is None:
                self._update_caps(target, json_mode=self._probe(cfg))
            return self._caps_for(target).json_mode or "prompt"

    def _probe(self, cfg: LLMConfig) -> str:
        """Find the strongest JSON level the server honours, with tiny requests."""
        pcfg = cfg.replace(
            max_tokens=PROBE_MAX_TOKENS, temperature=0.0, reasoning_effort=None, seed=None
        )
        msgs = [{"role": "user", "content": load_prompt("probe_json").render()}]
        accepted: str | None = None
        for level in JSON_LADDER[:-1]:
            t0 = time.monotonic()
            try:
                resp, _att, retries, _ = self._send(pcfg, msgs, PROBE_SCHEMA, fixed_level=level)
            except _FormatRejectedError:
                log.info("JSON probe: %s refused by %s", level, self._target(cfg))
                self.accounting.record_call(
                    "client", "probe", Usage(), latency_s=time.monotonic() - t0
                )
                continue
            text, usage, finish, _model = self._unpack(resp, msgs)
            self.budget.add_tokens(usage.total_tokens)
            self.accounting.record_call(
                "client", "probe", usage, latency_s=time.monotonic() - t0, retries=retries
            )
            if _try_parse(text, finish) is not None:
                return level
            accepted = accepted or level
        return accepted or "prompt"

    def _kwargs(
        self,
        cfg: LLMConfig,
        msgs: list[dict[str, str]],
        schema: Mapping[str, Any] | None,
        level: str | None,
        caps: _Caps,
        probe: bool,
    ) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": cfg.model, "messages": msgs, "timeout": cfg.timeout_s}
        kw[caps.max_tokens_param] = cfg.max_tokens
        if caps.temperature:
            kw["temperature"] = cfg.temperature
        if cfg.reasoning_effort is not None and caps.reasoning_effort:
            kw["reasoning_effort"] = cfg.reasoning_effort
        if cfg.seed is not None:
            kw["seed"] = cfg.seed
        if schema is not None and level is not None:
            if level == "json_schema":
                name = (
                    "".join(
                        ch if ch.isalnum() or ch in "_-" else "_"
                        for ch in str(schema.get("title", "reply"))
                    )[:64]
                    or "reply"
                )
                kw["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": name, "schema": dict(schema), "strict": False},
                }
            elif level == "json_object_schema":
                kw["response_format"] = {"type": "json_object", "schema": dict(schema)}
            elif level == "json_object":
                kw["response_format"] = {"type": "json_object"}
        if probe:
            kw["extra_headers"] = {PROBE_HEADER: "1"}
        return kw

    def _send(
        self,
        cfg: LLMConfig,
        msgs: list[dict[str, str]],
        schema: Mapping[str, Any] | None,
        *,
        fixed_level: str | None = None,
    ) -> tuple[Any, int, int, str | None]:
        """Send with adaptations and bounded retries; return (response, attempts, retries, level)."""
        import openai

        target = self._target(cfg)
        probe = fixed_level is not None
        level: str | None = None
        if schema is not None:
            level = fixed_level if probe else self._json_level(cfg, target)
        client = self._openai(cfg)
        attempts = retries = 0
        while True:
            caps = self._caps_for(target)
            kw = self._kwargs(cfg, msgs, schema, level, caps, probe)
            self.budget.reserve_call()
            attempts += 1
            try:
                with self._sem:
                    resp = client.chat.completions.create(**kw)
                return resp, attempts, retries, level
            except openai.APIStatusError as e:
                status = int(e.status_code)
                text = _error_text(e)
                low = text.lower()
                format_refused = (
                    "response_format" in kw
                    and status in (400, 404, 415, 422, 500, 501)
                    and any(w in low for w in _FORMAT_WORDS)
                )
                if format_refused and probe:
                    raise _FormatRejectedError(text) from e
                if format_refused and cfg.json_mode == "auto" and level in JSON_LADDER[:-1]:
                    assert level is not None
                    level = JSON_LADDER[JSON_LADDER.index(level) + 1]
                    log.warning("%s refused the response_format; falling back to %s", target, level)
                    self._update_caps(target, json_mode=level)
                    continue
                if self._adapt(target, kw, caps, status, low):
                    continue
                kind, retryable = _classify_status(status, format_refused)
                delay = _retry_after(e) if status == 429 else None
                err_msg = text
            except openai.APITimeoutError as e:
                kind, retryable, delay, status, err_msg = "timeout", True, None, None, str(e)
            except openai.APIConnectionError as e:
                kind, retryable, delay, status, err_msg = "connection", True, None, None, str(e)
            except openai.OpenAIError as e:
                kind, retryable, delay, status, err_msg = (
                    "invalid_response",
                    False,
                    None,
                    None,
                    str(e),
                )
            if not retryable or retries >= cfg.max_retries:
                raise LLMCallError(
                    kind,
                    err_msg[:500],
                    status=status,
                    attempts=attempts,
                    retries=retries,
                    retryable=retryable,
                )
            retries += 1
            wait = self._backoff(cfg, retries, delay)
            log.info("%s: %s, retry %d/%d in %.2f s", target, kind, retries, cfg.max_retries, wait)
            self.sleep(wait)

    def _adapt(
        self, target: str, kw: Mapping[str, Any], caps: _Caps, status: int, low: str
    ) -> bool:
        """Adapt a parameter the model refused (once per kind); True when something changed."""
        if status not in (400, 422):
            return False
        if "reasoning_effort" in kw and "reasoning" in low:
            self._update_caps(target, reasoning_effort=False)
            return True
        if kw.get("max_tokens") is not None and "max_completion_tokens" in low:
            self._update_caps(target, max_tokens_param="max_completion_tokens")
            return True
        if (
            "temperature" in kw
            and "temperature" in low
            and any(w in low for w in _UNSUPPORTED_WORDS)
        ):
            self._update_caps(target, temperature=False)
            return True
        return False

    def _backoff(self, cfg: LLMConfig, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, cfg.backoff_cap_s)
        d = min(cfg.backoff_cap_s, cfg.backoff_base_s * 2 ** (retry - 1))
        return d / 2 + self._rng.uniform(0, d / 2)

    @staticmethod
    def _unpack(resp: Any, msgs: list[dict[str, str]]) -> tuple[str, Usage, str | None, str]:
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


def _classify_status(status: int, format_refused: bool) -> tuple[str, bool]:
    if format_refused:
        return "unsupported", False
    if status == 429:
        return "rate_limit", True
    if status in (408, 409):
        return "timeout" if status == 408 else "server", True
    if status >= 500:
        return "server", True
    if status in (401, 403):
        return "auth", False
    if status == 404:
        return "not_found", False
    if 400 <= status < 500:
        return "bad_request", False
    return "other", False


def _try_parse(text: str, finish_reason: str | None) -> dict[str, Any] | None:
    try:
        return extract_json(text, finish_reason=finish_reason)
    except JsonReplyError:
        return None
