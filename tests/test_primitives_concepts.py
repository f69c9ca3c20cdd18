"""Known answers for the real-world-concept primitives (change points, wavelets, catch22, ARMA
order, ARCH, window moments, regimes), and what importing the catalog costs the sandbox.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tsevo.library.primitives import CATALOG, arma, canonical, regime
from tsevo.library.primitives.changepoint import kernel_change_points
from tsevo.library.primitives.wavelet import dwt_energy
from tsevo.library.primitives.window import window_moments


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def arma_sim(ar: list[float], ma: list[float], n: int, seed: int) -> np.ndarray:
    g = rng(seed)
    e = g.normal(size=n + 100)
    x = np.zeros(n + 100)
    for t in range(3, n + 100):
        x[t] = (
            sum(a * x[t - 1 - i] for i, a in enumerate(ar))
            + e[t]
            + sum(b * e[t - 1 - j] for j, b in enumerate(ma))
        )
    return x[100:]


def switching(n: int, mus: tuple[float, float], sds: tuple[float, float], stay: float, seed: int):  # type: ignore[no-untyped-def]
    g = rng(seed)
    s, out = 0, []
    for _ in range(n):
        if g.random() > stay:
            s = 1 - s
        out.append(g.normal(mus[s], sds[s]))
    return np.array(out)


# ---------------------------------------------------------------- imports and the sandbox


def test_catalog_imports_no_jit_or_statsmodels_and_calls_import_nothing() -> None:
    """Children fork from the warm parent and may not import lazily (rlimits, and the OS layer
    may deny file access): every primitive call must be served by modules already imported."""
    code = """
import sys
import numpy as np
from tsevo.library.primitives import CATALOG
heavy = [m for m in ("statsmodels", "stumpy", "numba", "llvmlite", "pandas") if m in sys.modules]
before = set(sys.modules)
g = np.random.default_rng(0)
a = np.cumsum(g.normal(size=400)) * 0.3 + np.sin(np.arange(400) / 4) + g.normal(size=400)
b = np.roll(a, 3) + g.normal(size=400)
for name, spec in sorted(CATALOG.items()):
    if spec.group == "forecast":
        continue
    args = (a,) if spec.arity == "single" else (a, b)
    spec.fn(*args)
    for key, values in spec.grid.items():
        for v in values:
            spec.fn(*args, **{key: v})
new = sorted(set(sys.modules) - before)
print(heavy, new)
sys.exit(1 if heavy or new else 0)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]


# ---------------------------------------------------------------- change points (ruptures)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_kernel_change_points_planted_mean_shift(kernel: str) -> None:
    x = rng(1).normal(size=300)
    x[180:] += 2.0
    r = kernel_change_points(x, kernel=kernel)
    assert r is not None and r["n_changes"] == 1
    assert r["shift_loc_frac"] == pytest.approx(0.6, abs=0.02)
    assert r["max_mean_shift_sigma"] > 1.5
    assert np.allclose(r["locations"], [r["first_loc_frac"]])
    quiet = kernel_change_points(rng(2).normal(size=300), kernel=kernel)
    assert quiet is not None and quiet["n_changes"] == 0 and quiet["first_loc_frac"] == -1.0


def test_kernel_change_points_rbf_sees_a_variance_change_and_long_series() -> None:
    x = rng(3).normal(size=300)
    x[100:] *= 4.0
    r = kernel_change_points(x, kernel="rbf")
    assert r is not None and r["n_changes"] >= 1
    assert r["var_loc_frac"] == pytest.approx(1 / 3, abs=0.03) and r["max_log_var_ratio"] > 1.5
    long = rng(4).normal(size=5000)
    long[3000:] += 1.5
    rl = kernel_change_points(long)
    assert rl is not None and rl["shift_loc_frac"] == pytest.approx(0.6, abs=0.01)


# ---------------------------------------------------------------- wavelets (PyWavelets)


def test_dwt_energy_locates_the_scale_of_a_tone_and_of_white_noise() -> None:
    t = np.arange(512.0)
    for period, level in ((3.0, 1), (12.0, 3), (48.0, 5)):
        r = dwt_energy(np.sin(2 * np.pi * t / period), wavelet="sym8")
        assert r is not None and r["dominant_level"] == level, (period, r)
    w = dwt_energy(rng(5).normal(size=512))
    assert w is not None and w["e_d1"] == pytest.approx(0.5, abs=0.08)
    assert sum(w[f"e_d{k}"] for k in range(1, 6)) + w["e_approx"] == pytest.approx(1.0)
    assert w["wavelet_entropy"] > 1.0 and w["levels"] == 5
    short = dwt_energy(rng(6).normal(size=40), wavelet="db4")
    assert short is not None and short["levels"] == 2 and short["e_d5"] == 0.0


# ---------------------------------------------------------------- catch22


def test_catch22_names_and_known_features() -> None:
    assert (
        CATALOG["catch22"].outputs == canonical.CATCH22_NAMES and len(canonical.CATCH22_NAMES) == 22
    )
    t = np.arange(400.0)
    sine = canonical.catch22(np.sin(2 * np.pi * t / 25) + 0.05 * rng(7).normal(size=400))
    noise = canonical.catch22(rng(8).normal(size=400))
    assert sine is not None and noise is not None
    assert sine["periodicity"] == pytest.approx(25, abs=1)
    assert sine["acf_first_min"] == pytest.approx(12.5, abs=1.5)
    assert noise["acf_timescale"] < 2 < sine["acf_timescale"]
    assert canonical.catch22(np.full(100, 3.0)) is None and canonical.catch22(np.ones(10)) is None


# ---------------------------------------------------------------- ARMA order, ARCH


def test_arma_order_identifies_ar_ma_and_white_noise() -> None:
    ar2 = [arma.arma_order(arma_sim([1.0, -0.5], [], 300, s)) for s in range(8)]
    ma1 = [arma.arma_order(arma_sim([], [0.7], 300, s)) for s in range(8)]
    wn = [arma.arma_order(rng(s).normal(size=300)) for s in range(8)]
    assert all(r is not None for r in ar2 + ma1 + wn)
    assert sum((r["p"], r["q"]) == (2, 0) for r in ar2) >= 6
    assert sum((r["p"], r["q"]) == (0, 1) for r in ma1) >= 5
    assert sum((r["p"], r["q"]) == (0, 0) for r in wn) >= 7
    assert sum(r["pacf_cutoff"] == 2 for r in ar2) >= 6
    assert sum(r["acf_cutoff"] == 1 for r in ma1) >= 6
    assert all(r["ic_gain"] >= 0 for r in ar2 + ma1 + wn)
    rw = arma.arma_order(np.cumsum(arma_sim([0.7], [], 300, 1)), diff=True)
    assert rw is not None and rw["p"] >= 1 and rw["pure_ar_p"] >= 1


def test_arch_lm_detects_volatility_clustering() -> None:
    g = rng(9)
    n = 600
    e = np.zeros(n)
    h = np.ones(n)
    for t in range(1, n):
        h[t] = 0.2 + 0.7 * e[t - 1] ** 2
        e[t] = np.sqrt(h[t]) * g.normal()
    r = arma.arch_lm(e, lags=5)
    q = arma.arch_lm(g.normal(size=n), lags=5)
    assert r is not None and q is not None
    assert r["arch_5"] and r["p"] < 1e-4 and r["sq_acf1"] > 0.2
    assert not q["arch_5"]
    flat_sq = arma.arch_lm(np.tile([1.0, -1.0], 50))
    assert flat_sq is not None and flat_sq["lm"] == 0.0 and flat_sq["p"] == 1.0


# ---------------------------------------------------------------- moments by window, regimes


def test_window_moments_drift_of_mean_and_spread() -> None:
    base = rng(10).normal(size=400)
    flat = window_moments(base)
    up = window_moments(base + np.linspace(0, 4, 400))
    wide = window_moments(base * np.linspace(1, 5, 400))
    assert flat is not None and up is not None and wide is not None
    assert flat["anova_p"] > 0.05 and flat["levene_p"] > 0.05
    assert up["mean_slope_sigma"] > 2 and up["anova_p"] < 1e-6
    assert wide["log_std_slope"] > 0.8 and wide["levene_p"] < 1e-6
    assert abs(wide["mean_slope_sigma"]) < 0.5
    assert window_moments(base[:10], n_windows=4) is None


def test_regime_switch_mean_and_variance_regimes() -> None:
    m = regime.regime_switch(switching(300, (0.0, 2.0), (1.0, 1.0), 0.97, 11))
    v = regime.regime_switch(switching(300, (0.0, 0.0), (1.0, 4.0), 0.97, 12))
    w = regime.regime_switch(rng(13).normal(size=300))
    assert m is not None and v is not None and w is not None
    assert m["mean_gap_sigma"] > 1.5 and m["bic_gain"] > 20 and m["persistence"] > 0.9
    assert v["log_sd_ratio"] > 1.0 and v["bic_gain"] > 20 and v["mean_gap_sigma"] < 0.6
    assert w["bic_gain"] < 0
    assert 2 <= m["n_switches"] <= 30
    long = regime.regime_switch(switching(3000, (0.0, 2.0), (1.0, 1.0), 0.995, 14))
    assert long is not None and long["mean_gap_sigma"] > 1.5
