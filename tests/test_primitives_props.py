"""Property tests for every primitive: output contract, abstention, determinism, invariances."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tsevo.library.primitives import CATALOG, PrimitiveSpec

MINE = {n: s for n, s in CATALOG.items() if not s.fn.__module__.endswith(".forecast")}
NAMES = sorted(MINE)
FAST = settings(max_examples=8, deadline=None)


def call(spec: PrimitiveSpec, s1: Any, s2: Any = None, /, **kw: Any) -> Any:
    if spec.arity == "single":
        return spec.fn(s1, **kw)
    return spec.fn(s1, s2 if s2 is not None else s1, **kw)


def check(spec: PrimitiveSpec, r: Any) -> None:
    """None, or a dict whose scalar keys are exactly the declared outputs, all finite."""
    if r is None:
        return
    assert isinstance(r, dict), spec.name
    scalars = {k for k, v in r.items() if not isinstance(v, np.ndarray)}
    assert scalars == set(spec.outputs), (spec.name, scalars ^ set(spec.outputs))
    for k, v in r.items():
        if isinstance(v, np.ndarray):
            assert np.all(np.isfinite(v)), (spec.name, k)
        else:
            assert type(v) in (bool, int, float), (spec.name, k, type(v))
            assert math.isfinite(v), (spec.name, k, v)


def same(r1: Any, r2: Any) -> bool:
    if r1 is None or r2 is None:
        return r1 is r2
    if r1.keys() != r2.keys():
        return False
    return all(
        np.array_equal(r1[k], r2[k]) if isinstance(r1[k], np.ndarray) else r1[k] == r2[k]
        for k in r1
    )


def structured(seed: int, n: int) -> np.ndarray:
    """Random walk + sine + noise: generic series without ties."""
    g = np.random.default_rng(seed)
    t = np.arange(n)
    return (
        np.cumsum(g.normal(size=n)) * 0.3
        + np.sin(2 * np.pi * t / g.uniform(5, 40))
        + g.normal(size=n)
    )


floats = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
arrays = st.lists(floats, min_size=0, max_size=160).map(lambda v: np.array(v, dtype=np.float64))


@pytest.mark.parametrize("name", NAMES)
@FAST
@given(a=arrays, b=arrays)
def test_random_input_contract_and_determinism(name: str, a: np.ndarray, b: np.ndarray) -> None:
    spec = MINE[name]
    r1 = call(spec, a, b)
    check(spec, r1)
    assert same(r1, call(spec, a, b)), name


@pytest.mark.parametrize("name", NAMES)
def test_structured_input_returns_result(name: str) -> None:
    spec = MINE[name]
    a, b = structured(1, 300), structured(2, 300)
    r = call(spec, a, b)
    check(spec, r)
    assert r is not None, name
    assert same(r, call(spec, a.copy(), b.copy())), name


@pytest.mark.parametrize("name", NAMES)
def test_grid_values_are_accepted(name: str) -> None:
    spec = MINE[name]
    a, b = structured(3, 256), structured(4, 256)
    for key, values in spec.grid.items():
        for v in values:
            check(spec, call(spec, a, b, **{key: v}))


@pytest.mark.parametrize("name", NAMES)
def test_abstains_on_bad_input(name: str) -> None:
    spec = MINE[name]
    good = structured(5, 200)
    for bad_value in (np.nan, np.inf, -np.inf):
        bad = good.copy()
        bad[37] = bad_value
        assert call(spec, bad, good) is None, (name, bad_value)
        if spec.arity != "single":
            assert call(spec, good, bad) is None, (name, bad_value)
    for short in ([], [1.0]):
        assert call(spec, np.array(short), np.array(short)) is None, (name, short)
    assert call(spec, good.reshape(20, 10), good.reshape(20, 10)) is None, name
    assert call(spec, "abc", "abc") is None, name
    check(spec, call(spec, np.full(200, 4.2), np.full(200, 4.2)))
    check(spec, call(spec, np.full(200, 4.2), good))


# ---------------------------------------------------------------- invariances

AFFINE_INVARIANT: dict[str, tuple[str, ...]] = {
    "trend": ("kendall_tau", "mk_p", "ols_r2", "slope_sigma_per_window", "direction"),
    "trend_windows": ("first_slope_sigma", "sign_changes"),
    "trend_shape": ("r2_linear", "r2_log", "r2_exp", "r2_quadratic", "best_shape", "curvature_sigma"),
    "slope_change": ("slope_diff_sigma", "level_jump_sigma"),
    "piecewise_linear": ("n_segments", "first_break_frac", "slope_first"),
    "acf": ("acf_lag", "acf1", "first_zero_lag"),
    "pacf": ("pacf1", "pacf2", "ar_order"),
    "ljung_box": ("q", "p"),
    "spectrum": ("dominant_period", "power_share", "spectral_flatness"),
    "band_power": ("relative_band_power",),
    "band_ratio": ("log_ratio", "log_excess", "share_1", "share_2"),
    "acf_period": ("period", "acf_at_period"),
    "seasonal_strength": ("strength", "trend_strength", "amplitude_sigma", "period_used"),
    "cycle_stats": ("n_cycles", "mean_period", "crest_factor", "squareness"),
    "wavelet_energy": ("e_d1", "e_d2", "e_approx", "dominant_level"),
    "wavelet_change": ("log_energy_ratio", "energy_first"),
    "window_compare": ("level_gap_sigma", "log_var_ratio", "log_mad_ratio", "log_diff_sd_ratio", "ks_stat", "mw_auc", "levene_p"),
    "rolling_profile": ("mean_range_sigma", "log_std_range", "max_jump_sigma"),
    "change_points": ("n_changes", "largest_loc_frac", "largest_mean_shift_sigma", "largest_type"),
    "cusum": ("stat", "loc_frac", "shift_sigma"),
    "spikes": ("n_spikes", "max_abs_z", "max_index"),
    "local_anomaly_profile": ("anomaly_score", "argmax_frac", "dominant_feature"),
    "adf": ("stat", "p", "used_lag"),
    "kpss": ("stat",),
    "variance_ratio": ("vr", "z"),
    "integration_order": ("order",),
    "noise_color": ("ar1_phi", "spectral_beta", "dfa_alpha"),
    "snr": ("snr_db", "noise_frac", "hetero_corr"),
    "endpoint_change": ("change_sigma", "p"),
    "trend_change_test": ("break_frac", "slope_before_sigma", "slope_after_sigma", "p_change", "p_reversal", "p_accelerating"),
    "extremes": ("argmax", "argmin", "max_z", "min_z"),
    "level_crossings": ("crossings", "frac_above"),
    "monotonicity": ("frac_up", "spearman_rho"),
    "motif_discord": ("discord_frac", "discord_score", "motif_score"),
    "sample_entropy": ("sampen",),
    "permutation_entropy": ("pe",),
    "spectral_entropy": ("spectral_entropy",),
    "kernel_change_points": ("n_changes", "first_loc_frac", "max_mean_shift_sigma", "max_log_var_ratio"),
    "dwt_energy": ("e_d1", "e_d2", "e_d5", "e_approx", "dominant_level", "wavelet_entropy"),
    "catch22": ("acf_timescale", "acf_first_min", "low_freq_power", "forecast_error", "trev"),
    "arma_order": ("p", "q", "ic_gain", "resid_var_ratio", "acf_cutoff", "pacf_cutoff"),
    "arch_lm": ("lm", "p", "r2", "sq_acf1"),
    "window_moments": ("mean_slope_sigma", "mean_range_sigma", "log_std_slope", "anova_p", "levene_p"),
    "regime_switch": ("mean_gap_sigma", "log_sd_ratio", "lr_stat"),
    # pair primitives: the same positive affine map applied to both, and each independently below
    "xcorr": ("best_lag", "peak_corr", "corr_at_zero"),
    "granger": ("f_a_to_b", "f_b_to_a"),
    "correlation": ("pearson", "spearman", "kendall", "diff_pearson", "detrended_pearson"),
    "correlation_test": ("r", "best_lag", "n_eff", "p", "p_pos", "p_neg"),
    "shape_distance": ("zeuclid", "dtw", "sbd", "corr", "reversed_corr"),
    "distribution_compare": ("ks_stat", "ad_stat", "wasserstein_sigma", "energy_sigma", "log_var_ratio", "mean_gap_sigma"),
    "pair_compare": ("mean_gap_sigma", "log_std_ratio", "slope_gap_sigma", "frac_b_above"),
}  # fmt: skip
# pair outputs that also hold when only one series is transformed
INDEPENDENT = {
    "xcorr": ("best_lag", "peak_corr"),
    "granger": ("f_a_to_b", "f_b_to_a"),
    "correlation": ("pearson", "spearman", "kendall"),
    "correlation_test": ("r", "best_lag", "n_eff", "p", "p_pos", "p_neg"),
    "shape_distance": ("zeuclid", "dtw", "sbd", "corr"),
}


def close(u: Any, v: Any) -> bool:
    return (
        bool(u == v)
        if isinstance(u, (bool, int)) and isinstance(v, (bool, int))
        else math.isclose(u, v, rel_tol=1e-6, abs_tol=1e-7)
    )


def test_invariance_table_covers_catalog() -> None:
    skipped = {"summary", "transform_signature", "flat_segments"}  # level/units-bearing outputs
    assert set(NAMES) - skipped <= set(AFFINE_INVARIANT), (
        set(NAMES) - skipped - set(AFFINE_INVARIANT)
    )


@pytest.mark.parametrize("name", sorted(AFFINE_INVARIANT))
@settings(max_examples=5, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    scale=st.floats(0.05, 50.0),
    shift=st.floats(-100.0, 100.0),
)
def test_affine_invariance(name: str, seed: int, scale: float, shift: float) -> None:
    spec = MINE[name]
    a, b = structured(seed, 240), structured(seed + 1, 240)
    r0 = call(spec, a, b)
    r1 = call(spec, scale * a + shift, scale * b + shift)
    assert (r0 is None) == (r1 is None), name
    if r0 is None:
        return
    for k in AFFINE_INVARIANT[name]:
        assert close(r0[k], r1[k]), (name, k, r0[k], r1[k])
    if name in INDEPENDENT:
        r2 = call(spec, a, scale * b + shift)
        assert r2 is not None
        for k in INDEPENDENT[name]:
            assert close(r0[k], r2[k]), (name, k, r0[k], r2[k])


SYMMETRIC = {
    "shape_distance": ("zeuclid", "dtw", "sbd", "corr", "reversed_corr"),
    "distribution_compare": (
        "ks_stat",
        "ks_p",
        "ad_stat",
        "wasserstein_sigma",
        "energy_sigma",
        "f_p",
    ),
    "correlation": ("pearson", "spearman", "kendall", "diff_pearson", "detrended_pearson"),
    "correlation_test": ("r", "n_eff", "p", "p_pos", "p_neg"),
    "xcorr": ("peak_corr", "corr_at_zero"),
}
ANTISYMMETRIC = {
    "shape_distance": ("amp_log_ratio", "sbd_lag"),
    "distribution_compare": ("log_var_ratio", "mean_gap_sigma"),
    "xcorr": ("best_lag", "lag_sign", "abs_best_lag"),
    "pair_compare": ("mean_gap_sigma", "log_std_ratio", "log_range_ratio", "slope_gap_sigma"),
    "granger": ("log_f_ratio",),
}


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(20, 300))
def test_pair_symmetry_and_antisymmetry(seed: int, n: int) -> None:
    a, b = structured(seed, n), structured(seed + 7, n)
    for name in set(SYMMETRIC) | set(ANTISYMMETRIC):
        fn = MINE[name].fn
        ab, ba = fn(a, b), fn(b, a)
        assert ab is not None and ba is not None, name
        for k in SYMMETRIC.get(name, ()):
            assert close(ab[k], ba[k]), (name, k, ab[k], ba[k])
        for k in ANTISYMMETRIC.get(name, ()):
            assert close(ab[k], -ba[k]), (name, k, ab[k], ba[k])
    g_ab, g_ba = MINE["granger"].fn(a, b), MINE["granger"].fn(b, a)
    assert g_ab is not None and g_ba is not None
    assert close(g_ab["f_a_to_b"], g_ba["f_b_to_a"]) and close(g_ab["p_a_to_b"], g_ba["p_b_to_a"])


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(40, 400))
def test_window_swap_and_time_reversal(seed: int, n: int) -> None:
    y = structured(seed, n)
    wc = MINE["window_compare"].fn
    r, s = wc(y, a=0, b=n // 2, c=n // 2, d=n), wc(y, a=n // 2, b=n, c=0, d=n // 2)
    assert r is not None and s is not None
    for k in (
        "level_gap_sigma",
        "mean_diff",
        "log_var_ratio",
        "log_mad_ratio",
        "log_diff_sd_ratio",
    ):
        assert close(r[k], -s[k]), k
    assert close(r["ks_stat"], s["ks_stat"]) and close(r["mw_auc"], 1 - s["mw_auc"])
    t, tr = MINE["trend"].fn(y), MINE["trend"].fn(y[::-1])
    assert t is not None and tr is not None
    assert close(t["slope"], -tr["slope"]) and close(t["kendall_tau"], -tr["kendall_tau"])
    sp, spr = MINE["spectrum"].fn(y), MINE["spectrum"].fn(y[::-1])
    assert (
        sp is not None and spr is not None and close(sp["dominant_period"], spr["dominant_period"])
    )
