"""Known-answer and catalog tests for the primitives catalog ``P`` (tsevo.library.primitives)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from scipy import signal

from tsevo.library.primitives import CATALOG
from tsevo.library.primitives import anomaly as an
from tsevo.library.primitives import autocorr as ac
from tsevo.library.primitives import changepoint as cp
from tsevo.library.primitives import cycle as cy
from tsevo.library.primitives import distribution as di
from tsevo.library.primitives import entropy as en
from tsevo.library.primitives import motif as mo
from tsevo.library.primitives import noise as no
from tsevo.library.primitives import pair as pa
from tsevo.library.primitives import seasonal as se
from tsevo.library.primitives import segments as sg
from tsevo.library.primitives import shape as sh
from tsevo.library.primitives import spectral as sp
from tsevo.library.primitives import stationarity as st
from tsevo.library.primitives import summary as su
from tsevo.library.primitives import transform as tr
from tsevo.library.primitives import trend as td
from tsevo.library.primitives import trend_shape as ts
from tsevo.library.primitives import wavelet as wv
from tsevo.library.primitives import window as wi

REQUIRED_GROUPS = {
    "summary", "trend", "trend_shape", "segments", "autocorr", "spectral", "seasonal", "cycle",
    "wavelet", "window", "changepoint", "anomaly", "stationarity", "noise", "lag", "causality",
    "shape", "distribution", "transform", "motif", "entropy",
}  # fmt: skip
MINE = {n: s for n, s in CATALOG.items() if not s.fn.__module__.endswith(".forecast")}


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def ar1(phi: float, n: int, seed: int = 0) -> np.ndarray:
    e = rng(seed).normal(size=n)
    x = np.zeros(n)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x


# ---------------------------------------------------------------- catalog


def test_catalog_size_groups_and_metadata() -> None:
    assert len(CATALOG) >= 38
    groups = {s.group for s in CATALOG.values()}
    assert groups >= REQUIRED_GROUPS, REQUIRED_GROUPS - groups
    for name, spec in CATALOG.items():
        assert spec.name == name and spec.summary.strip(), name
        assert spec.arity in ("single", "pair", "reference_candidates"), name
        assert spec.outputs and len(set(spec.outputs)) == len(spec.outputs), name


@pytest.mark.parametrize("name", sorted(MINE))
def test_signature_contract(name: str) -> None:
    spec = MINE[name]
    params = list(inspect.signature(spec.fn).parameters.values())
    k = 1 if spec.arity == "single" else 2
    for p in params[:k]:
        assert p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty, (name, p)
    for p in params[k:]:
        assert p.kind is p.KEYWORD_ONLY and p.default is not p.empty, (name, p)
    kw = {p.name for p in params[k:]}
    assert set(spec.grid) <= kw, (name, set(spec.grid) - kw)
    for key, values in spec.grid.items():
        assert len(values) >= 2, (name, key)


# ---------------------------------------------------------------- summary / trend


def test_summary_window_and_guards() -> None:
    y = np.arange(10.0)
    r = su.summary(y, a=2, b=6)
    assert r is not None and r["n"] == 4 and r["mean"] == 3.5 and r["min"] == 2 and r["max"] == 5
    r = su.summary(y, a=0.5)
    assert r is not None and r["first"] == 5.0 and r["n"] == 5
    assert su.summary(y, a=6, b=2) is None
    assert su.summary(y, a=0, b=11) is None
    assert su.summary(y, a=1.5) is None
    assert su.summary([1.0, np.nan, 2.0]) is None
    c = su.summary(np.full(20, 3.0))
    assert c is not None and c["std"] == 0.0 and c["skew"] == 0.0


def test_endpoint_change_and_extremes() -> None:
    y = np.r_[np.full(50, 10.0), np.full(50, 12.0)]
    r = su.endpoint_change(y)
    assert (
        r is not None and r["change"] == pytest.approx(2.0) and r["pct_change"] == pytest.approx(20)
    )
    z = rng().normal(size=300)
    z[250] = 15
    e = su.extremes(z)
    assert e is not None and e["argmax"] == 250 and e["argmax_third"] == 2 and e["max_z"] > 10


def test_trend_planted_slope() -> None:
    t = np.arange(400.0)
    y = 0.3 * t + rng(1).normal(size=400)
    r = td.trend(y)
    assert r is not None
    assert r["slope"] == pytest.approx(0.3, abs=0.01)
    assert r["slope_lo"] <= 0.3 <= r["slope_hi"]
    assert r["direction"] == 1 and r["mk_p"] < 1e-10 and r["ols_r2"] > 0.99
    down = td.trend(-y)
    assert down is not None and down["direction"] == -1
    flat = td.trend(rng(2).normal(size=400))
    assert flat is not None and abs(flat["slope_sigma_per_window"]) < 1.0
    # long series go through the thinned Theil-Sen path
    big = td.trend(0.01 * np.arange(3000.0) + rng(3).normal(size=3000))
    assert big is not None and big["slope"] == pytest.approx(0.01, abs=0.001)


def test_trend_windows_and_monotonicity() -> None:
    t = np.arange(400.0)
    v = np.abs(t - 200) + rng().normal(size=400)
    r = td.trend_windows(v, n_windows=4)
    assert (
        r is not None
        and r["sign_changes"] == 1
        and r["first_slope_sigma"] < 0 < r["last_slope_sigma"]
    )
    m = td.monotonicity(np.arange(50.0))
    assert m is not None and m["frac_up"] == 1.0 and m["spearman_rho"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (lambda t: t, "linear"),
        (lambda t: np.log1p(t), "log"),
        (lambda t: np.exp(t / 60.0), "exp"),
        (lambda t: (t - 100.0) ** 2, "quadratic"),
    ],
)
def test_trend_shape(fn, expected: str) -> None:  # type: ignore[no-untyped-def]
    t = np.arange(300.0)
    y = fn(t)
    y = y + 0.01 * np.std(y) * rng(4).normal(size=300)
    r = ts.trend_shape(y)
    assert r is not None and ts.SHAPES[r["best_shape"]] == expected


def test_slope_change() -> None:
    t = np.arange(300.0)
    y = np.where(t < 150, 0.0, (t - 150) * 0.1) + 0.2 * rng().normal(size=300)
    r = ts.slope_change(y, split=150)
    assert r is not None and r["slope_diff_sigma"] > 20 and abs(r["level_jump_sigma"]) < 2


def test_piecewise_linear_planted_break() -> None:
    t = np.arange(400.0)
    y = np.where(t < 200, 0.1 * t, 20 - 0.1 * (t - 200)) + 0.3 * rng().normal(size=400)
    r = sg.piecewise_linear(y)
    assert r is not None and r["n_segments"] == 2 and r["n_direction_changes"] == 1
    assert r["first_break_frac"] == pytest.approx(0.5, abs=0.02)
    one = sg.piecewise_linear(0.05 * t + rng(1).normal(size=400))
    assert one is not None and one["n_segments"] == 1 and one["first_break_frac"] == -1.0


# ---------------------------------------------------------------- autocorrelation / spectral


def test_acf_pacf_ljung_box_ar1() -> None:
    x = ar1(0.7, 3000)
    a = ac.acf(x, lag=2)
    assert a is not None and a["acf1"] == pytest.approx(0.7, abs=0.04)
    assert a["acf_lag"] == pytest.approx(0.49, abs=0.06)
    p = ac.pacf(x)
    assert p is not None and p["ar_order"] in (1, 2) and abs(p["pacf2"]) < 0.08
    assert ac.ljung_box(x)["p"] < 1e-8  # type: ignore[index]
    w = ac.ljung_box(rng(5).normal(size=1000))
    assert w is not None and w["p"] > 0.01


def test_spectrum_and_acf_period_recover_sine_period() -> None:
    t = np.arange(256.0)
    y = np.sin(2 * np.pi * t / 24) + 0.3 * rng().normal(size=256) + 0.01 * t
    r = sp.spectrum(y)
    assert r is not None and r["dominant_period"] == pytest.approx(24, abs=0.5)
    assert r["power_share"] > 0.5 and r["fisher_p"] < 1e-6
    a = sp.acf_period(y)
    assert a is not None and a["period"] == pytest.approx(24, abs=1.0) and a["periodic"]
    wn = sp.spectrum(rng(1).normal(size=256))
    assert wn is not None and wn["spectral_flatness"] > r["spectral_flatness"]


def test_band_power_pure_tone() -> None:
    t = np.arange(1000.0)
    y = 3.0 * np.sin(2 * np.pi * 0.08 * t)
    inb = sp.band_power(y, f_lo=0.05, f_hi=0.1)
    out = sp.band_power(y, f_lo=0.2, f_hi=0.3)
    assert inb is not None and out is not None
    assert inb["relative_band_power"] > 0.95 and out["relative_band_power"] < 0.01
    assert inb["band_power"] == pytest.approx(np.var(y), rel=0.05)
    assert inb["band_peak_freq"] == pytest.approx(0.08, abs=0.002)
    hz = sp.band_power(y, f_lo=0.5, f_hi=1.0, fs=10.0)  # 0.08 cycles/sample = 0.8 Hz at fs=10
    assert hz is not None and hz["relative_band_power"] > 0.95
    assert sp.band_power(y, f_lo=0.3, f_hi=0.2) is None


def test_seasonal_strength_and_cycles() -> None:
    t = np.arange(240.0)
    y = np.sin(2 * np.pi * t / 12) + 0.2 * rng().normal(size=240)
    s = se.seasonal_strength(y, period=12)
    assert s is not None and s["strength"] > 0.8 and s["period_used"] == 12
    auto = se.seasonal_strength(y)
    assert auto is not None and auto["period_used"] == 12
    noise = se.seasonal_strength(rng(1).normal(size=240), period=12)
    assert noise is not None and noise["strength"] < 0.4
    grow = se.seasonal_strength((1 + t / 60) * np.sin(2 * np.pi * t / 12) + t / 20, period=12)
    assert grow is not None and grow["amplitude_trend"] > 0.02 and grow["multiplicative_corr"] > 0.9
    sq = cy.cycle_stats(signal.square(2 * np.pi * t / 20))
    sine = cy.cycle_stats(np.sin(2 * np.pi * t / 20))
    saw = cy.cycle_stats(signal.sawtooth(2 * np.pi * t / 20))
    assert sq and sine and saw
    assert sine["mean_period"] == pytest.approx(20, abs=0.5)
    assert sq["squareness"] > 0.9 > sine["squareness"] > saw["squareness"]
    assert abs(saw["derivative_skew"]) > 2 > abs(sine["derivative_skew"])


def test_wavelet_energy_and_change() -> None:
    w = wv.wavelet_energy(rng().normal(size=512))
    assert w is not None and w["dominant_level"] == 1
    sm = wv.wavelet_energy(np.sin(2 * np.pi * np.arange(512) / 128))
    assert sm is not None and sm["dominant_level"] == 5
    x = np.r_[rng(1).normal(size=256), 3 * rng(2).normal(size=256)]
    c = wv.wavelet_change(x)
    assert c is not None and c["log_energy_ratio"] == pytest.approx(np.log(9), abs=0.4)


# ---------------------------------------------------------------- windows / change points / anomalies


def test_window_compare_planted_shift_and_variance() -> None:
    x = np.r_[rng().normal(size=300), 2.0 + rng(1).normal(size=300)]
    r = wi.window_compare(x, a=0, b=300, c=300, d=600)
    assert (
        r is not None and r["level_gap_sigma"] == pytest.approx(2.0, abs=0.25) and r["ks_p"] < 1e-10
    )
    f = wi.window_compare(x, a=0.0, b=0.5, c=0.5, d=1.0)
    assert f is not None and f["level_gap_sigma"] == r["level_gap_sigma"]
    v = np.r_[rng().normal(size=300), 3 * rng(1).normal(size=300)]
    rv = wi.window_compare(v)
    assert rv is not None and rv["log_var_ratio"] == pytest.approx(np.log(9), abs=0.3)
    assert rv["levene_p"] < 1e-6 and abs(rv["level_gap_sigma"]) < 0.3
    assert rv["log_diff_sd_ratio"] == pytest.approx(np.log(3), abs=0.15)
    # a steep drift inside window 2 inflates its variance but not the spread of its changes
    dr = np.r_[rng().normal(size=300), rng(1).normal(size=300) + np.linspace(0, 60, 300)]
    rd = wi.window_compare(dr)
    assert rd is not None and rd["log_var_ratio"] > 2.0 and abs(rd["log_diff_sd_ratio"]) < 0.15
    assert wi.window_compare(x, a=0, b=2, c=300, d=600) is None  # window 1 too short
    assert wi.window_compare(x, a=0, b=300, c=300, d=700) is None  # out of range
    rp = wi.rolling_profile(x, w=50)
    assert rp is not None and rp["jump_loc_frac"] == pytest.approx(0.5, abs=0.05)


def test_change_points_location_and_type() -> None:
    x = np.r_[rng().normal(size=300), 2.0 + rng(1).normal(size=200)]
    r = cp.change_points(x)
    assert (
        r is not None
        and r["n_changes"] >= 1
        and r["largest_loc_frac"] == pytest.approx(0.6, abs=0.02)
    )
    assert cp.CHANGE_TYPES[r["largest_type"]] == "mean" and r["largest_mean_shift_sigma"] > 1.5
    v = np.r_[rng().normal(size=300), 4 * rng(1).normal(size=200)]
    rv = cp.change_points(v)
    assert rv is not None and cp.CHANGE_TYPES[rv["largest_type"]] == "variance"
    t = np.arange(500.0)
    s = np.where(t < 250, 0.0, (t - 250) * 0.05) + 0.5 * rng(2).normal(size=500)
    rs = cp.change_points(s, max_changes=1)
    assert rs is not None and cp.CHANGE_TYPES[rs["largest_type"]] == "slope"
    none = cp.change_points(rng(3).normal(size=500))
    assert none is not None and none["n_changes"] == 0 and none["largest_type"] == -1
    c = cp.cusum(x)
    assert c is not None and c["loc_frac"] == pytest.approx(0.6, abs=0.02) and c["p"] < 1e-6


def test_spikes_planted_index_and_sign() -> None:
    x = rng().normal(size=500)
    x[123] += 10
    r = an.spikes(x)
    assert r is not None and r["max_index"] == 123 and r["max_sign"] == 1 and r["n_spikes"] >= 1
    x2 = rng().normal(size=500)
    x2[400] -= 10
    r2 = an.spikes(x2)
    assert (
        r2 is not None and r2["max_index"] == 400 and r2["max_sign"] == -1 and r2["max_third"] == 2
    )
    flat = an.spikes(np.full(100, 2.0))
    assert flat is not None and flat["n_spikes"] == 0 and flat["first_index_frac"] == -1.0


def test_local_anomaly_profile_and_flat_segments() -> None:
    t = np.arange(600.0)
    y = np.sin(t / 10) + 0.1 * rng().normal(size=600)
    y[420:480] = y[420]
    r = an.local_anomaly_profile(y)
    assert r is not None and r["location_third"] == 2
    assert an.ANOMALY_FEATURES[r["dominant_feature"]] in ("flatness", "log_var_ratio")
    assert r["max_flatness"] > 0.5 and r["max_log_var_ratio"] < -2
    f = an.flat_segments(y)
    assert f is not None and f["flat_start_frac"] == pytest.approx(0.7, abs=0.01)
    z = np.sin(t / 10) + 0.1 * rng(1).normal(size=600)
    z[100:160] *= 4
    rz = an.local_anomaly_profile(z)
    assert rz is not None and rz["location_third"] == 0


# ---------------------------------------------------------------- stationarity / noise


def test_mackinnon_p_matches_critical_values() -> None:
    assert st.mackinnon_p(-2.8623, "c") == pytest.approx(0.05, abs=0.003)
    assert st.mackinnon_p(-3.4336, "c") == pytest.approx(0.01, abs=0.002)
    assert st.mackinnon_p(-3.4126, "ct") == pytest.approx(0.05, abs=0.003)
    assert st.mackinnon_p(5.0) == 1.0 and st.mackinnon_p(-30.0) == 0.0


def test_stationarity_white_noise_vs_random_walk() -> None:
    e = rng().normal(size=500)
    w = np.cumsum(rng(1).normal(size=500))
    a_e, a_w = st.adf(e), st.adf(w)
    assert a_e is not None and a_w is not None
    assert a_e["p"] < 0.01 and a_e["stationary_5"] and a_w["p"] > 0.1 and not a_w["stationary_5"]
    k_e, k_w = st.kpss(e), st.kpss(w)
    assert k_e is not None and k_w is not None and k_e["stationary_5"] and not k_w["stationary_5"]
    v = st.variance_ratio(w, q=4)
    assert v is not None and v["vr"] == pytest.approx(1.0, abs=0.25)
    io = st.integration_order(w)
    assert io is not None and io["order"] == 1
    io2 = st.integration_order(np.cumsum(w))
    assert io2 is not None and io2["order"] == 2


def test_noise_color_and_snr() -> None:
    x = ar1(0.6, 3000)
    r = no.noise_color(x)
    assert r is not None and r["ar1_phi"] == pytest.approx(0.6, abs=0.05)
    w = no.noise_color(rng(1).normal(size=2000))
    b = no.noise_color(np.cumsum(rng(1).normal(size=2000)))
    assert w is not None and b is not None and w["color_code"] == 0 and b["color_code"] == 2
    assert w["dfa_alpha"] == pytest.approx(0.5, abs=0.1) and b["dfa_alpha"] > 1.3
    t = np.arange(500.0)
    hi = no.snr(np.sin(t / 20) + 0.05 * rng().normal(size=500))
    lo = no.snr(np.sin(t / 20) + 1.0 * rng().normal(size=500))
    assert hi is not None and lo is not None and hi["snr_db"] > lo["snr_db"] + 10


# ---------------------------------------------------------------- pairs


def test_xcorr_known_lag_and_sign_convention() -> None:
    a = rng().normal(size=400)
    b = np.r_[np.zeros(7), a[:-7]] + 0.2 * rng(1).normal(size=400)  # b lags a by 7
    r = pa.xcorr(a, b)
    assert r is not None and r["best_lag"] == 7 and r["lag_sign"] == 1 and r["peak_corr"] > 0.9
    s = pa.xcorr(b, a)
    assert s is not None and s["best_lag"] == -7
    neg = pa.xcorr(a, -b)
    assert neg is not None and neg["abs_best_lag"] == 7 and neg["abs_peak_corr"] < -0.9


def test_granger_direction() -> None:
    a = rng().normal(size=500)
    b = 0.8 * np.r_[0.0, a[:-1]] + 0.5 * rng(1).normal(size=500)
    r = pa.granger(a, b, lag=2)
    assert r is not None and r["p_a_to_b"] < 1e-10 and r["p_b_to_a"] > 0.01 and r["log_f_ratio"] > 0


def test_correlation_and_pair_compare() -> None:
    a = rng().normal(size=300)
    c = pa.correlation(a, 2 * a + 1)
    assert (
        c is not None and c["pearson"] == pytest.approx(1.0) and c["spearman"] == pytest.approx(1.0)
    )
    p = pa.pair_compare(a, 3 * a + 5)
    assert (
        p is not None
        and p["mean_gap_sigma"] > 1
        and p["log_std_ratio"] == pytest.approx(np.log(3), abs=1e-6)
    )


def test_shape_distance_known_cases() -> None:
    t = np.arange(300.0)
    a = np.sin(t / 15)
    r = sh.shape_distance(a, 5 * a + 3)
    assert r is not None and r["zeuclid"] < 1e-9 and r["dtw"] < 1e-9 and r["sbd"] < 1e-9
    assert r["amp_log_ratio"] == pytest.approx(np.log(5))
    rev = sh.shape_distance(a, a[::-1])
    assert rev is not None and rev["reversed_corr"] == pytest.approx(1.0)
    shifted = sh.shape_distance(a, np.roll(a, 10), band=15)
    far = sh.shape_distance(a, rng().normal(size=300), band=15)
    assert shifted is not None and far is not None and shifted["dtw"] < far["dtw"]
    assert shifted["sbd"] < far["sbd"] and shifted["sbd_lag"] == 10
    resampled = sh.shape_distance(a, np.sin(np.linspace(0, 299, 600) / 15))
    assert resampled is not None and resampled["zeuclid"] < 0.01


def test_dtw_matches_naive_dp() -> None:
    u, v = rng().normal(size=40), rng(1).normal(size=40)
    for w in (0, 3, 39):
        d = np.full((41, 41), np.inf)
        d[0, 0] = 0.0
        for i in range(1, 41):
            for j in range(max(1, i - w), min(40, i + w) + 1):
                d[i, j] = (u[i - 1] - v[j - 1]) ** 2 + min(
                    d[i - 1, j], d[i, j - 1], d[i - 1, j - 1]
                )
        assert sh.dtw_banded(u, v, w) == pytest.approx(np.sqrt(d[40, 40]), rel=1e-9)


def test_distribution_compare() -> None:
    a, b = rng().normal(size=400), rng(1).normal(size=400)
    same = di.distribution_compare(a, b)
    diff = di.distribution_compare(a, 2.0 * b + 1.0)
    assert same is not None and diff is not None
    assert same["ks_p"] > 0.01 and diff["ks_p"] < 1e-6 and diff["f_p"] < 1e-6
    assert diff["wasserstein_sigma"] > 3 * same["wasserstein_sigma"]
    assert diff["log_var_ratio"] == pytest.approx(np.log(4), abs=0.3)


def _transform_cases(a: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "identity": a.copy(),
        "diff": np.diff(a),
        "cumsum": np.cumsum(a),
        "moving_average": np.convolve(a, np.ones(7) / 7, mode="valid"),
        "zscore": (a - a.mean()) / a.std(),
        "minmax": (a - a.min()) / np.ptp(a),
        "log": np.log(a),
        "fft_abs": np.abs(np.fft.rfft(a)) / a.size,
        "haar_approx": (a[0::2] + a[1::2]) / 2.0,
        "haar_detail": (a[0::2] - a[1::2]) / np.sqrt(2.0),
        "reverse": a[::-1].copy(),
        "shift": np.r_[np.zeros(5), a[:-5]],
        "negate": -a,
    }


def test_transform_signature_recovers_each_transform() -> None:
    a = np.cumsum(rng(1).normal(size=200)) + 60.0
    cases = _transform_cases(a)
    assert set(cases) == set(tr.TRANSFORMS)
    for name, b in cases.items():
        r = tr.transform_signature(a, b)
        assert r is not None, name
        assert tr.TRANSFORMS[r["best_index"]] == name, (name, r)
        assert r["best_residual"] < 1e-6 and r["margin"] > 0.05, name
    r = tr.transform_signature(a, cases["moving_average"])
    assert r is not None and r["ma_window"] == 7
    r = tr.transform_signature(a, cases["shift"])
    assert r is not None and r["shift_k"] == 5


def test_motif_discord_planted_anomaly() -> None:
    t = np.arange(1000.0)
    y = np.sin(t / 8) + 0.05 * rng().normal(size=1000)
    y[700:720] = 0.8
    r = mo.motif_discord(y, m=30)
    assert (
        r is not None
        and r["discord_frac"] == pytest.approx(0.71, abs=0.03)
        and r["discord_third"] == 2
    )
    assert r["motif_score"] < 0.2 < r["discord_score"]
    long = np.sin(np.arange(5000.0) / 20) + 0.05 * rng(1).normal(size=5000)
    long[1000:1060] = 0.0
    rl = mo.motif_discord(long, m=0.02)
    assert (
        rl is not None
        and rl["downsample"] == 3
        and rl["discord_frac"] == pytest.approx(0.206, abs=0.02)
    )


def test_matrix_profile_matches_brute_force() -> None:
    x = rng().normal(size=200)
    m = 16
    prof, _ = mo.matrix_profile(x, m)
    k = x.size - m + 1
    sub = np.lib.stride_tricks.sliding_window_view(x, m)
    z = (sub - sub.mean(1, keepdims=True)) / sub.std(1, keepdims=True)
    d = np.sqrt(((z[:, None, :] - z[None, :, :]) ** 2).sum(-1))
    for i in range(k):
        d[i, max(0, i - m // 2) : i + m // 2 + 1] = np.inf
    assert np.allclose(prof, d.min(1), atol=1e-8)


def test_entropy_regular_vs_noise() -> None:
    t = np.arange(600.0)
    sine = np.sin(2 * np.pi * t / 25)
    noise = rng().normal(size=600)
    for f, key in (
        (en.sample_entropy, "sampen"),
        (en.permutation_entropy, "pe"),
        (en.spectral_entropy, "spectral_entropy"),
    ):
        a, b = f(sine), f(noise)
        assert a is not None and b is not None and a[key] < b[key], f.__name__
    pe = en.permutation_entropy(np.arange(30.0))
    assert pe is not None and pe["pe"] == 0.0 and pe["n_patterns"] == 1
