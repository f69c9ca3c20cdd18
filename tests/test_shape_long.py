"""Shape distance on long series: DTW on piecewise-aggregate means above ``DTW_MAX_POINTS`` (issue 15, scale).

Banded DTW at a fractional band is quadratic in the length; at 100,000 points one call took
minutes. Above ``DTW_MAX_POINTS`` the ``dtw`` key is computed on the z-series' piecewise-aggregate
means (PAA) with the band scaled alike. These tests hold the short path to the exact banded DTW and
the long path to DTW on the PAA means, and check that the approximation keeps DTW's reading.
"""

from __future__ import annotations

import numpy as np
import pytest

from tsevo.library.primitives import shape as sh
from tsevo.library.primitives._common import zscore


def test_paa_means_of_near_equal_segments() -> None:
    x = np.arange(10, dtype=float)
    assert sh.paa(x, 5).tolist() == [0.5, 2.5, 4.5, 6.5, 8.5]
    assert sh.paa(x, 3).tolist() == pytest.approx([1.0, 4.5, 8.0])  # segments 0-2, 3-6, 7-9
    assert sh.paa(x, 20) is x  # never upsampled
    y = np.random.default_rng(0).normal(size=12_345)
    assert sh.paa(y, 4096).mean() == pytest.approx(y.mean(), abs=1e-3)


def test_short_series_keep_the_exact_banded_dtw() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=sh.DTW_MAX_POINTS), rng.normal(size=sh.DTW_MAX_POINTS)
    res = sh.shape_distance(a, b, band=0.01)
    assert res is not None
    za, zb = zscore(a), zscore(b)
    assert za is not None and zb is not None
    bw = round(0.01 * a.size)
    assert res["dtw"] == pytest.approx(sh.dtw_banded(za, zb, bw) / np.sqrt(a.size))


def test_long_series_dtw_runs_on_paa_means() -> None:
    rng = np.random.default_rng(2)
    n = 3 * sh.DTW_MAX_POINTS + 17
    t = np.linspace(0, 40, n)
    a = np.sin(t) + 0.05 * rng.normal(size=n)
    b = np.sin(t + 0.4) + 0.05 * rng.normal(size=n)
    res = sh.shape_distance(a, b, band=0.1)
    assert res is not None
    za, zb = zscore(a), zscore(b)
    assert za is not None and zb is not None
    k = sh.DTW_MAX_POINTS
    bw = round(round(0.1 * n) * k / n)
    expect = sh.dtw_banded(sh.paa(za, k), sh.paa(zb, k), bw) / np.sqrt(k)
    assert res["dtw"] == pytest.approx(expect)
    # DTW's reading survives: a shifted copy is far closer under DTW than under Euclid, and an
    # unrelated series stays far.
    assert res["dtw"] < 0.5 * res["zeuclid"]
    other = sh.shape_distance(a, rng.normal(size=n), band=0.1)
    assert other is not None and other["dtw"] > 3 * res["dtw"]
