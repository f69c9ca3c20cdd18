"""Field checks of a question record: each returns the clean value or raises :class:`RecordError`.

:class:`~tsevo.data.Question` runs these in a fixed order (id, texts, options, gold, series and
their roles, metadata), so a record with several problems always reports the same one first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .report import RecordError

__all__ = [
    "MAX_OPTIONS",
    "MAX_PRIMARY",
    "MIN_OPTIONS",
    "FloatArray",
    "check_gold",
    "check_id",
    "check_metadata",
    "check_options",
    "check_series",
    "check_str",
    "norm_text",
]

MIN_OPTIONS = 2
MAX_OPTIONS = 10
MAX_PRIMARY = 2

FloatArray = npt.NDArray[np.float64]

#: The series roles, in the order a question lists its series.
ROLES = ("primary", "covariates", "candidates")


def norm_text(s: str) -> str:
    """Whitespace- and case-normalised text (how options are compared for duplicates)."""
    return " ".join(s.split()).casefold()


def check_id(qid: Any) -> str:
    """The question id: a non-empty string."""
    if not isinstance(qid, str):
        rid = "<no id>" if qid is None else str(qid)
        raise RecordError(rid, "id", f"expected a string id, got {type(qid).__name__}")
    if not qid.strip():
        raise RecordError("<no id>", "id", "empty id")
    return qid


def check_str(rid: str, fld: str, v: Any, *, allow_empty: bool) -> str:
    """A string field (non-blank unless ``allow_empty``)."""
    if not isinstance(v, str):
        raise RecordError(rid, fld, f"expected a string, got {type(v).__name__}")
    if not allow_empty and not v.strip():
        raise RecordError(rid, fld, "empty string")
    return v


def check_options(rid: str, opts: Any) -> tuple[str, ...]:
    """2-10 distinct, non-blank option strings (compared ignoring case and spacing)."""
    if isinstance(opts, str) or not isinstance(opts, Sequence | np.ndarray):
        raise RecordError(rid, "options", f"expected a list of strings, got {type(opts).__name__}")
    for i, o in enumerate(opts):
        if not isinstance(o, str):
            raise RecordError(rid, f"options[{i}]", f"expected a string, got {type(o).__name__}")
        if not o.strip():
            raise RecordError(rid, f"options[{i}]", "empty option")
    out = tuple(str(o) for o in opts)  # plain str, also for numpy string scalars
    if len(out) < MIN_OPTIONS:
        raise RecordError(rid, "options", f"{len(out)} option(s); at least {MIN_OPTIONS} needed")
    if len(out) > MAX_OPTIONS:
        raise RecordError(rid, "options", f"{len(out)} options; at most {MAX_OPTIONS} allowed")
    first_at: dict[str, int] = {}
    for j, o in enumerate(out):
        i = first_at.setdefault(norm_text(o), j)
        if i != j:
            raise RecordError(
                rid,
                "options",
                f"duplicate options [{i}] {out[i]!r} and [{j}] {o!r} "
                "(compared ignoring case and spacing)",
            )
    return out


def check_gold(rid: str, g: Any, n_options: int) -> int | None:
    """The gold option index (an int in range), or None when unlabeled."""
    if g is None:
        return None
    if isinstance(g, bool) or not isinstance(g, int | np.integer):
        raise RecordError(rid, "gold", f"expected an int option index, got {type(g).__name__}")
    if not 0 <= int(g) < n_options:
        raise RecordError(rid, "gold", f"index {int(g)} out of range for {n_options} options")
    return int(g)


def check_series(
    rid: str, series: Any, primary: Any, covariates: Any, candidates: Any
) -> tuple[dict[str, FloatArray], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Named read-only float64 series, each with exactly one role.

    Returns:
        The arrays ordered primary, covariates, candidates, and the three name tuples.
    """
    if not isinstance(series, Mapping):
        raise RecordError(
            rid, "series", f"expected a mapping name->values, got {type(series).__name__}"
        )
    if not series:
        raise RecordError(rid, "series", "no series")
    arrays: dict[str, FloatArray] = {}
    for name, vals in series.items():
        if not isinstance(name, str) or not name.strip():
            raise RecordError(
                rid, "series", f"series names must be non-empty strings, got {name!r}"
            )
        arrays[name] = _as_series(rid, name, vals)
    names = {
        "primary": _as_names(rid, "primary", primary),
        "covariates": _as_names(rid, "covariates", covariates),
        "candidates": _as_names(rid, "candidates", candidates),
    }
    n_primary = len(names["primary"])
    if not 1 <= n_primary <= MAX_PRIMARY:
        raise RecordError(rid, "primary", f"{n_primary} primary series; 1 or {MAX_PRIMARY} needed")
    role_of: dict[str, str] = {}
    for role in ROLES:
        for n in names[role]:
            if n not in arrays:
                raise RecordError(rid, role, f"names series {n!r}, which is not in series")
            if n in role_of:
                raise RecordError(rid, role, f"series {n!r} is already listed under {role_of[n]}")
            role_of[n] = role
    orphans = sorted(set(arrays) - set(role_of))
    if orphans:
        raise RecordError(
            rid, "series", f"series {orphans} have no role (primary/covariates/candidates)"
        )
    ordered = {n: arrays[n] for role in ROLES for n in names[role]}
    return ordered, names["primary"], names["covariates"], names["candidates"]


def check_metadata(rid: str, meta: Any) -> dict[str, Any]:
    """A JSON-serializable mapping, returned as plain JSON data (numpy scalars become numbers)."""
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise RecordError(rid, "metadata", f"expected a mapping, got {type(meta).__name__}")
    try:
        text = json.dumps(dict(meta), sort_keys=True, allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise RecordError(rid, "metadata", f"not JSON-serializable: {exc}") from None
    out: dict[str, Any] = json.loads(text)
    return out


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON-serializable")


def _fits_float(v: Any) -> bool:
    try:
        float(v)
    except OverflowError:
        return False
    return True


def _as_series(rid: str, name: str, values: Any) -> FloatArray:
    fld = f"series.{name}"
    if isinstance(values, str | bytes | Mapping | set | frozenset) or values is None:
        raise RecordError(rid, fld, f"expected a sequence of numbers, got {type(values).__name__}")
    if isinstance(values, np.ndarray) and values.dtype.kind != "O":
        arr = values
    else:
        if isinstance(values, np.ndarray):  # object array (e.g. from pandas): check elementwise
            if values.ndim != 1:
                raise RecordError(
                    rid, fld, f"series must be one-dimensional, got shape {values.shape}"
                )
            values = values.tolist()
        if not isinstance(values, Iterable):
            raise RecordError(
                rid, fld, f"expected a sequence of numbers, got {type(values).__name__}"
            )
        seq = list(values)
        for i, v in enumerate(seq):
            if isinstance(v, list | tuple | np.ndarray | Mapping):
                raise RecordError(rid, fld, f"ragged or nested series (element {i} is a container)")
            if isinstance(v, bool | np.bool_) or not isinstance(
                v, int | float | np.integer | np.floating
            ):
                raise RecordError(
                    rid, fld, f"element {i} is not a number ({type(v).__name__}: {v!r})"
                )
        try:
            arr = np.asarray(seq, dtype=np.float64)
        except OverflowError:
            i = next(j for j, v in enumerate(seq) if not _fits_float(v))
            raise RecordError(rid, fld, f"element {i} is too large for a float64") from None
    if arr.ndim != 1:
        raise RecordError(rid, fld, f"series must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise RecordError(rid, fld, f"series must hold real numbers, got dtype {arr.dtype}")
    if arr.size == 0:
        raise RecordError(rid, fld, "empty series")
    arr = np.array(arr, dtype=np.float64)  # always a private copy
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        x = float(arr[i])
        kind = "NaN" if math.isnan(x) else ("+inf" if x > 0 else "-inf")
        raise RecordError(
            rid, fld, f"{int(bad.sum())} non-finite value(s), first {kind} at index {i}"
        )
    arr.setflags(write=False)
    return arr


def _as_names(rid: str, fld: str, v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str) or not isinstance(v, Sequence | np.ndarray):
        raise RecordError(rid, fld, f"expected a list of series names, got {type(v).__name__}")
    out = []
    for x in v:
        if not isinstance(x, str) or not x:
            raise RecordError(rid, fld, f"series names must be non-empty strings, got {x!r}")
        out.append(x)
    if len(set(out)) != len(out):
        raise RecordError(rid, fld, f"duplicate names in {out}")
    return tuple(out)
