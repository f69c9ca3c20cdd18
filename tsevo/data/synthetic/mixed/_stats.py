"""Small numpy statistics the ``mixed`` kinds certify their gold with (never the primitives catalog).

Each is cheap (the preset draws several thousand candidate items in a few seconds) and reads only
the finished series; the families' own statistics are imported where one already exists.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .._base import FloatArray, detrend, dominant_period, mad_sigma, ols

__all__ = [
    "acf",
    "corr",
    "df_rho_detrended",
    "flat_run",
    "granger_f",
    "kurtosis",
    "lagged_corr",
    "local_roughness",
    "max_window_gap",
    "moving_average",
    "pacf2",
    "sine_fit",
    "skew",
    "snr_db",
    "spectral_peak_ratio",
    "trend_z",
    "vol_log_range",
    "window_t",
]


def trend_z(y: FloatArray) -> float:
    """OLS change over the whole series in units of the residual standard deviation."""
    slope, _, resid = ols(y)
    return slope * (y.size - 1) / max(resid, 1e-12)


def acf(y: FloatArray, k: int) -> FloatArray:
    """Sample autocorrelations at lags 1..k (biased estimator)."""
    x = y - y.mean()
    den = max(float((x * x).sum()), 1e-12)
    out: FloatArray = np.array([(x[j:] * x[: x.size - j]).sum() / den for j in range(1, k + 1)])
    return out


def pacf2(y: FloatArray) -> float:
    """Partial autocorrelation at lag 2 (Durbin-Levinson from the first two autocorrelations)."""
    r1, r2 = acf(y, 2)
    return float((r2 - r1 * r1) / max(1.0 - r1 * r1, 1e-12))


def corr(a: FloatArray, b: FloatArray) -> float:
    """Pearson correlation (0 when either is constant)."""
    sa, sb = float(a.std()), float(b.std())
    if sa < 1e-12 or sb < 1e-12:
        return 0.0
    return float(((a - a.mean()) * (b - b.mean())).mean() / (sa * sb))


def lagged_corr(a: FloatArray, b: FloatArray, max_lag: int) -> tuple[float, int]:
    """Best Pearson correlation of ``a[t]`` with ``b[t + k]`` over ``|k| <= max_lag``, and its k."""
    n = min(a.size, b.size)
    a, b = a[:n], b[:n]
    ks = np.arange(-max_lag, max_lag + 1)
    m = n - np.abs(ks)  # overlap length per lag
    cross = np.correlate(b, a, mode="full")[n - 1 + ks]  # sum_t a[t] b[t + k]
    ca, cb = np.r_[0.0, np.cumsum(a)], np.r_[0.0, np.cumsum(b)]
    qa, qb = np.r_[0.0, np.cumsum(a * a)], np.r_[0.0, np.cumsum(b * b)]
    a_lo, a_hi = np.maximum(-ks, 0), n - np.maximum(ks, 0)  # a's segment
    b_lo, b_hi = np.maximum(ks, 0), n - np.maximum(-ks, 0)  # b's segment
    sa, sb = ca[a_hi] - ca[a_lo], cb[b_hi] - cb[b_lo]
    va = qa[a_hi] - qa[a_lo] - sa * sa / m
    vb = qb[b_hi] - qb[b_lo] - sb * sb / m
    c = (cross - sa * sb / m) / np.sqrt(np.maximum(va * vb, 1e-24))
    j = int(np.argmax(c))
    return float(c[j]), int(ks[j])


def moving_average(y: FloatArray, w: int) -> FloatArray:
    """Centered moving average of odd width ``w`` (edges repeated)."""
    h = w // 2
    out: FloatArray = sliding_window_view(np.pad(y, h, mode="edge"), 2 * h + 1).mean(axis=1)
    return out


def skew(x: FloatArray) -> float:
    """Sample skewness."""
    d = x - x.mean()
    s = max(float(d.std()), 1e-12)
    return float((d**3).mean() / s**3)


def kurtosis(x: FloatArray) -> float:
    """Sample kurtosis (non-excess: 3 for a Gaussian)."""
    d = x - x.mean()
    s = max(float(d.std()), 1e-12)
    return float((d**4).mean() / s**4)


def spectral_peak_ratio(y: FloatArray) -> float:
    """Highest periodogram value over the median one, at periods from 3 samples to a third of n."""
    x = detrend(y)
    n = x.size
    power = np.abs(np.fft.rfft(x, 4 * n)) ** 2
    freqs = np.fft.rfftfreq(4 * n)
    ok = (freqs >= 3.0 / n) & (freqs <= 1.0 / 3.0)
    p = power[ok]
    return float(p.max() / max(float(np.median(p)), 1e-12))


def sine_fit(y: FloatArray, period: float | None = None) -> tuple[FloatArray, FloatArray, float]:
    """Least-squares line plus sinusoid at the dominant period: (fit, residual, amplitude)."""
    n = y.size
    p = dominant_period(y) if period is None else period
    t = np.arange(n, dtype=np.float64)
    w = 2 * np.pi * t / p
    X = np.column_stack([np.ones(n), t / n, np.sin(w), np.cos(w)])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    fit: FloatArray = X @ coef
    return fit, y - fit, float(np.hypot(coef[2], coef[3]))


def snr_db(y: FloatArray) -> float:
    """SNR in dB of a sinusoid in noise: fitted sinusoid power over residual power."""
    _, resid, amp = sine_fit(y)
    return float(10.0 * np.log10(max(amp * amp / 2.0, 1e-12) / max(float(resid.var()), 1e-12)))


def flat_run(y: FloatArray) -> tuple[int, int]:
    """Longest run of exactly equal consecutive values: (number of values, start index)."""
    z = np.r_[0, (np.diff(y) == 0).astype(np.int8), 0]
    edges = np.flatnonzero(np.diff(z))
    if edges.size == 0:
        return 1, 0
    starts, ends = edges[0::2], edges[1::2]
    j = int(np.argmax(ends - starts))
    return int(ends[j] - starts[j]) + 1, int(starts[j])


def max_window_gap(y: FloatArray, w: int) -> tuple[float, int]:
    """Largest gap between the means of adjacent windows of width ``w``, in robust noise units.

    Returns the gap (absolute value) and the index where the later window starts.
    """
    c = np.r_[0.0, np.cumsum(y)]
    means = (c[w:] - c[:-w]) / w
    gaps = means[w:] - means[:-w]
    sigma = mad_sigma(np.diff(y)) / np.sqrt(2.0)
    j = int(np.argmax(np.abs(gaps)))
    return float(abs(gaps[j]) / sigma), j + w


def local_roughness(y: FloatArray, w: int) -> tuple[float, int]:
    """Highest windowed median |first difference| over the median over windows, and where."""
    d = np.abs(np.diff(y))
    med = np.median(sliding_window_view(d, w), axis=1)
    j = int(np.argmax(med))
    return float(med[j] / max(float(np.median(med)), 1e-12)), j


def vol_log_range(y: FloatArray, w: int = 24) -> float:
    """Log of the highest over the lowest windowed RMS first difference.

    Each window leaves out its largest squared difference, so one jump does not count as
    volatility.
    """
    v = sliding_window_view(np.diff(y) ** 2, w)
    ms = (v.sum(axis=1) - v.max(axis=1)) / (w - 1)
    return float(0.5 * np.log(max(float(ms.max()), 1e-24) / max(float(ms.min()), 1e-24)))


def window_t(y: FloatArray, w: int = 16) -> float:
    """Largest t statistic between the means of adjacent windows of width ``w``."""
    v = sliding_window_view(y, w)
    m, s = v.mean(axis=1), v.var(axis=1)
    t = np.abs(m[w:] - m[:-w]) / np.sqrt(np.maximum((s[w:] + s[:-w]) / w, 1e-24))
    return float(t.max())


def df_rho_detrended(y: FloatArray) -> float:
    """Dickey-Fuller rho ``n (phi_hat - 1)`` of the series after removing an OLS line."""
    x = detrend(y)
    a, b = x[:-1], x[1:]
    phi = float((a * b).sum() / max(float((a * a).sum()), 1e-12))
    return (y.size - 1) * (phi - 1.0)


def granger_f(x: FloatArray, y: FloatArray, p: int = 4) -> float:
    """F statistic of "x's past helps predict y" with ``p`` lags (OLS, constant included)."""
    n = min(x.size, y.size)
    x, y = x[:n], y[:n]
    rows = n - p
    target = y[p:]
    own = np.column_stack([np.ones(rows)] + [y[p - j : n - j] for j in range(1, p + 1)])
    other = np.column_stack([x[p - j : n - j] for j in range(1, p + 1)])
    full = np.column_stack([own, other])
    rss_r = _rss(own, target)
    rss_u = _rss(full, target)
    dof = rows - full.shape[1]
    return float(((rss_r - rss_u) / p) / max(rss_u / dof, 1e-12))


def _rss(X: FloatArray, y: FloatArray) -> float:
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    r = y - X @ coef
    return float((r * r).sum())
