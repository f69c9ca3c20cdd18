"""Token and call accounting per role and stage, and the per-run budget.

:class:`Accounting` counts what each (role, stage) cost: network calls, cache hits, prompt and
completion tokens, latency, retries, failed calls and invalid replies. It is thread-safe, merges
across runs and becomes a tidy frame for the round summary and the run store.

:class:`Budget` enforces the run's :class:`~tsevo.roles.llm.config.BudgetLimits`. The client asks
it before every network request (capability probes and retries included); when a limit is reached
it raises :class:`BudgetExhausted` *before* sending, so the caller stops with nothing half-done and
a rerun resumes from the response cache. Tokens are only known after a reply, so concurrent
requests already in flight may overshoot ``max_tokens`` by at most ``concurrency`` replies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import pandas as pd

from .config import BudgetLimits, LLMError

__all__ = ["Accounting", "Budget", "BudgetExhausted", "StageStats", "Usage"]


@dataclass(frozen=True)
class Usage:
    """Tokens of one reply.

    Attributes:
        prompt_tokens: Prompt tokens as the server reported them.
        completion_tokens: Completion tokens as the server reported them.
        estimated: True when the server reported no usage and the counts are estimates.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Usage:
        """Inverse of :meth:`to_dict`."""
        return cls(
            int(d.get("prompt_tokens", 0)),
            int(d.get("completion_tokens", 0)),
            bool(d.get("estimated", False)),
        )


@dataclass
class StageStats:
    """Counters of one (role, stage).

    Attributes:
        requests: ``chat`` calls made (served from the cache or the network, or failed).
        calls: Replies that came from the network.
        cache_hits: Replies served from the response cache (zero network calls).
        prompt_tokens: Prompt tokens of network replies.
        completion_tokens: Completion tokens of network replies.
        latency_s: Seconds spent in network calls (retries and waits included).
        retries: Extra attempts after transient failures.
        errors: Requests that failed for good (after bounded retries, or not retryable).
        invalid: Replies rejected by a JSON contract (each re-ask counts again).
    """

    requests: int = 0
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    retries: int = 0
    errors: int = 0
    invalid: int = 0

    def add(self, other: StageStats) -> None:
        """Add another's counters into this one."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


COLUMNS = ("role", "stage", *(f.name for f in fields(StageStats)), "total_tokens")


class Accounting:
    """Thread-safe counters per (role, stage).

    Example:
        >>> acc = Accounting()
        >>> acc.record_call("triage", "assign", Usage(100, 20), latency_s=0.5)
        >>> acc.record_cache_hit("triage", "assign")
        >>> acc.totals().cache_hits, acc.totals().prompt_tokens
        (1, 100)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats: dict[tuple[str, str], StageStats] = {}

    def _get(self, role: str, stage: str) -> StageStats:
        s = self._stats.get((role, stage))
        if s is None:
            s = self._stats[(role, stage)] = StageStats()
        return s

    def record_call(
        self, role: str, stage: str, usage: Usage, *, latency_s: float, retries: int = 0
    ) -> None:
        """Count one network reply."""
        with self._lock:
            s = self._get(role, stage)
            s.requests += 1
            s.calls += 1
            s.prompt_tokens += usage.prompt_tokens
            s.completion_tokens += usage.completion_tokens
            s.latency_s += latency_s
            s.retries += retries

    def record_cache_hit(self, role: str, stage: str) -> None:
        """Count one reply served from the cache."""
        with self._lock:
            s = self._get(role, stage)
            s.requests += 1
            s.cache_hits += 1

    def record_error(
        self, role: str, stage: str, *, latency_s: float = 0.0, retries: int = 0
    ) -> None:
        """Count one request that failed for good."""
        with self._lock:
            s = self._get(role, stage)
            s.requests += 1
            s.errors += 1
            s.latency_s += latency_s
            s.retries += retries

    def record_invalid(self, role: str, stage: str, n: int = 1) -> None:
        """Count replies rejected by a JSON contract."""
        with self._lock:
            self._get(role, stage).invalid += n

    def get(self, role: str, stage: str) -> StageStats:
        """A copy of one (role, stage)'s counters (zeros when never seen)."""
        with self._lock:
            s = self._stats.get((role, stage))
            return StageStats(**asdict(s)) if s else StageStats()

    def totals(self, role: str | None = None) -> StageStats:
        """Sum over all stages (of one role, or of all roles)."""
        out = StageStats()
        with self._lock:
            for (r, _), s in self._stats.items():
                if role is None or r == role:
                    out.add(s)
        return out

    def __iter__(self) -> Iterator[tuple[str, str, StageStats]]:
        with self._lock:
            items = sorted(self._stats.items())
        for (r, st), s in items:
            yield r, st, StageStats(**asdict(s))

    def merge(self, other: Accounting) -> Accounting:
        """Return a new accounting holding the sum of both."""
        out = Accounting()
        for src in (self, other):
            for r, st, s in src:
                out._get(r, st).add(s)
        return out

    def to_dict(self) -> dict[str, dict[str, dict[str, Any]]]:
        """``{role: {stage: counters}}``, JSON-friendly."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for r, st, s in self:
            out.setdefault(r, {})[st] = asdict(s)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> Accounting:
        """Inverse of :meth:`to_dict`."""
        out = cls()
        for r, stages in d.items():
            for st, s in stages.items():
                out._get(r, st).add(StageStats(**dict(s)))
        return out

    def to_frame(self) -> pd.DataFrame:
        """Tidy frame, one row per (role, stage).

        Returns:
            DataFrame with columns ``role``, ``stage``, ``requests``, ``calls``, ``cache_hits``,
            ``prompt_tokens``, ``completion_tokens``, ``latency_s``, ``retries``, ``errors``,
            ``invalid``, ``total_tokens``.
        """
        rows = [
            {
                "role": r,
                "stage": st,
                **asdict(s),
                "total_tokens": s.prompt_tokens + s.completion_tokens,
            }
            for r, st, s in self
        ]
        return pd.DataFrame(rows, columns=list(COLUMNS))

    def summary(self) -> str:
        """A few lines for the round summary: per role calls, hits, tokens, retries, invalid."""
        roles = sorted({r for r, _, _ in self})
        lines = []
        for r in roles:
            t = self.totals(r)
            lines.append(
                f"{r}: {t.calls} calls, {t.cache_hits} cache hits, "
                f"{t.prompt_tokens}+{t.completion_tokens} tokens, {t.retries} retries, "
                f"{t.invalid} invalid, {t.errors} errors, {t.latency_s:.1f} s"
            )
        return "\n".join(lines) if lines else "no LLM calls"

    def __repr__(self) -> str:
        t = self.totals()
        return f"Accounting({t.calls} calls, {t.cache_hits} hits, {t.prompt_tokens + t.completion_tokens} tokens)"


class BudgetExhausted(LLMError):
    """A per-run limit is reached; raised before a request is sent.

    Attributes:
        limit: ``max_calls`` | ``max_tokens`` | ``max_wall_s``.
        used: What was used when the limit was hit.
        allowed: The limit.
    """

    def __init__(self, limit: str, used: float, allowed: float) -> None:
        self.limit = limit
        self.used = used
        self.allowed = allowed
        super().__init__(
            f"LLM budget exhausted: {limit} used {used:g} of {allowed:g}; nothing was sent. "
            "Rerun with a larger budget to resume (cached replies are free)."
        )


@dataclass
class Budget:
    """Live usage against :class:`BudgetLimits`; thread-safe.

    Attributes:
        limits: The limits.
        calls: Network requests reserved so far.
        tokens: Tokens of replies received so far.
        started: ``time.monotonic()`` at creation.
    """

    limits: BudgetLimits = field(default_factory=BudgetLimits)
    calls: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    @property
    def elapsed_s(self) -> float:
        """Seconds since the budget started."""
        return time.monotonic() - self.started

    def _check(self) -> None:
        lim = self.limits
        if lim.max_calls is not None and self.calls >= lim.max_calls:
            raise BudgetExhausted("max_calls", self.calls, lim.max_calls)
        if lim.max_tokens is not None and self.tokens >= lim.max_tokens:
            raise BudgetExhausted("max_tokens", self.tokens, lim.max_tokens)
        if lim.max_wall_s is not None and self.elapsed_s >= lim.max_wall_s:
            raise BudgetExhausted("max_wall_s", round(self.elapsed_s, 3), lim.max_wall_s)

    def check(self) -> None:
        """Raise :class:`BudgetExhausted` when any limit is reached (reserves nothing)."""
        with self._lock:
            self._check()

    def reserve_call(self) -> None:
        """Check the limits and count one request about to be sent (atomic)."""
        with self._lock:
            self._check()
            self.calls += 1

    def add_tokens(self, n: int) -> None:
        """Count the tokens of a reply."""
        with self._lock:
            self.tokens += int(n)

    def to_dict(self) -> dict[str, Any]:
        """Usage and limits, JSON-friendly."""
        with self._lock:
            return {
                "calls": self.calls,
                "tokens": self.tokens,
                "elapsed_s": round(self.elapsed_s, 3),
                "limits": self.limits.to_dict(),
            }
