"""Persistent response cache (SQLite) keyed by a fingerprint of the request.

The key is the SHA-256 of the canonical JSON (sorted keys, no spaces) of everything that affects
the reply: model, messages, temperature, max tokens, reasoning effort, seed and the requested JSON
schema. The endpoint URL is deliberately *not* part of the key, so a cassette recorded against one
server (or a scripted server on a random port) replays anywhere. The value is the reply text, its
usage and finish reason. Credentials and HTTP headers never reach this module.

Modes:
    * ``read_write``: a hit costs zero network calls; a miss is fetched and stored.
    * ``replay``: a miss raises :class:`ReplayMiss` (loudly, with a hint); nothing is fetched or
      written. Use it for cassettes in tests and for offline teaching.
    * ``off``: the client does not consult a cache.

Writes are single SQLite transactions (atomic); the file uses WAL journaling, so a killed process
loses at most the reply it was receiving and never corrupts what was committed. One connection
serves all threads under a lock; several processes may share a file (SQLite locking, 30 s timeout).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .accounting import Usage
from .config import LLMError

__all__ = ["CachedReply", "ReplayMiss", "ResponseCache", "canonical_json", "request_key"]

SCHEMA_VERSION = 1
MEMORY = ":memory:"


def canonical_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, compact separators, UTF-8 kept, NaN refused."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def request_key(request: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON of a request description."""
    return hashlib.sha256(canonical_json(dict(request)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedReply:
    """A stored reply.

    Attributes:
        text: Reply text.
        usage: Token usage of the original call.
        finish_reason: ``stop``, ``length``, ... as the server said.
        model: Model id the server reported.
    """

    text: str
    usage: Usage
    finish_reason: str | None = None
    model: str = ""


class ReplayMiss(LLMError):
    """Replay mode met a request that is not in the cassette (nothing was sent).

    Attributes:
        key: The request's cache key.
        path: The cache file.
    """

    def __init__(self, key: str, path: str, detail: str = "") -> None:
        self.key = key
        self.path = path
        where = f" ({detail})" if detail else ""
        super().__init__(
            f"replay mode: no cached reply for request {key[:16]}{where} in {path}. "
            "The prompts or parameters differ from the recording. Re-record against a live server "
            "with cache_mode='read_write' (TSEVO_LLM_CACHE_MODE=read_write), or point cache_path "
            "at the right cassette."
        )


class ResponseCache:
    """SQLite-backed reply store; safe for concurrent threads.

    Args:
        path: Database file (created with its folder); None or ``":memory:"`` for a
            process-local cache.
        mode: ``read_write`` | ``replay`` | ``off`` (``off`` caches nothing: every lookup misses).

    Example:
        >>> c = ResponseCache(None)
        >>> k = request_key({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        >>> c.put(k, {"model": "m"}, CachedReply("hello", Usage(3, 1)))
        >>> c.get(k).text
        'hello'
    """

    def __init__(self, path: str | Path | None = None, mode: str = "read_write") -> None:
        if mode not in ("read_write", "replay", "off"):
            raise ValueError(f"cache mode must be read_write, replay or off, got {mode!r}")
        self.mode = mode
        self.path = MEMORY if path is None or str(path) == MEMORY else str(Path(path))
        if self.path != MEMORY:
            p = Path(self.path)
            if mode == "replay" and not p.exists():
                raise FileNotFoundError(
                    f"replay mode needs an existing cassette, {p} does not exist; record one with "
                    "cache_mode='read_write' first"
                )
            p.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        self.hits = 0
        self.misses = 0
        with self._lock, self._conn:
            if self.path != MEMORY:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, "
                "request TEXT, text TEXT NOT NULL, usage TEXT NOT NULL, finish_reason TEXT, "
                "created_at REAL)"
            )
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS capabilities (target TEXT PRIMARY KEY, data TEXT, "
                "updated_at REAL)"
            )
            row = self._conn.execute("SELECT v FROM meta WHERE k='schema_version'").fetchone()
            if row is None:
                self._conn.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            elif int(row[0]) != SCHEMA_VERSION:
                raise ValueError(
                    f"cache {self.path} has schema version {row[0]}, this tsevo reads {SCHEMA_VERSION}"
                )

    # ------------------------------------------------------------------ replies
    def get(self, key: str) -> CachedReply | None:
        """The stored reply for ``key`` (None on a miss, and always None in ``off`` mode)."""
        if self.mode == "off":
            return None
        with self._lock:
            row = self._conn.execute(
                "SELECT text, usage, finish_reason, model FROM responses WHERE key=?", (key,)
            ).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        return CachedReply(row[0], Usage.from_dict(json.loads(row[1])), row[2], row[3] or "")

    def require(self, key: str, detail: str = "") -> CachedReply:
        """The stored reply, or :class:`ReplayMiss` (what replay mode does on a miss)."""
        got = self.get(key)
        if got is None:
            raise ReplayMiss(key, self.path, detail)
        return got

    def put(self, key: str, request: Mapping[str, Any], reply: CachedReply) -> None:
        """Store a reply (one atomic transaction). Refused in ``replay`` mode; ignored when ``off``.

        Args:
            key: The request's key (:func:`request_key`).
            request: The request description that was hashed (kept for inspection).
            reply: The reply.
        """
        if self.mode == "replay":
            raise RuntimeError("a replay-mode cache is read-only")
        if self.mode == "off":
            return
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    str(request.get("model", reply.model)),
                    canonical_json(dict(request)),
                    reply.text,
                    canonical_json(reply.usage.to_dict()),
                    reply.finish_reason,
                    time.time(),
                ),
            )

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return (
                self._conn.execute("SELECT 1 FROM responses WHERE key=?", (key,)).fetchone()
                is not None
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every stored entry (key, model, request, text, usage, finish_reason), oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, model, request, text, usage, finish_reason FROM responses "
                "ORDER BY created_at"
            ).fetchall()
        for k, m, req, text, usage, fr in rows:
            yield {
                "key": k,
                "model": m,
                "request": json.loads(req) if req else None,
                "text": text,
                "usage": json.loads(usage),
                "finish_reason": fr,
            }

    # ------------------------------------------------------------------ capabilities
    def get_capability(self, target: str) -> dict[str, Any] | None:
        """Detected server capabilities for ``target`` (``base_url|model``), if remembered."""
        with self._lock:
            row = self._conn.execute(
                "SELECT data FROM capabilities WHERE target=?", (target,)
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def set_capability(self, target: str, data: Mapping[str, Any]) -> None:
        """Remember detected capabilities (ignored unless ``read_write``)."""
        if self.mode != "read_write":
            return
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO capabilities VALUES (?, ?, ?)",
                (target, canonical_json(dict(data)), time.time()),
            )

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection (checkpoints the WAL into the main file)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResponseCache({self.path!r}, mode={self.mode!r})"
