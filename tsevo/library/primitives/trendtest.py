"""Tests of how a trend changes: a turn, a change of slope, a growing rate (group ``segments``).

A broken-stick regression (two lines joined at a break, the break placed where the fit is best;
Muggeo 2003, Stat. Med. 22, 3055-3071) gives the slope before and after the break with their
covariance. Serial correlation in the residuals makes ordinary least-squares standard errors too
small; they are inflated by ``sqrt((1 + phi) / (1 - phi))`` with ``phi`` the residuals' lag-1
autocorrelation, the first-order correction for a smooth regressor (Bence 1995, Ecology 76,
628-639), and the degrees of freedom shrink with it. Then:

* ``p_change``: two-sided test that the slopes differ (a Chow-type test at the fitted break;
  the search for the break is not corrected for, so it reads as a screen, not an exact level);
* ``p_reversal``: the trend turns (the slopes have opposite signs), as an intersection-union
  test (Berger 1982, Technometrics 24, 295-300): the larger of the two one-sided p-values, in the
  better of the two orientations. The break search is not corrected for here either: on a flat
  persistent noise a turn is found more often than 5% (about 10% at phi = 0.3 to 0.6), on a
  straight line with such noise rarely;
* ``p_accelerating``: the rate of change grows, from a quadratic fit: one-sided test that the
  curvature has the sign of the mean slope (convex while rising, concave while falling).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat, robust_scale
from ._registry import primitive

__all__ = ["trend_change_test"]


def _fit(
    x: FloatArray, design: FloatArray
) -> tuple[FloatArray, FloatArray, float, FloatArray] | None:
    """OLS coefficients, their serial-correlation-inflated covariance, df and the residuals."""
    beta, *_ = np.linalg.lstsq(design, x, rcond=None)
    res = x - design @ beta
    n, k = design.shape
    ss = float(np.dot(res, res))
    if not ss > 0 or n <= k + 1:
        return None
    phi = float(np.clip(np.dot(res[1:], res[:-1]) / ss, 0.0, 0.95))
    inflate = (1.0 + phi) / (1.0 - phi)
    df = max(n / inflate - k, 1.0)
    cov = ss / (n - k) * inflate * np.linalg.inv(design.T @ design)
    return np.asarray(beta, dtype=np.float64), np.asarray(cov, dtype=np.float64), df, res


def _rss(x: FloatArray, design: FloatArray) -> float:
    """Residual sum of squares of the least-squares fit of ``x`` on ``design``."""
    beta, *_ = np.linalg.lstsq(design, x, rcond=None)
    r = x - design @ beta
    return float(np.dot(r, r))


def _one_sided(est: float, var: float, df: float) -> float:
    """The p-value of H1: the estimate is positive."""
    if not var > 0:
        return 0.0 if est > 0 else 1.0
    return float(stats.t.sf(est / np.sqrt(var), df))


@primitive(
    group="segments",
    outputs=(
        "break_frac",
        "slope_before_sigma",
        "slope_after_sigma",
        "p_change",
        "p_reversal",
        "p_accelerating",
    ),
)
@guarded
def trend_change_test(y: Any, *, lo: float = 0.2, hi: float = 0.8) -> Result:
    """Broken-stick slopes (robust sigma per series length) and tests of a turn and of acceleration.

    The break is searched over fractions ``[lo, hi]`` of the series (about 60 candidate points).

    Args:
        y: Series.
        lo: Earliest break (fraction of the length).
        hi: Latest break.

    Returns:
        ``break_frac`` (fraction of the length), ``slope_before_sigma`` and ``slope_after_sigma``
        (change over the whole length at each slope, in robust sigma of y), ``p_change``,
        ``p_reversal``, ``p_accelerating`` (module docstring). ``None`` for fewer than 12 samples, a
        flat series or ``0 < lo < hi < 1`` violated.
    """
    x = as_series(y, 12)
    if x is None or is_flat(x) or not (0.0 < lo < hi < 1.0):
        return None
    n = x.size
    t = np.linspace(0.0, 1.0, n)
    one = np.ones(n)
    lo_i, hi_i = max(3, int(np.ceil(lo * (n - 1)))), min(n - 4, int(np.floor(hi * (n - 1))))
    if hi_i < lo_i:
        return None

    def hinge(tb: float) -> FloatArray:
        return np.column_stack((one, t, np.maximum(t - tb, 0.0)))

    breaks = np.unique(np.linspace(lo_i, hi_i, 61).round().astype(int))
    tb = float(t[breaks[int(np.argmin([_rss(x, hinge(t[i])) for i in breaks]))]])
    fit = _fit(x, hinge(tb))
    u = 2.0 * t - 1.0
    quad = _fit(x, np.column_stack((one, u, u * u)))
    if fit is None or quad is None:
        return None
    beta, cov, df, _ = fit
    s1, s2 = float(beta[1]), float(beta[1] + beta[2])
    v1, v2 = float(cov[1, 1]), float(cov[1, 1] + cov[2, 2] + 2.0 * cov[1, 2])
    up1, up2 = _one_sided(s1, v1, df), _one_sided(s2, v2, df)
    rev = min(max(up1, 1.0 - up2), max(1.0 - up1, up2))
    d = float(beta[2])
    p_change = min(1.0, 2.0 * min(_one_sided(d, cov[2, 2], df), _one_sided(-d, cov[2, 2], df)))
    qb, qcov, qdf, _ = quad
    sign = 1.0 if qb[1] >= 0 else -1.0
    p_acc = _one_sided(sign * float(qb[2]), float(qcov[2, 2]), qdf)
    s = robust_scale(x)
    return finish(
        {
            "break_frac": tb,
            "slope_before_sigma": s1 / s,
            "slope_after_sigma": s2 / s,
            "p_change": p_change,
            "p_reversal": float(rev),
            "p_accelerating": p_acc,
        }
    )
