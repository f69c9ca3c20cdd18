"""Comparison of two windows of one series, moments over k windows, rolling drift (group ``window``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from ._common import (
    Result,
    as_series,
    finish,
    guarded,
    is_flat,
    linfit,
    mad_sigma,
    resolve_width,
    resolve_window,
    robust_scale,
)
from ._registry import primitive

__all__ = ["rolling_profile", "window_compare", "window_moments"]


def _p(v: Any) -> float:
    """A p-value, 1.0 when undefined (e.g. both windows constant)."""
    f = float(v)
    return min(1.0, max(0.0, f)) if np.isfinite(f) else 1.0


@primitive(
    group="window",
    outputs=(
        "level_gap_sigma",
        "mean_diff",
        "log_var_ratio",
        "log_mad_ratio",
        "log_diff_sd_ratio",
        "ks_stat",
        "ks_p",
        "mw_auc",
        "mw_p",
        "levene_p",
    ),
    grid={"split": (0.25, 0.5, 0.75)},
)
@guarded
def window_compare(
    y: Any,
    *,
    a: int | float | None = None,
    b: int | float | None = None,
    c: int | float | None = None,
    d: int | float | None = None,
    split: float = 0.5,
) -> Result:
    """Window 2 = y[c:d] vs window 1 = y[a:b]: level gap in pooled sigma, log variance ratio, tests.

    Bounds are int indices (negative from the end) or float fractions in [0, 1]. Missing bounds
    default to window 1 = [0, split) and window 2 = [split, 1) (fractions). Each window needs at
    least 3 samples. The pooled standard deviation is floored at max(1e-3 * std(y), 1e-12).

    Args:
        y: Series.
        a: Window 1 start.
        b: Window 1 end (exclusive).
        c: Window 2 start.
        d: Window 2 end (exclusive).
        split: Default boundary (fraction) when the bounds are not given.

    Returns:
        ``level_gap_sigma`` ((mean2 - mean1) / pooled sd), ``mean_diff`` (units of y),
        ``log_var_ratio`` (log var2 / var1) and ``log_mad_ratio`` (log MAD2 / MAD1), both with the
        floor added to numerator and denominator; ``log_diff_sd_ratio`` (log sd of first differences,
        window 2 over window 1: volatility that a slow level drift inside a window does not
        inflate); ``ks_stat``/``ks_p`` (two-sample KS); ``mw_auc``
        (P(window2 > window1), ties count half) and ``mw_p`` (Mann-Whitney, asymptotic);
        ``levene_p`` (Brown-Forsythe, median-centred). Undefined p-values are 1.0.
    """
    x = as_series(y, 6)
    if x is None or not (0.0 < float(split) < 1.0):
        return None
    n = x.size
    sp = float(split)
    w1 = resolve_window(n, a if a is not None else 0.0, b if b is not None else sp, min_len=3)
    w2 = resolve_window(n, c if c is not None else sp, d if d is not None else 1.0, min_len=3)
    if w1 is None or w2 is None:
        return None
    s1 = x[w1[0] : w1[1]]
    s2 = x[w2[0] : w2[1]]
    n1, n2 = s1.size, s2.size
    v1, v2 = float(np.var(s1, ddof=1)), float(np.var(s2, ddof=1))
    floor = max(1e-3 * float(np.std(x)), 1e-12)
    pooled = max(float(np.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2))), floor)
    diff = float(np.mean(s2) - np.mean(s1))
    f2 = floor * floor
    d1, d2 = float(np.std(np.diff(s1))), float(np.std(np.diff(s2)))
    const = is_flat(np.concatenate((s1, s2)))
    if const:
        ks_stat, ks_p, auc, mw_p, lev_p = 0.0, 1.0, 0.5, 1.0, 1.0
    else:
        ks = stats.ks_2samp(s2, s1)
        ks_stat, ks_p = float(ks.statistic), _p(ks.pvalue)
        mw = stats.mannwhitneyu(s2, s1, alternative="two-sided", method="asymptotic")
        auc, mw_p = float(mw.statistic) / (n1 * n2), _p(mw.pvalue)
        lev_p = _p(stats.levene(s1, s2, center="median").pvalue)
    return finish(
        {
            "level_gap_sigma": diff / pooled,
            "mean_diff": diff,
            "log_var_ratio": float(np.log((v2 + f2) / (v1 + f2))),
            "log_mad_ratio": float(np.log((mad_sigma(s2) + floor) / (mad_sigma(s1) + floor))),
            "log_diff_sd_ratio": float(np.log((d2 + floor) / (d1 + floor))),
            "ks_stat": ks_stat,
            "ks_p": ks_p,
            "mw_auc": auc,
            "mw_p": mw_p,
            "levene_p": lev_p,
        }
    )


@primitive(
    group="window",
    outputs=(
        "mean_range_sigma",
        "log_std_range",
        "max_jump_sigma",
        "jump_loc_frac",
        "std_trend",
    ),
    grid={"w": (0.05, 0.1, 0.2)},
)
@guarded
def rolling_profile(y: Any, *, w: int | float = 0.1) -> Result:
    """Drift of the rolling mean (robust sigma) and rolling std (log units) over windows of ``w``.

    Args:
        y: Series.
        w: Rolling window: int samples or float fraction of the length (>= 3 samples, <= n / 2).

    Returns:
        ``mean_range_sigma`` (range of the rolling mean / robust scale of y), ``log_std_range``
        (log max/min rolling std, floored), ``max_jump_sigma`` (largest |difference| between the
        means of two adjacent non-overlapping windows / robust scale), ``jump_loc_frac`` (boundary
        of that pair / n), ``std_trend`` (Spearman correlation of the rolling std with time; 0 when
        undefined).
    """
    x = as_series(y, 8)
    if x is None or is_flat(x):
        return None
    n = x.size
    L = resolve_width(n, w, minimum=3, maximum=n // 2)
    if L is None:
        return None
    c1 = np.concatenate(([0.0], np.cumsum(x - np.mean(x))))
    c2 = np.concatenate(([0.0], np.cumsum((x - np.mean(x)) ** 2)))
    m = (c1[L:] - c1[:-L]) / L
    v = np.maximum((c2[L:] - c2[:-L]) / L - m * m, 0.0)
    s = robust_scale(x)
    floor = (1e-3 * float(np.std(x))) ** 2 + 1e-24
    jumps = np.abs(m[L:] - m[:-L])
    j = int(np.argmax(jumps))
    rho = stats.spearmanr(np.arange(v.size), v).statistic if not is_flat(v) else 0.0
    return finish(
        {
            "mean_range_sigma": float(np.ptp(m)) / s,
            "log_std_range": 0.5 * float(np.log((np.max(v) + floor) / (np.min(v) + floor))),
            "max_jump_sigma": float(jumps[j]) / s,
            "jump_loc_frac": (j + L) / n,
            "std_trend": float(rho) if np.isfinite(rho) else 0.0,
        }
    )


@primitive(
    group="window",
    outputs=(
        "mean_slope_sigma",
        "mean_range_sigma",
        "log_std_slope",
        "log_std_range",
        "std_cv",
        "anova_p",
        "levene_p",
    ),
    grid={"n_windows": (2, 3, 5, 10)},
)
@guarded
def window_moments(y: Any, *, n_windows: int = 4) -> Result:
    """First two moments over k consecutive windows: drift of the mean and of the spread, with tests.

    A check of weak (covariance) stationarity: y is cut into ``n_windows`` windows of (nearly)
    equal length; their means are compared by one-way ANOVA (Fisher's F) and their spreads by the
    Brown-Forsythe test (Levene's test about the median, Brown and Forsythe 1974). Both tests assume
    independent samples, so serial correlation makes their p-values too small.

    Args:
        y: Series.
        n_windows: Number of windows k (2..50, at least 3 samples each).

    Returns:
        ``mean_slope_sigma`` (OLS slope of the window means over window index, times k - 1, over
        the pooled within-window sd: the drift of the mean across the series), ``mean_range_sigma``
        (range of the window means over the pooled sd), ``log_std_slope`` (the same slope for the
        log window sd: > 0 when the spread grows), ``log_std_range`` (log max / min window sd),
        ``std_cv`` (coefficient of variation of the window sds), ``anova_p``, ``levene_p``
        (1.0 when undefined, e.g. constant windows). The pooled sd is floored at
        max(1e-3 std(y), 1e-12).
    """
    x = as_series(y, 6)
    k = int(n_windows)
    if x is None or not (2 <= k <= 50) or x.size < 3 * k:
        return None
    wins = np.array_split(x, k)
    m = np.array([float(np.mean(w)) for w in wins])
    s = np.array([float(np.std(w, ddof=1)) for w in wins])
    floor = max(1e-3 * float(np.std(x)), 1e-12)
    sp = max(float(np.sqrt(np.mean(s * s))), floor)
    idx = np.arange(k, dtype=np.float64)
    ls = np.log(s + floor)
    const = is_flat(x)
    anova_p = 1.0 if const or all(is_flat(w) for w in wins) else _p(stats.f_oneway(*wins).pvalue)
    lev_p = 1.0 if const else _p(stats.levene(*wins, center="median").pvalue)
    return finish(
        {
            "mean_slope_sigma": linfit(idx, m)[0] * (k - 1) / sp,
            "mean_range_sigma": float(np.ptp(m)) / sp,
            "log_std_slope": linfit(idx, ls)[0] * (k - 1),
            "log_std_range": float(np.ptp(ls)),
            "std_cv": float(np.std(s) / max(float(np.mean(s)), floor)),
            "anova_p": anova_p,
            "levene_p": lev_p,
        }
    )
