"""Autocorrelation: ACF, PACF (Durbin-Levinson), Ljung-Box (group ``autocorr``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat
from ._registry import primitive

__all__ = ["acf", "acf_values", "ljung_box", "pacf", "pacf_values"]


def acf_values(x: FloatArray, nlags: int) -> FloatArray | None:
    """Biased sample ACF at lags 0..nlags via FFT; ``None`` for a flat series."""
    if is_flat(x):
        return None
    d = x - np.mean(x)
    n = d.size
    nfft = 1 << int(np.ceil(np.log2(2 * n)))
    f = np.fft.rfft(d, nfft)
    ac = np.fft.irfft(f * np.conj(f), nfft)[: nlags + 1]
    if not ac[0] > 0:
        return None
    return np.asarray(ac / ac[0], dtype=np.float64)


def pacf_values(r: FloatArray, nlags: int) -> FloatArray:
    """PACF at lags 1..nlags from ACF values (Durbin-Levinson recursion)."""
    out = np.zeros(nlags)
    phi = np.zeros(0)
    v = 1.0
    for k in range(1, nlags + 1):
        if v <= 1e-12:
            break
        a = (r[k] - float(np.dot(phi, r[k - 1 : 0 : -1]))) / v if k > 1 else r[1]
        phi = np.concatenate((phi - a * phi[::-1], [a]))
        v *= 1.0 - a * a
        out[k - 1] = a
    return np.clip(out, -1.0, 1.0)


@primitive(
    group="autocorr",
    outputs=(
        "acf_lag",
        "acf1",
        "first_zero_lag",
        "n_significant",
        "sum_sq_10",
        "max_acf",
        "argmax_acf_lag",
    ),
    grid={"lag": (1, 2, 5, 7, 12, 24)},
)
@guarded
def acf(y: Any, *, lag: int = 1) -> Result:
    """Sample autocorrelation (unitless, in [-1, 1]) at ``lag`` samples plus ACF shape summaries.

    Args:
        y: Series.
        lag: Lag in samples (>= 1, < n / 2).

    Returns:
        ``acf_lag``; ``acf1``; ``first_zero_lag`` (first lag where the ACF turns <= 0, capped at
        n // 2); ``n_significant`` (lags 1..20 with |r| > 1.96 / sqrt(n)); ``sum_sq_10`` (sum of
        squares over lags 1..10); ``max_acf``/``argmax_acf_lag`` (largest ACF after the first
        zero crossing, lags up to n // 2; 0 / 0 when none). Extra array ``acf`` (lags 0..n//2).
    """
    x = as_series(y, 8)
    if x is None:
        return None
    n = x.size
    half = n // 2
    if not (1 <= int(lag) < half):
        return None
    r = acf_values(x, half)
    if r is None:
        return None
    neg = np.flatnonzero(r[1:] <= 0)
    fz = int(neg[0]) + 1 if neg.size else half
    tail = r[fz + 1 :]
    k20 = min(20, half)
    return finish(
        {
            "acf_lag": r[int(lag)],
            "acf1": r[1],
            "first_zero_lag": fz,
            "n_significant": int(np.count_nonzero(np.abs(r[1 : k20 + 1]) > 1.96 / np.sqrt(n))),
            "sum_sq_10": float(np.sum(r[1 : min(10, half) + 1] ** 2)),
            "max_acf": float(np.max(tail)) if tail.size else 0.0,
            "argmax_acf_lag": int(np.argmax(tail)) + fz + 1 if tail.size else 0,
        },
        {"acf": r},
    )


@primitive(
    group="autocorr",
    outputs=("pacf_lag", "pacf1", "pacf2", "ar_order"),
    grid={"lag": (1, 2, 3, 5)},
)
@guarded
def pacf(y: Any, *, lag: int = 1, max_lag: int = 10) -> Result:
    """Partial autocorrelation (unitless) at ``lag`` and an AR order estimate from the PACF cut-off.

    Args:
        y: Series.
        lag: Lag in samples (1..max_lag).
        max_lag: Largest lag computed (1..50, < n / 4).

    Returns:
        ``pacf_lag``, ``pacf1``, ``pacf2`` (0 if max_lag < 2), ``ar_order`` (largest lag <= max_lag
        with |pacf| > 1.96 / sqrt(n), 0 when none). Extra array ``pacf`` (lags 1..max_lag).
    """
    x = as_series(y, 12)
    if x is None:
        return None
    n = x.size
    L = int(max_lag)
    if not (1 <= L <= 50 and n // 4 > L and 1 <= int(lag) <= L):
        return None
    r = acf_values(x, L)
    if r is None:
        return None
    p = pacf_values(r, L)
    sig = np.flatnonzero(np.abs(p) > 1.96 / np.sqrt(n))
    return finish(
        {
            "pacf_lag": p[int(lag) - 1],
            "pacf1": p[0],
            "pacf2": p[1] if L >= 2 else 0.0,
            "ar_order": int(sig[-1]) + 1 if sig.size else 0,
        },
        {"pacf": p},
    )


@primitive(
    group="autocorr",
    outputs=("q", "p", "df", "white_noise_5"),
    grid={"lags": (5, 10, 20)},
)
@guarded
def ljung_box(y: Any, *, lags: int = 10, diff: bool = False) -> Result:
    """Ljung-Box Q statistic (chi-square units) over lags 1..lags and its p-value.

    Args:
        y: Series.
        lags: Number of lags (1..n/2).
        diff: Test the first difference instead of the series.

    Returns:
        ``q``, ``p`` (chi-square with ``lags`` degrees of freedom), ``df``, ``white_noise_5``
        (p >= 0.05). ``None`` for a constant series.
    """
    x = as_series(y, 8)
    if x is None:
        return None
    if diff:
        x = np.diff(x)
    n = x.size
    h = int(lags)
    if not (1 <= h <= n // 2):
        return None
    r = acf_values(x, h)
    if r is None:
        return None
    k = np.arange(1, h + 1)
    q = float(n * (n + 2) * np.sum(r[1:] ** 2 / (n - k)))
    p = float(stats.chi2.sf(q, h))
    return finish({"q": q, "p": p, "df": h, "white_noise_5": p >= 0.05})
