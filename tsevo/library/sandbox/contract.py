"""Layer 4: the output contract.

A tool returns ``None`` (abstain) or a flat ``dict`` of at most ``max_outputs`` keys; keys are
identifier-like strings of at most ``max_key_chars`` characters, values finite floats, integers
(``|x| <= 2**53``) or booleans. Never strings, arrays, nested containers or objects.

The check is split in two so that the parent never unpickles anything produced by tool code:

* :func:`encode_value` runs in the sandbox child and turns whatever the tool returned into an inert,
  bounded, JSON-able description (type tags, truncated strings, shapes), without calling any method
  of the returned object;
* :func:`check_encoded` runs in the parent on that description and either accepts it, giving plain
  Python ``float``/``int``/``bool`` values, or names the first violation.

The common case, a dict of plain numbers without covariate reads, takes a cheaper binary route
(:class:`FastEncoder` in the child, :func:`check_schema` and :func:`check_fast_values` in the
parent): the child describes each distinct *schema* (the tuple of keys and the value kinds) once
per batch as JSON and then sends only the values of each result as packed float64s. The parent
checks a schema's keys once and every value of every result (finite float, integral int within
``2**53``, 0/1 bool), so the contract is the same on both routes; only the cost differs.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "MAX_INT_OUTPUT",
    "FastEncoder",
    "Outputs",
    "canonical",
    "check_encoded",
    "check_fast_values",
    "check_schema",
    "encode_value",
]

Outputs = dict[str, float | int | bool]
MAX_INT_OUTPUT = 2**53
"""Largest absolute integer output (exactly representable as float64)."""
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_STR_PREVIEW = 80


def _encode_scalar(v: Any, depth: int, max_items: int) -> list[Any]:
    t = type(v)
    if v is None:
        return ["none"]
    if t is bool or t is np.bool_:
        return ["bool", bool(v)]
    if t is int or isinstance(v, np.integer):
        iv = int(v)
        return ["int", iv] if abs(iv) <= 2**63 else ["bigint", iv.bit_length()]
    if t is float or isinstance(v, np.floating):
        fv = float(v)
        return ["float", fv if math.isfinite(fv) else repr(fv)]
    if t is str:
        return ["str", len(v), v[:_STR_PREVIEW]]
    if t is dict:
        n = len(v)
        if depth > 0:
            return ["dict", n, None]
        items = []
        for i, (k, val) in enumerate(v.items()):
            if i > max_items:
                break
            items.append([_encode_scalar(k, 1, max_items), _encode_scalar(val, 1, max_items)])
        return ["dict", n, items]
    if isinstance(v, np.ndarray):
        return ["ndarray", [int(s) for s in v.shape[:8]], str(v.dtype)[:32]]
    if t in (list, tuple, set, frozenset):
        return [t.__name__, len(v)]
    return ["other", t.__name__[:64]]


def _compact(value: dict[Any, Any], max_items: int) -> list[Any] | None:
    """``["d", n, {key: number}]`` when every key is a str and every value a finite scalar."""
    if len(value) > max_items:
        return None
    out: dict[str, float | int | bool] = {}
    for k, v in value.items():
        if type(k) is not str or len(k) > 256:
            return None
        t = type(v)
        if t is float or t is np.float64:
            fv = float(v)
            if not math.isfinite(fv):
                return None
            out[k] = fv
        elif t is bool or t is np.bool_:
            out[k] = bool(v)
        elif (t is int or t is np.int64) and abs(int(v)) <= 2**63:
            out[k] = int(v)
        else:
            return None
    return ["d", len(value), out]


def encode_value(value: Any, max_items: int) -> list[Any]:
    """Describe a tool's return value as an inert, bounded, JSON-able tagged list.

    Only the top level may be a dict; at most ``max_items + 1`` of its items are described, so an
    oversized dict is still recognisable as such. A dict of plain scalars is sent in a compact
    form (``["d", n, {key: number}]``); anything else item by item with type tags. Either way the
    parent checks every key and value. Runs in the sandbox child.

    Args:
        value: Whatever the tool returned.
        max_items: The contract's key limit.

    Returns:
        A tag list such as ``["dict", 2, [[["str", 1, "a"], ["float", 1.5]], ...]]``.
    """
    if type(value) is dict:
        compact = _compact(value, max_items)
        if compact is not None:
            return compact
    return _encode_scalar(value, 0, max_items)


def _describe(enc: Any) -> str:
    if not isinstance(enc, list) or not enc:
        return "an unknown value"
    tag = enc[0]
    if tag == "float":
        return f"non-finite float {enc[1]}"
    if tag == "str":
        return f"a string of {enc[1]} characters"
    if tag == "ndarray":
        return f"a numpy array of shape {tuple(enc[1])} ({enc[2]})"
    if tag == "bigint":
        return f"an integer of {enc[1]} bits"
    if tag == "int":
        return f"the integer {enc[1]} (beyond ±2**53)"
    if tag in ("dict", "list", "tuple", "set", "frozenset"):
        return f"a {tag} of {enc[1]} items"
    if tag == "other":
        return f"an object of type {enc[1]}"
    return f"a {tag}"


def check_encoded(
    enc: Any, *, max_outputs: int = 32, max_key_chars: int = 64
) -> tuple[Outputs | None, str]:
    """Check an encoded return value against the contract (parent side).

    Args:
        enc: What :func:`encode_value` produced (after a JSON round trip).
        max_outputs: Most keys allowed.
        max_key_chars: Longest key allowed.

    Returns:
        ``(outputs, "")`` when accepted (``outputs`` is None for an abstention), or
        ``(None, reason)`` on a violation.
    """
    if not isinstance(enc, list) or not enc:
        return None, "malformed result from the sandbox"
    tag = enc[0]
    if tag == "none":
        return None, ""
    if tag == "d" and len(enc) == 3 and isinstance(enc[2], dict):
        return _check_compact(enc[1], enc[2], max_outputs, max_key_chars)
    if tag != "dict" or len(enc) != 3 or not isinstance(enc[2], list):
        return None, f"a tool must return a dict or None, got {_describe(enc)}"
    n = enc[1]
    if not isinstance(n, int) or n > max_outputs:
        return None, f"returned {n} outputs (max {max_outputs})"
    out: Outputs = {}
    for item in enc[2]:
        if not isinstance(item, list) or len(item) != 2:
            return None, "malformed result from the sandbox"
        k, v = item
        if not (isinstance(k, list) and len(k) == 3 and k[0] == "str"):
            return None, f"output keys must be strings, got {_describe(k)}"
        klen, key = k[1], k[2]
        if not isinstance(klen, int) or not isinstance(key, str) or klen != len(key):
            return None, f"output key longer than {max_key_chars} characters"
        if klen > max_key_chars:
            return None, f"output key longer than {max_key_chars} characters"
        if not _KEY.match(key):
            return None, f"output key {key!r} is not identifier-like (letters, digits, '_')"
        if not isinstance(v, list) or len(v) < 2:
            return None, f"output {key!r}: malformed value"
        vt = v[0]
        if (vt == "bool" and isinstance(v[1], bool)) or (
            vt == "int" and type(v[1]) is int and abs(v[1]) <= MAX_INT_OUTPUT
        ):
            out[key] = v[1]
        elif vt == "float" and isinstance(v[1], float | int) and not isinstance(v[1], bool):
            fv = float(v[1])
            if not math.isfinite(fv):
                return None, f"output {key!r} is not finite"
            out[key] = fv
        else:
            return None, (
                f"output {key!r} must be a finite number or a boolean, got {_describe(v)}"
            )
    if len(out) != n:
        return None, "duplicate or missing output keys"
    return out, ""


def _check_key(key: Any, max_key_chars: int) -> str:
    if not isinstance(key, str):
        return "output keys must be strings"
    if len(key) > max_key_chars:
        return f"output key longer than {max_key_chars} characters"
    if not _KEY.match(key):
        return f"output key {key[:80]!r} is not identifier-like (letters, digits, '_')"
    return ""


def _check_compact(
    n: Any, d: dict[str, Any], max_outputs: int, max_key_chars: int
) -> tuple[Outputs | None, str]:
    if not isinstance(n, int) or n > max_outputs:
        return None, f"returned {n} outputs (max {max_outputs})"
    if len(d) != n:
        return None, "duplicate or missing output keys"
    for key, v in d.items():
        why = _check_key(key, max_key_chars)
        if why:
            return None, why
        t = type(v)
        if t is float:
            if not math.isfinite(v):
                return None, f"output {key!r} is not finite"
        elif t is int:
            if abs(v) > MAX_INT_OUTPUT:
                return (
                    None,
                    f"output {key!r} must be a finite number or a boolean, got the integer {v} (beyond ±2**53)",
                )
        elif t is not bool:
            return None, f"output {key!r} must be a finite number or a boolean"
    return dict(d), ""


def canonical(outputs: Mapping[str, float | int | bool] | None) -> tuple[Any, ...] | None:
    """A comparable form of outputs for the determinism check (floats to 10 significant digits)."""
    if outputs is None:
        return None
    items: list[tuple[str, str, float | int | bool]] = []
    for k, v in outputs.items():
        if isinstance(v, bool):
            items.append((k, "b", v))
        elif isinstance(v, int):
            items.append((k, "i", v))
        else:
            items.append((k, "f", float(f"{v:.10g}")))
    return tuple(items)


# ---------------------------------------------------------------------------------------------
# the binary route for plain results

MAX_SCHEMAS = 1024
"""Most distinct schemas one child describes; results beyond take the JSON route."""

_FLOAT_TYPES = (float, np.float64)
_BOOL_TYPES = (bool, np.bool_)
_INT_TYPES = (int, np.int64)
_CODE: dict[type, str] = {t: "f" for t in _FLOAT_TYPES}
_CODE.update({t: "b" for t in _BOOL_TYPES})
_CODE.update({t: "i" for t in _INT_TYPES})


class FastEncoder:
    """Child side of the binary route: packs plain results against per-batch schemas.

    A result takes this route when it is a ``dict`` of at most ``max_items`` string keys (<= 256
    characters) whose values are exactly ``float``, ``numpy.float64``, ``bool``, ``numpy.bool_``,
    ``int`` or ``numpy.int64`` (ints within ``2**53``). Anything else returns None and goes
    through :func:`encode_value`. New schemas are queued in :attr:`pending` as
    ``(schema_id, json_bytes)``; the caller must send them before the first result that uses
    them. Non-finite floats are packed as they are and rejected by the parent.
    """

    __slots__ = ("max_items", "pending", "schemas")

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self.schemas: dict[tuple[Any, ...], tuple[int, struct.Struct, tuple[int, ...]] | None] = {}
        self.pending: list[tuple[int, bytes]] = []

    def values(self, value: dict[Any, Any]) -> tuple[int, struct.Struct, tuple[Any, ...]] | None:
        """``(schema_id, packer, values)`` for a dict on the binary route, else None."""
        if len(value) > self.max_items:
            return None
        vals = tuple(value.values())
        key = (tuple(value), tuple(map(type, vals)))
        sch = self.schemas.get(key)
        if sch is None:
            if key in self.schemas or len(self.schemas) >= MAX_SCHEMAS:
                return None
            sch = self._new_schema(key)
            self.schemas[key] = sch
            if sch is None:
                return None
        sid, packer, ints = sch
        for p in ints:
            v = vals[p]
            if v > MAX_INT_OUTPUT or v < -MAX_INT_OUTPUT:
                return None
        return sid, packer, vals

    def _new_schema(
        self, key: tuple[Any, ...]
    ) -> tuple[int, struct.Struct, tuple[int, ...]] | None:
        keys, types = key
        codes = []
        for k, t in zip(keys, types, strict=True):
            if type(k) is not str or len(k) > 256:
                return None
            code = _CODE.get(t)
            if code is None:
                return None
            codes.append(code)
        sid = len(self.schemas)
        desc = json.dumps({"k": list(keys), "t": "".join(codes)}, separators=(",", ":"))
        self.pending.append((sid, desc.encode()))
        ints = tuple(i for i, c in enumerate(codes) if c == "i")
        return sid, struct.Struct(f"<{len(keys)}d"), ints


def check_schema(desc: Any, *, max_outputs: int = 32, max_key_chars: int = 64) -> str:
    """Check a schema sent by the child (parent side); ``""`` when its keys are acceptable.

    Args:
        desc: The decoded schema, ``{"k": [key, ...], "t": "fbi..."}``.
        max_outputs: Most keys allowed.
        max_key_chars: Longest key allowed.

    Returns:
        The contract violation, or ``""``.
    """
    if not isinstance(desc, dict):
        return "malformed result from the sandbox"
    keys, codes = desc.get("k"), desc.get("t")
    if not isinstance(keys, list) or not isinstance(codes, str) or len(keys) != len(codes):
        return "malformed result from the sandbox"
    if any(c not in "fbi" for c in codes):
        return "malformed result from the sandbox"
    if len(keys) > max_outputs:
        return f"returned {len(keys)} outputs (max {max_outputs})"
    for key in keys:
        why = _check_key(key, max_key_chars)
        if why:
            return why
    if len(set(keys)) != len(keys):
        return "duplicate or missing output keys"
    return ""


def check_fast_values(
    keys: Sequence[str], codes: str, vals: Sequence[float]
) -> tuple[Outputs | None, str]:
    """Turn the packed values of one result into outputs (parent side), checking each value.

    Args:
        keys: The schema's keys (already accepted by :func:`check_schema`).
        codes: The schema's value kinds: ``f`` float, ``i`` int, ``b`` bool.
        vals: The float64 values, one per key.

    Returns:
        ``(outputs, "")`` or ``(None, reason)``.
    """
    if "i" not in codes and "b" not in codes:
        if not math.isfinite(sum(vals)):
            for key, v in zip(keys, vals, strict=True):
                if not math.isfinite(v):
                    return None, f"output {key!r} is not finite"
        return dict(zip(keys, vals, strict=True)), ""
    out: Outputs = {}
    for key, code, v in zip(keys, codes, vals, strict=True):
        if code == "f":
            if not math.isfinite(v):
                return None, f"output {key!r} is not finite"
            out[key] = v
        elif code == "i":
            if not (math.isfinite(v) and v.is_integer() and abs(v) <= MAX_INT_OUTPUT):
                return None, "malformed result from the sandbox"
            out[key] = int(v)
        elif v == 1.0 or v == 0.0:
            out[key] = v == 1.0
        else:
            return None, "malformed result from the sandbox"
    return out, ""
