"""Writing files safely: atomic replaces, append-only JSONL logs, and the credential guard.

Every file of a run is written atomically (:mod:`tsevo.fileio`: temp file + rename) except the
append-only logs, whose readers ignore a torn last line. Nothing that looks like a credential is ever written: every JSON
writer of the package goes through :func:`check_no_secrets`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tsevo.fileio import atomic_write_bytes, atomic_write_text

__all__ = [
    "RecordLog",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_no_secrets",
    "dumps",
    "read_jsonl",
]

#: Substrings of keys that name credentials (compared case-insensitively). Token *counts*
#: (``prompt_tokens``) are fine; ``access_token`` is not.
SECRET_HINTS = (
    "api_key",
    "apikey",
    "access_token",
    "auth_token",
    "bearer",
    "secret",
    "password",
    "authorization",
)


def check_no_secrets(obj: Any, where: str) -> None:
    """Refuse (``ValueError``) a mapping anywhere in ``obj`` with a non-empty credential-like key.

    Args:
        obj: What is about to be written.
        where: The file it goes to (for the message).
    """
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if isinstance(k, str) and any(h in k.lower() for h in SECRET_HINTS) and v:
                raise ValueError(f"refusing to store a credential-like field {k!r} in {where}")
            check_no_secrets(v, where)
    elif isinstance(obj, list | tuple):
        for v in obj:
            check_no_secrets(v, where)


def dumps(obj: Any) -> str:
    """The run store's JSON text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, default=_default) + "\n"


def _default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, set | frozenset):
        return sorted(o)
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"{type(o).__name__} is not JSON-serializable")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSONL file, ignoring a torn last line left by a killed writer."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if i >= len(lines) - 2:  # a torn last line from a killed writer: ignore it
                return
            raise


class RecordLog:
    """An append-only JSONL log of dicts keyed by a field (e.g. answer records by ``qid``).

    A record is appended (and flushed) as soon as it exists, so a killed run loses nothing it had
    computed; reading keeps the last record per key.
    """

    def __init__(self, path: Path, key: str = "qid") -> None:
        self.path = path
        self.key = key

    def load(self) -> dict[str, dict[str, Any]]:
        """All stored records by key (last write wins)."""
        return {str(r[self.key]): r for r in read_jsonl(self.path)}

    def append(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append records and flush them to disk."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._heal()
        with self.path.open("a", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r, sort_keys=True, ensure_ascii=False, default=_default) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def _heal(self) -> None:
        """Truncate a torn last line left by a killed writer before appending."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
            cut = data.rfind(b"\n") + 1
            fh.seek(cut)
            fh.truncate()
