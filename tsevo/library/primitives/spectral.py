"""Periodogram features, band power, ACF-based period (group ``spectral``).

Frequencies are in cycles per sample unless ``fs`` says otherwise; periods are in samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import signal

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat
from ._registry import primitive
from .autocorr import acf_values

__all__ = ["acf_period", "band_power", "band_ratio", "prepare", "spectrum"]


def prepare(x: FloatArray, detrend: bool) -> FloatArray | None:
    """Demeaned (or linearly detrended) copy of x, ``None`` when nothing is left."""
    if is_flat(x):
        return None
    if detrend:
        t = np.arange(x.size, dtype=np.float64)
        t -= t.mean()
        d = x - x.mean()
        d = d - t * (np.dot(t, d) / np.dot(t, t))
    else:
        d = x - x.mean()
    if float(np.max(np.abs(d))) <= 1e-9 * max(1.0, float(np.max(np.abs(x)))):
        return None
    return np.asarray(d, dtype=np.float64)


def _band_mask(f: FloatArray, lo: float, hi: float, fs: float) -> Any:
    """Non-DC frequency bins in [lo, hi); the Nyquist bin counts when hi reaches fs / 2."""
    return (f > 0) & (f >= lo) & ((f < hi) | ((f >= fs / 2 - 1e-12 * fs) & (hi >= fs / 2)))


@primitive(
    group="spectral",
    outputs=(
        "dominant_period",
        "dominant_freq",
        "power_share",
        "second_period",
        "second_ratio",
        "spectral_flatness",
        "fisher_p",
        "centroid_freq",
    ),
    grid={"detrend": (True, False)},
    numbers=("fs",),
)
@guarded
def spectrum(
    y: Any,
    *,
    detrend: bool = True,
    min_period: float = 2.0,
    max_period: float | None = None,
    fs: float = 1.0,
) -> Result:
    """Dominant period (samples) of the periodogram, its power share, flatness and Fisher's g test.

    The peak is located on an 8x zero-padded periodogram (sub-bin period accuracy); shares and
    flatness use the plain periodogram without the DC bin.

    Args:
        y: Series.
        detrend: Remove a least-squares line first (else only the mean).
        min_period: Shortest period searched, in samples (>= 2).
        max_period: Longest period searched (default n / 1.5, i.e. at least 1.5 cycles).
        fs: Sampling frequency; frequencies are reported in its units (cycles per sample when 1,
            Hz when the sampling rate is given in Hz). Periods stay in samples.

    Returns:
        ``dominant_period`` (samples), ``dominant_freq`` (cycles per unit of ``fs``), ``power_share`` (share of
        non-DC power within +-1 bin of the peak), ``second_period`` (next highest separate peak, 0
        when none) and ``second_ratio`` (its power / peak power), ``spectral_flatness`` (geometric /
        arithmetic mean power, 1 = white), ``fisher_p`` (Fisher's g test p-value for the largest
        bin), ``centroid_freq`` (power-weighted mean frequency, units of ``fs``).
    """
    x = as_series(y, 8)
    if x is None or not float(fs) > 0:
        return None
    n = x.size
    d = prepare(x, bool(detrend))
    if d is None:
        return None
    maxp = float(max_period) if max_period is not None else n / 1.5
    minp = max(2.0, float(min_period))
    if not (minp < maxp):
        return None
    p = np.abs(np.fft.rfft(d)) ** 2
    f = np.arange(p.size) / n
    p1, f1 = p[1:], f[1:]
    tot = float(np.sum(p1))
    if not tot > 0:
        return None
    nfft = 8 * (1 << int(np.ceil(np.log2(n))))
    pp = np.abs(np.fft.rfft(d, nfft)) ** 2
    fp = np.arange(pp.size) / nfft
    band = (fp >= 1.0 / maxp) & (fp <= 1.0 / minp)
    if not band.any():
        return None
    idx = np.flatnonzero(band)
    k = int(idx[np.argmax(pp[idx])])
    fd = float(fp[k])
    kb = fd * n
    near = np.abs(np.arange(p.size) - kb) <= 1.0
    near[0] = False
    share = float(np.sum(p[near]) / tot)
    inb = (f1 >= 1.0 / maxp) & (f1 <= 1.0 / minp)
    peaks, _ = signal.find_peaks(np.concatenate(([0.0], p1, [0.0])))
    peaks = peaks - 1
    peaks = peaks[inb[peaks] & (np.abs(f1[peaks] * n - kb) > 2.0)]
    if peaks.size:
        j = int(peaks[np.argmax(p1[peaks])])
        second_period = 1.0 / float(f1[j])
        second_ratio = float(p1[j] / max(float(np.max(p[near])), 1e-300))
    else:
        second_period, second_ratio = 0.0, 0.0
    eps = 1e-12 * float(np.max(p1))
    flat = float(np.exp(np.mean(np.log(p1 + eps))) / np.mean(p1 + eps))
    m = p1.size
    g = float(np.max(p1) / tot)
    fisher = min(1.0, m * (1.0 - g) ** (m - 1)) if g < 1.0 else 0.0
    return finish(
        {
            "dominant_period": 1.0 / fd,
            "dominant_freq": fd * float(fs),
            "power_share": min(1.0, share),
            "second_period": second_period,
            "second_ratio": min(1.0, second_ratio),
            "spectral_flatness": min(1.0, flat),
            "fisher_p": fisher,
            "centroid_freq": float(np.sum(f1 * p1) / tot) * float(fs),
        }
    )


@primitive(
    group="spectral",
    outputs=("band_power", "relative_band_power", "band_peak_freq", "band_db", "n_bins"),
    grid={"f_lo": (0.0, 0.02, 0.05, 0.1, 0.25), "f_hi": (0.02, 0.05, 0.1, 0.25, 0.5)},
    numbers=("fs", "f_lo", "f_hi"),
)
@guarded
def band_power(
    y: Any, *, f_lo: float = 0.0, f_hi: float = 0.1, fs: float = 1.0, detrend: bool = False
) -> Result:
    """Power of y in the band [f_lo, f_hi) (units of y^2, a share of the variance), absolute and relative.

    Args:
        y: Series.
        f_lo: Lower band edge, in cycles per unit time of ``fs`` (cycles/sample when fs = 1).
        f_hi: Upper band edge (exclusive; the Nyquist bin is included when f_hi >= fs / 2).
        fs: Sampling frequency (samples per unit time).
        detrend: Remove a line before the periodogram (else only the mean).

    Returns:
        ``band_power`` (integrated one-sided periodogram density over the band, units of y^2; the
        whole band sums to the variance), ``relative_band_power`` (band / total non-DC power),
        ``band_peak_freq`` (frequency of the largest bin in the band; f_lo when empty), ``band_db``
        (10 log10 of the relative power, floored at -120), ``n_bins`` (frequency bins in band).
    """
    x = as_series(y, 8)
    if x is None:
        return None
    fs = float(fs)
    lo, hi = float(f_lo), float(f_hi)
    if not (fs > 0 and 0.0 <= lo < hi and lo < fs / 2):
        return None
    d = prepare(x, bool(detrend))
    if d is None:
        return None
    f, pxx = signal.periodogram(d, fs=fs, detrend=False, scaling="density")
    df = fs / x.size
    pw = pxx * df
    nz = f > 0
    tot = float(np.sum(pw[nz]))
    if not tot > 0:
        return None
    sel = _band_mask(f, lo, hi, fs)
    bp = float(np.sum(pw[sel]))
    rel = bp / tot
    peak = float(f[sel][np.argmax(pw[sel])]) if sel.any() else lo
    return finish(
        {
            "band_power": bp,
            "relative_band_power": min(1.0, rel),
            "band_peak_freq": peak,
            "band_db": 10.0 * np.log10(max(rel, 1e-12)),
            "n_bins": int(np.count_nonzero(sel)),
        }
    )


@primitive(
    group="spectral",
    outputs=("log_ratio", "log_excess", "share_1", "share_2"),
    numbers=("fs", "lo1", "hi1", "k", "lo2", "hi2"),
)
@guarded
def band_ratio(
    y: Any,
    *,
    fs: float = 1.0,
    lo1: float = 0.0,
    hi1: float = 0.1,
    k: float = 1.0,
    lo2: float = 0.1,
    hi2: float = 0.5,
    detrend: bool = False,
) -> Result:
    """Power in band 1 against ``k`` times the power in band 2 (log scale), at sampling rate ``fs``.

    Reads as the question "sampled at fs, is the power in [lo1, hi1) more than k times the power in
    [lo2, hi2)?", which is also the order its numeric parameters are declared in.

    Args:
        y: Series.
        fs: Sampling frequency (band edges are in its units, e.g. Hz).
        lo1: Band 1 lower edge.
        hi1: Band 1 upper edge (exclusive; the Nyquist bin counts when hi1 >= fs / 2).
        k: Factor band 1 is compared against (> 0).
        lo2: Band 2 lower edge.
        hi2: Band 2 upper edge (exclusive, as hi1).
        detrend: Remove a line before the periodogram (else only the mean).

    Returns:
        ``log_ratio`` (log band-1 power / band-2 power), ``log_excess`` (log_ratio - log k: positive
        when band 1 holds more than k times band 2), ``share_1`` and ``share_2`` (each band's share of
        the non-DC power). Abstains when a band is empty, above Nyquist or holds no power.
    """
    x = as_series(y, 8)
    if x is None:
        return None
    fs, kk = float(fs), float(k)
    bands = ((float(lo1), float(hi1)), (float(lo2), float(hi2)))
    if not (fs > 0 and kk > 0) or any(not (0.0 <= lo < hi and lo < fs / 2) for lo, hi in bands):
        return None
    d = prepare(x, bool(detrend))
    if d is None:
        return None
    f, pxx = signal.periodogram(d, fs=fs, detrend=False, scaling="density")
    pw = pxx * (fs / x.size)
    tot = float(np.sum(pw[f > 0]))
    p1, p2 = (float(np.sum(pw[_band_mask(f, lo, hi, fs)])) for lo, hi in bands)
    if not (tot > 0 and p1 > 0 and p2 > 0):
        return None
    lr = float(np.log(p1 / p2))
    return finish(
        {
            "log_ratio": lr,
            "log_excess": lr - float(np.log(kk)),
            "share_1": min(1.0, p1 / tot),
            "share_2": min(1.0, p2 / tot),
        }
    )


@primitive(
    group="spectral",
    outputs=("period", "acf_at_period", "n_acf_peaks", "periodic"),
    grid={"max_period": (None, 30, 100)},
)
@guarded
def acf_period(y: Any, *, max_period: int | None = None, detrend: bool = True) -> Result:
    """Period in samples from the autocorrelation function (first strong ACF peak), with its ACF.

    Args:
        y: Series.
        max_period: Largest lag searched (default n // 2).
        detrend: Remove a line before the ACF.

    Returns:
        ``period`` (samples, parabolic sub-lag refinement; 0 when no peak), ``acf_at_period``,
        ``n_acf_peaks`` (ACF peaks with prominence >= 0.05), ``periodic`` (acf_at_period >= 0.3).
        The chosen peak is the first whose height is at least half the highest ACF peak (this
        prefers the fundamental over its multiples).
    """
    x = as_series(y, 8)
    if x is None:
        return None
    n = x.size
    L = n // 2 if max_period is None else int(max_period)
    if not (3 <= L <= n - 2):
        return None
    d = prepare(x, bool(detrend))
    if d is None:
        return None
    r = acf_values(d, L)
    if r is None:
        return None
    pk, _ = signal.find_peaks(r, prominence=0.05)
    pk = pk[(pk >= 2) & (r[pk] > 0)]
    if pk.size == 0:
        return finish({"period": 0.0, "acf_at_period": 0.0, "n_acf_peaks": 0, "periodic": False})
    top = float(np.max(r[pk]))
    k = int(pk[np.flatnonzero(r[pk] >= 0.5 * top)[0]])
    period = float(k)
    if 0 < k < L:
        y0, y1, y2 = r[k - 1], r[k], r[k + 1]
        den = y0 - 2 * y1 + y2
        if den < 0:
            period += float(np.clip(0.5 * (y0 - y2) / den, -0.5, 0.5))
    return finish(
        {
            "period": period,
            "acf_at_period": float(r[k]),
            "n_acf_peaks": int(pk.size),
            "periodic": bool(r[k] >= 0.3),
        }
    )
