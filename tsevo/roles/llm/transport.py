"""Sending one chat request: adaptations, bounded retries, exponential backoff with jitter.

:class:`Transport` owns the ``openai`` clients (one per base URL, the package's own retries off)
and the bound on requests in flight. It retries 429 (Retry-After honoured, capped at
``backoff_cap_s``), 408/409, 5xx, timeouts and connection errors; other errors fail at once. A
refused ``response_format`` steps down the JSON ladder and a refused parameter is adapted (both
remembered in the :class:`~tsevo.roles.llm.capabilities.CapabilityStore`) before the request is
sent again. Every failure is an :class:`~tsevo.roles.llm.wire.LLMCallError` with a ``kind``. The
budget is asked before every attempt.
"""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import openai

from .accounting import Accounting, Budget
from .capabilities import (
    JSON_LADDER,
    CapabilityStore,
    FormatRejectedError,
    format_refused,
    next_json_level,
    probe_json_level,
    refusal_adaptation,
    request_kwargs,
)
from .config import LLMConfig
from .wire import LLMCallError, clean_base_url

__all__ = ["Transport", "classify_status", "retry_after"]

log = logging.getLogger("tsevo.llm")


class Transport:
    """Sends chat requests to OpenAI-compatible endpoints.

    Args:
        caps: What each server accepts (read before and updated after every refusal).
        budget: Asked before every attempt (:meth:`Budget.reserve_call`).
        accounting: Where capability probes are counted.
        concurrency: Requests in flight at most, over all threads.
        api_key: The key sent to the server (kept in memory only).
    """

    def __init__(
        self,
        caps: CapabilityStore,
        budget: Budget,
        accounting: Accounting,
        *,
        concurrency: int,
        api_key: str | None,
    ) -> None:
        self.caps = caps
        self.budget = budget
        self.accounting = accounting
        self._api_key = api_key
        self._sem = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        self._rng = random.Random()
        self.sleep: Callable[[float], None] = time.sleep

    @staticmethod
    def target(cfg: LLMConfig) -> str:
        """The key capabilities are remembered under: ``<base URL>|<model>``."""
        return f"{clean_base_url(cfg.base_url)}|{cfg.model}"

    def json_level(self, cfg: LLMConfig) -> str:
        """The JSON level for a request with a schema (probing the server the first time)."""
        target = self.target(cfg)
        return self.caps.json_level(
            cfg,
            target,
            lambda: probe_json_level(
                self.send, cfg, accounting=self.accounting, budget=self.budget, target=target
            ),
        )

    def send(
        self,
        cfg: LLMConfig,
        msgs: list[dict[str, str]],
        schema: Mapping[str, Any] | None,
        *,
        fixed_level: str | None = None,
    ) -> tuple[Any, int, int, str | None]:
        """Send with adaptations and bounded retries.

        Args:
            cfg: The request's config.
            msgs: Chat messages (the JSON contract already appended).
            schema: JSON schema of the reply, if any.
            fixed_level: Send at this JSON level as a capability probe: a refused format raises
                :class:`~tsevo.roles.llm.capabilities.FormatRejectedError` instead of stepping
                down. None (a real request): the target's level, probed the first time.

        Returns:
            ``(response, attempts, retries, json level)``.

        Raises:
            LLMCallError: The request failed for good.
            BudgetExhausted: The budget is spent (nothing was sent).
        """
        target = self.target(cfg)
        probe = fixed_level is not None
        level: str | None = None
        if schema is not None:
            level = fixed_level if probe else self.json_level(cfg)
        client = self._openai(cfg)
        attempts = retries = 0
        while True:
            caps = self.caps.get(target)
            kw = request_kwargs(cfg, msgs, schema, level, caps, probe)
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
                refused = format_refused(kw, status, low)
                if refused and probe:
                    raise FormatRejectedError(text) from e
                if refused and cfg.json_mode == "auto" and level in JSON_LADDER[:-1]:
                    assert level is not None
                    level = next_json_level(level)
                    log.warning("%s refused the response_format; falling back to %s", target, level)
                    self.caps.update(target, json_mode=level)
                    continue
                changes = refusal_adaptation(kw, status, low)
                if changes is not None:
                    self.caps.update(target, **changes)
                    continue
                kind, retryable = classify_status(status, refused)
                delay = retry_after(e) if status == 429 else None
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

    def close(self) -> None:
        """Close the HTTP clients."""
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for c in clients:
            c.close()

    def _openai(self, cfg: LLMConfig) -> Any:
        url = cfg.base_url.rstrip("/")
        with self._lock:
            c = self._clients.get(url)
            if c is None:
                c = self._clients[url] = openai.OpenAI(
                    base_url=url,
                    api_key=self._api_key or "no-key",
                    max_retries=0,
                    timeout=cfg.timeout_s,
                )
            return c

    def _backoff(self, cfg: LLMConfig, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, cfg.backoff_cap_s)
        d = min(cfg.backoff_cap_s, cfg.backoff_base_s * 2 ** (retry - 1))
        return d / 2 + self._rng.uniform(0, d / 2)


def classify_status(status: int, format_refused: bool) -> tuple[str, bool]:
    """The :class:`LLMCallError` kind of an HTTP status, and whether it is worth a retry."""
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


def retry_after(e: Any) -> float | None:
    """Seconds a 429 asks the client to wait (``retry-after-ms`` or ``retry-after``), if any."""
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


def _error_text(e: Any) -> str:
    parts = [str(getattr(e, "message", "") or e)]
    body = getattr(e, "body", None)
    if body is not None:
        parts.append(str(body))
    return " ".join(parts)
