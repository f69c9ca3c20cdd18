"""ARMA order identification and conditional heteroskedasticity (group ``arma``).

Box-Jenkins identification from the ACF and PACF cut-offs, ARMA(p, q) order selection by an
information criterion over Hannan-Rissanen regressions, and Engle's ARCH LM test. The regressions are
closed-form numpy; tests/test_primitives_pins.py pins them to statsmodels
(``statsmodels.tsa.arima.estimators.hannan_rissanen.hannan_rissanen``, ``acf(..., alpha=0.05)``,
``statsmodels.stats.diagnostic.het_arch``), which fit one model per call and are 10-50x slower.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import linalg, signal, stats

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat
from ._registry import primitive
from .autocorr import acf_values, pacf_values

__all__ = [
    "arch_lm",
    "arma_order",
    "bartlett_band",
    "hannan_rissanen",
    "initial_ar_order",
    "leading_run",
    "yule_walker_mle",
]

_CUTOFF_LAGS = 10
_Z95 = 1.959963984540054


def yule_walker_mle(x: FloatArray, order: int) -> FloatArray:
    """AR(order) coefficients of demeaned ``x`` by Yule-Walker with the biased (MLE) autocovariance.

    Equals ``statsmodels.regression.linear_model.yule_walker(x, order, method="mle")``.
    """
    n = x.size
    d = x - np.mean(x)
    r = np.array([float(d[: n - k] @ d[k:]) / n for k in range(order + 1)])
    return np.asarray(linalg.solve_toeplitz(r[:order], r[1 : order + 1]), dtype=np.float64)


def initial_ar_order(n: int, max_order: int) -> int:
    """Long-AR order of the first Hannan-Rissanen stage: max(floor(log(n)^2), 2 max(p, q)).

    The rule of Gomez and Maravall (2001), statsmodels' default.
    """
    return max(int(np.floor(np.log(n) ** 2)), 2 * max_order)


def _long_ar_resid(x: FloatArray, m: int) -> FloatArray:
    """Residuals of the long AR(m) (Yule-Walker); entries before index m are 0 (never used)."""
    phi = yule_walker_mle(x, m)
    n = x.size
    e = np.zeros(n)
    X = np.column_stack([x[m - i : n - i] for i in range(1, m + 1)])
    e[m:] = x[m:] - X @ phi
    return e


def _design(x: FloatArray, e: FloatArray | None, p: int, q: int, start: int) -> FloatArray:
    """Columns [x_{t-1..t-p}, e_{t-1..t-q}] for rows t = start..n-1."""
    n = x.size
    cols = [x[start - i : n - i] for i in range(1, p + 1)]
    if q:
        assert e is not None
        cols += [e[start - j : n - j] for j in range(1, q + 1)]
    return np.column_stack(cols) if cols else np.zeros((n - start, 0))


def hannan_rissanen(
    x: FloatArray, p: int, q: int, m: int | None = None, start: int | None = None
) -> tuple[FloatArray, float, int]:
    """Second-stage Hannan-Rissanen least squares of a demeaned series: (params, rss, nobs).

    Stage 1 fits a long AR(m) by Yule-Walker and keeps its residuals e; stage 2 regresses x_t on
    x_{t-1..t-p} and e_{t-1..t-q} (no intercept) over rows t >= ``start``. With the defaults
    (m from :func:`initial_ar_order`, start = m + q, or p when q = 0) ``params`` (AR then MA) and
    ``rss / (nobs - p - q)`` equal statsmodels' ``hannan_rissanen(x, p, q, unbiased=False)``
    parameters and ``sigma2``.
    """
    n = x.size
    if q == 0:
        s = p if start is None else start
        X = _design(x, None, p, 0, s)
    else:
        mm = initial_ar_order(n, max(p, q)) if m is None else m
        s = mm + q if start is None else start
        X = _design(x, _long_ar_resid(x, mm), p, q, s)
    yv = x[s:]
    if X.shape[1] == 0:
        return np.zeros(0), float(yv @ yv), int(yv.size)
    beta, *_ = np.linalg.lstsq(X, yv, rcond=None)
    r = yv - X @ beta
    return np.asarray(beta, dtype=np.float64), float(r @ r), int(yv.size)


def bartlett_band(r: FloatArray, n: int, max_lag: int) -> FloatArray:
    """Half-width of Bartlett's 95% band of the ACF at lags 1..max_lag.

    At lag k: 1.96 sqrt((1 + 2 sum_{j<k} r_j^2) / n), the MA(k - 1) null; equals the confidence
    interval of ``statsmodels.tsa.stattools.acf(x, alpha=0.05)``.
    """
    var = (1.0 + 2.0 * np.concatenate(([0.0], np.cumsum(r[1:max_lag] ** 2)))) / n
    return np.asarray(_Z95 * np.sqrt(var), dtype=np.float64)


def leading_run(mask: Any) -> int:
    """Number of leading True values: the lag after which a correlogram cuts off."""
    off = np.flatnonzero(~np.asarray(mask, dtype=bool))
    return int(off[0]) if off.size else int(np.size(mask))


def _css(x: FloatArray, ar: Any, ma: Any, start: int) -> float:
    """Conditional sum of squares of ARMA innovations over rows >= start (residuals filtered)."""
    e = signal.lfilter(np.r_[1.0, -ar], np.r_[1.0, ma], x)
    tail = e[start:]
    return float(tail @ tail)


@primitive(
    group="arma",
    outputs=(
        "p",
        "q",
        "pure_ar_p",
        "pure_ma_q",
        "ic_gain",
        "resid_var_ratio",
        "acf_cutoff",
        "pacf_cutoff",
    ),
    grid={"criterion": ("bic", "aic"), "diff": (False, True)},
)
@guarded
def arma_order(
    y: Any, *, max_p: int = 3, max_q: int = 3, criterion: str = "bic", diff: bool = False
) -> Result:
    """ARMA(p, q) orders by BIC or AIC (Hannan-Rissanen regressions) and the ACF/PACF cut-offs.

    Hannan and Rissanen (1982): one long AR (Yule-Walker) gives innovation estimates; every
    (p, q) up to (max_p, max_q) is then a least-squares regression on lagged values and lagged
    innovations over one common sample of N rows, scored by N log(rss / N) + k (p + q) with
    k = log N (BIC) or 2 (AIC), where rss is the conditional sum of squares of the innovations
    the fitted ARMA filters out of the series (so a near non-invertible fit scores badly).
    Box and Jenkins identification alongside: the ACF of an MA(q) cuts off after lag q (Bartlett
    bands), the PACF of an AR(p) after lag p (+-1.96 / sqrt n); a cut-off is the number of
    leading significant lags among 1..10.

    Args:
        y: Series (at least 48 samples after differencing; demeaned here).
        max_p: Largest AR order (0..6).
        max_q: Largest MA order (0..6).
        criterion: ``"bic"`` or ``"aic"``.
        diff: Identify the first difference (an ARIMA(p, 1, q) model of y).

    Returns:
        ``p``, ``q`` (selected orders), ``pure_ar_p`` (best order with q = 0), ``pure_ma_q`` (best
        order with p = 0), ``ic_gain`` ((IC of white noise - IC of the selected model) / N,
        nats per observation; 0 when white noise wins), ``resid_var_ratio`` (innovation variance of
        the selected model over the variance of y), ``acf_cutoff``, ``pacf_cutoff``.
    """
    x = as_series(y, 8)
    if x is None or criterion not in ("bic", "aic"):
        return None
    P, Q = int(max_p), int(max_q)
    if not (0 <= P <= 6 and 0 <= Q <= 6):
        return None
    if diff:
        x = np.diff(x)
    n = x.size
    if n < 48 or is_flat(x):
        return None
    x = x - np.mean(x)
    m = initial_ar_order(n, max(P, Q, 1))
    start = m + Q
    N = n - start
    if N < 3 * (P + Q) + 24:
        return None
    X = _design(x, _long_ar_resid(x, m) if Q else None, P, Q, start)
    yv = x[start:]
    G, c, yy = X.T @ X, X.T @ yv, float(yv @ yv)
    k = np.log(N) if criterion == "bic" else 2.0
    ic = np.full((P + 1, Q + 1), np.inf)
    rss_of = np.full((P + 1, Q + 1), yy)
    for p in range(P + 1):
        for q in range(Q + 1):
            cols = list(range(p)) + list(range(P, P + q))
            if cols:
                beta = np.linalg.solve(G[np.ix_(cols, cols)], c[cols])
                rss = yy - float(beta @ c[cols])
                if q:  # score the regression's ARMA by its own filtered innovations
                    rss = _css(x, beta[:p], beta[p:], start)
                rss_of[p, q] = rss if np.isfinite(rss) else np.inf
            rss = max(float(rss_of[p, q]), 1e-12 * yy)
            ic[p, q] = N * np.log(rss / N) + k * (p + q) if np.isfinite(rss) else np.inf
    flat_ix = int(np.argmin(ic))  # ties go to the smallest p, then q
    bp, bq = divmod(flat_ix, Q + 1)
    r = acf_values(x, _CUTOFF_LAGS)
    if r is None:
        return None
    pa = pacf_values(r, _CUTOFF_LAGS)
    band = bartlett_band(r, n, _CUTOFF_LAGS)
    return finish(
        {
            "p": bp,
            "q": bq,
            "pure_ar_p": int(np.argmin(ic[:, 0])),
            "pure_ma_q": int(np.argmin(ic[0, :])),
            "ic_gain": float(ic[0, 0] - ic[bp, bq]) / N,
            "resid_var_ratio": float(rss_of[bp, bq] / yy),
            "acf_cutoff": leading_run(np.abs(r[1:]) > band),
            "pacf_cutoff": leading_run(np.abs(pa) > _Z95 / np.sqrt(n)),
        }
    )


@primitive(
    group="arma",
    outputs=("lm", "p", "r2", "sq_acf1", "arch_5"),
    grid={"lags": (1, 5, 10), "diff": (False, True)},
)
@guarded
def arch_lm(y: Any, *, lags: int = 5, diff: bool = False) -> Result:
    """Engle's ARCH LM test for volatility clustering: N R^2 of squared deviations on their lags.

    Engle (1982): regress e_t^2 on a constant and e_{t-1}^2..e_{t-lags}^2, where e is y (or its
    first difference) minus its mean; LM = N R^2 is chi-square with ``lags`` degrees of freedom
    under constant variance. Equals ``statsmodels.stats.diagnostic.het_arch(e, nlags=lags)``.

    Args:
        y: Series (at least 16 samples and 4 lags + 10).
        lags: Number of lagged squares (1..20).
        diff: Test the first difference (returns of a price-like level).

    Returns:
        ``lm``, ``p``, ``r2`` (of the auxiliary regression), ``sq_acf1`` (lag-1 autocorrelation of
        e^2), ``arch_5`` (p < 0.05). A series whose squared deviations are constant has lm 0, p 1.
    """
    x = as_series(y, 16)
    L = int(lags)
    if x is None or not (1 <= L <= 20):
        return None
    if diff:
        x = np.diff(x)
    if x.size < 4 * L + 10 or is_flat(x):
        return None
    s = (x - np.mean(x)) ** 2
    if is_flat(s):
        return finish({"lm": 0.0, "p": 1.0, "r2": 0.0, "sq_acf1": 0.0, "arch_5": False})
    n = s.size
    X = np.column_stack([np.ones(n - L), *[s[L - i : n - i] for i in range(1, L + 1)]])
    yv = s[L:]
    beta, *_ = np.linalg.lstsq(X, yv, rcond=None)
    res = yv - X @ beta
    dev = yv - np.mean(yv)
    tss = float(dev @ dev)
    r2 = max(0.0, 1.0 - float(res @ res) / tss) if tss > 0 else 0.0
    lm = (n - L) * r2
    p = float(stats.chi2.sf(lm, L))
    ra = acf_values(s, 1)
    return finish(
        {
            "lm": lm,
            "p": p,
            "r2": r2,
            "sq_acf1": float(ra[1]) if ra is not None else 0.0,
            "arch_5": p < 0.05,
        }
    )
