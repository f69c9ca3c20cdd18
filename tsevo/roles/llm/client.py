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
  The session's side of this lives in :mod:`~tsevo.roles.llm.session`; the request description
  that keys the cache in :mod:`~tsevo.roles.llm.wire`.
* **Capability detection by behaviour** (:mod:`~tsevo.roles.llm.capabilities`), remembered per
  (base URL, model) and persisted in the cache file: the JSON level a server honours (probed with
  tiny requests, stepped down when a format is refused) and parameters a model refuses.
  ``reasoning_effort`` is sent only when set.
* **Bounded retries** (:mod:`~tsevo.roles.llm.transport`) with exponential backoff and jitter on
  429 (Retry-After honoured, capped at ``backoff_cap_s``), 408/409, 5xx, timeouts and connection
  errors; other errors fail at once. Every failure is an :class:`LLMCallError` with a ``kind``.
* **Budget** (:class:`~tsevo.roles.llm.accounting.Budget`): checked before every request;
  :class:`~tsevo.roles.llm.accounting.BudgetExhausted` is raised before anything is sent.
* **Accounting** per role and stage, and a bounded thread pool (:meth:`LLMClient.map`,
  :meth:`LLMClient.map_chat`) whose results come back in input order.

The API key is read from the environment when the client is built and kept in memory only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal, TypeVar, overload

from .accounting import Accounting, Budget
from .cache import CachedReply, ResponseCache, request_key
from .capabilities import JSON_LADDER, CapabilityStore
from .config import LLMConfig, RoleConfigs, api_key_from_env
from .jsonreply import JsonAttempt, JsonCallMeta, parse_json_or_none, with_json_contract
from .render import check_budget
from .session import CacheSession
from .transport import Transport
from .wire import (
    CHAT_PARAMS,
    ChatRequest,
    LLMCallError,
    LLMReply,
    clean_base_url,
    describe_request,
    normalize_messages,
    unpack_response,
)

__all__ = [
    "JSON_LADDER",
    "ChatRequest",
    "LLMCallError",
    "LLMClient",
    "LLMReply",
    "clean_base_url",
]

log = logging.getLogger("tsevo.llm")

T = TypeVar("T")
R = TypeVar("R")


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
        self._session = CacheSession(self.cache)
        self._caps = CapabilityStore(self.cache)
        self._transport = Transport(
            self._caps,
            self.budget,
            self.accounting,
            concurrency=d.concurrency,
            api_key=api_key_from_env(),
        )

    @property
    def sleep(self) -> Callable[[float], None]:
        """How the client waits between retries (``time.sleep``; tests may swap it)."""
        return self._transport.sleep

    @sleep.setter
    def sleep(self, fn: Callable[[float], None]) -> None:
        self._transport.sleep = fn

    # ------------------------------------------------------------------ public
    @property
    def config(self) -> LLMConfig:
        """The default config."""
        return self.roles.default

    def capabilities(self) -> dict[str, dict[str, Any]]:
        """Detected capabilities per ``base_url|model`` (JSON level and parameter adaptations)."""
        return self._caps.snapshot()

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
        msgs = normalize_messages(messages)
        if schema is not None:
            msgs = with_json_contract(msgs, schema)
        check_budget(msgs, cfg.max_prompt_tokens)
        req = describe_request(cfg, msgs, schema)
        key = request_key(req)
        cache = self.cache
        if cache is None or not self._session.active:
            return self._fetch(role, stage, cfg, msgs, schema, req, key, 0)
        sample = self._session.sample_index(key)
        if cache.mode == "replay":
            recorded = cache.require(
                key, f"role={role}, stage={stage}, model={cfg.model}", sample=sample
            )
            return self._from_cache(role, stage, recorded, key, schema)
        # one fetch per (request, sample) at a time: a concurrent identical request waits and is
        # served the stored reply, so a replay sees exactly what the run saw
        with self._session.single_flight(key, sample):
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
        self._session.mark(reply.key, reply.sample, valid=valid)

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
        return self._session.sample_index(key)

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
        self._transport.close()
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
            parsed=parse_json_or_none(hit.text, hit.finish_reason) if schema is not None else None,
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
            resp, attempts, retries, level = self._transport.send(cfg, msgs, schema)
            text, usage, finish, model = unpack_response(resp, msgs)
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
            parsed=parse_json_or_none(text, finish) if schema is not None else None,
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
