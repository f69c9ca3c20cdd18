"""Seasonal strength and per-cycle amplitude/phase for a given period (group ``seasonal``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat, linfit, robust_scale
from ._registry import primitive
from .spectral import spectrum

__all__ = ["decompose", "seasonal_strength"]


def decompose(
    x: FloatArray, period: int
) -> tuple[npt.NDArray[np.int64], FloatArray, FloatArray, FloatArray]:
    """Classical additive decomposition on the interior where the centred moving average exists.

    Returns:
        (index, trend, seasonal, remainder) on the interior samples.
    """
    p = period
    if p % 2 == 0:
        w = np.concatenate(([0.5], np.ones(p - 1), [0.5])) / p
    else:
        w = np.ones(p) / p
    trend = np.convolve(x, w, mode="valid")
    h = (w.size - 1) // 2
    idx = np.arange(h, h + trend.size, dtype=np.int64)
    det = x[idx] - trend
    phase = idx % p
    cnt = np.bincount(phase, minlength=p)
    prof = np.bincount(phase, weights=det, minlength=p) / np.maximum(cnt, 1)
    prof -= prof.mean()
    seas = prof[phase]
    return idx, trend, seas, det - seas


@primitive(
    group="seasonal",
    outputs=(
        "strength",
        "trend_strength",
        "amplitude_sigma",
        "n_cycles",
        "amplitude_trend",
        "phase_drift",
        "multiplicative_corr",
        "period_used",
    ),
    grid={"period": (None, 4, 7, 12, 24, 52)},
)
@guarded
def seasonal_strength(y: Any, *, period: int | None = None) -> Result:
    """Seasonal strength 1 - Var(R)/Var(S+R) in [0, 1] for ``period`` samples; amplitude in robust sigma.

    Classical decomposition: centred moving average trend (2 x p for even p), seasonal profile = mean
    detrended value per phase, remainder R.

    Args:
        y: Series.
        period: Season length in samples (>= 2, at least 2 full cycles); None uses the dominant
            periodogram period rounded to an integer.

    Returns:
        ``strength`` and ``trend_strength`` (1 - Var(R)/Var(T+R)), both clipped to [0, 1];
        ``amplitude_sigma`` (range of the seasonal profile / robust scale of y); ``n_cycles``
        (complete cycles in the interior); ``amplitude_trend`` (OLS slope of log per-cycle range
        per cycle, 0 with < 3 cycles); ``phase_drift`` (slope of the unwrapped first-harmonic phase
        per cycle, in fractions of a period); ``multiplicative_corr`` (correlation of per-cycle
        range with per-cycle level; near 1 suggests multiplicative seasonality); ``period_used``.
    """
    x = as_series(y, 8)
    if x is None or is_flat(x):
        return None
    n = x.size
    if period is None:
        sp = spectrum(x)
        if sp is None:
            return None
        p = round(sp["dominant_period"])
    else:
        if isinstance(period, (bool, np.bool_)):
            return None
        p = int(period)
    if p < 2 or n < 2 * p + 1:
        return None
    idx, trend, seas, rem = decompose(x, p)
    vr = float(np.var(rem))
    vsr = float(np.var(seas + rem))
    vtr = float(np.var(trend + rem))
    strength = max(0.0, 1.0 - vr / vsr) if vsr > 0 else 0.0
    tstrength = max(0.0, 1.0 - vr / vtr) if vtr > 0 else 0.0
    prof_rng = float(np.ptp(seas))
    det = seas + rem
    start = int(np.flatnonzero(idx % p == 0)[0]) if np.any(idx % p == 0) else 0
    ncyc = (idx.size - start) // p
    amp_tr, drift, mult = 0.0, 0.0, 0.0
    if ncyc >= 3:
        cyc = det[start : start + ncyc * p].reshape(ncyc, p)
        lev = x[idx[start : start + ncyc * p]].reshape(ncyc, p).mean(axis=1)
        amps = np.ptp(cyc, axis=1)
        floor = 1e-3 * float(np.std(x)) + 1e-12
        c = np.arange(ncyc, dtype=np.float64)
        amp_tr, _, _, _ = linfit(c, np.log(np.maximum(amps, floor)))
        ang = np.angle(cyc @ np.exp(-2j * np.pi * np.arange(p) / p))
        drift, _, _, _ = linfit(c, np.unwrap(ang))
        drift = -drift / (2 * np.pi)
        if np.std(amps) > 0 and np.std(lev) > 0:
            mult = float(np.corrcoef(amps, lev)[0, 1])
    return finish(
        {
            "strength": min(1.0, strength),
            "trend_strength": min(1.0, tstrength),
            "amplitude_sigma": prof_rng / robust_scale(x),
            "n_cycles": int(ncyc),
            "amplitude_trend": amp_tr,
            "phase_drift": drift,
            "multiplicative_corr": mult,
            "period_used": p,
        }
    )
