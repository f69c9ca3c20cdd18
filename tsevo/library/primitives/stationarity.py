"""Stationarity tests in numpy: ADF (MacKinnon p-values), KPSS, variance ratio, integration order.

Group ``stationarity``. MacKinnon (1994) p-value response surfaces and MacKinnon (2010) critical
values for one variable, the same tables statsmodels uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat
from ._registry import primitive

__all__ = ["adf", "adf_test", "integration_order", "kpss", "mackinnon_p", "variance_ratio"]

_TAU = {
    # max, min, star, small-p coefficients, large-p coefficients (increasing powers)
    "c": (2.74, -18.83, -1.61, (2.1659, 1.4412, 3.8269e-2), (1.7339, 0.93202, -0.12745, -0.010368)),
    "ct": (0.7, -16.18, -2.89, (3.2512, 1.6047, 4.9588e-2), (2.5261, 0.61654, -0.37956, -0.060285)),
}
_CRIT = {
    "c": (
        (-3.43035, -6.5393, -16.786, -79.433),
        (-2.86154, -2.8903, -4.234, -40.040),
        (-2.56677, -1.5384, -2.809, 0.0),
    ),
    "ct": (
        (-3.95877, -9.0531, -28.428, -134.155),
        (-3.41049, -4.3904, -9.036, -45.374),
        (-3.12705, -2.5856, -3.925, -22.380),
    ),
}
_KPSS = {"c": (0.347, 0.463, 0.574, 0.739), "ct": (0.119, 0.146, 0.176, 0.216)}
_KPSS_P = (0.10, 0.05, 0.025, 0.01)


def mackinnon_p(tau: float, regression: str = "c") -> float:
    """Approximate asymptotic p-value of the ADF statistic (MacKinnon 1994, one variable)."""
    tmax, tmin, star, small, large = _TAU[regression]
    if tau > tmax:
        return 1.0
    if tau < tmin:
        return 0.0
    coef = small if tau <= star else large
    return float(stats.norm.cdf(sum(c * tau**i for i, c in enumerate(coef))))


def _crit(n: int, regression: str) -> tuple[float, float, float]:
    out = [sum(c / n**i for i, c in enumerate(row)) for row in _CRIT[regression]]
    return out[0], out[1], out[2]


def _gram_t(
    G: FloatArray, c: FloatArray, yy: float, cols: list[int], nobs: int
) -> tuple[float, float]:
    """(t statistic of the first selected column, AIC) of y ~ X[:, cols] from the Gram matrix."""
    Gs = G[np.ix_(cols, cols)]
    cs = c[cols]
    beta = np.linalg.solve(Gs, cs)
    k = len(cols)
    rss = max(yy - float(beta @ cs), 1e-12 * yy)
    if nobs - k < 1:
        raise ValueError("too few observations")
    e0 = np.zeros(k)
    e0[0] = 1.0
    inv00 = float(np.linalg.solve(Gs, e0)[0])
    var = rss / (nobs - k) * inv00
    if not var > 0:
        raise ValueError("zero standard error")
    return float(beta[0]) / float(np.sqrt(var)), float(nobs * np.log(rss / nobs) + 2 * k)


def _design(x: FloatArray, p: int, start: int, regression: str) -> tuple[FloatArray, FloatArray]:
    """Columns [y_{t-1}, dy_{t-1..t-p}, 1, (t / n)] and target dy_t for t >= start."""
    dx = np.diff(x)
    nobs = dx.size - start
    cols = [x[start : start + nobs]]
    cols += [dx[start - i : start - i + nobs] for i in range(1, p + 1)]
    cols.append(np.ones(nobs))
    if regression == "ct":
        cols.append(np.arange(start + 1, start + 1 + nobs, dtype=np.float64) / x.size)
    return np.column_stack(cols), dx[start:]


def _fit(x: FloatArray, p: int, start: int, regression: str, lags: int) -> tuple[float, float]:
    X, yv = _design(x, p, start, regression)
    G = X.T @ X
    c = X.T @ yv
    cols = list(range(lags + 1)) + list(range(p + 1, X.shape[1]))
    return _gram_t(G, c, float(yv @ yv), cols, X.shape[0])


def adf_test(x: FloatArray, regression: str = "c", lag: int | None = None) -> tuple[float, int]:
    """ADF t statistic and lag used; lag chosen by AIC up to 12 (n/100)^(1/4) when ``lag`` is None.

    Lag selection uses a common sample (the first maxlag observations dropped) and one Gram matrix;
    the chosen lag is then refitted on all available observations (as statsmodels does).
    """
    n = x.size
    if lag is None:
        maxlag = int(min(np.ceil(12.0 * (n / 100.0) ** 0.25), n // 2 - 3 - (regression == "ct")))
        maxlag = max(maxlag, 0)
        X, yv = _design(x, maxlag, maxlag, regression)
        G, c, yy = X.T @ X, X.T @ yv, float(yv @ yv)
        det = X.shape[1] - maxlag - 1
        best = (np.inf, 0)
        for p in range(maxlag + 1):
            cols = list(range(p + 1)) + list(range(maxlag + 1, maxlag + 1 + det))
            _, aic = _gram_t(G, c, yy, cols, X.shape[0])
            if aic < best[0]:
                best = (aic, p)
        lag = best[1]
    t, _ = _fit(x, lag, lag, regression, lag)
    return t, lag


@primitive(
    group="stationarity",
    outputs=("stat", "p", "crit_1", "crit_5", "crit_10", "used_lag", "stationary_5"),
    grid={"regression": ("c", "ct")},
)
@guarded
def adf(y: Any, *, regression: str = "c", lag: int | None = None) -> Result:
    """Augmented Dickey-Fuller t statistic (unit-root null; more negative = more stationary) and p.

    Said and Dickey (1984); equals ``statsmodels.tsa.stattools.adfuller(y, regression=...,
    autolag="AIC")`` (statistic, used lag, MacKinnon p and critical values), about ten times
    faster; pinned in tests/test_primitives_pins.py.

    Args:
        y: Series (at least 20 samples).
        regression: ``"c"`` constant or ``"ct"`` constant and linear trend.
        lag: Number of lagged differences; None selects it by AIC up to 12 (n/100)^(1/4).

    Returns:
        ``stat`` (t statistic), ``p`` (MacKinnon 1994 approximate p), ``crit_1``/``crit_5``/
        ``crit_10`` (MacKinnon 2010 finite-sample critical values), ``used_lag``, ``stationary_5``
        (stat < crit_5).
    """
    x = as_series(y, 20)
    if x is None or is_flat(x) or regression not in _TAU:
        return None
    if lag is not None and not (0 <= int(lag) <= x.size // 3):
        return None
    z = (x - np.mean(x)) / np.std(x)
    t, used = adf_test(z, regression, None if lag is None else int(lag))
    nobs = x.size - 1 - used
    c1, c5, c10 = _crit(nobs, regression)
    return finish(
        {
            "stat": t,
            "p": mackinnon_p(t, regression),
            "crit_1": c1,
            "crit_5": c5,
            "crit_10": c10,
            "used_lag": used,
            "stationary_5": t < c5,
        }
    )


@primitive(
    group="stationarity",
    outputs=("stat", "p", "crit_5", "used_lags", "stationary_5"),
    grid={"regression": ("c", "ct")},
)
@guarded
def kpss(y: Any, *, regression: str = "c", lags: int | None = None) -> Result:
    """KPSS statistic (stationarity null; larger = less stationary), p interpolated in [0.01, 0.10].

    Kwiatkowski, Phillips, Schmidt and Shin (1992), eqs. 10-11, with a Bartlett (Newey-West)
    long-run variance; equals ``statsmodels.tsa.stattools.kpss(y, regression, nlags="legacy")``
    (pinned in tests/test_primitives_pins.py).

    Args:
        y: Series (at least 12 samples).
        regression: ``"c"`` level stationarity or ``"ct"`` trend stationarity.
        lags: Bartlett-kernel lags for the long-run variance (default: statsmodels' ``"legacy"``
            rule ceil(12 (n/100)^(1/4)), capped at n - 1).

    Returns:
        ``stat``, ``p`` (from the KPSS 1992 table; clipped to [0.01, 0.10]), ``crit_5``,
        ``used_lags``, ``stationary_5`` (stat < crit_5).
    """
    x = as_series(y, 12)
    if x is None or is_flat(x) or regression not in _KPSS:
        return None
    n = x.size
    z = (x - np.mean(x)) / np.std(x)
    if regression == "c":
        e = z - z.mean()
    else:
        t = np.arange(n, dtype=np.float64)
        tc = t - t.mean()
        e = z - z.mean() - tc * (np.dot(tc, z) / np.dot(tc, tc))
    L = int(np.ceil(12.0 * (n / 100.0) ** 0.25)) if lags is None else int(lags)
    L = min(max(L, 0), n - 1)
    s2 = float(e @ e) / n
    for k in range(1, L + 1):
        s2 += 2.0 * (1.0 - k / (L + 1.0)) * float(e[k:] @ e[:-k]) / n
    if not s2 > 1e-12:
        return None
    S = np.cumsum(e)
    eta = float(S @ S) / (n * n * s2)
    crit = _KPSS[regression]
    p = float(np.interp(eta, crit, _KPSS_P))
    return finish(
        {"stat": eta, "p": p, "crit_5": crit[1], "used_lags": L, "stationary_5": eta < crit[1]}
    )


@primitive(
    group="stationarity",
    outputs=("vr", "z", "p", "z_homo"),
    grid={"q": (2, 4, 8, 16)},
)
@guarded
def variance_ratio(y: Any, *, q: int = 2) -> Result:
    """Lo-MacKinlay variance ratio of q-step vs 1-step increments (1 = random walk, < 1 mean reversion).

    Args:
        y: Series treated as a level (its first differences are the increments).
        q: Aggregation horizon in samples (2..n/4).

    Returns:
        ``vr``, ``z`` (heteroskedasticity-robust statistic), ``p`` (two-sided, from ``z``),
        ``z_homo`` (homoskedastic statistic).
    """
    x = as_series(y, 16)
    if x is None or is_flat(x):
        return None
    d = np.diff(x)
    T = d.size
    qq = int(q)
    if not (2 <= qq <= T // 4):
        return None
    mu = float(np.mean(d))
    e = d - mu
    s1 = float(e @ e) / (T - 1)
    if not s1 > 0:
        return None
    c = np.concatenate(([0.0], np.cumsum(d)))
    agg = c[qq:] - c[:-qq] - qq * mu
    m = qq * (T - qq + 1) * (1.0 - qq / T)
    sq = float(agg @ agg) / m
    vr = sq / s1
    z_homo = (vr - 1.0) / np.sqrt(2.0 * (2 * qq - 1) * (qq - 1) / (3.0 * qq * T))
    e2 = e * e
    den = float(np.sum(e2)) ** 2
    theta = 0.0
    for j in range(1, qq):
        delta = T * float(e2[j:] @ e2[:-j]) / den
        theta += (2.0 * (qq - j) / qq) ** 2 * delta
    z = (vr - 1.0) / np.sqrt(theta / T) if theta > 0 else 0.0
    return finish(
        {"vr": vr, "z": z, "p": float(2.0 * stats.norm.sf(abs(z))), "z_homo": float(z_homo)}
    )


@primitive(
    group="stationarity",
    outputs=("order", "p_level", "p_diff1", "p_diff2"),
)
@guarded
def integration_order(y: Any, *, alpha: float = 0.05) -> Result:
    """Order of integration 0/1/2 (3 = more): differences needed before ADF (constant) rejects at alpha.

    Args:
        y: Series (at least 24 samples).
        alpha: Significance level.

    Returns:
        ``order``, ``p_level``, ``p_diff1``, ``p_diff2`` (ADF p-values of the level, first and
        second difference; 0.0 for a difference that is numerically constant, e.g. a pure line).
    """
    x = as_series(y, 24)
    if x is None or is_flat(x):
        return None
    ps = []
    cur = x
    for _ in range(3):
        if is_flat(cur):
            ps.append(0.0)
        else:
            z = (cur - cur.mean()) / cur.std()
            t, _ = adf_test(z, "c")
            ps.append(mackinnon_p(t, "c"))
        cur = np.diff(cur)
    order = next((i for i, p in enumerate(ps) if p < float(alpha)), 3)
    return finish({"order": order, "p_level": ps[0], "p_diff1": ps[1], "p_diff2": ps[2]})
