"""Forecasting: stat backend known answers, the cache, the primitive, and Chronos loaded offline."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tsevo.hashing import series_hash
from tsevo.library import forecasting as fx
from tsevo.library.forecasting import (
    ChronosUnavailableError,
    Forecast,
    ForecastCache,
    _api,
    _stat,
    forecast,
)
from tsevo.library.primitives import CATALOG
from tsevo.library.primitives.forecast import FORECAST_ARRAY_KEYS, FORECAST_OUTPUTS

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch):
    """No configured model and an empty memory-only cache for every test."""
    monkeypatch.delenv(fx.ENV_MODEL, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fx.set_cache_dir(None)
    fx.clear_cache()
    yield
    fx.set_cache_dir(None)
    fx.clear_cache()


def ordered(fc: Forecast) -> bool:
    paths = [fc.quantiles[lv] for lv in fc.levels]
    return all(np.all(a <= b) for a, b in itertools.pairwise(paths))


# ------------------------------------------------------------------------------ stat backend
def test_pure_seasonal_series_continued_by_seasonal_naive():
    pattern = np.array([0.0, 1.0, 3.0, 2.0, 5.0, 4.0, 1.5, -1.0, -2.0, 0.5, 0.0, 2.5])
    y = np.tile(pattern, 8)
    fc = forecast(y, 30, backend="stat")
    assert fc.method == "seasonal_naive_drift" and fc.period == 12
    np.testing.assert_allclose(fc.point, np.tile(pattern, 3)[:30], atol=1e-12)
    assert fc.point.shape == (30,) and fc.levels == (0.1, 0.5, 0.9)


def test_noisy_seasonal_period_found_and_followed():
    rng = np.random.default_rng(0)
    t = np.arange(240)
    y = 3 * np.sin(2 * np.pi * t / 24) + 0.3 * rng.normal(size=240)
    fc = forecast(y, 24, backend="stat")
    assert fc.period == 24
    truth = 3 * np.sin(2 * np.pi * np.arange(240, 264) / 24)
    assert np.corrcoef(fc.point, truth)[0, 1] > 0.95
    assert ordered(fc)


def test_linear_trend_continues_upward():
    rng = np.random.default_rng(1)
    y = 10 + 0.5 * np.arange(150) + rng.normal(scale=1.0, size=150)
    fc = forecast(y, 20, backend="stat")
    assert fc.method in ("holt", "damped_trend") and fc.period == 0
    assert np.all(np.diff(fc.point) > 0)
    assert fc.point[0] > np.median(y[-10:]) and fc.point[-1] > fc.point[0] + 5
    exact = 2.0 + 0.25 * np.arange(60)
    np.testing.assert_allclose(forecast(exact, 5).point, 2.0 + 0.25 * np.arange(60, 65))


def test_quantiles_ordered_median_is_point_width_grows():
    rng = np.random.default_rng(2)
    series = [
        np.cumsum(rng.normal(size=200)),
        rng.normal(size=80),
        np.sin(np.arange(120) / 3.0) + 0.2 * rng.normal(size=120),
        0.1 * np.arange(50) ** 1.5 + rng.normal(size=50),
    ]
    for y in series:
        fc = forecast(y, 48, quantiles=(0.05, 0.1, 0.5, 0.9, 0.95))
        assert ordered(fc)
        assert np.all(fc.quantiles[0.05] < fc.quantiles[0.95])
        np.testing.assert_allclose(fc.quantile(0.5), fc.point)
        width = fc.quantile(0.9) - fc.quantile(0.1)
        assert np.all(np.diff(width) >= -1e-12) and width[-1] > width[0]
        assert all(not a.flags.writeable for a in [fc.point, *fc.quantiles.values()])


def test_random_walk_and_white_noise_are_not_seasonal():
    rng = np.random.default_rng(3)
    assert fx.detect_period(rng.normal(size=300)) == 0
    w = rng.normal(size=300)
    fc = forecast(w, 8)
    # white noise is forecast flat at its mean (AR(1) with phi near 0, or smoothing)
    assert fc.method in ("ar1", "ses") and fc.period == 0
    assert np.all(np.abs(fc.point[1:] - w.mean()) < 0.1)
    assert forecast(np.cumsum(rng.normal(size=300)), 8).method == "ses"  # a random walk stays put


def test_a_mean_reverting_series_is_forecast_back_towards_its_mean():
    rng = np.random.default_rng(5)
    e = rng.normal(size=400)
    x = np.zeros(400)
    for i in range(1, 400):
        x[i] = 0.8 * x[i - 1] + e[i]
    end = int(np.argmax(x[100:])) + 100  # stop at a high excursion
    y = x[: end + 1] + 10.0
    fc = forecast(y, 10)
    assert fc.method == "ar1" and 0.6 < fc.params["phi"] < 0.95
    assert y[-1] > fc.point[0] > fc.point[4] > fc.point[9] > y.mean() - 0.5
    assert fc.point[9] - y.mean() < 0.25 * (y[-1] - y.mean())
    # smoothing alone would have kept the forecast near the last value
    assert fx.detect_period(np.full(50, 2.0)) == 0


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        forecast([1.0, 2.0], 3)
    with pytest.raises(ValueError):
        forecast([1.0, np.nan, 2.0, 3.0], 3)
    with pytest.raises(ValueError):
        forecast(np.arange(10.0), 0)
    with pytest.raises(ValueError):
        forecast(np.arange(10.0), 3, quantiles=(0.5, 1.0))
    with pytest.raises(ValueError):
        forecast(np.arange(10.0), 3, backend="stat", model="/some/model")


# ------------------------------------------------------------------------------ cache
def test_cache_hit_does_not_recompute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    calls: list[int] = []
    real = _stat.stat_forecast

    def counting(*a: Any, **k: Any) -> Forecast:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(_api, "stat_forecast", counting)
    y = np.cumsum(np.random.default_rng(4).normal(size=100))
    a = forecast(y, 12)
    b = forecast(y.copy(), 12)
    assert len(calls) == 1 and b is a
    forecast(y, 13)
    forecast(y, 12, quantiles=(0.25, 0.5, 0.75))
    forecast(y[:-1], 12)
    assert len(calls) == 4
    forecast(y, 12, cache=False)
    assert len(calls) == 5
    info = fx.cache_info()
    assert info["hits"] == 1 and info["misses"] == 4 and info["size"] == 4

    # on disk: a fresh memory cache (a new process) reads the npz instead of recomputing
    fx.set_cache_dir(tmp_path / "fc")
    c = forecast(y, 12, quantiles=(0.1, 0.9))
    assert len(calls) == 6 and list((tmp_path / "fc").glob("*/*.npz"))
    fx.clear_cache()
    d = forecast(y, 12, quantiles=(0.1, 0.9))
    assert len(calls) == 6 and fx.cache_info()["disk_hits"] == 1
    np.testing.assert_array_equal(d.point, c.point)
    np.testing.assert_array_equal(d.quantiles[0.9], c.quantiles[0.9])
    assert (d.method, d.period, d.model, d.backend) == (c.method, c.period, c.model, c.backend)
    # a corrupt file is ignored and recomputed
    for p in (tmp_path / "fc").glob("*/*.npz"):
        p.write_bytes(b"garbage")
    fx.clear_cache()
    forecast(y, 12, quantiles=(0.1, 0.9))
    assert len(calls) == 7


def test_lru_eviction():
    cache = ForecastCache(maxsize=2)
    fcs = [_stat.stat_forecast(np.arange(10.0) + i, 3, (0.5,)) for i in range(3)]
    for i, fc in enumerate(fcs):
        cache.put(f"k{i}", fc)
    assert cache.get("k0") is None and cache.get("k2") is fcs[2] and len(cache) == 2


def test_series_hash_depends_on_values_and_length():
    assert series_hash([1, 2, 3]) == series_hash(np.array([1.0, 2.0, 3.0]))
    assert series_hash([1, 2, 3]) != series_hash([1, 2, 3.0000001])
    assert series_hash([0.0]) != series_hash([0.0, 0.0])


# ------------------------------------------------------------------------------ primitive
def test_primitive_registered_and_returns_flat_scalars():
    spec = CATALOG["forecast"]
    assert spec.group == "forecast" and spec.outputs == FORECAST_OUTPUTS
    rng = np.random.default_rng(5)
    up = 0.3 * np.arange(120) + rng.normal(size=120)
    out = spec.fn(up, h=16)
    assert out is not None
    assert set(out) == set(FORECAST_OUTPUTS) | set(FORECAST_ARRAY_KEYS)
    for k in FORECAST_OUTPUTS:
        v = out[k]
        assert isinstance(v, (bool, int, float)) and not isinstance(v, np.ndarray), k
        assert np.isfinite(v), k
    assert all(out[k].shape == (16,) for k in FORECAST_ARRAY_KEYS)
    assert out["delta_sigma"] > 0 and out["frac_above_level"] == 1.0 and out["chronos"] is False
    assert out["q10_mean"] < out["point_mean"] < out["q90_mean"]
    down = spec.fn(-up, h=8)
    assert down is not None and down["delta_sigma"] < 0 and down["h"] == 8


def test_primitive_abstains_and_validates():
    fn = CATALOG["forecast"].fn
    assert fn(np.arange(7.0)) is None
    assert fn(np.r_[np.arange(20.0), np.nan]) is None
    assert fn(np.full(30, 4.0)) is None
    with pytest.raises(ValueError):
        fn(np.arange(30.0), h=0)


@pytest.mark.parametrize(
    ("modules", "absent"),
    [
        # what the sandbox worker imports before it forks: no model stack, no scikit-learn
        (
            "tsevo.library.forecasting, tsevo.library.primitives, tsevo.library.sandbox.worker",
            ("torch", "chronos", "transformers", "sklearn"),
        ),
        # scikit-learn is an ordinary top-level import of calibration; the model stack is not
        ("tsevo.library.calibration, tsevo.library.roots", ("torch", "chronos", "transformers")),
    ],
)
def test_import_stays_light(modules: str, absent: tuple[str, ...]):
    code = (
        f"import sys, tsevo, {modules}\n"
        f"bad = [m for m in {absent!r} if m in sys.modules]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=60)


# ------------------------------------------------------------------------------ chronos offline
def test_unavailable_model_fails_fast(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    y = np.arange(40.0)
    t0 = time.perf_counter()
    with pytest.raises(ChronosUnavailableError, match="not available offline"):
        forecast(y, 8, backend="chronos", model="amazon/chronos-2")
    with pytest.raises(ChronosUnavailableError, match="does not exist"):
        forecast(y, 8, backend="chronos", model=str(tmp_path / "no-such-dir"))
    with pytest.raises(ChronosUnavailableError, match="needs a model"):
        forecast(y, 8, backend="chronos")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    with pytest.raises(ChronosUnavailableError, match="lacks"):
        forecast(y, 8, backend="chronos", model=tmp_path / "half")
    monkeypatch.setenv(fx.ENV_MODEL, "amazon/chronos-bolt-small")
    with pytest.raises(ChronosUnavailableError):
        forecast(y, 8)  # auto + configured but missing: loud, no silent fallback
    assert time.perf_counter() - t0 < 2.0


@pytest.fixture(scope="module")
def tiny_chronos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight Chronos-2 saved with save_pretrained (imports chronos once per module)."""
    pytest.importorskip("chronos")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from chronos import Chronos2Pipeline
    from chronos.chronos2 import Chronos2Model
    from chronos.chronos2.config import Chronos2CoreConfig

    torch.manual_seed(0)
    cfg = Chronos2CoreConfig(
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=1,
        num_heads=4,
        feed_forward_proj="relu",
        chronos_config={
            "context_length": 512,
            "input_patch_size": 16,
            "input_patch_stride": 16,
            "output_patch_size": 16,
            "max_output_patches": 4,
            "use_reg_token": True,
            "use_arcsinh": True,
            "quantiles": [0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99],
        },
        chronos_pipeline_class="Chronos2Pipeline",
        architectures=["Chronos2Model"],
    )
    path = tmp_path_factory.mktemp("chronos") / "c2-tiny"
    Chronos2Pipeline(model=Chronos2Model(cfg).eval()).save_pretrained(path)
    return path


@pytest.mark.filterwarnings("ignore:We recommend keeping prediction length")
def test_chronos_local_path(tiny_chronos: Path):
    rng = np.random.default_rng(6)
    y = np.cumsum(rng.normal(size=100))
    fc = forecast(y, 16, backend="chronos", model=tiny_chronos)
    assert fc.backend == "chronos" and fc.method == "Chronos2Pipeline"
    assert fc.model == str(tiny_chronos.resolve())
    assert fc.point.shape == (16,) and all(fc.quantiles[q].shape == (16,) for q in fc.levels)
    assert np.all(np.isfinite(fc.point)) and ordered(fc)
    # batched and single calls agree; the pipeline is loaded once per model id
    many = fx.forecast_many(
        [y, y[:40], y[:9]], 16, backend="chronos", model=tiny_chronos, cache=False
    )
    np.testing.assert_allclose(many[0].point, fc.point, rtol=1e-4, atol=1e-5)
    single = forecast(y[:40], 16, backend="chronos", model=str(tiny_chronos), cache=False)
    np.testing.assert_allclose(many[1].point, single.point, rtol=1e-4, atol=1e-5)
    keys = [k for k in fx.loaded_pipelines() if str(tiny_chronos.resolve()) in k]
    assert len(keys) == 1
    assert fx.warm_up(tiny_chronos) == keys[0] and fx.warm_up() is None
    # longer horizon than the model's native output: still h points
    assert forecast(y, 80, backend="chronos", model=tiny_chronos).point.shape == (80,)


def test_chronos_via_env_auto_and_primitive(tiny_chronos: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(fx.ENV_MODEL, str(tiny_chronos))
    y = np.cumsum(np.random.default_rng(7).normal(size=64)) + 0.2 * np.arange(64)
    assert forecast(y, 8).backend == "chronos"
    assert forecast(y, 8, backend="stat").backend == "stat"
    out = CATALOG["forecast"].fn(y, h=12)
    assert out is not None and out["chronos"] is True and out["period"] == 0
    assert out["q10_mean"] <= out["q90_mean"]


def test_chronos_from_hf_cache_layout(
    tiny_chronos: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    rev = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--tsevo-test--c2-tiny"
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    for f in ("config.json", "model.safetensors"):
        shutil.copy(tiny_chronos / f, snap / f)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    y = np.sin(np.arange(60) / 4.0)
    fc = forecast(y, 16, backend="chronos", model="tsevo-test/c2-tiny")
    assert fc.model == "tsevo-test/c2-tiny" and fc.point.shape == (16,) and ordered(fc)
    ref = fx.resolve_chronos_model("tsevo-test/c2-tiny@main")
    assert (
        ref.path == snap and ref.fingerprint == fx.resolve_chronos_model(tiny_chronos).fingerprint
    )
    with pytest.raises(ChronosUnavailableError):
        fx.resolve_chronos_model("tsevo-test/c2-tiny@other-branch")


def test_chronos_disk_cache_survives_memory_clear(
    tiny_chronos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    fx.set_cache_dir(tmp_path / "fc")
    y = np.cumsum(np.random.default_rng(8).normal(size=50))
    a = forecast(y, 16, backend="chronos", model=tiny_chronos)
    fx.clear_cache()

    def boom(*a: Any, **k: Any) -> Any:
        raise AssertionError("recomputed instead of reading the disk cache")

    monkeypatch.setattr(_api, "chronos_predict", boom)
    b = forecast(y, 16, backend="chronos", model=tiny_chronos)
    np.testing.assert_array_equal(a.point, b.point)
    assert b.backend == "chronos" and b.method == "Chronos2Pipeline"
