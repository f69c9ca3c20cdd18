"""One client session's walk through the response cache: samples, verdicts, single flights.

A request key may hold several replies, its *samples* (see :mod:`tsevo.roles.llm.cache`). The
session serves a request the sample it has reached for that key: sample 0 first, the next one only
after the caller marked the one it got invalid. So a rerun (or a replay) asks the same requests,
reaches the same verdicts and walks the same samples, while a request repeated after an invalid
reply gets the next sample instead of the known-bad one. Concurrent identical requests are fetched
once: the others wait on the same flight and are served the stored reply.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .cache import ResponseCache, sample_key

__all__ = ["CacheSession"]


@dataclass
class _Flight:
    """The lock of one (request, sample) being fetched, and how many wait on it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0


class CacheSession:
    """Which sample of each request this session serves next, and who is fetching what.

    Args:
        cache: The response cache (None, or a cache in ``off`` mode: nothing is tracked).
    """

    def __init__(self, cache: ResponseCache | None) -> None:
        self.cache = cache
        self._lock = threading.Lock()
        self._cursor: dict[str, int] = {}
        self._flights: dict[str, _Flight] = {}

    @property
    def active(self) -> bool:
        """True when there is a cache to consult (mode ``read_write`` or ``replay``)."""
        return self.cache is not None and self.cache.mode != "off"

    def sample_index(self, key: str) -> int:
        """The sample of request ``key`` this session serves next (0 until one is rejected)."""
        with self._lock:
            return self._cursor.get(key, 0)

    def mark(self, key: str, sample: int, *, valid: bool) -> None:
        """Record a verdict: an invalid one moves the session past ``sample`` of ``key``.

        The verdict is stored with the reply in ``read_write`` mode.
        """
        if not key or self.cache is None or self.cache.mode == "off":
            return
        if not valid:
            with self._lock:
                if self._cursor.get(key, 0) <= sample:
                    self._cursor[key] = sample + 1
        if self.cache.mode == "read_write":
            self.cache.mark(key, sample, valid=valid)

    @contextmanager
    def single_flight(self, key: str, sample: int) -> Iterator[None]:
        """Hold the flight of (``key``, ``sample``): one fetch at a time, the others wait."""
        skey = sample_key(key, sample)
        with self._lock:
            flight = self._flights.get(skey)
            if flight is None:
                flight = self._flights[skey] = _Flight()
            flight.waiting += 1
        try:
            with flight.lock:
                yield
        finally:
            with self._lock:
                flight.waiting -= 1
                if flight.waiting == 0:
                    del self._flights[skey]
