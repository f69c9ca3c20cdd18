"""The curated namespace a tool runs in: ``ctx``, ``P``, ``np``, ``math`` and a small builtins dict.

Every name a tool can reach is a *facade*: an instance of a slot-less class whose members are the
allowlisted functions and constants, whose ``__setattr__``/``__delattr__`` raise, and which never
hands out a module object. The allowlists here are also what the AST gate (:mod:`.gate`) accepts as
attribute names, so the two layers cannot drift apart.
"""

from __future__ import annotations

import math as _math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as _np

from tsevo.library.context import ToolInput
from tsevo.library.primitives import CATALOG

__all__ = [
    "BUILTINS",
    "CTX_MEMBERS",
    "DATA_METHODS",
    "MATH_MEMBERS",
    "NUMPY_MEMBERS",
    "NUMPY_SUBMODULES",
    "RESERVED_NAMES",
    "CovariateAccessError",
    "Facade",
    "MissingSeriesError",
    "SandboxViolation",
    "ToolContext",
    "build_base_namespace",
    "make_facade",
    "make_primitives_facade",
]


class SandboxViolation(BaseException):
    """A rule of the sandbox was broken inside the tool.

    Derived from ``BaseException`` so that a tool's ``except Exception`` does not swallow it; the
    violation is also recorded on ``ctx``, so even a swallowed one marks the result as an error.
    """


class CovariateAccessError(SandboxViolation):
    """A covariate was read although the question text does not mention it."""


class MissingSeriesError(LookupError):
    """``ctx.series`` / ``ctx.primary`` asked for a series the question does not have."""


# --------------------------------------------------------------------------------------------
# allowlists (shared with the gate)


def _words(text: str) -> list[str]:
    return text.split()


NUMPY_MEMBERS: tuple[str, ...] = tuple(
    n
    for n in _words(
        """
    array asarray zeros ones full arange linspace zeros_like ones_like full_like
    mean median std var sum prod cumsum cumprod min max amin amax minimum maximum
    argmin argmax argsort sort unique abs absolute sign sqrt square exp log log1p log2 log10
    expm1 power sin cos tan arctan arctan2 arcsin arccos sinh cosh tanh floor ceil round rint
    trunc clip where diff gradient convolve correlate polyfit polyval interp percentile quantile
    nanmean nanmedian nanstd nanvar nansum nanmin nanmax nanpercentile nanquantile nanargmin
    nanargmax isnan isfinite isinf nan_to_num all any count_nonzero nonzero flatnonzero
    concatenate stack vstack hstack column_stack append roll flip tile repeat reshape ravel
    transpose dot matmul outer inner cov corrcoef histogram bincount digitize searchsorted
    allclose isclose array_equal floor_divide mod remainder fmod add subtract multiply divide
    true_divide hypot logical_and logical_or logical_not logical_xor greater less equal
    not_equal greater_equal less_equal trapezoid ptp average argwhere partition argpartition
    tril triu eye identity diag cross float64 float32 int64 int32 bool_ ndarray floating
    integer number pi e inf nan
    """
    )
    if hasattr(_np, n)
)
"""Names under ``np``: array construction, reductions, elementwise math, sorting, statistics.

Deliberately absent: every I/O and code sink (``load``, ``save``, ``fromfile``, ``frombuffer``,
``memmap``, ``loadtxt``, ``genfromtxt``, ``ctypeslib``, ``lib``, ``DataSource``), global-state setters
(``seterr``, ``set_printoptions``), ``random``, uninitialized memory (``empty``) and callable
adapters (``vectorize``, ``frompyfunc``, ``apply_along_axis``).
"""

NUMPY_SUBMODULES: dict[str, tuple[str, ...]] = {
    "linalg": tuple(
        n
        for n in _words(
            "norm lstsq solve inv pinv det eigvals eigvalsh eig eigh svd qr cholesky matrix_rank"
        )
        if hasattr(_np.linalg, n)
    ),
    "fft": tuple(
        n
        for n in _words("fft ifft rfft irfft rfftfreq fftfreq fftshift ifftshift")
        if hasattr(_np.fft, n)
    ),
}
"""Sub-facades ``np.linalg`` and ``np.fft`` (facades themselves, not the numpy submodules)."""

MATH_MEMBERS: tuple[str, ...] = tuple(
    n
    for n in _words(
        """
    sqrt log log10 log2 log1p exp expm1 sin cos tan atan atan2 asin acos sinh cosh tanh floor
    ceil trunc fabs isfinite isnan isinf hypot copysign fsum erf erfc lgamma degrees radians
    fmod modf isclose prod gcd pi e inf nan tau
    """
    )
    if hasattr(_math, n)
)
"""Names under ``math`` (``factorial``, ``comb`` and ``pow`` are left out: unbounded cost)."""

CTX_MEMBERS: tuple[str, ...] = (
    "series",
    "primary",
    "names",
    "has",
    "primary_names",
    "covariate_names",
    "candidate_names",
    "n_primary",
    "length",
    "question_mentions",
    "question_numbers",
    "question_tokens",
)
"""Methods of ``ctx`` (see :class:`ToolContext`)."""

DATA_METHODS: frozenset[str] = frozenset(
    _words(
        """
    mean std var sum prod min max argmin argmax argsort cumsum cumprod shape size ndim astype
    reshape ravel flatten copy tolist item round clip T real imag conj conjugate any all nonzero
    dot squeeze transpose diagonal trace searchsorted sort repeat fill
    keys values items get append extend pop insert index count reverse update setdefault add
    discard remove clear union intersection difference symmetric_difference issubset issuperset
    isdisjoint
    lower upper strip lstrip rstrip split startswith endswith join replace
    is_integer start stop step
    """
    )
)
"""Attribute names allowed on any value (arrays, lists, dicts, sets, strings, numbers).

Chosen so that no name in the set reaches code, frames, files or memory on any object a tool can
hold: ``tofile``, ``dump``, ``view``, ``base``, ``data``, ``ctypes``, ``flat``, ``format``,
``format_map``, ``mro``, ``gi_frame``, ``f_back``, ``tb_frame``, ``args`` and all dunders are out.
"""

_EXCEPTIONS: tuple[type[BaseException], ...] = (
    Exception,
    ArithmeticError,
    AssertionError,
    FloatingPointError,
    IndexError,
    KeyError,
    LookupError,
    OverflowError,
    RuntimeError,
    TypeError,
    ValueError,
    ZeroDivisionError,
)

BUILTINS: Mapping[str, Any] = {
    **{
        f.__name__: f
        for f in (
            abs,
            all,
            any,
            bool,
            dict,
            divmod,
            enumerate,
            filter,
            float,
            frozenset,
            int,
            isinstance,
            len,
            list,
            map,
            max,
            min,
            range,
            reversed,
            round,
            set,
            sorted,
            str,
            sum,
            tuple,
            zip,
        )
    },
    **{e.__name__: e for e in _EXCEPTIONS},
    "MissingSeriesError": MissingSeriesError,
}
"""The ``__builtins__`` a tool gets. An explicit dict, so CPython never injects the real builtins."""

RESERVED_NAMES: frozenset[str] = frozenset({"ctx", "P", "np", "math"})
"""Facade names a tool may read but never rebind."""


# --------------------------------------------------------------------------------------------
# facades


class Facade:
    """Base of every facade: no instance state, no attribute assignment or deletion."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only (cannot delete {name!r})")

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def make_facade(title: str, members: Mapping[str, Any]) -> Facade:
    """Build a read-only facade exposing exactly ``members`` as attributes.

    Callables are stored as ``staticmethod`` so they are returned unbound; constants and nested
    facades are stored as they are.

    Args:
        title: Class name of the facade (shown in error messages).
        members: Attribute name -> object.

    Returns:
        A fresh facade instance.
    """
    body: dict[str, Any] = {"__slots__": (), "__doc__": f"Read-only facade {title}."}
    for name, obj in members.items():
        if name.startswith("_"):
            raise ValueError(f"facade member names may not start with '_': {name!r}")
        body[name] = staticmethod(obj) if callable(obj) and not isinstance(obj, Facade) else obj
    cls = type(title, (Facade,), body)
    return cls()


def _detach(x: Any) -> Any:
    """Copy arrays and containers in a primitive's result so a tool cannot mutate shared state."""
    if isinstance(x, _np.ndarray):
        return x.copy()
    if type(x) is dict:
        return {k: _detach(v) for k, v in x.items()}
    if type(x) is list:
        return [_detach(v) for v in x]
    if type(x) is tuple:
        return tuple(_detach(v) for v in x)
    return x


def _wrap_primitive(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return _detach(fn(*args, **kwargs))

    call.__name__ = getattr(fn, "__name__", "primitive")
    call.__doc__ = fn.__doc__
    return call


def make_primitives_facade(catalog: Mapping[str, Any]) -> Facade:
    """Build ``P`` from a primitives catalog (``name -> PrimitiveSpec``).

    Each member calls the primitive and returns a detached copy of its result. Names starting with
    ``_`` or outside the gate's naming rules are skipped.
    """
    members = {
        name: _wrap_primitive(spec.fn)
        for name, spec in sorted(catalog.items())
        if name.isidentifier() and not name.startswith("_")
    }
    return make_facade("Primitives", members)


def _numpy_facade() -> Facade:
    members: dict[str, Any] = {n: getattr(_np, n) for n in NUMPY_MEMBERS}
    for sub, names in NUMPY_SUBMODULES.items():
        mod = getattr(_np, sub)
        members[sub] = make_facade(f"Numpy{sub.capitalize()}", {n: getattr(mod, n) for n in names})
    return make_facade("Numpy", members)


def _math_facade() -> Facade:
    return make_facade("Math", {n: getattr(_math, n) for n in MATH_MEMBERS})


class ToolContext(Facade):
    """``ctx``: a read-only view of one :class:`~tsevo.library.context.ToolInput`.

    Series are returned as fresh float64 copies. A covariate may be read with :meth:`series` only
    when the question text mentions its name; otherwise the read raises
    :class:`CovariateAccessError` and the violation is recorded (it stays recorded even when the
    tool catches the exception).
    """

    __slots__ = ("_inp", "_read", "_violations")
    _inp: ToolInput
    _read: list[str]
    _violations: list[str]

    def __init__(self, inp: ToolInput) -> None:
        object.__setattr__(self, "_inp", inp)
        object.__setattr__(self, "_read", [])
        object.__setattr__(self, "_violations", [])

    # -- names ---------------------------------------------------------------------------
    def names(self) -> tuple[str, ...]:
        """Names of every series of the question."""
        return tuple(self._inp.series)

    def has(self, name: str) -> bool:
        """True when the question has a series called ``name``."""
        return isinstance(name, str) and name in self._inp.series

    def primary_names(self) -> tuple[str, ...]:
        """Names of the primary series, in order."""
        return tuple(self._inp.primary)

    def covariate_names(self) -> tuple[str, ...]:
        """Names of the covariate series (reading one needs a mention in the question)."""
        return tuple(self._inp.covariates)

    def candidate_names(self) -> tuple[str, ...]:
        """Names of the candidate series (e.g. ``"A"``, ``"B"``)."""
        return tuple(self._inp.candidates)

    def n_primary(self) -> int:
        """Number of primary series."""
        return len(self._inp.primary)

    def length(self, name: str) -> int:
        """Number of samples of series ``name``."""
        self._check_name(name)
        return int(_np.asarray(self._inp.series[name]).shape[0])

    # -- values --------------------------------------------------------------------------
    def series(self, name: str) -> _np.ndarray:
        """A float64 copy of series ``name``.

        Raises:
            MissingSeriesError: The question has no such series.
            CovariateAccessError: ``name`` is a covariate the question text does not mention.
        """
        self._check_name(name)
        inp = self._inp
        if name in inp.covariates and name not in inp.primary and name not in inp.candidates:
            if not inp.mentions(name):
                msg = f"covariate {name!r} read but the question does not mention it"
                self._violations.append(msg)
                raise CovariateAccessError(msg)
            if name not in self._read:
                self._read.append(name)
        return _np.array(inp.series[name], dtype=_np.float64)

    def primary(self, i: int = 0) -> _np.ndarray:
        """A float64 copy of the ``i``-th primary series."""
        prim = self._inp.primary
        if type(i) is not int or not -len(prim) <= i < len(prim):
            raise MissingSeriesError(
                f"no primary series #{i!r} (this question has {len(prim)} primary series)"
            )
        return self.series(prim[i])

    # -- question text -------------------------------------------------------------------
    def question_mentions(self, word: str) -> bool:
        """True when the question text contains ``word`` as a whole token (case-insensitive)."""
        if not isinstance(word, str):
            raise TypeError("question_mentions expects a string")
        return len(word) <= 200 and self._inp.mentions(word)

    def question_numbers(self) -> tuple[float, ...]:
        """Numbers written in the question text, in order."""
        return tuple(self._inp.numbers())

    def question_tokens(self) -> frozenset[str]:
        """The question's normalized word tokens (lower case, numbers and punctuation left out).

        A read-only set of strings (what a composite tool dispatches its branches on): the same
        tokens the planner's kind matchers were learned from.
        """
        return self._inp.tokens()

    # -- internals (unreachable from tool code: the gate rejects names starting with '_') ---
    def _check_name(self, name: object) -> None:
        if not isinstance(name, str):
            raise TypeError(f"series names are strings, got {type(name).__name__}")
        if name not in self._inp.series:
            raise MissingSeriesError(
                f"no series named {name!r} (available: {', '.join(self._inp.series) or 'none'}); "
                "check ctx.has(name) and return None to abstain"
            )

    def _report(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(covariates read, violations) so far."""
        return tuple(self._read), tuple(self._violations)

    def __repr__(self) -> str:
        return "<ctx>"


def build_base_namespace(catalog: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The namespace every tool starts from, without ``ctx`` (added per question).

    Args:
        catalog: Primitives catalog for ``P``; defaults to
            :data:`tsevo.library.primitives.CATALOG` as it is now.

    Returns:
        ``{"__builtins__": ..., "__name__": "tool", "P": ..., "np": ..., "math": ...}``.
    """
    if catalog is None:
        catalog = CATALOG
    return {
        "__builtins__": dict(BUILTINS),
        "__name__": "tool",
        "P": make_primitives_facade(catalog),
        "np": _numpy_facade(),
        "math": _math_facade(),
    }
