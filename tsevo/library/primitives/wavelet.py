"""Wavelet energy per level: PyWavelets' DWT for any orthogonal wavelet, and a numpy Haar (group ``wavelet``).

The numpy Haar transform (:func:`haar_dwt`) equals ``pywt.wavedec(x, "haar", mode="periodization")``
up to the sign of the detail coefficients (pinned in tests/test_primitives_pins.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pywt

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat, resolve_window
from ._registry import primitive

__all__ = ["DWT_LEVELS", "dwt_energy", "haar_dwt", "haar_step", "wavelet_change", "wavelet_energy"]


def haar_step(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """One orthonormal Haar step (odd lengths drop the last sample): (approx, detail).

    ``approx = (x[2k] + x[2k+1]) / sqrt(2)``, ``detail = (x[2k] - x[2k+1]) / sqrt(2)``.
    """
    m = x.size // 2
    e, o = x[0 : 2 * m : 2], x[1 : 2 * m : 2]
    r = np.sqrt(0.5)
    return (e + o) * r, (e - o) * r


def haar_dwt(x: FloatArray, level: int) -> tuple[FloatArray, list[FloatArray]]:
    """Multi-level Haar DWT: (final approximation, [detail level 1, ..., detail level L])."""
    details = []
    a = x
    for _ in range(level):
        if a.size < 2:
            break
        a, d = haar_step(a)
        details.append(d)
    return a, details


@primitive(
    group="wavelet",
    outputs=(
        "e_d1",
        "e_d2",
        "e_d3",
        "e_d4",
        "e_approx",
        "dominant_level",
        "log_fine_coarse",
    ),
    grid={"a": (None, 0.0, 0.5), "b": (None, 0.5, 1.0)},
)
@guarded
def wavelet_energy(y: Any, *, a: int | float | None = None, b: int | float | None = None) -> Result:
    """Relative Haar energy per detail level 1..4 and the coarser rest (fractions summing to 1).

    The window y[a:b] is demeaned, then decomposed 4 levels (fewer when short; missing levels get
    0). Level 1 is the finest scale (2-sample differences), level k covers periods ~2^k..2^(k+1).

    Args:
        y: Series.
        a: Window start (int index or float fraction; default 0).
        b: Window end, exclusive (default the length).

    Returns:
        ``e_d1``..``e_d4`` (energy share of each detail level), ``e_approx`` (share of the level-4
        approximation), ``dominant_level`` (1..4, or 5 for the approximation), ``log_fine_coarse``
        (log((e_d1 + 1e-12) / (e_d3 + e_d4 + e_approx + 1e-12))).
    """
    x = as_series(y)
    if x is None:
        return None
    w = resolve_window(x.size, a, b, min_len=8)
    if w is None:
        return None
    s = x[w[0] : w[1]]
    if is_flat(s):
        return None
    s = s - np.mean(s)
    approx, det = haar_dwt(s, 4)
    e = [float(np.sum(d * d)) for d in det] + [0.0] * (4 - len(det))
    ea = float(np.sum(approx * approx))
    tot = sum(e) + ea
    if not tot > 0:
        return None
    r = [v / tot for v in e] + [ea / tot]
    return finish(
        {
            "e_d1": r[0],
            "e_d2": r[1],
            "e_d3": r[2],
            "e_d4": r[3],
            "e_approx": r[4],
            "dominant_level": int(np.argmax(r)) + 1,
            "log_fine_coarse": float(np.log((r[0] + 1e-12) / (r[2] + r[3] + r[4] + 1e-12))),
        }
    )


@primitive(
    group="wavelet",
    outputs=("log_energy_ratio", "energy_first", "energy_second", "argmax_energy_frac"),
    grid={"level": (1, 2, 3), "split": (0.25, 0.5, 0.75)},
)
@guarded
def wavelet_change(y: Any, *, level: int = 1, split: int | float = 0.5) -> Result:
    """Log ratio of Haar detail energy per sample after vs before a split (unitless; >0 = rougher later).

    Args:
        y: Series.
        level: Detail level (1 = finest, up to 6).
        split: Split point: int index or float fraction of the length.

    Returns:
        ``log_energy_ratio`` (log of mean squared detail coefficient after / before the split,
        with a floor of 1e-6 x the overall mean), ``energy_first`` and ``energy_second`` (mean
        squared coefficient over the variance of y), ``argmax_energy_frac`` (position of the
        largest |detail| coefficient, as a fraction of the length).
    """
    x = as_series(y, 8)
    if x is None or is_flat(x) or not (1 <= int(level) <= 6):
        return None
    lev = int(level)
    n = x.size
    w = resolve_window(n, 0, split, min_len=1)
    if w is None:
        return None
    k = w[1]
    _, det = haar_dwt(x - np.mean(x), lev)
    if len(det) < lev:
        return None
    d = det[lev - 1]
    centre = (np.arange(d.size) + 0.5) * 2**lev
    first = d[centre < k]
    second = d[centre >= k]
    if first.size < 2 or second.size < 2:
        return None
    overall = float(np.mean(d * d))
    fl = 1e-6 * overall + 1e-300
    e1 = float(np.mean(first * first))
    e2 = float(np.mean(second * second))
    var = float(np.var(x))
    return finish(
        {
            "log_energy_ratio": float(np.log((e2 + fl) / (e1 + fl))),
            "energy_first": e1 / var,
            "energy_second": e2 / var,
            "argmax_energy_frac": float(centre[int(np.argmax(np.abs(d)))] / n),
        }
    )


DWT_LEVELS = 5


@primitive(
    group="wavelet",
    outputs=(
        "e_d1",
        "e_d2",
        "e_d3",
        "e_d4",
        "e_d5",
        "e_approx",
        "dominant_level",
        "wavelet_entropy",
        "levels",
    ),
    grid={"wavelet": ("haar", "db4", "sym8")},
)
@guarded
def dwt_energy(
    y: Any,
    *,
    wavelet: str = "db4",
    a: int | float | None = None,
    b: int | float | None = None,
) -> Result:
    """Relative energy per DWT detail level 1..5 and the approximation (PyWavelets), and its entropy.

    Mallat's discrete wavelet transform (``pywt.wavedec``, periodization mode) of the demeaned
    window y[a:b], truncated to a multiple of 2^L so that the transform is orthogonal and the
    energies sum to the window's. L = min(5, ``pywt.dwt_max_level``); missing levels get 0.
    Level k covers periods of about 2^k..2^(k+1) samples. The wavelet entropy is the Shannon
    entropy of the relative energies (Rosso et al. 2001), in nats: 0 when one level holds all.

    Args:
        y: Series.
        wavelet: An orthogonal PyWavelets name: ``"haar"``, ``"db4"``, ``"sym8"``, ...
        a: Window start (int index or float fraction; default 0).
        b: Window end, exclusive (default the length).

    Returns:
        ``e_d1``..``e_d5`` (energy share of each detail level, finest first), ``e_approx`` (share
        of the coarsest approximation), ``dominant_level`` (1..5, or 6 for the approximation),
        ``wavelet_entropy``, ``levels`` (L used).
    """
    x = as_series(y)
    if x is None or wavelet not in _ORTHOGONAL:
        return None
    w = resolve_window(x.size, a, b, min_len=16)
    if w is None:
        return None
    s = x[w[0] : w[1]]
    wv = pywt.Wavelet(wavelet)
    L = min(DWT_LEVELS, pywt.dwt_max_level(s.size, wv.dec_len))
    if L < 1:
        return None
    s = s[: (s.size >> L) << L]
    if is_flat(s):
        return None
    coeffs = pywt.wavedec(s - np.mean(s), wv, mode="periodization", level=L)
    e = np.array([float(np.sum(c * c)) for c in coeffs[::-1]])  # d1..dL, approx
    tot = float(np.sum(e))
    if not tot > 0:
        return None
    r = e / tot
    shares = list(r[:L]) + [0.0] * (DWT_LEVELS - L)
    nz = r[r > 0]
    return finish(
        {
            **{f"e_d{k + 1}": shares[k] for k in range(DWT_LEVELS)},
            "e_approx": float(r[L]),
            "dominant_level": DWT_LEVELS + 1 if int(np.argmax(r)) == L else int(np.argmax(r)) + 1,
            "wavelet_entropy": float(-np.sum(nz * np.log(nz))),
            "levels": L,
        }
    )


_ORTHOGONAL = frozenset(
    n for fam in ("haar", "db", "sym", "coif") for n in pywt.wavelist(fam, kind="discrete")
)
