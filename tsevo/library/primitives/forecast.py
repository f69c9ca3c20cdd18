"""The forecasting primitive ``P.forecast(y, h=16)``: forecast summaries a tool can return.

It calls :func:`tsevo.library.forecasting.forecast` with ``backend="auto"``: the numpy stat
backend unless a chronos model is configured through ``$TSEVO_CHRONOS_MODEL`` (then Chronos,
loaded offline; a configured but missing model raises rather than silently changing backend).
Results are cached by (series hash, horizon, model), so calling it from many tools is cheap.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tsevo.library.forecasting import forecast as _forecast

from ._registry import primitive

__all__ = ["FORECAST_ARRAY_KEYS", "FORECAST_OUTPUTS", "MAX_HORIZON", "MIN_HISTORY", "forecast"]

MIN_HISTORY = 8
"""Shortest history the primitive forecasts (shorter input abstains)."""
MAX_HORIZON = 512
"""Largest horizon accepted."""

FORECAST_OUTPUTS = (
    "last",
    "level",
    "scale",
    "point_first",
    "point_mean",
    "point_last",
    "point_min",
    "point_max",
    "delta",
    "delta_sigma",
    "delta_noise",
    "end_delta_sigma",
    "frac_above_level",
    "q10_mean",
    "q90_mean",
    "q10_last",
    "q90_last",
    "width_mean",
    "spread_ratio",
    "period",
    "chronos",
    "h",
)
FORECAST_ARRAY_KEYS = ("point", "q10", "q90")
"""Array-valued keys of the result: usable inside tool code, never returnable by a tool."""


def _robust_sigma(x: npt.NDArray[np.float64]) -> float:
    med = float(np.median(x))
    s = 1.4826 * float(np.median(np.abs(x - med)))
    if s <= 0.0:
        s = float(np.std(x))
    return s


@primitive(
    group="forecast",
    outputs=FORECAST_OUTPUTS,
    grid={"h": (8, 16, 32)},
)
def forecast(
    y: npt.ArrayLike, *, h: int = 16, level_window: int | None = None
) -> dict[str, Any] | None:
    """Forecast the next ``h`` steps and summarize them against the recent level (series units).

    Outputs (scalars):
        last: Last observed value.
        level: Median of the last ``level_window`` observations (default ``max(8, h)``, capped at
            the history length): the "recent level" the forecast is compared with.
        scale: Robust sigma of the history (1.4826·MAD, falling back to the standard deviation).
        point_first, point_mean, point_last, point_min, point_max: Summaries of the point path.
        delta: ``point_mean - level`` (series units).
        delta_sigma: ``delta / scale`` (forecast mean minus recent level, in robust sigma).
        delta_noise: ``delta`` over the noise scale (robust sigma of first differences / √2,
            falling back to ``scale``): large for a clean trend even when ``scale`` is large.
        end_delta_sigma: ``(point_last - level) / scale``.
        frac_above_level: Fraction of the point path strictly above ``level`` (0..1).
        q10_mean, q90_mean, q10_last, q90_last: The 10 % and 90 % quantile paths' mean and end.
        width_mean: Mean of ``q90 - q10`` over the horizon.
        spread_ratio: ``width_mean`` over the history's 10–90 % interquantile range (or
            ``2.563·scale`` when that range is 0): above 1 the forecast is less certain than the
            history's own spread.
        period: Period used by the stat backend's seasonal naive (0: none, or chronos).
        chronos: True when the Chronos backend produced the forecast.
        h: The horizon.

    Extra keys ``point``, ``q10`` and ``q90`` hold the paths (read-only arrays of length ``h``)
    for use inside tool code; tools may not return them (the output contract allows scalars only).

    Args:
        y: The history (1-D, finite).
        h: Forecast horizon in samples, 1..512.
        level_window: Observations defining the recent level.

    Returns:
        The dict above, or None when the history is shorter than 8 points, not finite, or
        constant (zero scale).

    Raises:
        ValueError: ``h`` or ``level_window`` out of range.
    """
    h = int(h)
    if not 1 <= h <= MAX_HORIZON:
        raise ValueError(f"h must be in 1..{MAX_HORIZON}, got {h}")
    x = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape[0] < MIN_HISTORY or not np.all(np.isfinite(x)):
        return None
    n = x.shape[0]
    scale = _robust_sigma(x)
    if not scale > 0.0:
        return None
    if level_window is None:
        w = min(n, max(8, h))
    else:
        w = int(level_window)
        if w < 1:
            raise ValueError(f"level_window must be >= 1, got {w}")
        w = min(n, w)
    fc = _forecast(x, h, quantiles=(0.1, 0.5, 0.9))
    point = fc.point
    q10 = fc.quantile(0.1)
    q90 = fc.quantile(0.9)
    level = float(np.median(x[-w:]))
    noise = _robust_sigma(np.diff(x)) / float(np.sqrt(2.0))
    if not noise > 0.0:
        noise = scale
    p_mean = float(np.mean(point))
    delta = p_mean - level
    width = float(np.mean(q90 - q10))
    hist_lo, hist_hi = np.quantile(x, [0.1, 0.9])
    hist_spread = float(hist_hi - hist_lo)
    if not hist_spread > 0.0:
        hist_spread = 2.563 * scale
    out: dict[str, Any] = {
        "last": float(x[-1]),
        "level": level,
        "scale": scale,
        "point_first": float(point[0]),
        "point_mean": p_mean,
        "point_last": float(point[-1]),
        "point_min": float(np.min(point)),
        "point_max": float(np.max(point)),
        "delta": delta,
        "delta_sigma": delta / scale,
        "delta_noise": delta / noise,
        "end_delta_sigma": (float(point[-1]) - level) / scale,
        "frac_above_level": float(np.mean(point > level)),
        "q10_mean": float(np.mean(q10)),
        "q90_mean": float(np.mean(q90)),
        "q10_last": float(q10[-1]),
        "q90_last": float(q90[-1]),
        "width_mean": width,
        "spread_ratio": width / hist_spread,
        "period": int(fc.period),
        "chronos": fc.backend == "chronos",
        "h": h,
    }
    if not all(np.isfinite(v) for k, v in out.items() if k != "chronos"):
        return None
    out["point"] = point
    out["q10"] = q10
    out["q90"] = q90
    return out
