"""Robust trend: Theil-Sen, Mann-Kendall, OLS, per-window slopes, monotonicity (group ``trend``)."""

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
    linfit,
    resolve_window,
    robust_scale,
)
from ._registry import primitive

__all__ = ["monotonicity", "theil_sen", "trend", "trend_windows"]

_MAX_TS_POINTS = 600


def theil_sen(x: FloatArray) -> tuple[float, float, float, float]:
    """Theil-Sen slope with a 95% interval: (slope, intercept, lo, hi), slope in units per sample.

    For more than 600 samples the pairwise slopes are taken among 600 evenly spaced samples
    (deterministic thinning, O(600^2) instead of O(n^2)).
    """
    n = x.size
    if n > _MAX_TS_POINTS:
        idx = np.unique(np.round(np.linspace(0, n - 1, _MAX_TS_POINTS)).astype(np.int64))
    else:
        idx = np.arange(n)
    t = idx.astype(np.float64)
    v = x[idx]
    i, j = np.triu_indices(idx.size, k=1)
    slopes = np.sort((v[j] - v[i]) / (t[j] - t[i]))
    slope = float(np.median(slopes))
    m = slopes.size
    # Sen (1968) interval from the normal approximation of Kendall's S (no tie correction).
    k = idx.size
    var_s = k * (k - 1) * (2 * k + 5) / 18.0
    c = 1.959963984540054 * np.sqrt(var_s)
    lo_i = int(np.clip(np.floor((m - c) / 2.0), 0, m - 1))
    hi_i = int(np.clip(np.ceil((m + c) / 2.0), 0, m - 1))
    intercept = float(np.median(x) - slope * (n - 1) / 2.0)
    return slope, intercept, float(slopes[lo_i]), float(slopes[hi_i])


@primitive(
    group="trend",
    outputs=(
        "slope",
        "intercept",
        "slope_lo",
        "slope_hi",
        "kendall_tau",
        "mk_p",
        "ols_slope",
        "ols_r2",
        "slope_sigma_per_window",
        "slope_sigma_per_sample",
        "direction",
    ),
    grid={"a": (None, 0.0, 0.5), "b": (None, 0.5, 1.0)},
)
@guarded
def trend(y: Any, *, a: int | float | None = None, b: int | float | None = None) -> Result:
    """Trend of y[a:b]: Theil-Sen slope in units of y per sample and in robust sigma per window.

    Args:
        y: Series.
        a: Window start (int index or float fraction; default 0).
        b: Window end, exclusive (int index or float fraction; default the length).

    Returns:
        ``slope``/``intercept``/``slope_lo``/``slope_hi`` (Theil-Sen with a 95% interval, units of y
        per sample, intercept at the window start), ``kendall_tau`` and ``mk_p`` (Mann-Kendall: tau
        of y against time and its two-sided p), ``ols_slope`` and ``ols_r2``,
        ``slope_sigma_per_window`` (slope * window length / robust scale of the detrended window),
        ``slope_sigma_per_sample``, ``direction`` (+1 / -1 when mk_p < 0.05, else 0).
        ``None`` for fewer than 4 samples or a constant window.
    """
    x = as_series(y)
    if x is None:
        return None
    w = resolve_window(x.size, a, b, min_len=4)
    if w is None:
        return None
    s = x[w[0] : w[1]]
    if is_flat(s):
        return None
    n = s.size
    t = np.arange(n, dtype=np.float64)
    slope, intercept, lo, hi = theil_sen(s)
    tau, p = stats.kendalltau(t, s)
    ols_slope, _, _, r2 = linfit(t, s)
    resid = s - (intercept + slope * t)
    scale = max(robust_scale(resid), 1e-3 * float(np.std(s)))
    p = float(p) if np.isfinite(p) else 1.0
    tau = float(tau) if np.isfinite(tau) else 0.0
    return finish(
        {
            "slope": slope,
            "intercept": intercept,
            "slope_lo": lo,
            "slope_hi": hi,
            "kendall_tau": tau,
            "mk_p": p,
            "ols_slope": ols_slope,
            "ols_r2": r2,
            "slope_sigma_per_window": slope * n / scale,
            "slope_sigma_per_sample": slope / scale,
            "direction": int(np.sign(tau)) if p < 0.05 else 0,
        }
    )


@primitive(
    group="trend",
    outputs=(
        "n_windows",
        "first_slope_sigma",
        "last_slope_sigma",
        "max_slope_sigma",
        "min_slope_sigma",
        "slope_spread_sigma",
        "sign_changes",
        "argmax_slope_frac",
        "argmin_slope_frac",
    ),
    grid={"n_windows": (2, 3, 4, 6)},
)
@guarded
def trend_windows(y: Any, *, n_windows: int = 4) -> Result:
    """OLS slope in each of n_windows equal windows, in robust sigma of y per window length.

    Args:
        y: Series.
        n_windows: Number of consecutive equal windows (2..32); each needs at least 3 samples.

    Returns:
        ``first_slope_sigma``, ``last_slope_sigma``, ``max_slope_sigma``, ``min_slope_sigma``,
        ``slope_spread_sigma`` (max - min), ``sign_changes`` (direction changes between consecutive
        windows whose slope exceeds 0.5 sigma per window), ``argmax_slope_frac`` and
        ``argmin_slope_frac`` (window centre / n). Extra array ``slopes_sigma``.
    """
    x = as_series(y)
    if x is None or not (2 <= int(n_windows) <= 32) or is_flat(x):
        return None
    k = int(n_windows)
    n = x.size
    if n < 3 * k:
        return None
    edges = np.round(np.linspace(0, n, k + 1)).astype(np.int64)
    s = robust_scale(np.diff(x)) / np.sqrt(2.0)
    s = max(s, 1e-3 * float(np.std(x)), 1e-12)
    slopes = np.empty(k)
    for i in range(k):
        seg = x[edges[i] : edges[i + 1]]
        sl, _, _, _ = linfit(np.arange(seg.size, dtype=np.float64), seg)
        slopes[i] = sl * seg.size / s
    signs = np.sign(slopes[np.abs(slopes) > 0.5])
    centres = (edges[:-1] + edges[1:]) / 2.0 / n
    return finish(
        {
            "n_windows": k,
            "first_slope_sigma": slopes[0],
            "last_slope_sigma": slopes[-1],
            "max_slope_sigma": float(np.max(slopes)),
            "min_slope_sigma": float(np.min(slopes)),
            "slope_spread_sigma": float(np.ptp(slopes)),
            "sign_changes": int(np.count_nonzero(signs[1:] != signs[:-1])) if signs.size > 1 else 0,
            "argmax_slope_frac": float(centres[int(np.argmax(slopes))]),
            "argmin_slope_frac": float(centres[int(np.argmin(slopes))]),
        },
        {"slopes_sigma": slopes},
    )


@primitive(
    group="trend",
    outputs=(
        "frac_up",
        "frac_down",
        "frac_flat",
        "spearman_rho",
        "longest_up_frac",
        "longest_down_frac",
    ),
)
@guarded
def monotonicity(y: Any) -> Result:
    """How monotone y is: fractions of rising/falling steps and Spearman rho with time (unitless).

    A step counts as flat when |diff| <= 1e-3 * robust scale of the diffs.

    Returns:
        ``frac_up``, ``frac_down``, ``frac_flat`` (fractions of the n - 1 steps), ``spearman_rho``
        (rank correlation with time; 0 for a constant series), ``longest_up_frac`` and
        ``longest_down_frac`` (longest run of rising / falling steps over n - 1).
    """
    x = as_series(y, 3)
    if x is None:
        return None
    d = np.diff(x)
    tol = 1e-3 * max(robust_scale(d), 1e-3 * float(np.std(x))) if not is_flat(x) else np.inf
    up = d > tol
    down = d < -tol
    m = d.size
    rho = 0.0
    if not is_flat(x):
        r = stats.spearmanr(np.arange(x.size), x).statistic
        rho = float(r) if np.isfinite(r) else 0.0
    return finish(
        {
            "frac_up": float(np.mean(up)),
            "frac_down": float(np.mean(down)),
            "frac_flat": float(1.0 - np.mean(up) - np.mean(down)),
            "spearman_rho": rho,
            "longest_up_frac": _run(up) / m,
            "longest_down_frac": _run(down) / m,
        }
    )


def _run(mask: np.ndarray) -> int:
    if not mask.any():
        return 0
    z = np.concatenate(([0], mask.astype(np.int8), [0]))
    d = np.diff(z)
    return int(np.max(np.flatnonzero(d == -1) - np.flatnonzero(d == 1)))
