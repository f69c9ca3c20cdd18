"""Persistent response cache (SQLite) keyed by a fingerprint of the request.

The key is the SHA-256 of the canonical JSON (sorted keys, no spaces) of everything that affects
the reply: model, messages, temperature, max tokens, reasoning effort, seed and the requested JSON
schema. The endpoint URL is deliberately *not* part of the key, so a cassette recorded against one
server (or a scripted server on a random port) replays anywhere. The value is the reply text, its
usage and finish reason. Credentials and HTTP headers never reach this module.

Samples and verdicts:
    One request key may hold several replies, its *samples* ``0, 1, 2, ...``. Sample 0 is stored
    under the request key itself (so caches written before samples existed read unchanged);
    sample ``s > 0`` under ``<key>#<s>``. Each sample carries the caller's *verdict* once it has
    validated the reply: ``valid``, ``invalid`` or None (not checked). The client serves a request
    the sample its session has reached for that key: sample 0 first, and the next sample only after
    the caller marked the one it got invalid. So a rerun (or a replay) asks the same requests,
    gets the same replies, reaches the same verdicts and walks the same samples (byte for byte,
    zero calls), while a request repeated after an invalid reply (an engine-level retry) gets the
    next sample, fetched afresh in ``read_write`` mode, instead of the known-bad reply.

Modes:
    * ``read_write``: a hit costs zero network calls; a miss is fetched and stored.
    * ``replay``: a miss raises :class:`ReplayMiss` (loudly, with a hint); nothing is fetched or
      written (verdicts included). Use it for cassettes in tests and for offline teaching.
    * ``off``: the client does not consult a cache.

Writes are single SQLite transactions (atomic); the file uses WAL journaling, so a killed process
loses at most the reply it was receiving and never corrupts what was committed. One connection
serves all threads under a lock; several processes may share a file (SQLite locking, 30 s timeout).
A schema-1 file (before samples and verdicts) is upgraded in place when opened for writing and
read as it is in ``replay`` mode.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsevo.hashing import canonical_json

from .accounting import Usage
from .config import LLMError

__all__ = [
    "VERDICTS",
    "CacheCorrupted",
    "CachedReply",
    "ReplayMiss",
    "ResponseCache",
    "request_key",
    "sample_key",
]

SCHEMA_VERSION = 2
MEMORY = ":memory:"
#: Verdicts a caller can record on a stored reply (None: not checked).
VERDICTS = ("valid", "invalid")
_COLUMNS = "text, usage, finish_reason, model, sample, status"
_LEGACY_COLUMNS = "text, usage, finish_reason, model, 0, NULL"


def request_key(request: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON of a request description."""
    return hashlib.sha256(canonical_json(dict(request), compact=True).encode("utf-8")).hexdigest()


def sample_key(key: str, sample: int = 0) -> str:
    """Where sample ``sample`` of request ``key`` is stored (the key itself for sample 0).

    Example:
        >>> sample_key("ab12", 0), sample_key("ab12", 2)
        ('ab12', 'ab12#2')
    """
    if sample < 0:
        raise ValueError(f"sample must be >= 0, got {sample}")
    return key if sample == 0 else f"{key}#{sample}"


@dataclass(frozen=True)
class CachedReply:
    """A stored reply.

    Attributes:
        text: Reply text.
        usage: Token usage of the original call.
        finish_reason: ``stop``, ``length``, ... as the server said.
        model: Model id the server reported.
        sample: Which sample of its request this is (0 for the first reply).
        status: The caller's verdict: ``valid``, ``invalid`` or None (not checked).
    """

    text: str
    usage: Usage
    finish_reason: str | None = None
    model: str = ""
    sample: int = 0
    status: str | None = None


class ReplayMiss(LLMError):
    """Replay mode met a request that is not in the cassette (nothing was sent).

    Attributes:
        key: The request's cache key.
        path: The cache file.
        sample: The sample that was asked for (> 0 when an earlier reply was marked invalid).
    """

    def __init__(self, key: str, path: str, detail: str = "", sample: int = 0) -> None:
        self.key = key
        self.path = path
        self.sample = sample
        where = f" ({detail})" if detail else ""
        which = (
            f" (sample {sample}: the recording has fewer replies to this request after an "
            "invalid one)"
            if sample
            else ""
        )
        super().__init__(
            f"replay mode: no cached reply for request {key[:16]}{where}{which} in {path}. "
            "The prompts or parameters differ from the recording. Re-record against a live server "
            "with cache_mode='read_write' (TSEVO_LLM_CACHE_MODE=read_write), or point cache_path "
            "at the right cassette."
        )


class CacheCorrupted(LLMError):
    """A replay cassette failed SQLite's integrity check (it is never trusted)."""


def _integrity_problem(conn: sqlite3.Connection) -> str | None:
    """What SQLite's quick check finds wrong with an open database (None when it is sound)."""
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
        if [r[0] for r in rows] != ["ok"]:
            return "; ".join(str(r[0]) for r in rows[:3])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "responses" in tables:
            conn.execute("SELECT COUNT(*), MAX(length(text)) FROM responses").fetchone()
    except sqlite3.DatabaseError as e:
        return f"{type(e).__name__}: {e}"
    return None


def _set_aside(path: Path) -> Path:
    """Rename a corrupted database (and its WAL and shared-memory files) out of the way."""
    n = 1
    while path.with_name(f"{path.name}.corrupt-{n}").exists():
        n += 1
    target = path.with_name(f"{path.name}.corrupt-{n}")
    path.replace(target)
    for suffix in ("-wal", "-shm", "-journal"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.replace(target.with_name(target.name + suffix))
    return target


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
        >>> c.mark(k, 0, valid=False), c.get(k).status, c.get(k, 1)
        (True, 'invalid', None)
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
        #: Where a corrupted file was set aside when this cache was opened (None: it was sound).
        self.set_aside: Path | None = None
        self._conn = self._connect()
        self.hits = 0
        self.misses = 0
        #: Schema version of the file (1: a pre-sample file read as it is, in replay mode).
        self.schema_version = SCHEMA_VERSION
        with self._lock, self._conn:
            if self.path != MEMORY:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
            row = self._conn.execute("SELECT v FROM meta WHERE k='schema_version'").fetchone()
            version = SCHEMA_VERSION if row is None else int(row[0])
            if version > SCHEMA_VERSION or version < 1:
                raise ValueError(
                    f"cache {self.path} has schema version {version}, this tsevo reads "
                    f"1 to {SCHEMA_VERSION}"
                )
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, "
                "request TEXT, text TEXT NOT NULL, usage TEXT NOT NULL, finish_reason TEXT, "
                "created_at REAL"
                + (
                    ", sample INTEGER NOT NULL DEFAULT 0, status TEXT, checked_at REAL)"
                    if version >= 2
                    else ")"
                )
            )
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS capabilities (target TEXT PRIMARY KEY, data TEXT, "
                "updated_at REAL)"
            )
            if row is None:
                self._conn.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            elif version == 1 and mode != "replay":
                self._upgrade_from_1()
            else:
                self.schema_version = version
        self._cols = _COLUMNS if self.schema_version >= 2 else _LEGACY_COLUMNS

    def _connect(self) -> sqlite3.Connection:
        """Open the file; a corrupted or truncated one is never trusted.

        In ``read_write`` mode it is set aside (renamed to ``<name>.corrupt-<n>``, with its WAL)
        and a new, empty cache is built in its place, so the affected requests are simply asked
        again; in ``replay`` mode a corrupted cassette is an error.
        """
        conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        if self.path == MEMORY or not Path(self.path).exists():
            return conn
        problem = _integrity_problem(conn)
        if problem is None:
            return conn
        conn.close()
        if self.mode == "replay":
            raise CacheCorrupted(
                f"the LLM response cache {self.path} is corrupted ({problem}); a corrupted "
                "cassette cannot be replayed: re-record it with cache_mode='read_write'"
            )
        self.set_aside = _set_aside(Path(self.path))
        warnings.warn(
            f"the LLM response cache {self.path} was corrupted ({problem}); it was set aside as "
            f"{self.set_aside} and a new cache is built (replies are requested again)",
            RuntimeWarning,
            stacklevel=3,
        )
        return sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)

    def _upgrade_from_1(self) -> None:
        """Add the sample and verdict columns to a schema-1 file (inside the open transaction)."""
        for col in ("sample INTEGER NOT NULL DEFAULT 0", "status TEXT", "checked_at REAL"):
            self._conn.execute(f"ALTER TABLE responses ADD COLUMN {col}")
        self._conn.execute("UPDATE meta SET v=? WHERE k='schema_version'", (str(SCHEMA_VERSION),))

    # ------------------------------------------------------------------ replies
    def get(self, key: str, sample: int = 0) -> CachedReply | None:
        """Sample ``sample`` of the reply to ``key`` (None on a miss, always None when ``off``)."""
        if self.mode == "off":
            return None
        with self._lock:
            row = self._conn.execute(
                f"SELECT {self._cols} FROM responses WHERE key=?", (sample_key(key, sample),)
            ).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        text, usage, finish, model, smp, status = row
        return CachedReply(
            text, Usage.from_dict(json.loads(usage)), finish, model or "", int(smp), status
        )

    def require(self, key: str, detail: str = "", sample: int = 0) -> CachedReply:
        """The stored sample, or :class:`ReplayMiss` (what replay mode does on a miss)."""
        got = self.get(key, sample)
        if got is None:
            raise ReplayMiss(key, self.path, detail, sample)
        return got

    def put(
        self, key: str, request: Mapping[str, Any], reply: CachedReply, sample: int = 0
    ) -> None:
        """Store a reply (one atomic transaction). Refused in ``replay`` mode; ignored when ``off``.

        Args:
            key: The request's key (:func:`request_key`).
            request: The request description that was hashed (kept for inspection).
            reply: The reply (its ``status`` is stored as its verdict; normally None).
            sample: Which sample of the request this reply is.
        """
        if self.mode == "replay":
            raise RuntimeError("a replay-mode cache is read-only")
        if self.mode == "off":
            return
        if reply.status is not None and reply.status not in VERDICTS:
            raise ValueError(f"status must be one of {VERDICTS} or None, got {reply.status!r}")
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, model, request, text, usage, "
                "finish_reason, created_at, sample, status, checked_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sample_key(key, sample),
                    str(request.get("model", reply.model)),
                    canonical_json(dict(request), compact=True),
                    reply.text,
                    canonical_json(reply.usage.to_dict(), compact=True),
                    reply.finish_reason,
                    time.time(),
                    sample,
                    reply.status,
                    None if reply.status is None else time.time(),
                ),
            )

    def mark(self, key: str, sample: int, *, valid: bool) -> bool:
        """Record the caller's verdict on a stored reply (``read_write`` only).

        Args:
            key: The request's key.
            sample: Which sample was judged.
            valid: Whether the reply passed the caller's checks.

        Returns:
            True when a stored reply was updated (False in ``replay``/``off`` mode, for an
            unknown reply, or when the verdict was already recorded).
        """
        if self.mode != "read_write" or self.schema_version < 2:
            return False
        status = "valid" if valid else "invalid"
        with self._lock, self._conn:
            cur = self._conn.execute(
                "UPDATE responses SET status=?, checked_at=? WHERE key=? "
                "AND (status IS NULL OR status<>?)",
                (status, time.time(), sample_key(key, sample), status),
            )
            return cur.rowcount > 0

    def samples(self, key: str) -> int:
        """How many samples of request ``key`` are stored."""
        with self._lock:
            n = 0
            while (
                self._conn.execute(
                    "SELECT 1 FROM responses WHERE key=?", (sample_key(key, n),)
                ).fetchone()
                is not None
            ):
                n += 1
            return n

    def verdicts(self) -> dict[str, int]:
        """Stored replies by verdict: ``{"valid": n, "invalid": n, "unchecked": n}``."""
        out = {"valid": 0, "invalid": 0, "unchecked": 0}
        if self.schema_version < 2:
            out["unchecked"] = len(self)
            return out
        with self._lock:
            rows = self._conn.execute(
                "SELECT status, COUNT(*) FROM responses GROUP BY status"
            ).fetchall()
        for status, n in rows:
            out[status if status in VERDICTS else "unchecked"] += int(n)
        return out

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
        """Every stored reply, oldest first.

        Yields:
            Dicts with ``key`` (the request key), ``sample``, ``status``, ``model``,
            ``request``, ``text``, ``usage`` and ``finish_reason``.
        """
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, model, request, text, usage, finish_reason, "
                + ("sample, status" if self.schema_version >= 2 else "0, NULL")
                + " FROM responses ORDER BY created_at"
            ).fetchall()
        for k, m, req, text, usage, fr, smp, status in rows:
            yield {
                "key": str(k).split("#", 1)[0],
                "sample": int(smp),
                "status": status,
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
                (target, canonical_json(dict(data), compact=True), time.time()),
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
