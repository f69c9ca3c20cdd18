"""Forecast backend timings: stat (cold and cached) and a tiny random-weight Chronos-2 on CPU."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tsevo.library import forecasting as fx


def _ms(fn: Callable[[], object], reps: int) -> tuple[float, float]:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return statistics.median(ts), ts[int(0.95 * (len(ts) - 1))]


def main() -> None:
    """Print p50/p95 latencies and batch throughput."""
    rng = np.random.default_rng(0)
    series = [np.cumsum(rng.normal(size=256)) for _ in range(256)]
    seasonal = [
        np.sin(np.arange(256) * 2 * np.pi / 24) + 0.3 * rng.normal(size=256) for _ in range(64)
    ]
    fx.clear_cache()
    it = iter(series)
    p50, p95 = _ms(lambda: fx.forecast(next(it), 16, cache=False), 200)
    print(f"stat ETS, n=256 h=16, uncached:        p50 {p50:.2f} ms  p95 {p95:.2f} ms")
    its = iter(seasonal)
    p50, p95 = _ms(lambda: fx.forecast(next(its), 16, cache=False), 60)
    print(f"stat seasonal naive, n=256, uncached:  p50 {p50:.2f} ms  p95 {p95:.2f} ms")
    fx.forecast(series[0], 16)
    p50, p95 = _ms(lambda: fx.forecast(series[0], 16), 500)
    print(f"stat memory-cache hit:                 p50 {p50:.3f} ms  p95 {p95:.3f} ms")
    with tempfile.TemporaryDirectory() as d:
        fx.set_cache_dir(d)
        fx.forecast_many(series[:64], 16)
        fx.clear_cache()
        t0 = time.perf_counter()
        fx.forecast_many(series[:64], 16)
        dt = (time.perf_counter() - t0) * 1e3 / 64
        print(f"stat disk-cache hit (npz):             {dt:.3f} ms / series")
        fx.set_cache_dir(None)
    fx.clear_cache()
    try:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        t0 = time.perf_counter()
        import torch
        from chronos import Chronos2Pipeline
        from chronos.chronos2 import Chronos2Model
        from chronos.chronos2.config import Chronos2CoreConfig
    except ImportError:
        print("chronos not installed: skipped")
        return
    print(f"import chronos:                        {time.perf_counter() - t0:.2f} s")
    torch.manual_seed(0)
    cfg = Chronos2CoreConfig(
        d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, feed_forward_proj="relu",
        chronos_config={
            "context_length": 2048, "input_patch_size": 16, "input_patch_stride": 16,
            "output_patch_size": 16, "max_output_patches": 64, "use_reg_token": True,
            "use_arcsinh": True, "quantiles": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        },
        chronos_pipeline_class="Chronos2Pipeline", architectures=["Chronos2Model"],
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c2"
        Chronos2Pipeline(model=Chronos2Model(cfg).eval()).save_pretrained(path)
        t0 = time.perf_counter()
        fx.forecast(series[0], 16, backend="chronos", model=path, cache=False)
        print(f"chronos-2 tiny: load + first call      {(time.perf_counter() - t0) * 1e3:.0f} ms")
        it2 = iter(series)
        p50, p95 = _ms(
            lambda: fx.forecast(next(it2), 16, backend="chronos", model=path, cache=False), 50
        )
        print(f"chronos-2 tiny single call:            p50 {p50:.2f} ms  p95 {p95:.2f} ms")
        t0 = time.perf_counter()
        fx.forecast_many(series, 16, backend="chronos", model=path, cache=False)
        dt = time.perf_counter() - t0
        print(f"chronos-2 tiny batch of 256:           {dt * 1e3:.0f} ms ({256 / dt:.0f} series/s)")


if __name__ == "__main__":
    main()
