"""Two-series relations: cross-correlation lag, Granger F, correlations, level/spread comparison.

Groups ``lag``, ``causality``, ``correlation``, ``comparison``. Series of different lengths are
truncated to the common prefix length unless a primitive says otherwise.
"""

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
    resolve_width,
    zscore,
)
from ._registry import primitive

__all__ = ["correlation", "granger", "pair_compare", "xcorr"]


def _pair(a: Any, b: Any, min_len: int) -> tuple[FloatArray, FloatArray] | None:
    x = as_series(a, min_len)
    y = as_series(b, min_len)
    if x is None or y is None:
        return None
    m = min(x.size, y.size)
    return x[:m], y[:m]


@primitive(
    group="lag",
    arity="pair",
    outputs=("best_lag", "peak_corr", "abs_best_lag", "abs_peak_corr", "corr_at_zero", "lag_sign"),
    grid={"max_lag": (0.1, 0.25, 0.5), "diff": (False, True)},
)
@guarded
def xcorr(a: Any, b: Any, *, max_lag: int | float = 0.25, diff: bool = False) -> Result:
    """Lag (samples) maximizing the cross-correlation; positive lag = b lags a (b[t] ~ a[t - lag]).

    Both series are truncated to the common length, optionally differenced, z-scored; the biased
    cross-correlation r(k) = sum_t a[t] b[t + k] / n is computed by FFT for |k| <= max_lag.
    Swapping a and b negates the lags.

    Args:
        a: First series (the leader for positive lags).
        b: Second series.
        max_lag: Largest |lag|: int samples or float fraction of the common length.
        diff: Correlate first differences (removes shared trends).

    Returns:
        ``best_lag`` (argmax of r), ``peak_corr``, ``abs_best_lag`` (argmax of |r|),
        ``abs_peak_corr`` (signed r there), ``corr_at_zero``, ``lag_sign`` (sign of best_lag).
    """
    p = _pair(a, b, 8)
    if p is None:
        return None
    x, y = p
    if diff:
        x, y = np.diff(x), np.diff(y)
    n = x.size
    L = resolve_width(n, max_lag, minimum=0, maximum=n - 2)
    zx, zy = zscore(x), zscore(y)
    if L is None or zx is None or zy is None:
        return None
    nfft = 1 << int(np.ceil(np.log2(2 * n)))
    cc = np.fft.irfft(np.conj(np.fft.rfft(zx, nfft)) * np.fft.rfft(zy, nfft), nfft) / n
    lags = np.arange(-L, L + 1)
    r = cc[lags % nfft]
    order = np.lexsort((lags, np.abs(lags), -r))
    i = int(order[0])
    order_abs = np.lexsort((lags, np.abs(lags), -np.abs(r)))
    j = int(order_abs[0])
    return finish(
        {
            "best_lag": int(lags[i]),
            "peak_corr": float(r[i]),
            "abs_best_lag": int(lags[j]),
            "abs_peak_corr": float(r[j]),
            "corr_at_zero": float(r[L]),
            "lag_sign": int(np.sign(lags[i])),
        }
    )


def _rss_lagged(target: FloatArray, regs: list[FloatArray], p: int) -> tuple[float, int]:
    n = target.size
    cols = [np.ones(n - p)]
    for r in regs:
        cols += [r[p - i : n - i] for i in range(1, p + 1)]
    X = np.column_stack(cols)
    yv = target[p:]
    coef, _, rank, _ = np.linalg.lstsq(X, yv, rcond=None)
    if rank < X.shape[1]:
        raise ValueError("singular design")
    e = yv - X @ coef
    return float(e @ e), X.shape[1]


def _granger_one(cause: FloatArray, effect: FloatArray, p: int) -> tuple[float, float]:
    rss_r, _ = _rss_lagged(effect, [effect], p)
    rss_u, k = _rss_lagged(effect, [effect, cause], p)
    dfd = effect.size - p - k
    if dfd < 1 or not rss_u > 1e-12 * max(rss_r, 1e-300):
        raise ValueError("degenerate Granger regression")
    f = max(0.0, ((rss_r - rss_u) / p) / (rss_u / dfd))
    return f, float(stats.f.sf(f, p, dfd))


@primitive(
    group="causality",
    arity="pair",
    outputs=("f_a_to_b", "p_a_to_b", "f_b_to_a", "p_b_to_a", "log_f_ratio"),
    grid={"lag": (1, 2, 5, 10)},
)
@guarded
def granger(a: Any, b: Any, *, lag: int = 2, diff: bool = False) -> Result:
    """Granger causality F statistics (F units) and p-values in both directions with ``lag`` lags.

    ``a -> b``: does adding a's past to an AR(lag) model of b reduce the residual sum of squares?

    Args:
        a: First series.
        b: Second series (truncated to the common length).
        lag: Number of lags (1..20, and n > 4 lag + 4).
        diff: Test first differences (for trending series).

    Returns:
        ``f_a_to_b``, ``p_a_to_b``, ``f_b_to_a``, ``p_b_to_a``, ``log_f_ratio``
        (log((f_a_to_b + 1) / (f_b_to_a + 1)); > 0 means a -> b is the stronger direction).
    """
    pr = _pair(a, b, 10)
    if pr is None:
        return None
    x, y = pr
    if diff:
        x, y = np.diff(x), np.diff(y)
    p = int(lag)
    if not (1 <= p <= 20) or x.size <= 4 * p + 4:
        return None
    zx, zy = zscore(x), zscore(y)
    if zx is None or zy is None:
        return None
    f_ab, p_ab = _granger_one(zx, zy, p)
    f_ba, p_ba = _granger_one(zy, zx, p)
    return finish(
        {
            "f_a_to_b": f_ab,
            "p_a_to_b": p_ab,
            "f_b_to_a": f_ba,
            "p_b_to_a": p_ba,
            "log_f_ratio": float(np.log((f_ab + 1.0) / (f_ba + 1.0))),
        }
    )


@primitive(
    group="correlation",
    arity="pair",
    outputs=("pearson", "pearson_p", "spearman", "kendall", "diff_pearson", "detrended_pearson"),
)
@guarded
def correlation(a: Any, b: Any) -> Result:
    """Correlations of a and b (unitless, [-1, 1]): raw, rank, of first differences, after detrending.

    Returns:
        ``pearson`` and ``pearson_p``, ``spearman``, ``kendall``, ``diff_pearson`` (of first
        differences; 0 when a difference is constant), ``detrended_pearson`` (of residuals from
        least-squares lines; 0 when a residual is constant). ``None`` when a or b is constant.
    """
    pr = _pair(a, b, 4)
    if pr is None:
        return None
    x, y = pr
    if is_flat(x) or is_flat(y):
        return None
    pe = stats.pearsonr(x, y)
    dx, dy = np.diff(x), np.diff(y)
    t = np.arange(x.size, dtype=np.float64)
    rx = x - np.polyval(np.polyfit(t, x, 1), t)
    ry = y - np.polyval(np.polyfit(t, y, 1), t)

    def _c(u: FloatArray, v: FloatArray) -> float:
        zu, zv = zscore(u), zscore(v)
        return 0.0 if zu is None or zv is None else float(np.clip(np.mean(zu * zv), -1, 1))

    return finish(
        {
            "pearson": float(pe.statistic),
            "pearson_p": float(pe.pvalue),
            "spearman": float(stats.spearmanr(x, y).statistic),
            "kendall": float(stats.kendalltau(x, y).statistic),
            "diff_pearson": _c(dx, dy),
            "detrended_pearson": _c(rx, ry),
        }
    )


@primitive(
    group="comparison",
    arity="pair",
    outputs=(
        "mean_gap_sigma",
        "log_std_ratio",
        "log_range_ratio",
        "slope_gap_sigma",
        "log_roughness_ratio",
        "frac_b_above",
    ),
)
@guarded
def pair_compare(a: Any, b: Any) -> Result:
    """Which of two series is higher, more variable, steeper, rougher: b relative to a, in pooled sigma.

    Uses each full series (lengths may differ). Pooled sigma = sqrt((var a + var b) / 2), floored at
    max(1e-3 * max std, 1e-12); log ratios floor both terms at the same value.

    Returns:
        ``mean_gap_sigma`` ((mean b - mean a) / pooled), ``log_std_ratio`` (log std b / std a),
        ``log_range_ratio``, ``slope_gap_sigma`` ((OLS slope b - slope a) per sample x mean length /
        pooled), ``log_roughness_ratio`` (log std of first differences, b over a),
        ``frac_b_above`` (fraction of the common prefix where b > a).
    """
    x = as_series(a, 4)
    y = as_series(b, 4)
    if x is None or y is None:
        return None
    sa, sb = float(np.std(x)), float(np.std(y))
    fl = max(1e-3 * max(sa, sb), 1e-12)
    pooled = max(float(np.sqrt((sa * sa + sb * sb) / 2.0)), fl)
    ka, _, _, _ = linfit(np.arange(x.size, dtype=np.float64), x)
    kb, _, _, _ = linfit(np.arange(y.size, dtype=np.float64), y)
    m = min(x.size, y.size)
    L = (x.size + y.size) / 2.0
    return finish(
        {
            "mean_gap_sigma": float(np.mean(y) - np.mean(x)) / pooled,
            "log_std_ratio": float(np.log(max(sb, fl) / max(sa, fl))),
            "log_range_ratio": float(np.log(max(float(np.ptp(y)), fl) / max(float(np.ptp(x)), fl))),
            "slope_gap_sigma": (kb - ka) * L / pooled,
            "log_roughness_ratio": float(
                np.log(max(float(np.std(np.diff(y))), fl) / max(float(np.std(np.diff(x))), fl))
            ),
            "frac_b_above": float(np.mean(y[:m] > x[:m])),
        }
    )
