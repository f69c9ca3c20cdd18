"""Shape of the trend: linear vs log vs exponential vs quadratic, curvature, slope change (group ``trend_shape``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat, linfit, robust_scale
from ._registry import primitive

__all__ = ["SHAPES", "slope_change", "trend_shape"]

SHAPES = ("linear", "log", "exp", "quadratic")
_EXP_RATES = np.concatenate((-np.geomspace(12.0, 0.25, 16), np.geomspace(0.25, 12.0, 16)))


def _r2(y: FloatArray, rss: float) -> float:
    syy = float(np.sum((y - np.mean(y)) ** 2))
    return max(0.0, min(1.0, 1.0 - rss / syy)) if syy > 0 else 0.0


def _ls2(u: FloatArray, y: FloatArray) -> float:
    """RSS of y ~ a + b * u."""
    _, _, rss, _ = linfit(u, y)
    return rss


@primitive(
    group="trend_shape",
    outputs=(
        "r2_linear",
        "r2_log",
        "r2_exp",
        "r2_quadratic",
        "best_shape",
        "curvature_sigma",
        "curvature_sign",
        "exp_rate",
        "bic_linear_minus_best",
    ),
)
@guarded
def trend_shape(y: Any) -> Result:
    """R^2 of linear, log, exponential and quadratic trends (unitless); curvature in robust sigma.

    Time is normalized to t in [0, 1]. Fits (all with free offset and scale, so affine-invariant):
    linear ``a + b t``; log ``a + b log(1 + i)`` with i the sample index; exponential
    ``c + A exp(k t)`` with k searched on a fixed grid of 32 rates in [-12, 12]; quadratic
    ``a + b t + c t^2``.

    Returns:
        ``r2_linear``, ``r2_log``, ``r2_exp``, ``r2_quadratic``; ``best_shape`` (index into
        :data:`SHAPES` with the lowest BIC: linear/log 2 parameters, quadratic 3, exp 4);
        ``curvature_sigma`` (second derivative of the quadratic over the whole series, 2c, divided
        by the robust scale of y); ``curvature_sign`` (+1 convex, -1 concave, 0 when the quadratic
        does not beat the line by BIC); ``exp_rate`` (best k, e-folds per series length);
        ``bic_linear_minus_best`` (>= 0). ``None`` below 8 samples or for a constant series.
    """
    x = as_series(y, 8)
    if x is None or is_flat(x):
        return None
    n = x.size
    z = (x - np.mean(x)) / np.std(x)
    i = np.arange(n, dtype=np.float64)
    t = i / (n - 1)
    rss_lin = _ls2(t, z)
    rss_log = _ls2(np.log1p(i), z)
    best_k, rss_exp = 0.0, np.inf
    for k in _EXP_RATES:
        r = _ls2(np.exp(k * t), z)
        if r < rss_exp:
            best_k, rss_exp = float(k), r
    coef = np.polyfit(t, z, 2)
    rss_quad = float(np.sum((z - np.polyval(coef, t)) ** 2))
    rss = np.array([rss_lin, rss_log, rss_exp, rss_quad])
    params = np.array([2, 2, 4, 3])
    bic = n * np.log(np.maximum(rss, 1e-12 * n) / n) + params * np.log(n)
    best = int(np.argmin(bic))
    curv = 2.0 * float(coef[0]) * float(np.std(x)) / robust_scale(x)
    return finish(
        {
            "r2_linear": _r2(z, rss_lin),
            "r2_log": _r2(z, rss_log),
            "r2_exp": _r2(z, rss_exp),
            "r2_quadratic": _r2(z, rss_quad),
            "best_shape": best,
            "curvature_sigma": curv,
            "curvature_sign": int(np.sign(curv)) if bic[3] < bic[0] else 0,
            "exp_rate": best_k,
            "bic_linear_minus_best": float(bic[0] - np.min(bic)),
        }
    )


@primitive(
    group="trend_shape",
    outputs=(
        "slope_before_sigma",
        "slope_after_sigma",
        "slope_diff_sigma",
        "level_jump_sigma",
        "angle_change",
    ),
    grid={"split": (0.25, 0.5, 0.75)},
)
@guarded
def slope_change(y: Any, *, split: int | float = 0.5) -> Result:
    """OLS slopes before/after a split, in robust sigma per series length; jump at the split in sigma.

    Args:
        y: Series.
        split: Split point: int index or float fraction of the length; each side needs 3 samples.

    Returns:
        ``slope_before_sigma``, ``slope_after_sigma`` (slope * n / s, with s the floored robust scale
        of the two-piece residuals), ``slope_diff_sigma`` (after - before), ``level_jump_sigma``
        (after-fit minus before-fit at the split, over s), ``angle_change`` (difference of the
        slope angles in radians, slopes taken in sigma per series length, in [-pi, pi]).
    """
    x = as_series(y, 6)
    if x is None or is_flat(x):
        return None
    n = x.size
    if isinstance(split, (bool, np.bool_)):
        return None
    k = int(split) if isinstance(split, (int, np.integer)) else round(float(split) * n)
    if k < 0:
        k += n
    if not (3 <= k <= n - 3):
        return None
    t = np.arange(n, dtype=np.float64)
    s1, i1, _, _ = linfit(t[:k], x[:k])
    s2, i2, _, _ = linfit(t[k:], x[k:])
    resid = np.concatenate((x[:k] - (i1 + s1 * t[:k]), x[k:] - (i2 + s2 * t[k:])))
    s = max(robust_scale(resid), 1e-3 * float(np.std(x)), 1e-12)
    b = s1 * n / s
    a = s2 * n / s
    tk = float(k) - 0.5
    jump = ((i2 + s2 * tk) - (i1 + s1 * tk)) / s
    return finish(
        {
            "slope_before_sigma": b,
            "slope_after_sigma": a,
            "slope_diff_sigma": a - b,
            "level_jump_sigma": jump,
            "angle_change": float(np.arctan(a) - np.arctan(b)),
        }
    )
