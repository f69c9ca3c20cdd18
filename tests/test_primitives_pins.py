"""Hand-written primitives pinned to the libraries they re-implement for speed inside the sandbox.

statsmodels (ADF, KPSS, ACF, PACF, Ljung-Box, Granger, Hannan-Rissanen, Bartlett bands, ARCH LM,
Markov switching), PyWavelets (Haar DWT) and stumpy (matrix profile) are imported here only: the
catalog itself never imports statsmodels or stumpy (see tests/test_primitives_concepts.py). stumpy
runs in a subprocess with numba's JIT disabled, because compiling ``stump`` takes tens of seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import pywt
from statsmodels.stats.diagnostic import acorr_ljungbox, het_arch
from statsmodels.tsa.arima.estimators.hannan_rissanen import hannan_rissanen as sm_hr
from statsmodels.tsa.regime_switching.markov_regression import MarkovRegression
from statsmodels.tsa.stattools import acf as sm_acf
from statsmodels.tsa.stattools import adfuller, grangercausalitytests
from statsmodels.tsa.stattools import kpss as sm_kpss
from statsmodels.tsa.stattools import pacf as sm_pacf

from tsevo.library.primitives import arma, autocorr, motif, regime, stationarity, wavelet
from tsevo.library.primitives.pair import granger


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.simplefilter("ignore")


def series(i: int) -> np.ndarray:
    """Random series of 40..600 samples: white noise, random walk, AR(1) or a noisy line."""
    g = np.random.default_rng(1000 + i)
    n = int(g.integers(40, 600))
    e = g.normal(size=n)
    kind = i % 4
    if kind == 0:
        return e
    if kind == 1:
        return np.cumsum(e)
    if kind == 2:
        x = np.zeros(n)
        phi = g.uniform(-0.9, 0.95)
        for t in range(1, n):
            x[t] = phi * x[t - 1] + e[t]
        return x
    return 0.02 * g.normal() * np.arange(n) + e


def arma_sim(ar: list[float], ma: list[float], n: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    e = g.normal(size=n + 100)
    x = np.zeros(n + 100)
    for t in range(3, n + 100):
        x[t] = (
            sum(a * x[t - 1 - i] for i, a in enumerate(ar))
            + e[t]
            + sum(b * e[t - 1 - j] for j, b in enumerate(ma))
        )
    return x[100:]


# ---------------------------------------------------------------- stationarity


def test_adf_matches_statsmodels_on_200_series() -> None:
    """Every series at a fixed lag (one regression each), and every fifth with AIC lag selection."""
    for i in range(200):
        y = series(i)
        reg = "c" if i % 3 else "ct"
        lag = i % 7
        r = stationarity.adf(y, regression=reg, lag=lag)
        s = adfuller(y, maxlag=lag, regression=reg, autolag=None)
        assert r is not None
        assert r["stat"] == pytest.approx(s[0], rel=1e-9, abs=1e-9), i
        assert r["p"] == pytest.approx(s[1], rel=1e-7, abs=1e-9), i
        assert r["crit_5"] == pytest.approx(s[4]["5%"], rel=1e-9), i
        if i % 5 == 0:
            r = stationarity.adf(y, regression=reg)
            s = adfuller(y, regression=reg, autolag="AIC")
            assert r is not None
            assert r["used_lag"] == s[2], i
            assert r["stat"] == pytest.approx(s[0], rel=1e-9, abs=1e-9), i


@pytest.mark.parametrize("reg", ["c", "ct"])
def test_kpss_matches_statsmodels_legacy_lags_on_200_series(reg: str) -> None:
    for i in range(200):
        y = series(i)
        r = stationarity.kpss(y, regression=reg)
        s = sm_kpss(y, regression=reg, nlags="legacy")
        assert r is not None
        assert r["used_lags"] == s[2], i
        assert r["stat"] == pytest.approx(s[0], rel=1e-9, abs=1e-12), i
        assert r["p"] == pytest.approx(s[1], rel=1e-9), i


# ---------------------------------------------------------------- autocorrelation


def test_acf_pacf_ljung_box_match_statsmodels() -> None:
    for i in range(40):
        y = series(i)
        n = y.size
        r = autocorr.acf_values(y, n // 2)
        assert r is not None
        assert np.allclose(r, sm_acf(y, nlags=n // 2, fft=True), atol=1e-12), i
        L = min(10, n // 4 - 1)
        pa = autocorr.pacf(y, max_lag=L)
        assert pa is not None
        # Durbin-Levinson on the biased ACF is statsmodels' "ldb" method
        assert np.allclose(pa["pacf"], sm_pacf(y, nlags=L, method="ldb")[1:], atol=1e-10), i
        lb = autocorr.ljung_box(y, lags=10)
        s = acorr_ljungbox(y, lags=[10])
        assert lb is not None
        assert lb["q"] == pytest.approx(float(s["lb_stat"].iloc[0]), rel=1e-9), i
        assert lb["p"] == pytest.approx(float(s["lb_pvalue"].iloc[0]), rel=1e-7, abs=1e-12), i


def test_granger_matches_statsmodels_both_directions() -> None:
    for i in range(30):
        g = np.random.default_rng(i)
        a = series(i)
        b = np.roll(a, 2) * 0.6 + g.normal(size=a.size)
        lag = 1 + i % 3
        r = granger(a, b, lag=lag)
        assert r is not None
        ab = grangercausalitytests(np.column_stack([b, a]), [lag])[lag][0]["ssr_ftest"]
        ba = grangercausalitytests(np.column_stack([a, b]), [lag])[lag][0]["ssr_ftest"]
        assert r["f_a_to_b"] == pytest.approx(ab[0], rel=1e-7), i
        assert r["p_a_to_b"] == pytest.approx(ab[1], rel=1e-6, abs=1e-12), i
        assert r["f_b_to_a"] == pytest.approx(ba[0], rel=1e-7), i
        assert r["p_b_to_a"] == pytest.approx(ba[1], rel=1e-6, abs=1e-12), i


# ---------------------------------------------------------------- ARMA identification


@pytest.mark.parametrize("order", [(1, 1), (2, 1), (1, 2), (0, 2), (2, 0), (3, 0)])
def test_hannan_rissanen_matches_statsmodels(order: tuple[int, int]) -> None:
    p, q = order
    for seed in range(6):
        x = arma_sim([0.5, -0.2], [0.4], 300, seed)
        params, rss, nobs = arma.hannan_rissanen(x - x.mean(), p, q)
        s = sm_hr(x, ar_order=p, ma_order=q, demean=True, unbiased=False)[0]
        ref = np.r_[s.ar_params if p else [], s.ma_params if q else []]
        assert np.allclose(params, ref, atol=1e-10), (order, seed)
        assert rss / (nobs - p - q) == pytest.approx(s.sigma2, rel=1e-9)


def test_yule_walker_and_bartlett_band_match_statsmodels() -> None:
    from statsmodels.regression.linear_model import yule_walker

    for i in range(20):
        y = series(i)
        d = y - y.mean()
        rho, _ = yule_walker(d, order=5, method="mle")
        assert np.allclose(arma.yule_walker_mle(d, 5), rho, atol=1e-10), i
        r, ci = sm_acf(y, nlags=10, alpha=0.05, fft=True)
        ours = arma.bartlett_band(autocorr.acf_values(y, 10), y.size, 10)  # type: ignore[arg-type]
        assert np.allclose(ours, (ci[:, 1] - r)[1:], atol=1e-12), i


@pytest.mark.parametrize("diff", [False, True])
def test_arch_lm_matches_het_arch(diff: bool) -> None:
    for i in range(30):
        y = series(i) ** 2 if i % 2 else series(i)
        lags = 1 + i % 6
        r = arma.arch_lm(y, lags=lags, diff=diff)
        x = np.diff(y) if diff else y
        s = het_arch(x - x.mean(), nlags=lags)
        assert r is not None
        assert r["lm"] == pytest.approx(s[0], rel=1e-7, abs=1e-9), i
        assert r["p"] == pytest.approx(s[1], rel=1e-6, abs=1e-12), i


# ---------------------------------------------------------------- regimes


def test_two_state_hmm_matches_statsmodels_markov_regression() -> None:
    g = np.random.default_rng(5)
    for mus, sds, stay in (((0.0, 2.0), (1.0, 1.0), 0.97), ((0.0, 0.5), (1.0, 3.0), 0.95)):
        s, out = 0, []
        for _ in range(300):
            if g.random() > stay:
                s = 1 - s
            out.append(g.normal(mus[s], sds[s]))
        x = np.array(out)
        z = (x - x.mean()) / x.std()
        fits = [regime.hmm2_fit(z, m, v) for m, v in regime._starts(z)]
        ll, mu, var, A, _ = max(fits, key=lambda f: f[0])
        res = MarkovRegression(z, k_regimes=2, switching_variance=True).fit()
        # statsmodels starts the chain in its stationary distribution, ours estimates it: the
        # likelihoods differ by at most a few tenths of a nat
        assert ll == pytest.approx(res.llf, abs=1.5)
        sm_mu, sm_var = res.params[2:4], res.params[4:6]
        order, sm_order = np.argsort(mu), np.argsort(sm_mu)
        assert np.allclose(mu[order], sm_mu[sm_order], atol=0.02)
        assert np.allclose(var[order], sm_var[sm_order], rtol=0.03)
        sm_stay = np.array([res.params[0], 1.0 - res.params[1]])  # p[0->0], 1 - p[1->0]
        assert np.allclose(np.diag(A)[order], sm_stay[sm_order], atol=0.02)


# ---------------------------------------------------------------- wavelets and matrix profile


def test_haar_dwt_matches_pywavelets() -> None:
    for i in range(10):
        x = np.random.default_rng(i).normal(size=256)
        approx, det = wavelet.haar_dwt(x, 4)
        ref = pywt.wavedec(x, "haar", mode="periodization", level=4)
        assert np.allclose(approx, ref[0], atol=1e-12)
        for lev, d in enumerate(det, start=1):
            assert np.allclose(np.abs(d), np.abs(ref[-lev]), atol=1e-12), lev


_STUMP = """
import json, sys
import numpy as np
import stumpy
stumpy.config.STUMPY_EXCL_ZONE_DENOM = 2
out = []
for seed, n, m in json.loads(sys.argv[1]):
    x = np.random.default_rng(seed).normal(size=n).cumsum() * 0.2 + np.random.default_rng(seed + 1).normal(size=n)
    mp = stumpy.stump(x, m)
    out.append([mp[:, 0].astype(float).tolist(), mp[:, 1].astype(int).tolist()])
print(json.dumps(out))
"""


def test_matrix_profile_matches_stumpy() -> None:
    cases = [(1, 160, 12), (3, 257, 16)]
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "NUMBA_CACHE_DIR": "/nonexistent"}
    r = subprocess.run(
        [sys.executable, "-c", _STUMP, json.dumps(cases)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    for (seed, n, m), (prof_ref, _idx) in zip(cases, json.loads(r.stdout), strict=True):
        x = np.random.default_rng(seed).normal(size=n).cumsum() * 0.2 + np.random.default_rng(
            seed + 1
        ).normal(size=n)
        prof, _ = motif.matrix_profile(x, m)
        assert np.allclose(prof, prof_ref, atol=1e-6), (seed, n, m)
