"""Whether two series are correlated, with serial correlation allowed for (group ``correlation``).

Two smooth series correlate strongly by chance: neighbouring samples repeat each other, so a
series of 200 points may hold the information of ten. ``scipy.stats.pearsonr`` counts every sample
as independent and calls such a correlation significant far more often than its level says. The
classical remedy replaces ``n`` by an effective sample size from the two autocorrelation
functions (Bartlett 1935; Bretherton et al. 1999, J. Climate 12, 1990-2009; Pyper and Peterman
1998, Can. J. Fish. Aquat. Sci. 55, 2127-2140):

    1 / n_eff = 1 / n + (2 / n) * sum_{k=1}^{K} (n - k) / n * rho_a(k) * rho_b(k),   K = n // 5,

and tests ``r`` with a t statistic on ``n_eff - 2`` degrees of freedom. One-sided p-values say
whether the series move together (``p_pos``) or against each other (``p_neg``). A lagged search
(the largest correlation over ``|lag| <= max_lag``) multiplies the chances; its p-values carry a
Sidak correction over the number of lags that are effectively independent, ``(2 L + 1) n_eff / n``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat, resolve_width, zscore
from ._registry import primitive
from .autocorr import acf_values

__all__ = ["correlation_test", "effective_pairs"]


def effective_pairs(x: FloatArray, y: FloatArray) -> float:
    """Effective number of independent pairs of two equally long series (Bartlett's formula).

    Clipped to ``[3, n]``; lags up to ``n // 5`` enter, weighted by ``(n - k) / n`` (Pyper and
    Peterman 1998). Both series must vary.
    """
    n = x.size
    lags = max(1, n // 5)
    ra, rb = acf_values(x, lags), acf_values(y, lags)
    if ra is None or rb is None:
        raise ValueError("flat series")
    k = np.arange(1, lags + 1, dtype=np.float64)
    inv = 1.0 / n + 2.0 / n * float(np.sum((n - k) / n * ra[1:] * rb[1:]))
    return float(np.clip(1.0 / inv if inv > 0 else n, 3.0, n))


def _p_values(r: FloatArray, n_eff: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Two-sided, positive and negative one-sided p of ``r`` on ``n_eff - 2`` degrees of freedom."""
    df = np.maximum(n_eff - 2.0, 1.0)
    rr = np.clip(r, -0.999999, 0.999999)
    t = rr * np.sqrt(df / (1.0 - rr * rr))
    one_pos, one_neg = stats.t.sf(t, df), stats.t.cdf(t, df)
    return np.minimum(1.0, 2.0 * np.minimum(one_pos, one_neg)), one_pos, one_neg


def _sidak(p: float, tries: float) -> float:
    """The chance that the best of ``tries`` independent tests reaches ``p``."""
    return float(1.0 - (1.0 - p) ** tries) if tries > 1.0 else p


@primitive(
    group="correlation",
    arity="pair",
    outputs=("r", "best_lag", "n_eff", "p", "p_pos", "p_neg"),
    grid={"max_lag": (0, 0.25)},
)
@guarded
def correlation_test(a: Any, b: Any, *, max_lag: int | float = 0) -> Result:
    """Pearson correlation of a and b tested on the effective number of pairs (unitless, p in [0, 1]).

    Both series are truncated to their common length. With ``max_lag`` > 0 the correlation is the
    one of largest magnitude over lags ``|k| <= max_lag`` (positive k: b lags a, b[t] ~ a[t - k];
    the overlapping parts are correlated, each on its share of the effective pairs), the lag of the
    smallest two-sided p-value wins, and its p-values are Sidak-corrected for the search.

    Args:
        a: First series.
        b: Second series.
        max_lag: Largest |lag|: int samples or float fraction of the common length (0: no search).

    Returns:
        ``r`` (the correlation tested), ``best_lag`` (its lag in samples, 0 without a search),
        ``n_eff`` (effective pairs), ``p`` (two-sided: any correlation), ``p_pos`` (the series move
        together), ``p_neg`` (they move against each other). ``None`` when a or b is constant or
        shorter than 8 samples.
    """
    x, y = as_series(a, 8), as_series(b, 8)
    if x is None or y is None:
        return None
    m = min(x.size, y.size)
    x, y = x[:m], y[:m]
    if is_flat(x) or is_flat(y):
        return None
    n_eff = effective_pairs(x, y)
    lag_max = 0 if max_lag == 0 else resolve_width(m, max_lag, minimum=0, maximum=m // 2)
    if lag_max is None:
        return None
    ks, rs, sizes = [], [], []
    for k in range(-lag_max, lag_max + 1):
        u, v = (x[: m - k], y[k:]) if k >= 0 else (x[-k:], y[: m + k])
        zu, zv = zscore(u), zscore(v)
        if zu is None or zv is None or u.size < 8:
            continue
        ks.append(k)
        rs.append(float(np.clip(np.mean(zu * zv), -1.0, 1.0)))
        sizes.append(u.size)
    if not ks:
        return None
    r_all = np.asarray(rs)
    p_all = _p_values(r_all, np.maximum(3.0, n_eff * np.asarray(sizes, dtype=np.float64) / m))
    # the smallest two-sided p wins; among equals the shortest lag
    i = min(range(len(ks)), key=lambda j: (p_all[0][j], abs(ks[j])))
    best, best_k, best_p = float(r_all[i]), ks[i], tuple(float(q[i]) for q in p_all)
    tries = max(1.0, (2 * lag_max + 1) * n_eff / m)
    p, p_pos, p_neg = (_sidak(q, tries) for q in best_p)
    return finish(
        {"r": best, "best_lag": best_k, "n_eff": n_eff, "p": p, "p_pos": p_pos, "p_neg": p_neg}
    )
