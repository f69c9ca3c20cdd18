"""Distribution comparison of two samples: KS, Anderson-Darling, Wasserstein, energy, F test.

Group ``distribution``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from ._common import Result, as_series, finish, guarded, is_flat, mad_sigma
from ._registry import primitive

__all__ = ["distribution_compare"]


@primitive(
    group="distribution",
    arity="pair",
    outputs=(
        "ks_stat",
        "ks_p",
        "ad_stat",
        "ad_p",
        "wasserstein_sigma",
        "energy_sigma",
        "log_var_ratio",
        "f_p",
        "mean_gap_sigma",
    ),
)
@guarded
def distribution_compare(a: Any, b: Any) -> Result:
    """Do a and b share a distribution? Tests (p-values) and distances in pooled robust sigma.

    Order in time is ignored; lengths may differ (each needs 5 samples). The pooled scale is
    max(1.4826 MAD of the pooled centred samples, 1e-3 * pooled std, 1e-12); a pooled sample that
    is constant makes it abstain.

    Returns:
        ``ks_stat``/``ks_p`` (two-sample Kolmogorov-Smirnov), ``ad_stat``/``ad_p`` (Anderson-Darling
        k-sample; p capped by scipy to [0.001, 0.25]), ``wasserstein_sigma`` and ``energy_sigma``
        (distances over the pooled scale), ``log_var_ratio`` (log var b / var a, floored),
        ``f_p`` (two-sided F test of equal variances), ``mean_gap_sigma``
        ((mean b - mean a) / pooled scale).
    """
    x = as_series(a, 5)
    y = as_series(b, 5)
    if x is None or y is None:
        return None
    pooled = np.concatenate((x - np.median(x), y - np.median(y)))
    allv = np.concatenate((x, y))
    if is_flat(allv):
        return None
    s = max(mad_sigma(pooled), 1e-3 * float(np.std(allv)), 1e-12)
    ks = stats.ks_2samp(x, y)
    ad = stats.anderson_ksamp([x, y])
    va, vb = float(np.var(x, ddof=1)), float(np.var(y, ddof=1))
    fl = (1e-3 * float(np.std(allv))) ** 2 + 1e-24
    f = (vb + fl) / (va + fl)
    cdf = float(stats.f.cdf(f, y.size - 1, x.size - 1))
    sf = float(stats.f.sf(f, y.size - 1, x.size - 1))
    return finish(
        {
            "ks_stat": float(ks.statistic),
            "ks_p": float(ks.pvalue),
            "ad_stat": float(ad.statistic),
            "ad_p": float(ad.pvalue),
            "wasserstein_sigma": float(stats.wasserstein_distance(x, y)) / s,
            "energy_sigma": float(stats.energy_distance(x, y)) / np.sqrt(s),
            "log_var_ratio": float(np.log(f)),
            "f_p": float(min(1.0, 2.0 * min(cdf, sf))),
            "mean_gap_sigma": float(np.mean(y) - np.mean(x)) / s,
        }
    )
