"""Shape distances: z-normalized Euclidean, banded DTW, SBD, correlations (group ``shape``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import FloatArray, Result, as_series, finish, guarded, resolve_width, zscore
from ._registry import primitive

__all__ = ["DTW_MAX_POINTS", "dtw_banded", "paa", "sbd", "shape_distance"]

#: Above this many points, ``shape_distance``'s DTW runs on piecewise-aggregate means of this length
#: (banded DTW is O(n * band) = O(n^2) at a fractional band: minutes per call at 100,000 points).
DTW_MAX_POINTS = 4096


def paa(x: FloatArray, m: int) -> FloatArray:
    """Piecewise aggregate approximation: means of ``m`` near-equal consecutive segments of ``x``."""
    if x.size <= m:
        return x
    edges = np.linspace(0, x.size, m + 1).round().astype(np.int64)
    sums = np.add.reduceat(x, edges[:-1])
    return np.asarray(sums / np.diff(edges), dtype=np.float64)


def _resample(x: FloatArray, m: int) -> FloatArray:
    if x.size == m:
        return x
    return np.asarray(
        np.interp(np.linspace(0, x.size - 1, m), np.arange(x.size), x), dtype=np.float64
    )


def dtw_banded(a: FloatArray, b: FloatArray, band: int) -> float:
    """DTW with squared-difference cost in a Sakoe-Chiba band |i - j| <= band: sqrt(total cost).

    O(n * band): each row of the band is solved with the min-plus prefix identity
    ``D[j] = S[j] + cummin(X[k] - S[k-1])``.
    """
    n = a.size
    w = max(0, min(band, n - 1))
    prev = None  # D values of row i-1 over columns [lo_prev, hi_prev]
    lo_prev = 0
    for i in range(n):
        lo, hi = max(0, i - w), min(n - 1, i + w)
        c = (a[i] - b[lo : hi + 1]) ** 2
        if prev is None:
            cur = np.cumsum(c)
        else:
            cols = np.arange(lo, hi + 1)
            up = np.full(cols.size, np.inf)  # D[i-1, j]
            diag = np.full(cols.size, np.inf)  # D[i-1, j-1]
            hi_prev = lo_prev + prev.size - 1
            m = (cols >= lo_prev) & (cols <= hi_prev)
            up[m] = prev[cols[m] - lo_prev]
            m2 = (cols - 1 >= lo_prev) & (cols - 1 <= hi_prev)
            diag[m2] = prev[cols[m2] - 1 - lo_prev]
            x = np.minimum(up, diag)
            s = np.cumsum(c)
            s_prev = np.concatenate(([0.0], s[:-1]))
            cur = s + np.minimum.accumulate(x - s_prev)
        prev, lo_prev = cur, lo
    assert prev is not None
    return float(np.sqrt(max(float(prev[-1]), 0.0)))


def sbd(za: FloatArray, zb: FloatArray) -> tuple[float, int]:
    """Shape-based distance 1 - max normalized cross-correlation (in [0, 2]) and its lag (b vs a)."""
    n = za.size
    nfft = 1 << int(np.ceil(np.log2(2 * n)))
    cc = np.fft.irfft(np.conj(np.fft.rfft(za, nfft)) * np.fft.rfft(zb, nfft), nfft)
    lags = np.arange(-(n - 1), n)
    r = cc[lags % nfft] / (np.linalg.norm(za) * np.linalg.norm(zb))
    order = np.lexsort((lags, np.abs(lags), -r))
    k = int(order[0])
    return float(1.0 - r[k]), int(lags[k])


def _dtw(zx: FloatArray, zy: FloatArray, bw: int) -> float:
    m = zx.size
    if m <= DTW_MAX_POINTS:
        return dtw_banded(zx, zy, bw) / np.sqrt(m)
    k = DTW_MAX_POINTS
    return dtw_banded(paa(zx, k), paa(zy, k), max(0, round(bw * k / m))) / np.sqrt(k)


@primitive(
    group="shape",
    arity="reference_candidates",
    outputs=("zeuclid", "dtw", "sbd", "sbd_lag", "corr", "reversed_corr", "amp_log_ratio"),
    grid={"band": (0.05, 0.1, 0.2)},
)
@guarded
def shape_distance(a: Any, b: Any, *, band: int | float = 0.1) -> Result:
    """Shape distances between z-normalized a and b (unitless; 0 = same shape): Euclidean, DTW, SBD.

    If the lengths differ, the longer series is linearly resampled to the shorter length. All
    distances except ``amp_log_ratio`` and ``sbd_lag`` are symmetric in (a, b) and invariant to
    positive affine changes of either series.

    Args:
        a: Reference series.
        b: Candidate series.
        band: Sakoe-Chiba half-width for DTW: int samples or float fraction of the length.

    Returns:
        ``zeuclid`` (||za - zb|| / sqrt(n), in [0, 2]), ``dtw`` (banded DTW / sqrt(n); above
        ``DTW_MAX_POINTS`` points, the same on the z-series' piecewise-aggregate means of that length,
        with the band scaled alike), ``sbd``
        (1 - max normalized cross-correlation, [0, 2]), ``sbd_lag`` (shift of b relative to a at
        that maximum), ``corr`` (Pearson), ``reversed_corr`` (Pearson of a with time-reversed b),
        ``amp_log_ratio`` (log std b / std a, before normalization).
    """
    x = as_series(a, 4)
    y = as_series(b, 4)
    if x is None or y is None:
        return None
    m = min(x.size, y.size)
    x, y = _resample(x, m), _resample(y, m)
    zx, zy = zscore(x), zscore(y)
    bw = resolve_width(m, band, minimum=0)
    if zx is None or zy is None or bw is None:
        return None
    d_sbd, lag = sbd(zx, zy)
    return finish(
        {
            "zeuclid": float(np.linalg.norm(zx - zy) / np.sqrt(m)),
            "dtw": _dtw(zx, zy, bw),
            "sbd": d_sbd,
            "sbd_lag": lag,
            "corr": float(np.clip(np.mean(zx * zy), -1.0, 1.0)),
            "reversed_corr": float(np.clip(np.mean(zx * zy[::-1]), -1.0, 1.0)),
            "amp_log_ratio": float(np.log(np.std(y) / np.std(x))),
        }
    )
