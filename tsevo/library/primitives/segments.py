"""Piecewise-linear segmentation by binary segmentation with an L2 linear cost (group ``segments``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat, resolve_width
from ._registry import primitive

__all__ = ["piecewise_linear"]


class _LinCost:
    """O(1) residual sum of squares of a line fitted to any segment, from prefix sums."""

    def __init__(self, y: FloatArray) -> None:
        t = np.arange(y.size, dtype=np.float64) - (y.size - 1) / 2.0
        z = np.zeros(1)
        self.c1 = np.concatenate((z, np.cumsum(np.ones_like(y))))
        self.ct = np.concatenate((z, np.cumsum(t)))
        self.ctt = np.concatenate((z, np.cumsum(t * t)))
        self.cy = np.concatenate((z, np.cumsum(y)))
        self.cyy = np.concatenate((z, np.cumsum(y * y)))
        self.cty = np.concatenate((z, np.cumsum(t * y)))

    def rss(self, i: Any, j: Any) -> Any:
        """RSS of the line on [i, j) (arrays or ints); segments of < 3 points cost 0."""
        m = self.c1[j] - self.c1[i]
        st = self.ct[j] - self.ct[i]
        sy = self.cy[j] - self.cy[i]
        stt = self.ctt[j] - self.ctt[i] - st * st / m
        syy = self.cyy[j] - self.cyy[i] - sy * sy / m
        sty = self.cty[j] - self.cty[i] - st * sy / m
        out = syy - np.where(stt > 0, sty * sty / np.where(stt > 0, stt, 1.0), 0.0)
        return np.maximum(out, 0.0)

    def slope(self, i: int, j: int) -> float:
        m = self.c1[j] - self.c1[i]
        st = self.ct[j] - self.ct[i]
        sy = self.cy[j] - self.cy[i]
        stt = self.ctt[j] - self.ctt[i] - st * st / m
        sty = self.cty[j] - self.cty[i] - st * sy / m
        return float(sty / stt) if stt > 0 else 0.0


def _best_split(cost: _LinCost, i: int, j: int, min_size: int) -> tuple[float, int]:
    ks = np.arange(i + min_size, j - min_size + 1)
    if ks.size == 0:
        return 0.0, -1
    gain = cost.rss(i, j) - cost.rss(np.full(ks.size, i), ks) - cost.rss(ks, np.full(ks.size, j))
    b = int(np.argmax(gain))
    return float(gain[b]), int(ks[b])


@primitive(
    group="segments",
    outputs=(
        "n_segments",
        "first_break_frac",
        "slope_first",
        "slope_last",
        "max_abs_slope_change",
        "n_direction_changes",
        "bic_gain",
        "r2",
    ),
    grid={"kmax": (3, 5, 8), "min_size": (0.05, 0.1)},
)
@guarded
def piecewise_linear(y: Any, *, kmax: int = 5, min_size: int | float = 0.05) -> Result:
    """Number of linear pieces by BIC over binary segmentation; slopes in sigma of y per series length.

    The series is z-scored, then split greedily (largest RSS reduction first) up to ``kmax``
    segments; the number of segments minimizing ``n log(RSS/n) + (3K - 1) log n`` is kept.

    Args:
        y: Series.
        kmax: Maximum number of segments (1..20).
        min_size: Minimum segment length: int samples or float fraction (at least 3 samples).

    Returns:
        ``n_segments``; ``first_break_frac`` (first breakpoint / n, -1.0 when one segment);
        ``slope_first``/``slope_last`` (slopes of the first/last piece, z units per n samples);
        ``max_abs_slope_change`` (largest |slope difference| at a break); ``n_direction_changes``
        (sign changes between consecutive pieces whose |slope| > 0.5); ``bic_gain`` (BIC of one line
        minus BIC of the chosen model, >= 0); ``r2`` of the piecewise fit. Extra arrays
        ``breakpoints`` (fractions) and ``slopes``.
    """
    x = as_series(y, 8)
    if x is None or is_flat(x) or not (1 <= int(kmax) <= 20):
        return None
    n = x.size
    ms = resolve_width(n, min_size, minimum=3)
    if ms is None or 2 * ms > n:
        return None
    z = (x - np.mean(x)) / np.std(x)
    cost = _LinCost(z)
    segs = [(0, n)]
    cache = {(0, n): _best_split(cost, 0, n, ms)}
    total = float(cost.rss(0, n))
    rss_path = [total]
    order: list[list[int]] = [[]]
    for _ in range(int(kmax) - 1):
        cand = [(cache[s][0], s) for s in segs if cache[s][1] >= 0]
        if not cand:
            break
        g, s = max(cand, key=lambda c: (c[0], -c[1][0]))
        if g <= 1e-12:
            break
        k = cache[s][1]
        segs.remove(s)
        for part in ((s[0], k), (k, s[1])):
            segs.append(part)
            cache[part] = _best_split(cost, part[0], part[1], ms)
        total -= g
        rss_path.append(max(total, 0.0))
        order.append(sorted(order[-1] + [k]))
    rss = np.maximum(np.array(rss_path), 1e-12 * n)
    kk = np.arange(1, rss.size + 1)
    bic = n * np.log(rss / n) + (3 * kk - 1) * np.log(n)
    best = int(np.argmin(bic))
    breaks = order[best]
    bounds = [0, *breaks, n]
    slopes = np.array([cost.slope(bounds[i], bounds[i + 1]) * n for i in range(len(bounds) - 1)])
    big = np.sign(slopes[np.abs(slopes) > 0.5])
    return finish(
        {
            "n_segments": len(bounds) - 1,
            "first_break_frac": breaks[0] / n if breaks else -1.0,
            "slope_first": slopes[0],
            "slope_last": slopes[-1],
            "max_abs_slope_change": float(np.max(np.abs(np.diff(slopes))))
            if slopes.size > 1
            else 0.0,
            "n_direction_changes": int(np.count_nonzero(big[1:] != big[:-1]))
            if big.size > 1
            else 0,
            "bic_gain": float(bic[0] - bic[best]),
            "r2": max(0.0, min(1.0, 1.0 - float(rss_path[best]) / n)),
        },
        {"breakpoints": np.array(breaks, dtype=np.float64) / n, "slopes": slopes},
    )
