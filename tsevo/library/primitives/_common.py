"""Shared helpers for primitives: input validation, windows, scale floors, output finishing.

Conventions used by every primitive module:

* A series argument is anything ``np.asarray(..., dtype=float64)`` accepts that is one-dimensional.
  Non-finite values anywhere, a wrong shape or too few samples make the primitive abstain (``None``).
* Window bounds are resolved by :func:`resolve_window`: an ``int`` is a sample index (negative
  counts from the end, like Python slicing); a ``float`` is a fraction of the length in ``[0, 1]``.
  ``None`` takes the documented default. Windows are half-open ``[lo, hi)``.
* Widths (moving windows, subsequence lengths) are resolved by :func:`resolve_width`: an ``int`` is
  a number of samples, a ``float`` in ``(0, 1]`` a fraction of the length.
* Where a scale divides, the floor ``s = max(robust_scale, 1e-3 * std, 1e-12)`` applies, and a
  numerically constant series makes the primitive abstain.
* :func:`finish` turns the result into plain Python scalars and returns ``None`` when any value is
  not finite, so no primitive ever returns NaN or infinity.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
Result = dict[str, Any] | None
F = TypeVar("F", bound=Callable[..., Any])

MAD_TO_SIGMA = 1.482602218505602
TINY = 1e-12

__all__ = [
    "MAD_TO_SIGMA",
    "TINY",
    "FloatArray",
    "Result",
    "as_series",
    "finish",
    "guarded",
    "is_flat",
    "linfit",
    "mad_sigma",
    "resolve_width",
    "resolve_window",
    "robust_scale",
    "zscore",
]


def guarded(fn: F) -> F:
    """Run a primitive with floating-point warnings silenced; numeric failures abstain (``None``).

    Only data-dependent numeric failures are caught (``ValueError``, ``ArithmeticError``,
    ``LinAlgError``); a wrong keyword or a bug still raises.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return fn(*args, **kwargs)
            except (ValueError, ArithmeticError, np.linalg.LinAlgError):
                return None

    return wrapper  # type: ignore[return-value]


def as_series(y: Any, min_len: int = 2) -> FloatArray | None:
    """Return ``y`` as a finite 1-D float64 array of at least ``min_len`` samples, else ``None``."""
    if isinstance(y, (str, bytes)):
        return None
    try:
        x = np.array(y, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return None
    if x.ndim != 1 or x.size < max(1, min_len) or not bool(np.all(np.isfinite(x))):
        return None
    return x


def is_flat(x: FloatArray) -> bool:
    """True when ``x`` is numerically constant (peak-to-peak within 1e-12 of its magnitude)."""
    if x.size == 0:
        return True
    return float(np.ptp(x)) <= TINY * max(1.0, float(np.max(np.abs(x))))


def mad_sigma(x: FloatArray) -> float:
    """Median absolute deviation scaled to a normal sigma (no floor)."""
    return float(MAD_TO_SIGMA * np.median(np.abs(x - np.median(x))))


def robust_scale(x: FloatArray) -> float:
    """Scale floor ``max(1.4826 * MAD, 1e-3 * std, 1e-12)``."""
    return max(mad_sigma(x), 1e-3 * float(np.std(x)), TINY)


def zscore(x: FloatArray) -> FloatArray | None:
    """Mean 0, standard deviation 1; ``None`` for a flat series."""
    if is_flat(x):
        return None
    sd = float(np.std(x))
    if not sd > 0:
        return None
    return np.asarray((x - np.mean(x)) / sd, dtype=np.float64)


def _index(v: Any, n: int) -> int | None:
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, np.integer)):
        i = int(v)
        return i + n if i < 0 else i
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if not (0.0 <= f <= 1.0):
            return None
        return round(f * n)
    return None


def resolve_window(
    n: int, lo: Any, hi: Any, default: tuple[int, int] | None = None, min_len: int = 1
) -> tuple[int, int] | None:
    """Resolve window bounds to sample indices ``[lo, hi)`` or ``None`` when out of range.

    Args:
        n: Series length.
        lo: Start: ``int`` index (negative from the end), ``float`` fraction in [0, 1], or None.
        hi: End (exclusive), same conventions.
        default: Bounds used for a ``None`` argument; ``(0, n)`` when not given.
        min_len: Minimum number of samples in the window.
    """
    d0, d1 = default if default is not None else (0, n)
    i0 = d0 if lo is None else _index(lo, n)
    i1 = d1 if hi is None else _index(hi, n)
    if i0 is None or i1 is None:
        return None
    if not (0 <= i0 < i1 <= n) or i1 - i0 < max(1, min_len):
        return None
    return i0, i1


def resolve_width(n: int, w: Any, minimum: int = 1, maximum: int | None = None) -> int | None:
    """Resolve a width: ``int`` samples or ``float`` fraction of ``n`` in (0, 1]; ``None`` if invalid."""
    if isinstance(w, (bool, np.bool_)):
        return None
    if isinstance(w, (int, np.integer)):
        k = int(w)
    elif isinstance(w, (float, np.floating)):
        f = float(w)
        if not (0.0 < f <= 1.0):
            return None
        k = round(f * n)
    else:
        return None
    k = max(k, minimum)
    if k < 1 or (maximum is not None and k > maximum) or k > n:
        return None
    return k


def linfit(t: FloatArray, y: FloatArray) -> tuple[float, float, float, float]:
    """Closed-form OLS line ``y ~ intercept + slope * t``: (slope, intercept, rss, r2).

    ``r2`` is 0 when ``y`` has no variance.
    """
    tm = float(np.mean(t))
    ym = float(np.mean(y))
    dt = t - tm
    dy = y - ym
    stt = float(np.dot(dt, dt))
    syy = float(np.dot(dy, dy))
    slope = float(np.dot(dt, dy)) / stt if stt > 0 else 0.0
    intercept = ym - slope * tm
    resid = dy - slope * dt
    rss = float(np.dot(resid, resid))
    r2 = 1.0 - rss / syy if syy > TINY * max(1.0, ym * ym) * y.size else 0.0
    return slope, intercept, rss, max(0.0, min(1.0, r2))


def _scalar(v: Any) -> bool | int | float | None:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def finish(values: Mapping[str, Any], arrays: Mapping[str, Any] | None = None) -> Result:
    """Convert a result to plain Python scalars; ``None`` if any value is not finite.

    Args:
        values: Scalar outputs (the declared ``outputs`` keys).
        arrays: Optional extra array outputs (documented per primitive); they must be finite too.
    """
    out: dict[str, Any] = {}
    for k, v in values.items():
        s = _scalar(v)
        if s is None:
            return None
        out[k] = s
    for k, arr in (arrays or {}).items():
        a = np.asarray(arr, dtype=np.float64)
        if not bool(np.all(np.isfinite(a))):
            return None
        out[k] = a
    return out
