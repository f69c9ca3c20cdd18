"""The ``stat`` backend (numpy only): period detection, seasonal naive, ETS grid, AR(1)."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from ._result import FloatArray, Forecast, frozen

__all__ = [
    "AR1_MAX_PHI",
    "MAX_STAT_HISTORY",
    "PERIOD_MIN_ACF",
    "PERIOD_MIN_PROMINENCE",
    "STAT_MODEL_ID",
    "detect_period",
    "stat_forecast",
]

STAT_MODEL_ID = "stat-v2"
"""Model key of the stat backend; bump it when the method changes (invalidates disk caches)."""
MAX_STAT_HISTORY = 1024
"""The stat backend fits on at most this many most recent points."""
AR1_MAX_PHI = 0.97
"""Largest lag-1 coefficient for which the stat backend considers a mean-reverting AR(1)."""
PERIOD_MIN_ACF = 0.3
PERIOD_MIN_PROMINENCE = 0.3


def _robust_scale(e: FloatArray) -> float:
    if e.size == 0:
        return 0.0
    med = float(np.median(e))
    s = 1.4826 * float(np.median(np.abs(e - med)))
    if s <= 0.0:
        s = float(np.sqrt(np.mean((e - med) ** 2)))
    return s


def _acf(x: FloatArray, max_lag: int) -> FloatArray:
    n = x.shape[0]
    m = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(x, m)
    r = np.fft.irfft(f * np.conj(f), m)[: max_lag + 1]
    return np.asarray(r / r[0], dtype=np.float64)


def detect_period(y: npt.ArrayLike, *, max_period: int | None = None) -> int:
    """Dominant period of a series by ACF peak search (0 when there is none).

    Args:
        y: The series (finite values; only the last :data:`MAX_STAT_HISTORY` are used).
        max_period: Largest period considered (default and cap ``n // 3``: three cycles).

    Returns:
        The period in samples (≥ 2), or 0.
    """
    x = np.asarray(y, dtype=np.float64)[-MAX_STAT_HISTORY:]
    n = x.shape[0]
    if n < 8 or not np.all(np.isfinite(x)):
        return 0
    t = np.arange(n, dtype=np.float64)
    slope, icpt = np.polyfit(t, x, 1)
    r = x - (slope * t + icpt)
    if float(np.dot(r, r)) <= 1e-24 * max(1.0, float(np.dot(x, x))):
        return 0
    max_lag = n // 3 if max_period is None else min(n // 3, int(max_period))
    if max_lag < 3:
        return 0
    ac = _acf(r, max_lag + 1)
    peaks: list[tuple[int, float]] = []
    for k in range(2, max_lag + 1):
        v = ac[k]
        if v > ac[k - 1] and v >= ac[k + 1] and v >= PERIOD_MIN_ACF:
            trough = float(np.min(ac[1:k]))
            if v - trough >= PERIOD_MIN_PROMINENCE:
                peaks.append((k, float(v)))
    if not peaks:
        return 0
    best = max(v for _, v in peaks)
    for k, v in peaks:
        if v >= 0.85 * best:
            return k
    return 0  # pragma: no cover - the best peak always qualifies


def _normal_z(levels: Sequence[float]) -> FloatArray:
    nd = NormalDist()
    return np.array([0.0 if abs(q - 0.5) < 1e-12 else nd.inv_cdf(q) for q in levels])


def _seasonal_naive(
    x: FloatArray, h: int, p: int
) -> tuple[FloatArray, FloatArray, dict[str, float]]:
    n = x.shape[0]
    d = x[p:] - x[:-p]
    drift = float(np.mean(d))
    k = np.arange(1, h + 1)
    m = np.ceil(k / p).astype(np.int64)
    idx = n - p + ((k - 1) % p)
    point = x[idx] + m * drift
    sigma = _robust_scale(d - drift)
    T = max(d.shape[0], 1)
    sd = sigma * np.sqrt(m * (1.0 + m / T))
    return point, sd, {"drift_per_season": drift, "sigma": sigma}


def _ets_grid() -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Grid of (alpha, beta, phi, n_params); SES first, then Holt, then damped (tie order)."""
    alphas = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99]
    rows: list[tuple[float, float, float, int]] = [(a, 0.0, 0.0, 2) for a in alphas]
    for phi, k in ((1.0, 4), (0.98, 5), (0.95, 5), (0.9, 5), (0.8, 5)):
        for a in alphas:
            for bf in (0.02, 0.1, 0.3, 0.6, 1.0):
                rows.append((a, a * bf, phi, k))
    g = np.array(rows, dtype=np.float64)
    return g[:, 0], g[:, 1], g[:, 2], g[:, 3]


_GRID = _ets_grid()


def _ar1(
    x: FloatArray, h: int, burn: int, scale2: float
) -> tuple[FloatArray, FloatArray, dict[str, float], float] | None:
    """Mean-reverting AR(1) around the sample mean, scored like the ETS grid.

    ``x[t] - μ = φ·(x[t-1] - μ) + e`` with μ the mean and φ the lag-1 least-squares coefficient
    (at least -0.99; no candidate above :data:`AR1_MAX_PHI`); the criterion ``m·log(MSE) + 2k`` (k = 2: μ and φ) uses the same
    one-step errors after the same burn-in as the ETS grid. Exponential smoothing cannot revert to a
    level (a damped trend damps the slope, not the level), so without this candidate a series that
    ended far from its mean is forecast to stay there.
    """
    n = x.shape[0]
    if n < 8:
        return None
    mu = float(np.mean(x))
    xc = x - mu
    den = float(np.dot(xc[:-1], xc[:-1]))
    if den <= 0.0:
        return None
    phi = max(-0.99, float(np.dot(xc[1:], xc[:-1])) / den)
    if phi > AR1_MAX_PHI:
        return None  # near a unit root the sample mean is no level the series returns to
    errs = xc[1:] - phi * xc[:-1]
    m = max(n - 1 - burn, 1)
    mse = max(float(np.sum(errs[burn:] ** 2)) / m, scale2 * 1e-20)
    crit = m * float(np.log(mse)) + 2.0 * 2
    ks = np.arange(1, h + 1)
    point = mu + xc[-1] * phi**ks
    sigma = _robust_scale(errs[burn:])
    sd = sigma * np.sqrt(np.cumsum(phi ** (2 * (ks - 1))))
    return point, sd, {"mu": mu, "phi": phi, "sigma": sigma}, crit


def _ets(x: FloatArray, h: int) -> tuple[FloatArray, FloatArray, dict[str, float], str]:
    alpha, beta, phi, kpar = _GRID
    n = x.shape[0]
    trend = phi > 0.0
    b0 = float(np.mean(np.diff(x[: min(n, 5)])))
    lvl = np.full(alpha.shape, x[0])
    b = np.where(trend, b0, 0.0)
    burn = min(3, n // 4)
    sse = np.zeros(alpha.shape)
    errs = np.empty((n - 1, alpha.shape[0]))
    for t in range(1, n):
        yhat = lvl + phi * b
        e = x[t] - yhat
        errs[t - 1] = e
        if t > burn:
            sse += e * e
        lvl = yhat + alpha * e
        b = phi * b + beta * e
    m = max(n - 1 - burn, 1)
    scale2 = float(np.var(x)) + float(np.mean(x * x)) * 1e-12 + 1e-300
    mse = np.maximum(sse / m, scale2 * 1e-20)
    crit = m * np.log(mse) + 2.0 * kpar
    i = int(np.argmin(np.round(crit, 9)))
    ar = _ar1(x, h, burn, scale2)
    if ar is not None and round(ar[3], 9) < round(float(crit[i]), 9):
        return ar[0], ar[1], ar[2], "ar1"
    a, bt, ph = float(alpha[i]), float(beta[i]), float(phi[i])
    ks = np.arange(1, h + 1)
    if ph > 0.0:
        cum = ks.astype(np.float64) if ph == 1.0 else ph * (1 - ph**ks) / (1 - ph)
        point = lvl[i] + cum * b[i]
        j = np.arange(1, h)
        phisum = j.astype(np.float64) if ph == 1.0 else ph * (1 - ph**j) / (1 - ph)
        c = a + bt * phisum
    else:
        point = np.full(h, lvl[i])
        c = np.full(h - 1, a)
    sigma = _robust_scale(errs[burn:, i])
    var_mult = 1.0 + np.concatenate([[0.0], np.cumsum(c * c)])
    sd = sigma * np.sqrt(var_mult)
    method = "ses" if ph == 0.0 else ("holt" if ph == 1.0 else "damped_trend")
    return point, sd, {"alpha": a, "beta": bt, "phi": ph, "sigma": sigma}, method


def stat_forecast(y: FloatArray, h: int, levels: tuple[float, ...]) -> Forecast:
    """The stat backend's forecast of ``h`` steps with quantile paths at ``levels``."""
    x = np.asarray(y, dtype=np.float64)[-MAX_STAT_HISTORY:]
    n = x.shape[0]
    p = detect_period(x)
    params: dict[str, float]
    if p >= 2 and n >= 3 * p:
        point, sd, params = _seasonal_naive(x, h, p)
        method = "seasonal_naive_drift"
    elif n >= 6:
        point, sd, params, method = _ets(x, h)
        p = 0
    else:
        point = np.full(h, x[-1])
        sigma = _robust_scale(np.diff(x))
        sd = sigma * np.sqrt(np.arange(1, h + 1, dtype=np.float64))
        params, method, p = {"sigma": sigma}, "naive", 0
    z = _normal_z(levels)
    qs = {lv: frozen(point + z[i] * sd) for i, lv in enumerate(levels)}
    return Forecast(
        point=frozen(point),
        quantiles=qs,
        backend="stat",
        model=STAT_MODEL_ID,
        method=method,
        period=int(p),
        params=params,
    )
