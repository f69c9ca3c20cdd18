"""The catalog's tests with serial correlation allowed for: level under the null, power, pins.

``correlation_test`` (Bartlett's effective pairs), ``endpoint_change``'s ``p`` (Welch on effective
sample sizes) and ``trend_change_test`` (broken-stick and quadratic fits with inflated standard
errors) are read as Yes / No verdicts at 5% (:func:`tsevo.roles.builtin.optsem.significance_rule`),
so how often they reject where nothing is there is what matters. Each level below is measured on a
few hundred simulated series; the naive test beside it shows what the correction buys.
"""

from __future__ import annotations

import numpy as np
import statsmodels.api as sm
from scipy import stats

from tsevo.library.primitives import CATALOG
from tsevo.library.primitives.cortest import effective_pairs
from tsevo.library.primitives.summary import _equal_means_p
from tsevo.library.primitives.trendtest import _fit

CORR = CATALOG["correlation_test"].fn
ENDS = CATALOG["endpoint_change"].fn
TURN = CATALOG["trend_change_test"].fn


def ar1(g: np.random.Generator, n: int, phi: float) -> np.ndarray:
    e = g.normal(size=n + 50)
    x = np.zeros(n + 50)
    for t in range(1, n + 50):
        x[t] = phi * x[t - 1] + e[t]
    return x[50:]


def rate(flags: list[bool]) -> float:
    return float(np.mean(flags))


def test_correlation_test_keeps_its_level_on_persistent_series_where_pearson_does_not() -> None:
    g = np.random.default_rng(11)
    pairs = [(ar1(g, 200, 0.9), ar1(g, 200, 0.9)) for _ in range(300)]
    ours = rate([CORR(a, b)["p"] < 0.05 for a, b in pairs])
    lagged = rate([CORR(a, b, max_lag=0.25)["p"] < 0.05 for a, b in pairs])
    naive = rate([stats.pearsonr(a, b).pvalue < 0.05 for a, b in pairs])
    assert ours <= 0.09 and lagged <= 0.09, (ours, lagged)
    assert naive >= 0.3, naive  # the correction is what keeps the level
    white = [(g.normal(size=150), g.normal(size=150)) for _ in range(300)]
    assert rate([CORR(a, b, max_lag=0.25)["p"] < 0.05 for a, b in white]) <= 0.09


def test_correlation_test_reads_sign_and_lag() -> None:
    g = np.random.default_rng(3)
    t = np.arange(240)
    base = np.sin(2 * np.pi * t / 80) + 0.3 * np.sin(2 * np.pi * t / 23)
    flipped = CORR(base, -3 * base + 5 + 0.3 * g.normal(size=240))
    assert flipped["p_neg"] < 1e-3 and flipped["p_pos"] > 0.99 and flipped["r"] < -0.9
    same = CORR(base, base + 0.3 * g.normal(size=240))
    assert same["p_pos"] < 1e-3 and same["p_neg"] > 0.99
    shifted = np.roll(base, 17) + 0.1 * g.normal(size=240)
    out = CORR(base[20:], shifted[20:], max_lag=0.25)
    assert out["best_lag"] == 17 and out["p_pos"] < 1e-3
    assert CORR(base, np.ones(240)) is None and CORR(base[:5], base[:5]) is None


def test_effective_pairs_follows_bartlett_for_two_ar1_series() -> None:
    # two independent AR(1) series with coefficient phi: n_eff ~ n (1 - phi^2) / (1 + phi^2)
    g = np.random.default_rng(5)
    n = 4000
    assert effective_pairs(g.normal(size=n), g.normal(size=n)) > 0.8 * n
    for phi in (0.5, 0.8):
        got = np.median([effective_pairs(ar1(g, n, phi), ar1(g, n, phi)) for _ in range(5)])
        want = n * (1 - phi**2) / (1 + phi**2)
        assert abs(got / want - 1) < 0.25, (phi, got, want)


def test_endpoint_p_keeps_its_level_and_finds_a_shift() -> None:
    g = np.random.default_rng(2)
    null = [ar1(g, 200, 0.5) for _ in range(300)]
    ours = rate([ENDS(y, frac=0.2)["p"] < 0.05 for y in null])
    naive = rate([stats.ttest_ind(y[:40], y[-40:], equal_var=False).pvalue < 0.05 for y in null])
    assert ours <= 0.09 and naive >= 0.15, (ours, naive)
    shifted = [ar1(g, 200, 0.5) + 2.0 * (np.arange(200) >= 120) for _ in range(100)]
    assert rate([ENDS(y, frac=0.2)["p"] < 0.05 for y in shifted]) >= 0.9


def test_endpoint_p_is_welch_when_the_windows_carry_no_serial_correlation() -> None:
    # alternating samples: the lag-1 estimate is negative, clipped to none, and the test is Welch's
    g = np.random.default_rng(8)
    u = g.normal(size=30) * np.where(np.arange(30) % 2, 1.0, -1.0) + np.where(
        np.arange(30) % 2, 1.0, -1.0
    )
    v = u[::-1] * 1.5 + 0.4
    want = stats.ttest_ind(u, v, equal_var=False).pvalue
    assert np.isclose(_equal_means_p(u, v), want, rtol=1e-9)


def test_regression_fit_is_ols_with_an_inflated_covariance() -> None:
    g = np.random.default_rng(4)
    n = 150
    t = np.linspace(0, 1, n)
    design = np.column_stack((np.ones(n), t, t * t))
    y = 1 + 2 * t + ar1(g, n, 0.6)
    fit = _fit(y, design)
    assert fit is not None
    beta, cov, df, res = fit
    ols = sm.OLS(y, design).fit()
    phi = float(np.clip(np.dot(res[1:], res[:-1]) / np.dot(res, res), 0, 0.95))
    inflate = (1 + phi) / (1 - phi)
    assert np.allclose(beta, ols.params) and np.allclose(cov / inflate, ols.cov_params())
    assert np.isclose(df, n / inflate - 3)


def test_trend_change_test_reads_turns_and_acceleration() -> None:
    g = np.random.default_rng(9)
    n = 200
    t = np.arange(n)
    turn = np.interp(t, [0, 90, n - 1], [0, 6, 0]) + ar1(g, n, 0.3)
    kink = np.interp(t, [0, 90, n - 1], [0, 3, 8]) + ar1(g, n, 0.3)
    grow = np.exp(3 * t / n) + 0.2 * g.normal(size=n)
    r_turn, r_kink, r_grow = TURN(turn), TURN(kink), TURN(grow)
    assert r_turn["p_reversal"] < 1e-3 and abs(r_turn["break_frac"] - 90 / (n - 1)) < 0.05
    assert r_kink["p_reversal"] > 0.5 and r_kink["p_change"] < 0.05
    assert r_grow["p_accelerating"] < 1e-3 and TURN(-grow)["p_accelerating"] < 1e-3
    assert TURN(np.log1p(t))["p_accelerating"] > 0.99  # growth that slows down


def test_trend_change_test_levels_on_lines_with_serial_correlation() -> None:
    g = np.random.default_rng(12)
    lines = [ar1(g, 200, 0.3) + np.linspace(0, 3, 200) for _ in range(200)]
    got = [TURN(y) for y in lines]
    assert rate([r["p_accelerating"] < 0.05 for r in got]) <= 0.1
    assert rate([r["p_reversal"] < 0.05 for r in got]) <= 0.05
    # the break search is not corrected for: on flat noise a turn is found more often than 5%
    flat = [TURN(ar1(g, 200, 0.3))["p_reversal"] < 0.05 for _ in range(200)]
    assert rate(flat) <= 0.15
