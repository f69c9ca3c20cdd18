"""The question data model: one multiple-choice time-series question, immutable and validated.

A question is ``x = (q, S, O)``: text ``q`` (``question`` plus optional ``context``), observed input
``S`` (named float series, each playing one role: primary, covariate or candidate) and finite options
``O``. ``gold`` is the index of the correct option (``None`` when unlabeled). ``metadata`` is free
data that no agent or evolution role ever reads (analysis and widgets may group by it).

Validation is strict by default: a malformed record raises :class:`RecordError` naming the record id
and the field. Loaders that want to keep going collect these errors in a :class:`LoadReport`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["LoadReport", "Question", "RecordError"]

MIN_OPTIONS = 2
MAX_OPTIONS = 10
MAX_PRIMARY = 2
FINGERPRINT_CHARS = 16

FloatArray = npt.NDArray[np.float64]

_REQUIRED = ("id", "source", "task", "question", "options", "series", "primary")
_OPTIONAL = (
    "subtask",
    "context",
    "covariates",
    "candidates",
    "gold",
    "group",
    "metadata",
    "fingerprint",
)
_KNOWN = frozenset(_REQUIRED + _OPTIONAL)


class RecordError(ValueError):
    """A malformed question record.

    Attributes:
        record_id: The record's id (or ``"<record N>"`` when it has none).
        field: The offending field, e.g. ``"series.A"`` or ``"options"``.
        reason: What is wrong, in words.
    """

    def __init__(self, record_id: str, field: str, reason: str) -> None:
        self.record_id = record_id
        self.field = field
        self.reason = reason
        super().__init__(f"record {record_id!r}, field {field!r}: {reason}")

    def to_dict(self) -> dict[str, str]:
        """Return the error as a JSON-friendly dict."""
        return {"record_id": self.record_id, "field": self.field, "reason": self.reason}


@dataclass
class LoadReport:
    """What a lenient load kept and what it rejected (nothing disappears silently).

    Attributes:
        n_read: Records read from the input.
        n_kept: Records that became questions.
        errors: One :class:`RecordError` per rejected record.
        duplicates: Ids dropped because an earlier record had the same fingerprint.
    """

    n_read: int = 0
    n_kept: int = 0
    errors: list[RecordError] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no record was rejected."""
        return not self.errors

    def add(self, err: RecordError) -> None:
        """Record one rejected record."""
        self.errors.append(err)

    def to_frame(self) -> Any:
        """Return the rejected records as a DataFrame (record_id, field, reason)."""
        import pandas as pd

        return pd.DataFrame(
            [e.to_dict() for e in self.errors], columns=["record_id", "field", "reason"]
        )

    def __str__(self) -> str:
        lines = [f"read {self.n_read}, kept {self.n_kept}, rejected {len(self.errors)}"]
        if self.duplicates:
            lines[0] += f", duplicates dropped {len(self.duplicates)}"
        lines += [f"  - {e}" for e in self.errors[:20]]
        if len(self.errors) > 20:
            lines.append(f"  ... and {len(self.errors) - 20} more")
        return "\n".join(lines)


def _fail(rid: str, fld: str, reason: str) -> RecordError:
    return RecordError(rid, fld, reason)


def _fits_float(v: Any) -> bool:
    try:
        float(v)
    except OverflowError:
        return False
    return True


def _as_series(rid: str, name: str, values: Any) -> FloatArray:
    fld = f"series.{name}"
    if isinstance(values, str | bytes | Mapping | set | frozenset) or values is None:
        raise _fail(rid, fld, f"expected a sequence of numbers, got {type(values).__name__}")
    if isinstance(values, np.ndarray) and values.dtype.kind != "O":
        arr = values
    else:
        if isinstance(values, np.ndarray):  # object array (e.g. from pandas): check elementwise
            if values.ndim != 1:
                raise _fail(rid, fld, f"series must be one-dimensional, got shape {values.shape}")
            values = values.tolist()
        if not isinstance(values, Iterable):
            raise _fail(rid, fld, f"expected a sequence of numbers, got {type(values).__name__}")
        seq = list(values)
        for i, v in enumerate(seq):
            if isinstance(v, list | tuple | np.ndarray | Mapping):
                raise _fail(rid, fld, f"ragged or nested series (element {i} is a container)")
            if isinstance(v, bool | np.bool_) or not isinstance(
                v, int | float | np.integer | np.floating
            ):
                raise _fail(rid, fld, f"element {i} is not a number ({type(v).__name__}: {v!r})")
        try:
            arr = np.asarray(seq, dtype=np.float64)
        except OverflowError:
            i = next(j for j, v in enumerate(seq) if not _fits_float(v))
            raise _fail(rid, fld, f"element {i} is too large for a float64") from None
    if arr.ndim != 1:
        raise _fail(rid, fld, f"series must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise _fail(rid, fld, f"series must hold real numbers, got dtype {arr.dtype}")
    if arr.size == 0:
        raise _fail(rid, fld, "empty series")
    arr = np.array(arr, dtype=np.float64)  # always a private copy
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        x = float(arr[i])
        kind = "NaN" if math.isnan(x) else ("+inf" if x > 0 else "-inf")
        raise _fail(rid, fld, f"{int(bad.sum())} non-finite value(s), first {kind} at index {i}")
    arr.setflags(write=False)
    return arr


def _as_str(rid: str, fld: str, v: Any, *, allow_empty: bool) -> str:
    if not isinstance(v, str):
        raise _fail(rid, fld, f"expected a string, got {type(v).__name__}")
    if not allow_empty and not v.strip():
        raise _fail(rid, fld, "empty string")
    return v


def _as_names(rid: str, fld: str, v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str) or not isinstance(v, Sequence | np.ndarray):
        raise _fail(rid, fld, f"expected a list of series names, got {type(v).__name__}")
    out = []
    for x in v:
        if not isinstance(x, str) or not x:
            raise _fail(rid, fld, f"series names must be non-empty strings, got {x!r}")
        out.append(x)
    if len(set(out)) != len(out):
        raise _fail(rid, fld, f"duplicate names in {out}")
    return tuple(out)


def _norm_option(s: str) -> str:
    return " ".join(s.split()).casefold()


def _jsonable(rid: str, meta: Any) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise _fail(rid, "metadata", f"expected a mapping, got {type(meta).__name__}")
    try:
        text = json.dumps(dict(meta), sort_keys=True, allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise _fail(rid, "metadata", f"not JSON-serializable: {exc}") from None
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


@dataclass(frozen=True, eq=False, repr=False)
class Question:
    """One multiple-choice time-series question. Immutable; build with :meth:`from_dict` or directly.

    Attributes:
        id: Unique id within a suite.
        source: Where it comes from (``"synthetic"``, ``"timeseriesexam"``, ...).
        task: The benchmark task (may appear in a scope, never in the triage define step).
        question: The question text shown to the agent.
        options: 2-10 distinct option strings.
        series: Named read-only float64 arrays.
        primary: Names of the one or two primary series.
        covariates: Names of covariate series (tools may read one only when the question mentions it).
        candidates: Names of candidate series (e.g. ``"A"``, ``"B"``) for matching questions.
        gold: Index of the correct option, or ``None`` when unlabeled.
        group: Unit for splitting (series, template or row id); siblings share it.
        subtask: Finer label that no role reads (analysis and widgets may group by it).
        context: Extra text shown with the question (event context, description).
        metadata: Free JSON data never shown to agents or evolution roles.
    """

    id: str
    source: str
    task: str
    question: str
    options: tuple[str, ...]
    series: Mapping[str, FloatArray]
    primary: tuple[str, ...]
    covariates: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    gold: int | None = None
    group: str = ""
    subtask: str = ""
    context: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            rid = "<no id>" if self.id is None else str(self.id)
            raise _fail(rid, "id", f"expected a string id, got {type(self.id).__name__}")
        if not self.id.strip():
            raise _fail("<no id>", "id", "empty id")
        rid = self.id
        _as_str(rid, "source", self.source, allow_empty=False)
        _as_str(rid, "task", self.task, allow_empty=False)
        _as_str(rid, "question", self.question, allow_empty=False)
        _as_str(rid, "subtask", self.subtask, allow_empty=True)
        _as_str(rid, "context", self.context, allow_empty=True)
        _as_str(rid, "group", self.group, allow_empty=True)

        # options
        opts = self.options
        if isinstance(opts, str) or not isinstance(opts, Sequence | np.ndarray):
            raise _fail(rid, "options", f"expected a list of strings, got {type(opts).__name__}")
        for i, o in enumerate(opts):
            if not isinstance(o, str):
                raise _fail(rid, f"options[{i}]", f"expected a string, got {type(o).__name__}")
            if not o.strip():
                raise _fail(rid, f"options[{i}]", "empty option")
        opts_t = tuple(str(o) for o in opts)  # plain str, also for numpy string scalars
        if len(opts_t) < MIN_OPTIONS:
            raise _fail(rid, "options", f"{len(opts_t)} option(s); at least {MIN_OPTIONS} needed")
        if len(opts_t) > MAX_OPTIONS:
            raise _fail(rid, "options", f"{len(opts_t)} options; at most {MAX_OPTIONS} allowed")
        first_at: dict[str, int] = {}
        for j, o in enumerate(opts_t):
            i = first_at.setdefault(_norm_option(o), j)
            if i != j:
                raise _fail(
                    rid,
                    "options",
                    f"duplicate options [{i}] {opts_t[i]!r} and [{j}] {o!r} "
                    "(compared ignoring case and spacing)",
                )
        object.__setattr__(self, "options", opts_t)

        # gold
        g = self.gold
        if g is not None:
            if isinstance(g, bool) or not isinstance(g, int | np.integer):
                raise _fail(rid, "gold", f"expected an int option index, got {type(g).__name__}")
            if not 0 <= int(g) < len(opts_t):
                raise _fail(rid, "gold", f"index {int(g)} out of range for {len(opts_t)} options")
            object.__setattr__(self, "gold", int(g))

        # series and roles
        if not isinstance(self.series, Mapping):
            raise _fail(
                rid, "series", f"expected a mapping name->values, got {type(self.series).__name__}"
            )
        if not self.series:
            raise _fail(rid, "series", "no series")
        arrays: dict[str, FloatArray] = {}
        for name, vals in self.series.items():
            if not isinstance(name, str) or not name.strip():
                raise _fail(rid, "series", f"series names must be non-empty strings, got {name!r}")
            arrays[name] = _as_series(rid, name, vals)
        primary = _as_names(rid, "primary", self.primary)
        covariates = _as_names(rid, "covariates", self.covariates)
        candidates = _as_names(rid, "candidates", self.candidates)
        if not 1 <= len(primary) <= MAX_PRIMARY:
            raise _fail(rid, "primary", f"{len(primary)} primary series; 1 or {MAX_PRIMARY} needed")
        roles: dict[str, str] = {}
        for role, names in (
            ("primary", primary),
            ("covariates", covariates),
            ("candidates", candidates),
        ):
            for n in names:
                if n not in arrays:
                    raise _fail(rid, role, f"names series {n!r}, which is not in series")
                if n in roles:
                    raise _fail(rid, role, f"series {n!r} is already listed under {roles[n]}")
                roles[n] = role
        orphans = sorted(set(arrays) - set(roles))
        if orphans:
            raise _fail(
                rid, "series", f"series {orphans} have no role (primary/covariates/candidates)"
            )
        ordered = {n: arrays[n] for n in (*primary, *covariates, *candidates)}
        object.__setattr__(self, "series", MappingProxyType(ordered))
        object.__setattr__(self, "primary", primary)
        object.__setattr__(self, "covariates", covariates)
        object.__setattr__(self, "candidates", candidates)
        object.__setattr__(self, "metadata", MappingProxyType(_jsonable(rid, self.metadata)))
        object.__setattr__(self, "group", self.group or self.id)
        object.__setattr__(self, "_fp", self._compute_fingerprint())

    # ------------------------------------------------------------------ identity
    def _compute_fingerprint(self) -> str:
        h = hashlib.sha256()
        head = {
            "source": self.source,
            "task": self.task,
            "question": self.question,
            "context": self.context,
            "options": list(self.options),
            "primary": list(self.primary),
            "covariates": list(self.covariates),
            "candidates": list(self.candidates),
        }
        h.update(json.dumps(head, sort_keys=True, ensure_ascii=False).encode())
        for name, arr in self.series.items():
            h.update(b"\x00" + name.encode() + b"\x00")
            h.update(np.ascontiguousarray(arr, dtype="<f8").tobytes())
        return h.hexdigest()[:FINGERPRINT_CHARS]

    @property
    def fingerprint(self) -> str:
        """Stable content hash of everything an agent sees (not id, gold, group or metadata)."""
        fp: str = self.__dict__["_fp"]
        return fp

    @property
    def gold_option(self) -> str | None:
        """The gold option text, or None when unlabeled."""
        return None if self.gold is None else self.options[self.gold]

    @property
    def n_options(self) -> int:
        """Number of options."""
        return len(self.options)

    def check_candidate_lengths(self) -> None:
        """Raise :class:`RecordError` unless all candidate series have the same length."""
        lengths = {n: self.series[n].size for n in self.candidates}
        if len(set(lengths.values())) > 1:
            raise RecordError(self.id, "candidates", f"unequal candidate lengths {lengths}")

    def role_of(self, name: str) -> str:
        """Return ``"primary"``, ``"covariate"`` or ``"candidate"`` for a series name."""
        if name in self.primary:
            return "primary"
        if name in self.covariates:
            return "covariate"
        if name in self.candidates:
            return "candidate"
        raise KeyError(name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Question):
            return NotImplemented
        return (
            self.id == other.id
            and self.fingerprint == other.fingerprint
            and self.gold == other.gold
            and self.group == other.group
            and self.subtask == other.subtask
            and dict(self.metadata) == dict(other.metadata)
        )

    def __hash__(self) -> int:
        return hash((self.id, self.fingerprint))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The read-only mapping proxies cannot be pickled: rebuild (and revalidate) from fields.
        return (_rebuild, (type(self), self._fields()))

    def __copy__(self) -> Question:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, Any]) -> Question:
        return self  # immutable

    def _fields(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "task": self.task,
            "question": self.question,
            "options": self.options,
            "series": {k: np.array(v) for k, v in self.series.items()},
            "primary": self.primary,
            "covariates": self.covariates,
            "candidates": self.candidates,
            "gold": self.gold,
            "group": self.group,
            "subtask": self.subtask,
            "context": self.context,
            "metadata": dict(self.metadata),
        }

    def __repr__(self) -> str:
        lens = ",".join(f"{k}:{v.size}" for k, v in self.series.items())
        return (
            f"Question(id={self.id!r}, task={self.task!r}, series=[{lens}], "
            f"options={len(self.options)}, gold={self.gold})"
        )

    # ------------------------------------------------------------------ (de)serialization
    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-friendly dict (series as lists of floats); inverse of :meth:`from_dict`."""
        return {
            "id": self.id,
            "source": self.source,
            "task": self.task,
            "subtask": self.subtask,
            "question": self.question,
            "context": self.context,
            "options": list(self.options),
            "gold": self.gold,
            "group": self.group,
            "primary": list(self.primary),
            "covariates": list(self.covariates),
            "candidates": list(self.candidates),
            "series": {k: v.tolist() for k, v in self.series.items()},
            "metadata": dict(self.metadata),
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_dict(
        cls,
        d: Mapping[str, Any],
        *,
        index: int | None = None,
        strict_candidate_lengths: bool = False,
        where: str | None = None,
    ) -> Question:
        """Build and validate a question from a plain dict.

        Optional fields that are absent or ``None`` take their defaults; any other value is
        type-checked (an empty list is not silently accepted as metadata, for instance).

        Args:
            d: The record. Required keys: id, source, task, question, options, series, primary.
            index: Position in the input, used to name records that lack a usable id.
            strict_candidate_lengths: Require all candidate series to have equal length.
            where: Name for records that lack a usable id (e.g. ``"<line 7>"``); overrides
                ``index``.

        Raises:
            RecordError: naming the record id and the field at fault.
        """
        if where is None:
            where = f"<record {index}>" if index is not None else "<record>"
        if not isinstance(d, Mapping):
            raise RecordError(where, "<record>", f"expected a mapping, got {type(d).__name__}")
        rid_raw = d.get("id")
        if rid_raw is None:
            raise RecordError(where, "id", "missing required field")
        if not isinstance(rid_raw, str):
            rid = str(rid_raw) if isinstance(rid_raw, int | float) else where
            raise RecordError(rid, "id", f"expected a string id, got {type(rid_raw).__name__}")
        if not rid_raw.strip():
            raise RecordError(where, "id", "empty id")
        rid = rid_raw
        for k in _REQUIRED:
            if k not in d or d[k] is None:
                raise RecordError(rid, k, "missing required field")
        unknown = sorted((k for k in d if k not in _KNOWN), key=str)
        if unknown:
            raise RecordError(
                rid, str(unknown[0]), f"unknown field(s) {unknown}; known: {sorted(_KNOWN)}"
            )

        def opt(key: str, default: Any) -> Any:
            v = d.get(key)
            return default if v is None else v

        try:
            q = cls(
                id=rid,
                source=d["source"],
                task=d["task"],
                question=d["question"],
                options=d["options"],
                series=d["series"],
                primary=d["primary"],
                covariates=opt("covariates", ()),
                candidates=opt("candidates", ()),
                gold=d.get("gold"),
                group=opt("group", ""),
                subtask=opt("subtask", ""),
                context=opt("context", ""),
                metadata=opt("metadata", {}),
            )
        except RecordError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:  # never let a bad record escape
            raise RecordError(rid, "<record>", f"{type(exc).__name__}: {exc}") from exc
        if strict_candidate_lengths:
            q.check_candidate_lengths()
        fp = d.get("fingerprint")
        if fp is not None and fp != q.fingerprint:
            raise RecordError(
                rid,
                "fingerprint",
                f"stored fingerprint {fp!r} does not match content ({q.fingerprint}); "
                "the record was edited after it was written",
            )
        return q


def _rebuild(cls: type[Question], fields: dict[str, Any]) -> Question:
    return cls(**fields)
