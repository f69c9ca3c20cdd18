"""Summary statistics of a series or of one window of it (group ``summary``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from ._common import (
    FloatArray,
    Result,
    as_series,
    finish,
    guarded,
    is_flat,
    mad_sigma,
    resolve_window,
    robust_scale,
)
from ._registry import primitive

__all__ = ["endpoint_change", "extremes", "level_crossings", "summary"]

_WINDOWS = {"a": (None, 0.0, 0.5), "b": (None, 0.5, 1.0)}


@primitive(
    group="summary",
    outputs=(
        "n",
        "mean",
        "median",
        "std",
        "mad",
        "iqr",
        "min",
        "max",
        "range",
        "skew",
        "kurtosis",
        "first",
        "last",
        "cv",
    ),
    grid=_WINDOWS,
)
@guarded
def summary(y: Any, *, a: int | float | None = None, b: int | float | None = None) -> Result:
    """Level and spread of y[a:b], in the units of y (skew, excess kurtosis and cv unitless).

    Args:
        y: Series.
        a: Window start (int index or float fraction; default 0).
        b: Window end, exclusive (int index or float fraction; default the length).

    Returns:
        ``n``, ``mean``, ``median``, ``std`` (ddof 0), ``mad`` (scaled to sigma), ``iqr``, ``min``,
        ``max``, ``range``, ``skew`` and ``kurtosis`` (0 for a constant window), ``first``, ``last``,
        ``cv`` (std / |mean|, 0 when the mean is 0). ``None`` for fewer than 2 samples.
    """
    x = as_series(y)
    if x is None:
        return None
    w = resolve_window(x.size, a, b, min_len=2)
    if w is None:
        return None
    s = x[w[0] : w[1]]
    flat = is_flat(s)
    mean = float(np.mean(s))
    sd = float(np.std(s))
    q75, q25 = np.percentile(s, [75, 25])
    return finish(
        {
            "n": int(s.size),
            "mean": mean,
            "median": float(np.median(s)),
            "std": sd,
            "mad": mad_sigma(s),
            "iqr": float(q75 - q25),
            "min": float(np.min(s)),
            "max": float(np.max(s)),
            "range": float(np.ptp(s)),
            "skew": 0.0 if flat or s.size < 3 else float(stats.skew(s)),
            "kurtosis": 0.0 if flat or s.size < 4 else float(stats.kurtosis(s)),
            "first": float(s[0]),
            "last": float(s[-1]),
            "cv": sd / abs(mean) if abs(mean) > 1e-12 else 0.0,
        }
    )


@primitive(
    group="summary",
    outputs=("change", "change_sigma", "pct_change", "log_ratio", "head_mean", "tail_mean", "p"),
    grid={"frac": (0.05, 0.1, 0.2, 0.5)},
)
@guarded
def endpoint_change(y: Any, *, frac: float = 0.1) -> Result:
    """Change from the head to the tail of y: in units of y, in robust sigma, and in percent.

    Head and tail are the first and last ``frac`` of the samples (at least one each).

    Args:
        y: Series.
        frac: Fraction of the length averaged at each end, in (0, 0.5].

    Returns:
        ``change`` = tail mean - head mean (units of y), ``change_sigma`` (change / robust scale of
        y), ``pct_change`` (100 * change / |head mean|, 0 when the head mean is 0), ``log_ratio``
        (log(tail/head) when both are positive, else 0), ``head_mean``, ``tail_mean``, ``p``
        (two-sided test that head and tail share one mean, serial correlation allowed for: Welch's
        t on effective sample sizes ``k (1 - phi) / (1 + phi)``, phi the lag-1 autocorrelation of
        the demeaned head and tail with Kendall's bias correction, as in Zwiers and von Storch
        1995, J. Climate 8, 336-351; 1.0 when head or tail holds fewer than 3 samples or neither
        varies). Short windows still estimate phi low on strongly persistent series, so there it
        rejects more often than its level: about 10% at phi = 0.9 with 40-sample windows, near 5%
        at phi = 0.5 (``tests/test_primitives_tests.py``).
    """
    x = as_series(y, 2)
    if x is None or not (0.0 < frac <= 0.5):
        return None
    k = max(1, round(frac * x.size))
    head = float(np.mean(x[:k]))
    tail = float(np.mean(x[-k:]))
    change = tail - head
    s = robust_scale(x)
    return finish(
        {
            "change": change,
            "change_sigma": 0.0 if is_flat(x) else change / s,
            "pct_change": 100.0 * change / abs(head) if abs(head) > 1e-12 else 0.0,
            "log_ratio": float(np.log(tail / head)) if head > 0 and tail > 0 else 0.0,
            "head_mean": head,
            "tail_mean": tail,
            "p": _equal_means_p(x[:k], x[-k:]),
        }
    )


def _equal_means_p(u: FloatArray, v: FloatArray) -> float:
    """Two-sided p of equal means of two windows of one series, on effective sample sizes."""
    du, dv = u - np.mean(u), v - np.mean(v)
    ss = float(np.dot(du, du) + np.dot(dv, dv))
    if u.size < 3 or v.size < 3 or not ss > 0:
        return 1.0
    lag1 = float(np.dot(du[1:], du[:-1]) + np.dot(dv[1:], dv[:-1])) / ss
    # the lag-1 autocorrelation of a short demeaned window is biased low by about (1 + 3 phi) / k
    # (Kendall 1954); the correction keeps the test near its level on persistent series
    phi = min(max(lag1 + (1.0 + 3.0 * lag1) / min(u.size, v.size), 0.0), 0.95)
    shrink = (1.0 - phi) / (1.0 + phi)
    nu, nv = max(2.0, u.size * shrink), max(2.0, v.size * shrink)
    su, sv = float(np.var(u, ddof=1)) / nu, float(np.var(v, ddof=1)) / nv
    if not su + sv > 0:
        return 1.0
    t = (float(np.mean(v)) - float(np.mean(u))) / np.sqrt(su + sv)
    df = (su + sv) ** 2 / (su**2 / (nu - 1.0) + sv**2 / (nv - 1.0))
    return float(min(1.0, 2.0 * stats.t.sf(abs(t), df)))


@primitive(
    group="summary",
    outputs=(
        "argmax",
        "argmin",
        "argmax_frac",
        "argmin_frac",
        "max_z",
        "min_z",
        "argmax_third",
        "argmin_third",
    ),
)
@guarded
def extremes(y: Any) -> Result:
    """Where the maximum and minimum are (index and fraction of length) and how extreme (robust z).

    Returns:
        ``argmax``/``argmin`` (first index), ``argmax_frac``/``argmin_frac`` (index / (n - 1)),
        ``max_z``/``min_z`` ((value - median) / robust scale), ``argmax_third``/``argmin_third``
        (0, 1 or 2: which third of the series holds the extremum). ``None`` for a constant series.
    """
    x = as_series(y, 3)
    if x is None or is_flat(x):
        return None
    n = x.size
    i_max = int(np.argmax(x))
    i_min = int(np.argmin(x))
    med = float(np.median(x))
    s = robust_scale(x)
    return finish(
        {
            "argmax": i_max,
            "argmin": i_min,
            "argmax_frac": i_max / (n - 1),
            "argmin_frac": i_min / (n - 1),
            "max_z": (float(x[i_max]) - med) / s,
            "min_z": (float(x[i_min]) - med) / s,
            "argmax_third": min(2, 3 * i_max // n),
            "argmin_third": min(2, 3 * i_min // n),
        }
    )


@primitive(
    group="summary",
    outputs=(
        "crossings",
        "crossing_rate",
        "frac_above",
        "longest_above_frac",
        "longest_below_frac",
    ),
    grid={"q": (0.25, 0.5, 0.75)},
)
@guarded
def level_crossings(y: Any, *, q: float = 0.5) -> Result:
    """Crossings of the q-quantile level: count, rate per sample, time above, longest runs (fractions).

    Args:
        y: Series.
        q: Quantile that defines the level, in (0, 1).

    Returns:
        ``crossings`` (count of sign changes of y - level, ignoring samples exactly on it),
        ``crossing_rate`` (crossings / (n - 1)), ``frac_above`` (fraction of samples above),
        ``longest_above_frac`` and ``longest_below_frac`` (longest run / n). ``None`` if constant.
    """
    x = as_series(y, 3)
    if x is None or not (0.0 < q < 1.0) or is_flat(x):
        return None
    level = float(np.quantile(x, q))
    sign = np.sign(x - level)
    nz = sign[sign != 0]
    crossings = int(np.count_nonzero(nz[1:] != nz[:-1])) if nz.size > 1 else 0
    return finish(
        {
            "crossings": crossings,
            "crossing_rate": crossings / (x.size - 1),
            "frac_above": float(np.mean(sign > 0)),
            "longest_above_frac": _longest_run(sign > 0) / x.size,
            "longest_below_frac": _longest_run(sign < 0) / x.size,
        }
    )


def _longest_run(mask: np.ndarray) -> int:
    """Length of the longest run of True values."""
    if not mask.any():
        return 0
    m = np.concatenate(([0], mask.astype(np.int8), [0]))
    d = np.diff(m)
    starts = np.flatnonzero(d == 1)
    ends = np.flatnonzero(d == -1)
    return int(np.max(ends - starts))
