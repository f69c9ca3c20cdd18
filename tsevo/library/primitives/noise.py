"""Noise colour (AR(1), spectral slope, DFA) and signal-to-noise ratio (group ``noise``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import signal, stats

from ._common import Result, as_series, finish, guarded, is_flat, linfit, resolve_width
from ._registry import primitive
from .spectral import prepare

__all__ = ["noise_color", "snr"]


@primitive(
    group="noise",
    outputs=("ar1_phi", "spectral_beta", "dfa_alpha", "color_code"),
    grid={"detrend": (True, False)},
)
@guarded
def noise_color(y: Any, *, detrend: bool = True) -> Result:
    """Noise colour: AR(1) phi, log-log periodogram slope beta (0 white, 1 pink, 2 red), DFA-1 alpha.

    Args:
        y: Series (at least 32 samples).
        detrend: Remove a least-squares line first.

    Returns:
        ``ar1_phi`` (lag-1 autocorrelation of the residual), ``spectral_beta`` (minus the OLS slope
        of log power on log frequency over all non-DC bins), ``dfa_alpha`` (detrended fluctuation
        analysis exponent over box sizes 4..n/4: 0.5 white, 1 pink, 1.5 brown), ``color_code``
        (0 white if beta < 0.5, 1 pink if beta < 1.5, else 2 red/brown).
    """
    x = as_series(y, 32)
    if x is None:
        return None
    d = prepare(x, bool(detrend))
    if d is None:
        return None
    n = d.size
    phi = float(np.dot(d[1:], d[:-1]) / np.dot(d, d))
    p = np.abs(np.fft.rfft(d)) ** 2
    f = np.arange(p.size) / n
    p1 = p[1:]
    eps = 1e-12 * float(np.max(p1))
    beta = -linfit(np.log(f[1:]), np.log(p1 + eps))[0]
    prof = np.cumsum(d - d.mean())
    sizes = np.unique(np.geomspace(4, max(5, n // 4), 12).astype(np.int64))
    fl = []
    for s in sizes:
        m = n // s
        if m < 2:
            continue
        seg = prof[: m * s].reshape(m, s)
        t = np.arange(s, dtype=np.float64) - (s - 1) / 2.0
        sl = (seg - seg.mean(axis=1, keepdims=True)) @ t / np.dot(t, t)
        res = seg - seg.mean(axis=1, keepdims=True) - np.outer(sl, t)
        fl.append((s, np.sqrt(np.mean(res * res))))
    if len(fl) < 3:
        return None
    ss = np.array([a for a, _ in fl], dtype=np.float64)
    ff = np.array([b for _, b in fl])
    alpha = linfit(np.log(ss), np.log(np.maximum(ff, 1e-300)))[0]
    return finish(
        {
            "ar1_phi": phi,
            "spectral_beta": beta,
            "dfa_alpha": alpha,
            "color_code": 0 if beta < 0.5 else (1 if beta < 1.5 else 2),
        }
    )


@primitive(
    group="noise",
    outputs=("snr_db", "noise_frac", "noise_sigma", "hetero_corr", "hetero_time_corr"),
    grid={"window": (0.02, 0.05, 0.1)},
)
@guarded
def snr(y: Any, *, window: int | float = 0.05) -> Result:
    """Signal-to-noise ratio in dB from a Savitzky-Golay smoother; noise level in units of y.

    Args:
        y: Series.
        window: Smoother window: int samples or float fraction (made odd, >= 5).

    Returns:
        ``snr_db`` (10 log10 var(smooth) / var(residual), residual variance floored at 1e-12 of the
        total), ``noise_frac`` (std residual / std y), ``noise_sigma`` (std of the residual, units of
        y), ``hetero_corr`` (Spearman correlation of |residual| with the smoothed level: > 0 suggests
        multiplicative noise), ``hetero_time_corr`` (Spearman correlation of |residual| with time).
    """
    x = as_series(y, 8)
    if x is None or is_flat(x):
        return None
    n = x.size
    w = resolve_width(n, window, minimum=5)
    if w is None:
        return None
    w = w if w % 2 == 1 else w + 1
    if w > n:
        w = n if n % 2 == 1 else n - 1
    sm = signal.savgol_filter(x, w, 2, mode="interp")
    r = x - sm
    vt = float(np.var(x))
    vr = max(float(np.var(r)), 1e-12 * vt)
    vs = max(float(np.var(sm)), 1e-12 * vt)
    ar = np.abs(r)
    hc = stats.spearmanr(ar, sm).statistic if not (is_flat(ar) or is_flat(sm)) else 0.0
    ht = stats.spearmanr(ar, np.arange(n)).statistic if not is_flat(ar) else 0.0
    return finish(
        {
            "snr_db": 10.0 * np.log10(vs / vr),
            "noise_frac": float(np.sqrt(vr / vt)),
            "noise_sigma": float(np.std(r)),
            "hetero_corr": float(hc) if np.isfinite(hc) else 0.0,
            "hetero_time_corr": float(ht) if np.isfinite(ht) else 0.0,
        }
    )
