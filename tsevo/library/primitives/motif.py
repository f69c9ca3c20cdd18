"""Matrix-profile discord and motif (z-normalized subsequence distances), pure numpy (group ``motif``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat, resolve_width
from ._registry import primitive

__all__ = ["matrix_profile", "motif_discord"]

MAX_POINTS = 2048
_REFRESH = 64


def _sliding_dot(q: FloatArray, x: FloatArray) -> FloatArray:
    """Dot products of q with every subsequence of x (MASS sliding dot product by FFT)."""
    m, n = q.size, x.size
    nfft = 1 << int(np.ceil(np.log2(n + m)))
    prod = np.fft.irfft(np.fft.rfft(x, nfft) * np.fft.rfft(q[::-1], nfft), nfft)
    return np.asarray(prod[m - 1 : n], dtype=np.float64)


def matrix_profile(x: FloatArray, m: int) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """Self-join matrix profile of z-normalized distances with exclusion zone m // 2.

    Rows of dot products are updated with the STOMP recurrence and recomputed exactly (MASS by FFT)
    every 64 rows. Subsequence standard deviations are floored at max(1e-3 std(x), 1e-12).

    Returns:
        (profile, index of the nearest neighbour) for each of the n - m + 1 subsequences.
    """
    n = x.size
    k = n - m + 1
    c1 = np.concatenate(([0.0], np.cumsum(x)))
    c2 = np.concatenate(([0.0], np.cumsum(x * x)))
    mu = (c1[m:] - c1[:-m]) / m
    sig = np.sqrt(np.maximum((c2[m:] - c2[:-m]) / m - mu * mu, 0.0))
    sig = np.maximum(sig, max(1e-3 * float(np.std(x)), 1e-12))
    excl = max(1, m // 2)
    prof = np.full(k, np.inf)
    nn = np.zeros(k, dtype=np.int64)
    first = _sliding_dot(x[:m], x)
    qt = first.copy()
    j = np.arange(k)
    for i in range(k):
        if i % _REFRESH == 0:
            qt = _sliding_dot(x[i : i + m], x)
        else:
            qt[1:] = qt[:-1] - x[i - 1] * x[: k - 1] + x[i + m - 1] * x[m : m + k - 1]
            qt[0] = first[i]
        corr = (qt - m * mu[i] * mu) / (m * sig[i] * sig)
        d = np.sqrt(np.maximum(2.0 * m * (1.0 - corr), 0.0))
        d[np.abs(j - i) <= excl] = np.inf
        b = int(np.argmin(d))
        prof[i], nn[i] = d[b], b
    return prof, nn


@primitive(
    group="motif",
    outputs=(
        "discord_frac",
        "discord_score",
        "discord_third",
        "motif_score",
        "discord_ratio",
        "motif_frac",
        "downsample",
    ),
    grid={"m": (0.02, 0.05, 0.1)},
)
@guarded
def motif_discord(y: Any, *, m: int | float = 0.05) -> Result:
    """Most unusual subsequence (discord) and best repeated pair (motif); distances in sqrt(2m) units.

    Series longer than 2048 samples are block-averaged by the smallest integer factor that brings
    them to <= 2048 (``downsample``); locations are reported as fractions of the original length.

    Args:
        y: Series.
        m: Subsequence length: int samples (of the original series) or float fraction (>= 4).

    Returns:
        ``discord_frac`` (centre of the discord subsequence / n), ``discord_score`` (its nearest-
        neighbour distance / sqrt(2m): 0 identical shape, 1 uncorrelated, up to sqrt 2),
        ``discord_third`` (0/1/2), ``motif_score`` (smallest profile value / sqrt(2m)),
        ``discord_ratio`` (discord distance / median profile), ``motif_frac`` (centre of the motif
        subsequence / n), ``downsample`` (block-average factor used).
    """
    x = as_series(y, 16)
    if x is None or is_flat(x):
        return None
    n0 = x.size
    f = int(np.ceil(n0 / MAX_POINTS))
    if f > 1:
        nb = n0 // f
        x = x[: nb * f].reshape(nb, f).mean(axis=1)
    n = x.size
    w0 = resolve_width(n0, m, minimum=4)
    if w0 is None:
        return None
    w = max(4, round(w0 / f))
    if n - w + 1 < 2 * (w // 2 + 1) + 2:
        return None
    prof, _ = matrix_profile(x, w)
    ok = np.isfinite(prof)
    if not ok.any():
        return None
    pv = np.where(ok, prof, -np.inf)
    i = int(np.argmax(pv))
    j = int(np.argmin(np.where(ok, prof, np.inf)))
    norm = np.sqrt(2.0 * w)
    med = float(np.median(prof[ok]))
    centre = (i + w / 2.0) * f / n0
    return finish(
        {
            "discord_frac": centre,
            "discord_score": float(prof[i]) / norm,
            "discord_third": min(2, int(3 * centre)),
            "motif_score": float(prof[j]) / norm,
            "discord_ratio": float(prof[i]) / max(med, 1e-12),
            "motif_frac": (j + w / 2.0) * f / n0,
            "downsample": f,
        }
    )
