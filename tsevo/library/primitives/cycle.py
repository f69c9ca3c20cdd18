"""Cycle statistics from peaks: period and amplitude per cycle, waveform shape (group ``cycle``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import signal, stats

from ._common import Result, as_series, finish, guarded, is_flat, linfit, robust_scale
from ._registry import primitive
from .spectral import prepare

__all__ = ["cycle_stats"]


@primitive(
    group="cycle",
    outputs=(
        "n_cycles",
        "mean_period",
        "period_cv",
        "period_trend",
        "amplitude_sigma",
        "amplitude_cv",
        "amplitude_trend",
        "crest_factor",
        "squareness",
        "derivative_skew",
    ),
    grid={"prominence": (0.5, 1.0, 2.0)},
)
@guarded
def cycle_stats(y: Any, *, prominence: float = 1.0, detrend: bool = True) -> Result:
    """Peak-to-peak periods (samples), amplitudes (robust sigma) and waveform shape (unitless).

    Peaks are local maxima of the (linearly detrended) series with prominence >= ``prominence``
    robust sigmas.

    Args:
        y: Series.
        prominence: Minimum peak prominence in robust sigma of the detrended series.
        detrend: Remove a least-squares line first.

    Returns:
        ``n_cycles`` (peaks - 1), ``mean_period`` (mean peak spacing, samples; 0 if < 2 peaks),
        ``period_cv``, ``period_trend`` (OLS slope of spacing per cycle / mean spacing),
        ``amplitude_sigma`` (mean peak prominence), ``amplitude_cv``, ``amplitude_trend`` (slope of
        prominence per cycle / mean prominence), ``crest_factor`` (max |x| / rms: sine 1.41,
        square 1.0, triangle/sawtooth 1.73), ``squareness`` (fraction of samples beyond 80% of the
        half-range from the mid-range: sine ~0.41, square ~1, triangle ~0.2), ``derivative_skew``
        (skew of the first difference; large |value| for sawtooth waves).
    """
    x = as_series(y, 8)
    if x is None or is_flat(x) or not prominence > 0:
        return None
    d = prepare(x, bool(detrend))
    if d is None:
        return None
    s = robust_scale(d)
    z = d / s
    pk, props = signal.find_peaks(z, prominence=float(prominence))
    n_pk = int(pk.size)
    if n_pk >= 2:
        sp = np.diff(pk).astype(np.float64)
        mean_p = float(np.mean(sp))
        p_cv = float(np.std(sp) / mean_p)
        p_tr = linfit(np.arange(sp.size, dtype=np.float64), sp)[0] / mean_p if sp.size >= 2 else 0.0
    else:
        mean_p, p_cv, p_tr = 0.0, 0.0, 0.0
    if n_pk >= 1:
        pr = props["prominences"]
        a_mean = float(np.mean(pr))
        a_cv = float(np.std(pr) / a_mean)
        a_tr = linfit(np.arange(pr.size, dtype=np.float64), pr)[0] / a_mean if pr.size >= 2 else 0.0
    else:
        a_mean, a_cv, a_tr = 0.0, 0.0, 0.0
    rms = float(np.sqrt(np.mean(d * d)))
    mid = (float(np.max(d)) + float(np.min(d))) / 2.0
    half = float(np.ptp(d)) / 2.0
    dd = np.diff(d)
    dskew = float(stats.skew(dd)) if dd.size >= 3 and not is_flat(dd) else 0.0
    return finish(
        {
            "n_cycles": max(0, n_pk - 1),
            "mean_period": mean_p,
            "period_cv": p_cv,
            "period_trend": p_tr,
            "amplitude_sigma": a_mean,
            "amplitude_cv": a_cv,
            "amplitude_trend": a_tr,
            "crest_factor": float(np.max(np.abs(d)) / rms),
            "squareness": float(np.mean(np.abs(d - mid) > 0.8 * half)),
            "derivative_skew": dskew,
        }
    )
