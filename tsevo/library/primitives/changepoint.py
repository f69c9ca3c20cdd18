"""Change points: binary segmentation with Gaussian costs, kernel PELT (ruptures), type of change, CUSUM.

Group ``changepoint``.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import ruptures as rpt
from scipy import spatial, stats

from ._common import (
    FloatArray,
    Result,
    as_series,
    finish,
    guarded,
    is_flat,
    mad_sigma,
    resolve_width,
)
from ._registry import primitive

__all__ = ["CHANGE_TYPES", "change_points", "change_type", "cusum", "kernel_change_points"]

CHANGE_TYPES = ("mean", "variance", "slope")


class _Cost:
    """Segment costs from prefix sums: L2 (known sigma) for ``mean``, Gaussian likelihood for ``meanvar``."""

    def __init__(self, z: FloatArray, model: str, sigma2: float, var_floor: float) -> None:
        zero = np.zeros(1)
        self.c1 = np.concatenate((zero, np.cumsum(z)))
        self.c2 = np.concatenate((zero, np.cumsum(z * z)))
        self.model = model
        self.sigma2 = sigma2
        self.floor = var_floor

    def __call__(self, i: Any, j: Any) -> Any:
        m = j - i
        s1 = self.c1[j] - self.c1[i]
        rss = np.maximum(self.c2[j] - self.c2[i] - s1 * s1 / m, 0.0)
        if self.model == "mean":
            return rss / self.sigma2
        return m * np.log(np.maximum(rss / m, self.floor))


def _best(cost: _Cost, i: int, j: int, ms: int) -> tuple[float, int]:
    ks = np.arange(i + ms, j - ms + 1)
    if ks.size == 0:
        return 0.0, -1
    g = cost(i, j) - cost(np.full(ks.size, i), ks) - cost(ks, np.full(ks.size, j))
    b = int(np.argmax(g))
    return float(g[b]), int(ks[b])


def change_type(seg: FloatArray, k: int) -> int:
    """Which single change at ``k`` explains ``seg`` best by BIC: 0 mean, 1 variance, 2 slope (hinge)."""
    n = seg.size
    a, b = seg[:k], seg[k:]
    fl = 1e-12 + 1e-6 * float(np.var(seg))
    rss_mean = float(np.sum((a - a.mean()) ** 2) + np.sum((b - b.mean()) ** 2))
    mu = float(seg.mean())
    v1 = max(float(np.mean((a - mu) ** 2)), fl)
    v2 = max(float(np.mean((b - mu) ** 2)), fl)
    t = np.arange(n, dtype=np.float64) / n
    X = np.column_stack((np.ones(n), t, np.maximum(0.0, t - k / n)))
    coef, *_ = np.linalg.lstsq(X, seg, rcond=None)
    rss_hinge = float(np.sum((seg - X @ coef) ** 2))
    ln = np.log(n)
    bic = [
        n * np.log(max(rss_mean / n, fl)) + 3 * ln,
        a.size * np.log(v1) + b.size * np.log(v2) + 3 * ln,
        n * np.log(max(rss_hinge / n, fl)) + 4 * ln,
    ]
    return int(np.argmin(bic))


@primitive(
    group="changepoint",
    outputs=(
        "n_changes",
        "first_loc_frac",
        "largest_loc_frac",
        "largest_gain",
        "largest_mean_shift_sigma",
        "largest_log_var_ratio",
        "largest_type",
    ),
    grid={"model": ("mean", "meanvar"), "penalty": (2.0, 3.0, 5.0)},
)
@guarded
def change_points(
    y: Any,
    *,
    model: str = "meanvar",
    penalty: float = 3.0,
    max_changes: int = 5,
    min_size: int | float = 0.05,
) -> Result:
    """Change points by binary segmentation; locations as fractions of the length, shifts in sigma.

    ``model="mean"``: L2 cost with the noise variance estimated from first differences (robust to
    the shifts); ``"meanvar"``: Gaussian likelihood cost with per-segment mean and variance. A split
    is accepted while its cost gain exceeds ``penalty * log(n)``.

    Args:
        y: Series.
        model: ``"mean"`` or ``"meanvar"``.
        penalty: Multiplier of log(n) for each accepted change.
        max_changes: Maximum number of changes (0..20).
        min_size: Minimum segment length, int samples or float fraction (>= 3 samples).

    Returns:
        ``n_changes``; ``first_loc_frac`` (earliest change / n, -1.0 when none); for the change with
        the largest gain: ``largest_loc_frac`` (-1.0 when none), ``largest_gain`` (cost gain /
        log n), ``largest_mean_shift_sigma`` (mean after - before over the pooled sd),
        ``largest_log_var_ratio`` (log var after / before), ``largest_type`` (index into
        :data:`CHANGE_TYPES`: mean, variance, slope; -1 when none). Extra array ``locations``
        (sorted fractions).
    """
    x = as_series(y, 8)
    if x is None or is_flat(x) or model not in ("mean", "meanvar"):
        return None
    if not (0 <= int(max_changes) <= 20) or not float(penalty) > 0:
        return None
    n = x.size
    ms = resolve_width(n, min_size, minimum=3)
    if ms is None or 2 * ms > n:
        return None
    z = (x - np.mean(x)) / np.std(x)
    sig = mad_sigma(np.diff(z)) / np.sqrt(2.0)
    sig = max(sig, 1e-3)
    cost = _Cost(z, model, sig * sig, (1e-3) ** 2)
    thr = float(penalty) * np.log(n)
    segs = [(0, n)]
    cache = {(0, n): _best(cost, 0, n, ms)}
    found: list[tuple[int, float, tuple[int, int]]] = []
    for _ in range(int(max_changes)):
        cand = [(cache[s][0], s) for s in segs if cache[s][1] >= 0]
        if not cand:
            break
        g, s = max(cand, key=lambda c: (c[0], -c[1][0]))
        if g <= thr:
            break
        k = cache[s][1]
        found.append((k, g, s))
        segs.remove(s)
        for part in ((s[0], k), (k, s[1])):
            segs.append(part)
            cache[part] = _best(cost, part[0], part[1], ms)
    locs = np.array(sorted(k for k, _, _ in found), dtype=np.float64)
    if not found:
        return finish(
            {
                "n_changes": 0,
                "first_loc_frac": -1.0,
                "largest_loc_frac": -1.0,
                "largest_gain": 0.0,
                "largest_mean_shift_sigma": 0.0,
                "largest_log_var_ratio": 0.0,
                "largest_type": -1,
            },
            {"locations": locs},
        )
    k, g, (i, j) = max(found, key=lambda f: (f[1], -f[0]))
    a, b = x[i:k], x[k:j]
    va, vb = float(np.var(a)), float(np.var(b))
    fl = (1e-3 * float(np.std(x))) ** 2 + 1e-24
    pooled = np.sqrt((a.size * va + b.size * vb) / (a.size + b.size)) + np.sqrt(fl)
    return finish(
        {
            "n_changes": len(found),
            "first_loc_frac": float(locs[0]) / n,
            "largest_loc_frac": k / n,
            "largest_gain": g / np.log(n),
            "largest_mean_shift_sigma": float(np.mean(b) - np.mean(a)) / pooled,
            "largest_log_var_ratio": float(np.log((vb + fl) / (va + fl))),
            "largest_type": change_type(x[i:j], k - i),
        },
        {"locations": locs / n},
    )


@primitive(group="changepoint", outputs=("stat", "p", "loc_frac", "shift_sigma"))
@guarded
def cusum(y: Any) -> Result:
    """CUSUM test for one mean shift: sup statistic (Brownian-bridge units), p-value, location fraction.

    The noise scale is estimated from first differences (1.4826 MAD / sqrt 2), so a level shift
    does not inflate it; serial correlation does inflate the statistic (no long-run correction).

    Returns:
        ``stat`` (max |partial sum of deviations| / (sigma sqrt n)), ``p`` (Kolmogorov asymptotic
        p-value), ``loc_frac`` (argmax / n), ``shift_sigma`` (mean after - before the argmax over
        sigma).
    """
    x = as_series(y, 8)
    if x is None or is_flat(x):
        return None
    n = x.size
    sig = max(mad_sigma(np.diff(x)) / np.sqrt(2.0), 1e-3 * float(np.std(x)), 1e-12)
    c = np.cumsum(x - np.mean(x))[:-1]
    k = int(np.argmax(np.abs(c)))
    stat = float(np.abs(c[k])) / (sig * np.sqrt(n))
    split = k + 1
    shift = float(np.mean(x[split:]) - np.mean(x[:split])) / sig
    return finish(
        {
            "stat": stat,
            "p": float(stats.kstwobign.sf(stat)),
            "loc_frac": split / n,
            "shift_sigma": shift,
        }
    )


_MAX_CPD_POINTS = 1024


def _block_mean(x: FloatArray, limit: int) -> tuple[FloatArray, int]:
    """Block averages of x by the smallest integer factor bringing it to <= ``limit`` samples."""
    f = int(np.ceil(x.size / limit))
    if f <= 1:
        return x, 1
    nb = x.size // f
    return np.asarray(x[: nb * f].reshape(nb, f).mean(axis=1), dtype=np.float64), f


@primitive(
    group="changepoint",
    outputs=(
        "n_changes",
        "first_loc_frac",
        "last_loc_frac",
        "shift_loc_frac",
        "max_mean_shift_sigma",
        "var_loc_frac",
        "max_log_var_ratio",
        "longest_segment_frac",
    ),
    grid={"kernel": ("linear", "rbf"), "penalty": (1.5, 3.0, 6.0)},
)
@guarded
def kernel_change_points(
    y: Any, *, kernel: str = "linear", penalty: float = 3.0, min_size: int | float = 0.05
) -> Result:
    """Change points by kernel PELT (ruptures ``KernelCPD``); locations as fractions of the length.

    Killick, Fearnhead and Eckley (2012) PELT on the kernel cost of Arlot, Celisse and Harchaoui
    (2019), as implemented in C by ruptures (Truong, Oudre and Vayatis 2020). ``kernel="linear"``
    is the L2 cost (changes in mean); ``"rbf"`` a Gaussian kernel with the median-heuristic
    bandwidth (changes in mean, spread or shape). The series is z-scored; the penalty per change
    is ``penalty * v * log(n)``, where ``v`` is the noise level of the cost estimated from
    successive samples (robust to the changes themselves): 1.4826 MAD(diff)^2 / 2 for the linear
    kernel, the mean of 1 - k(y_t, y_t+1) for the rbf kernel. Series over 1024 samples are
    block-averaged first (locations stay fractions of the original length).

    Args:
        y: Series (at least 16 samples).
        kernel: ``"linear"`` or ``"rbf"``.
        penalty: Multiplier of ``v * log(n)`` per change (larger = fewer changes).
        min_size: Minimum segment length: int samples or float fraction (>= 3 samples).

    Returns:
        ``n_changes``; ``first_loc_frac`` / ``last_loc_frac`` (earliest / latest change, -1.0 when
        none); ``shift_loc_frac`` and ``max_mean_shift_sigma`` (the change between adjacent
        segments with the largest |mean after - mean before| over their pooled sd, signed; -1.0 /
        0.0 when none); ``var_loc_frac`` and ``max_log_var_ratio`` (the change with the largest
        |log var after / var before|, signed); ``longest_segment_frac``. Extra array
        ``locations`` (sorted fractions).
    """
    x0 = as_series(y, 16)
    if x0 is None or is_flat(x0) or kernel not in ("linear", "rbf") or not float(penalty) > 0:
        return None
    x, f = _block_mean(x0, _MAX_CPD_POINTS)
    n = x.size
    w = min_size if isinstance(min_size, float) else max(1, round(int(min_size) / f))
    ms = resolve_width(n, w, minimum=3)
    if ms is None or 2 * ms > n or is_flat(x):
        return None
    z = (x - np.mean(x)) / np.std(x)
    if kernel == "linear":
        v = max((mad_sigma(np.diff(z)) / np.sqrt(2.0)) ** 2, 1e-6)
        algo = rpt.KernelCPD(kernel="linear", min_size=ms)
    else:
        d2 = spatial.distance.pdist(z.reshape(-1, 1), metric="sqeuclidean")
        med = float(np.median(d2))
        gamma = 1.0 / med if med > 0 else 1.0
        v = max(float(np.mean(1.0 - np.exp(-gamma * np.diff(z) ** 2))), 1e-6)
        algo = rpt.KernelCPD(kernel="rbf", min_size=ms, params={"gamma": gamma})
    bkps = algo.fit(z).predict(pen=float(penalty) * v * float(np.log(n)))
    edges = [0, *[int(b) for b in bkps]]
    if edges[-1] != n:
        edges.append(n)
    segs = [x[a:b] for a, b in itertools.pairwise(edges)]
    cps = edges[1:-1]
    locs = np.array(cps, dtype=np.float64) * f / x0.size
    fl = (1e-3 * float(np.std(x))) ** 2 + 1e-24
    shifts, lvr = [], []
    for a, b in itertools.pairwise(segs):
        va, vb = float(np.var(a)), float(np.var(b))
        pooled = np.sqrt((a.size * va + b.size * vb) / (a.size + b.size)) + np.sqrt(fl)
        shifts.append(float(np.mean(b) - np.mean(a)) / pooled)
        lvr.append(float(np.log((vb + fl) / (va + fl))))
    i = int(np.argmax(np.abs(shifts))) if shifts else -1
    j = int(np.argmax(np.abs(lvr))) if lvr else -1
    return finish(
        {
            "n_changes": len(cps),
            "first_loc_frac": float(locs[0]) if cps else -1.0,
            "last_loc_frac": float(locs[-1]) if cps else -1.0,
            "shift_loc_frac": float(locs[i]) if cps else -1.0,
            "max_mean_shift_sigma": shifts[i] if cps else 0.0,
            "var_loc_frac": float(locs[j]) if cps else -1.0,
            "max_log_var_ratio": lvr[j] if cps else 0.0,
            "longest_segment_frac": max(s.size for s in segs) / n,
        },
        {"locations": locs},
    )
