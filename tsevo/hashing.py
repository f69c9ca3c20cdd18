"""Canonical JSON and content hashes: the one implementation every layer uses.

These functions sit below every other module (``data`` included) because their bytes are
identities: tool content hashes, library files, LLM cache keys, forecast cache keys and split groups
all depend on them, so they must never drift apart. Where two uses differ on purpose, a parameter
names the difference.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = ["canonical_json", "series_hash"]


def canonical_json(obj: Any, *, compact: bool = False) -> str:
    """Deterministic JSON text: sorted keys, UTF-8 kept, NaN and infinities refused.

    Args:
        obj: A JSON-compatible object.
        compact: ``False`` (files a person reads and diffs: library folders, tool hashes): two-space
            indent and a trailing newline. ``True`` (keys and stored blobs: the LLM response cache):
            no whitespace at all.

    Example:
        >>> canonical_json({"b": 1, "a": [1, 2]}, compact=True)
        '{"a":[1,2],"b":1}'
        >>> canonical_json({"b": 1, "a": 2}).splitlines()
        ['{', '  "a": 2,', '  "b": 1', '}']
    """
    if compact:
        return json.dumps(
            obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def series_hash(
    *arrays: npt.ArrayLike | Sequence[float],
    framing: Literal["length", "separator"] = "length",
    n: int | None = None,
) -> str:
    """SHA-256 of one or more series' float64 little-endian bytes.

    Args:
        *arrays: The series (converted to float64).
        framing: How series are delimited in the hashed stream. ``"length"`` (the forecast cache's
            series key): each series is preceded by ``f8:<length>:``, so ``[0.0]`` and ``[0.0, 0.0]``
            differ. ``"separator"`` (the split group of loaded sources): each series is preceded by a
            NUL byte.
        n: Keep the first ``n`` hex characters (``None``: the whole digest).

    Example:
        >>> series_hash([1.0, 2.0]) == series_hash(np.array([1, 2]))
        True
        >>> len(series_hash([1.0], [2.0], framing="separator", n=12))
        12
    """
    if framing not in ("length", "separator"):
        raise ValueError(f"unknown framing {framing!r}; use 'length' or 'separator'")
    h = hashlib.sha256()
    for a in arrays:
        arr = np.ascontiguousarray(np.asarray(a, dtype="<f8"))
        if framing == "length":
            h.update(f"f8:{arr.shape[0]}:".encode())
        else:
            h.update(b"\x00")
        h.update(arr.tobytes())
    digest = h.hexdigest()
    return digest if n is None else digest[:n]
