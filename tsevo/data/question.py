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
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from .report import LoadReport, RecordError
from .validation import (
    MAX_OPTIONS,
    MAX_PRIMARY,
    MIN_OPTIONS,
    FloatArray,
    check_gold,
    check_id,
    check_metadata,
    check_options,
    check_series,
    check_str,
)

__all__ = [
    "FINGERPRINT_CHARS",
    "MAX_OPTIONS",
    "MAX_PRIMARY",
    "MIN_OPTIONS",
    "LoadReport",
    "Question",
    "RecordError",
]

FINGERPRINT_CHARS = 16

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
        rid = check_id(self.id)
        check_str(rid, "source", self.source, allow_empty=False)
        check_str(rid, "task", self.task, allow_empty=False)
        check_str(rid, "question", self.question, allow_empty=False)
        check_str(rid, "subtask", self.subtask, allow_empty=True)
        check_str(rid, "context", self.context, allow_empty=True)
        check_str(rid, "group", self.group, allow_empty=True)
        options = check_options(rid, self.options)
        gold = check_gold(rid, self.gold, len(options))
        series, primary, covariates, candidates = check_series(
            rid, self.series, self.primary, self.covariates, self.candidates
        )
        metadata = check_metadata(rid, self.metadata)
        set_ = object.__setattr__
        set_(self, "options", options)
        set_(self, "gold", gold)
        set_(self, "series", MappingProxyType(series))
        set_(self, "primary", primary)
        set_(self, "covariates", covariates)
        set_(self, "candidates", candidates)
        set_(self, "metadata", MappingProxyType(metadata))
        set_(self, "group", self.group or self.id)
        set_(self, "_fp", self._compute_fingerprint())

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
