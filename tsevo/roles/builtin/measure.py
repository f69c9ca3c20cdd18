"""Measurement specs: a catalog primitive, its parameters and how it is fed from a question.

The builtin planner searches these specs on a bucket's train rows and the builtin synthesizer turns
the chosen spec into real tool source (:func:`~.specsource.spec_source`), so what is measured at
planning time is exactly what the tool computes in the sandbox.

Feeding modes:

``primary``
    ``P.f(ctx.primary(), **params)``.
``window2`` / ``window4``
    window bounds read from the numbers written in the question (``a, b`` or ``a, b, c, d``).
``qnum``
    like ``primary``, but parameters whose value is ``"#i"`` take the question's i-th number
    (e.g. a forecast horizon and the length of the recent window the question states).
``dual_diff``
    ``P.f(second)[k] - P.f(first)[k]`` for two primary series.
``resid``
    ``P.f(second - first)`` for two primary series of one length: where and how they differ.
``pair``
    ``P.f(first, second)`` for a two-series primitive.
``covariate``
    ``P.f(primary, covariate)`` for the covariate the question mentions.
``cand``
    ``P.f(reference, candidate)[k]`` per candidate (keys ``<k>_<name>``).
``cand_diff``
    ``|P.f(candidate)[k] - P.f(reference)[k]|`` per candidate.

A ``primary`` or ``pair`` measurement may also be read *per* the question's first number
(``Spec.per``): every value times that number. A question that states its sampling interval ("sampled
every 20 minutes ... in hours?", "a sample every 5 seconds ... how many seconds?") asks for a count
of samples (a lag, a period, a duration, a slope per step) in its own units, which no one affine map
fits when the interval differs from question to question.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tsevo.data import QuestionView
from tsevo.library.context import extract_numbers, mentions
from tsevo.library.primitives import CATALOG

__all__ = [
    "LOCATION_KEY",
    "MODES",
    "PER_MODES",
    "WINDOW_ARGS",
    "RankedMeasurement",
    "Spec",
    "SpecCache",
    "per_source",
    "spec_values",
]

MODES = (
    "primary",
    "window2",
    "window4",
    "qnum",
    "dual_diff",
    "resid",
    "pair",
    "covariate",
    "cand",
    "cand_diff",
)
#: Output keys the catalog names as a location along the series, a fraction of its length (its
#: naming convention: ``argmax_frac``, ``largest_loc_frac``, ``flat_start_frac``, ``discord_frac``...).
#: A position is read only from these, a direction never (a location has no sign); a residual
#: (``resid``) is read only as these: where two series differ.
LOCATION_KEY = re.compile(
    r"(^|_)(arg(max|min)(_[a-z]+)?|loc|index|start|break|discord|motif)_frac$"
)
#: The window bounds the ``window2`` / ``window4`` modes read from the question's numbers.
WINDOW_ARGS = {"window2": ("a", "b"), "window4": ("a", "b", "c", "d")}
#: Modes a measurement may be read per a question number in (``Spec.per``).
PER_MODES = ("primary", "pair")


@dataclass(frozen=True)
class Spec:
    """One measurement: primitive + parameters + feeding mode.

    Attributes:
        primitive: Catalog name.
        mode: Feeding mode (see the module docstring).
        params: Keyword parameters as sorted ``(name, value)`` pairs.
        per: Every value is multiplied by the question's ``per``-th number (``None``: as measured;
            ``primary`` and ``pair`` modes only).
        per_len: Also multiplied by the first primary series' length, so that a location given as
            a fraction of the series reads as a time in the question's units (``primary`` with
            ``per`` only).
    """

    primitive: str
    mode: str = "primary"
    params: tuple[tuple[str, Any], ...] = ()
    per: int | None = None
    per_len: bool = False

    def __post_init__(self) -> None:
        if self.per is not None and (self.mode not in PER_MODES or self.per < 0):
            raise ValueError(f"per={self.per} needs a primary or pair mode, not {self.mode!r}")
        if self.per_len and (self.per is None or self.mode != "primary"):
            raise ValueError(f"per_len needs per and the primary mode, not {self.mode!r}")

    @property
    def unscaled(self) -> Spec:
        """The same measurement as measured (no ``per`` / ``per_len`` reading)."""
        return replace(self, per=None, per_len=False)

    def kwargs(self) -> dict[str, Any]:
        """Parameters as a dict."""
        return dict(self.params)

    @property
    def computes(self) -> tuple[Any, ...]:
        """What the primitive is called with: specs equal here measure the same values.

        The parameters are spelled out with the primitive's own defaults, each by type and repr
        (``1`` samples and ``1.0`` of the length differ), so a grid variant at the default value
        and the spec without parameters share one computation.
        """
        typed = tuple((k, type(v).__name__, repr(v)) for k, v in self.params)
        ps = CATALOG.get(self.primitive)
        args = _spelled_out(ps.fn, typed) if ps is not None else typed
        return (self.primitive, self.mode, args, self.per, self.per_len)

    def describe(self, key: str = "") -> str:
        """Human-readable name, e.g. ``window_compare.level_gap_sigma[window4]``."""
        p = ",".join(f"{k}={v}" for k, v in self.params)
        extra = [self.mode] if self.mode != "primary" else []
        if p:
            extra.append(p)
        if self.per is not None:
            extra.append(f"per #{self.per}" + (" x length" if self.per_len else ""))
        return f"{self.primitive}{'.' + key if key else ''}{'[' + '; '.join(extra) + ']' if extra else ''}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        d: dict[str, Any] = {
            "primitive": self.primitive,
            "mode": self.mode,
            "params": [list(p) for p in self.params],
        }
        if self.per is not None:
            d["per"] = self.per
        if self.per_len:
            d["per_len"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Spec:
        """Inverse of :meth:`to_dict`."""
        per = d.get("per")
        return cls(
            d["primitive"],
            d.get("mode", "primary"),
            tuple((str(k), v) for k, v in d.get("params", [])),
            None if per is None else int(per),
            bool(d.get("per_len", False)),
        )


def _scalars(res: Any, outputs: tuple[str, ...]) -> dict[str, float]:
    if not isinstance(res, Mapping):
        return {}
    out = {}
    for k in outputs:
        v = res.get(k)
        if isinstance(v, bool | np.bool_):
            out[k] = float(v)
        elif isinstance(v, int | float | np.integer | np.floating) and math.isfinite(float(v)):
            out[k] = float(v)
    return out


def _mentioned_covariate(q: QuestionView) -> str | None:
    text = q.question if not q.context else f"{q.question}\n{q.context}"
    for c in q.covariates:
        if mentions(text, c):
            return c
    return None


def _window_args(spec: Spec, q: QuestionView, n: int) -> dict[str, int] | None:
    names = WINDOW_ARGS[spec.mode]
    nums = extract_numbers(q.question)
    if len(nums) < len(names):
        return None
    vals = [int(x) for x in nums[: len(names)]]
    if any(v < 0 or v > n for v in vals) or any(
        not float(x).is_integer() for x in nums[: len(names)]
    ):
        return None
    return dict(zip(names, vals, strict=True))


@functools.cache
def number_is_float(primitive: str, param: str) -> bool:
    """Whether a parameter bound to a question number takes it as a float (else a positive int).

    Parameters annotated ``float`` (a sampling rate, band edges, a factor) take any number >= 0;
    everything else (``int``, ``int | float`` counts and windows) needs a positive whole number.
    """
    ps = CATALOG.get(primitive)
    if ps is None:
        return False
    try:
        p = inspect.signature(ps.fn).parameters.get(param)
    except (TypeError, ValueError):
        return False
    ann = str(p.annotation) if p is not None else ""
    return "float" in ann and "int" not in ann


def _bind_numbers(spec: Spec, q: QuestionView) -> dict[str, Any] | None:
    """Parameters with values ``"#i"`` take the question's i-th number (see :func:`number_is_float`)."""
    nums = extract_numbers(q.question)
    out: dict[str, Any] = {}
    for k, v in spec.params:
        if isinstance(v, str) and v.startswith("#"):
            i = int(v[1:])
            if i >= len(nums):
                return None
            x = float(nums[i])
            if number_is_float(spec.primitive, k):
                if not (math.isfinite(x) and x >= 0):
                    return None
                out[k] = x
                continue
            if not x.is_integer() or x <= 0:
                return None
            out[k] = int(x)
        else:
            out[k] = v
    return out


def _per(spec: Spec, q: QuestionView, vals: dict[str, float] | None) -> dict[str, float] | None:
    """``vals`` times the question's ``spec.per``-th number, and the length for ``per_len``.

    ``None`` when the question states no such number, or one not above zero.
    """
    if vals is None or spec.per is None:
        return vals
    nums = extract_numbers(q.question)
    if spec.per >= len(nums) or not nums[spec.per] > 0:
        return None
    f = nums[spec.per] * (q.series[q.primary[0]].size if spec.per_len else 1)
    return {k: v * f for k, v in vals.items()}


def per_source(spec: Spec) -> tuple[str, str]:
    """Tool source of a ``per`` reading: its condition and the factor its values take.

    The condition holds where the question states its number above zero; both are ``_per``'s
    arithmetic, written for the sandbox.
    """
    scale = f" * nums[{spec.per}]" + (" * len(y)" if spec.per_len else "")
    return f"len(nums) > {spec.per} and nums[{spec.per}] > 0", scale


def _resid(q: QuestionView) -> np.ndarray | None:
    """The second primary series minus the first, when there are two of one length."""
    if len(q.primary) < 2:
        return None
    a, b = q.series[q.primary[0]], q.series[q.primary[1]]
    return b - a if a.size == b.size else None


def spec_values(spec: Spec, q: QuestionView) -> dict[str, float] | None:
    """Compute a spec's scalar values on one question (``None`` when it does not apply or abstains)."""
    if spec.per is not None:
        return _per(spec, q, spec_values(spec.unscaled, q))
    ps = CATALOG.get(spec.primitive)
    if ps is None:
        return None
    kw = spec.kwargs()
    try:
        if spec.mode == "qnum":
            bound = _bind_numbers(spec, q)
            if bound is None:
                return None
            return _scalars(ps.fn(q.series[q.primary[0]], **bound), ps.outputs) or None
        if spec.mode == "primary":
            return _scalars(ps.fn(q.series[q.primary[0]], **kw), ps.outputs) or None
        if spec.mode in WINDOW_ARGS:
            y = q.series[q.primary[0]]
            w = _window_args(spec, q, y.size)
            if w is None:
                return None
            return _scalars(ps.fn(y, **w, **kw), ps.outputs) or None
        if spec.mode == "dual_diff":
            if len(q.primary) < 2:
                return None
            r0 = _scalars(ps.fn(q.series[q.primary[0]], **kw), ps.outputs)
            r1 = _scalars(ps.fn(q.series[q.primary[1]], **kw), ps.outputs)
            return {k: r1[k] - r0[k] for k in r0 if k in r1} or None
        if spec.mode == "resid":
            d = _resid(q)
            r = _scalars(ps.fn(d, **kw), ps.outputs) if d is not None else {}
            return {k: v for k, v in r.items() if LOCATION_KEY.search(k)} or None
        if spec.mode == "pair":
            if len(q.primary) < 2:
                return None
            return (
                _scalars(ps.fn(q.series[q.primary[0]], q.series[q.primary[1]], **kw), ps.outputs)
                or None
            )
        if spec.mode == "covariate":
            c = _mentioned_covariate(q)
            if c is None:
                return None
            return _scalars(ps.fn(q.series[q.primary[0]], q.series[c], **kw), ps.outputs) or None
        if spec.mode in ("cand", "cand_diff"):
            if len(q.candidates) < 2:
                return None
            ref = q.series[q.primary[0]]
            out: dict[str, float] = {}
            base = _scalars(ps.fn(ref, **kw), ps.outputs) if spec.mode == "cand_diff" else {}
            for c in q.candidates:
                if spec.mode == "cand":
                    r = _scalars(ps.fn(ref, q.series[c], **kw), ps.outputs)
                else:
                    rc = _scalars(ps.fn(q.series[c], **kw), ps.outputs)
                    r = {k: abs(rc[k] - base[k]) for k in rc if k in base}
                for k, v in r.items():
                    out[f"{k}_{c}"] = v
            return out or None
    except Exception:  # a primitive failing on odd input is an abstention, not a crash
        return None
    raise ValueError(f"unknown mode {spec.mode!r}")


class SpecCache:
    """Memo of :func:`spec_values` by (spec, question fingerprint); shared across buckets and rounds."""

    def __init__(self) -> None:
        self.data: dict[tuple[Spec, str], dict[str, float] | None] = {}
        # by what is computed (Spec.computes): a spec at its primitive's defaults reuses the values
        self.computed: dict[tuple[tuple[Any, ...], str], dict[str, float] | None] = {}

    def put(self, spec: Spec, fingerprint: str, vals: dict[str, float] | None) -> None:
        """Store values measured elsewhere (a worker process) for ``spec`` on one question."""
        self.data[(spec, fingerprint)] = vals
        self.computed.setdefault((spec.computes, fingerprint), None if vals is None else dict(vals))

    def get(self, spec: Spec, q: QuestionView) -> dict[str, float] | None:
        """Cached :func:`spec_values` (a measurement read per a number reuses the plain one)."""
        key = (spec, q.fingerprint)
        if key not in self.data:
            same = (spec.computes, q.fingerprint)
            if same in self.computed:
                vals = self.computed[same]
                self.data[key] = None if vals is None else dict(vals)
            elif spec.per is not None:
                self.put(spec, q.fingerprint, _per(spec, q, self.get(spec.unscaled, q)))
            else:
                self.put(spec, q.fingerprint, spec_values(spec, q))
        return self.data[key]


@functools.lru_cache(maxsize=1 << 12)
def _spelled_out(
    fn: Any, typed: tuple[tuple[str, str, str], ...]
) -> tuple[tuple[str, str, str], ...]:
    """``(name, type, repr)`` of every parameter: the given ones over ``fn``'s defaults.

    Keyed by the function itself, so a primitive registered again under its name is read anew.
    """
    sig: Mapping[str, inspect.Parameter]
    try:
        sig = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        sig = {}
    empty = inspect.Parameter.empty
    full = {
        k: (type(p.default).__name__, repr(p.default))
        for k, p in sig.items()
        if p.default is not empty
    }
    full.update({k: (t, r) for k, t, r in typed})
    return tuple(sorted((k, t, r) for k, (t, r) in full.items()))


@dataclass(frozen=True)
class RankedMeasurement:
    """One measured candidate: spec, output key, fitted rule and its accuracies on the planner's rows."""

    spec: Spec
    key: str
    rule: Any
    cv_acc: float
    train_acc: float
    coverage: float
    separation: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "spec": self.spec.to_dict(),
            "key": self.key,
            "rule": self.rule.to_dict(),
            "cv_acc": round(self.cv_acc, 6),
            "train_acc": round(self.train_acc, 6),
            "coverage": round(self.coverage, 6),
            "separation": round(self.separation, 6),
            "measurement": self.spec.describe(self.key),
        }
