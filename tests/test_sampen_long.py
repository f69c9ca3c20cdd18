"""Sample entropy on long series: the sorted-window count equals the full comparison (issue 15, scale).

Above 2048 templates ``sample_entropy`` compares 2048 anchors with every template. On a series of
100,000 points the full comparison took minutes per call; the sorted-window count tests only the
templates whose first value is within the tolerance. These tests hold it to the same integers,
including series with many exact ties and distances that fall exactly on the tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from tsevo.library.primitives import entropy as en


def _series() -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    out = []
    for n in (2051, 2600):
        out.append(rng.normal(size=n))
        out.append(np.cumsum(rng.normal(size=n)))
        out.append(np.round(rng.normal(size=n), 1))  # ties; distances exactly at the tolerance
        out.append(rng.integers(0, 5, size=n) * 0.1)
        base = np.sin(np.arange(64) / 5) + rng.normal(size=64) * 0.3
        out.append(np.interp(np.linspace(0, 63, n), np.arange(64), base))  # a stretched series
        out.append(1e6 + rng.normal(size=n))  # large level, small spread
    return out


@pytest.mark.parametrize("m", [2, 3])
def test_sorted_window_counts_equal_the_full_comparison(m: int) -> None:
    for x in _series():
        for r in (0.1, 0.3):
            tol = r * float(np.std(x))
            n_t = x.size - m
            cols = [x[c : c + n_t] for c in range(m + 1)]
            anchors = np.unique(np.linspace(0, n_t - 1, en.MAX_ANCHORS).astype(np.int64))
            dense = en._matches_dense(cols, anchors, m, tol)
            assert en._matches_sorted(cols, anchors, m, tol) == dense, (x.size, m, r)


def test_long_series_reads_the_same_counts() -> None:
    x = _series()[1]
    res = en.sample_entropy(x, m=2, r=0.2)
    assert res is not None
    tol = 0.2 * float(np.std(x))
    n_t = x.size - 2
    cols = [x[c : c + n_t] for c in range(3)]
    anchors = np.unique(np.linspace(0, n_t - 1, en.MAX_ANCHORS).astype(np.int64))
    b, a = en._matches_dense(cols, anchors, 2, tol)
    assert (res["matches_m"], res["matches_m1"]) == (b, a)
    assert res["sampen"] == pytest.approx(-np.log(a / b))
