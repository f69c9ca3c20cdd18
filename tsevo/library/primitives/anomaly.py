"""Spikes, local anomaly profile, flat stretches (group ``anomaly``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from ._common import (
    FloatArray,
    Result,
    as_series,
    finish,
    guarded,
    is_flat,
    mad_sigma,
    resolve_width,
    robust_scale,
)
from ._registry import primitive

__all__ = ["ANOMALY_FEATURES", "flat_segments", "local_anomaly_profile", "robust_z", "spikes"]

ANOMALY_FEATURES = ("log_var_ratio", "flatness", "zcr_log_ratio", "slope_dev", "mean_offset")


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) indices of the runs of True."""
    m = np.concatenate(([0], mask.astype(np.int8), [0]))
    d = np.diff(m)
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


def robust_z(x: FloatArray, width: int) -> FloatArray:
    """Residual from a running median of ``width`` samples over the floored MAD scale of the residual.

    Scale floor: ``max(1.4826 MAD(resid), 1e-3 std(x), 1e-12)``.
    """
    med = ndimage.median_filter(x, size=width, mode="nearest")
    r = x - med
    s = max(mad_sigma(r), 1e-3 * float(np.std(x)), 1e-12)
    return np.asarray(r / s, dtype=np.float64)


@primitive(
    group="anomaly",
    outputs=(
        "n_spikes",
        "max_abs_z",
        "max_index",
        "max_index_frac",
        "max_sign",
        "max_third",
        "first_index_frac",
        "mean_width",
        "spike_frac",
    ),
    grid={"k": (3.0, 4.0, 6.0), "window": (5, 0.02, 0.05)},
)
@guarded
def spikes(y: Any, *, k: float = 4.0, window: int | float = 0.05) -> Result:
    """Spikes: robust z of the residual from a running median (MAD scale with floor); counts and location.

    Args:
        y: Series.
        k: Threshold on |robust z|.
        window: Running-median width: int samples or float fraction (made odd, >= 3).

    Returns:
        ``n_spikes`` (runs of consecutive samples with |z| > k), ``max_abs_z``, ``max_index``
        (sample with the largest |z|), ``max_index_frac`` (max_index / (n - 1)), ``max_sign`` (+1 up,
        -1 down, 0 when z = 0), ``max_third`` (0/1/2), ``first_index_frac`` (start of the first spike
        / (n - 1), -1.0 when none), ``mean_width`` (mean run length, 0 when none), ``spike_frac``
        (fraction of samples over threshold). Extra array ``spike_index`` (index of the largest |z|
        in each run). A constant series has no spikes.
    """
    x = as_series(y, 5)
    if x is None or not float(k) > 0:
        return None
    n = x.size
    w = resolve_width(n, window, minimum=3)
    if w is None:
        return None
    w = w if w % 2 == 1 else w + 1
    z = robust_z(x, min(w, n if n % 2 == 1 else n - 1))
    az = np.abs(z)
    over = az > float(k)
    st, en = _runs(over)
    peaks = np.array(
        [s + int(np.argmax(az[s:e])) for s, e in zip(st, en, strict=True)], dtype=np.float64
    )
    i = int(np.argmax(az))
    return finish(
        {
            "n_spikes": int(st.size),
            "max_abs_z": float(az[i]),
            "max_index": i,
            "max_index_frac": i / (n - 1),
            "max_sign": int(np.sign(z[i])),
            "max_third": min(2, 3 * i // n),
            "first_index_frac": float(st[0]) / (n - 1) if st.size else -1.0,
            "mean_width": float(np.mean(en - st)) if st.size else 0.0,
            "spike_frac": float(np.mean(over)),
        },
        {"spike_index": peaks},
    )


@primitive(
    group="anomaly",
    outputs=(
        "anomaly_score",
        "argmax_frac",
        "location_third",
        "dominant_feature",
        "max_log_var_ratio",
        "max_flatness",
        "max_zcr_log_ratio",
        "max_slope_dev",
        "max_mean_offset",
    ),
    grid={"w": (0.05, 0.1, 0.2)},
)
@guarded
def local_anomaly_profile(y: Any, *, w: int | float = 0.1) -> Result:
    """Most anomalous window: score in robust z across windows; where (fraction, third) and which feature.

    Windows of length ``w`` slide with half-window steps. Per window, after removing a global
    least-squares line: log variance ratio of the window to the median window, flatness (fraction of
    |diff| <= 1% of the robust diff scale), log ratio of the zero-crossing rate to the median,
    local slope deviation (robust sigma per window length) and mean offset (robust sigma). Each
    feature is robust-z-scored across windows; the window score is the largest |z| over features.

    Args:
        y: Series.
        w: Window length: int samples or float fraction of the length (>= 4 samples, >= 4 windows).

    Returns:
        ``anomaly_score`` (largest |z| over windows and features), ``argmax_frac`` (centre of that
        window / n), ``location_third`` (0/1/2), ``dominant_feature`` (index into
        :data:`ANOMALY_FEATURES`), and per-feature extremes (the raw value with the largest
        |deviation from its median|): ``max_log_var_ratio``, ``max_flatness`` (raw fraction),
        ``max_zcr_log_ratio``, ``max_slope_dev``, ``max_mean_offset``.
    """
    x = as_series(y, 16)
    if x is None or is_flat(x):
        return None
    n = x.size
    L = resolve_width(n, w, minimum=4)
    if L is None:
        return None
    step = max(1, L // 2)
    starts = np.arange(0, n - L + 1, step)
    if starts.size < 4:
        return None
    t = np.arange(n, dtype=np.float64)
    tc = t - t.mean()
    resid = x - x.mean() - tc * (np.dot(tc, x - x.mean()) / np.dot(tc, tc))
    s = robust_scale(resid)
    ds = max(robust_scale(np.diff(x)), 1e-12)
    win = np.lib.stride_tricks.sliding_window_view(resid, L)[starts]
    xw = np.lib.stride_tricks.sliding_window_view(x, L)[starts]
    fl = (1e-3 * float(np.std(x))) ** 2 + 1e-24
    var = np.var(win, axis=1)
    lvr = np.log((var + fl) / (np.median(var) + fl))
    flat = np.mean(np.abs(np.diff(xw, axis=1)) <= 0.01 * ds, axis=1)
    cen = win - win.mean(axis=1, keepdims=True)
    sg = np.sign(cen)
    zcr = np.mean((sg[:, 1:] * sg[:, :-1]) < 0, axis=1)
    zlr = np.log((zcr + 1.0 / L) / (np.median(zcr) + 1.0 / L))
    tw = np.arange(L, dtype=np.float64) - (L - 1) / 2.0
    slope = (cen @ tw) / np.dot(tw, tw) * L / s
    sdev = slope - np.median(slope)
    off = win.mean(axis=1) / s
    feats = np.vstack((lvr, flat, zlr, sdev, off))
    med = np.median(feats, axis=1, keepdims=True)
    dev = feats - med
    mad = 1.4826 * np.median(np.abs(dev), axis=1, keepdims=True)
    floors = np.array([[0.1], [0.02], [0.1], [0.5], [0.25]])
    zf = np.abs(dev) / np.maximum(mad, floors)
    f, j = np.unravel_index(int(np.argmax(zf)), zf.shape)
    centre = (starts[j] + L / 2.0) / n
    ext = [float(feats[i, int(np.argmax(np.abs(dev[i])))]) for i in range(feats.shape[0])]
    return finish(
        {
            "anomaly_score": float(zf[f, j]),
            "argmax_frac": float(centre),
            "location_third": min(2, int(3 * centre)),
            "dominant_feature": int(f),
            "max_log_var_ratio": ext[0],
            "max_flatness": ext[1],
            "max_zcr_log_ratio": ext[2],
            "max_slope_dev": ext[3],
            "max_mean_offset": ext[4],
        }
    )


@primitive(
    group="anomaly",
    outputs=("longest_flat_frac", "flat_start_frac", "n_flat_runs", "flat_total_frac"),
    grid={"min_len": (3, 5, 10)},
)
@guarded
def flat_segments(y: Any, *, tol: float = 1e-3, min_len: int = 5) -> Result:
    """Flat stretches (|diff| <= tol x robust diff scale): longest run and start as length fractions.

    Args:
        y: Series.
        tol: Tolerance relative to the floored robust scale of the first differences.
        min_len: Minimum run length in samples to count a flat stretch.

    Returns:
        ``longest_flat_frac`` (longest run of samples / n, 0 when none >= min_len), ``flat_start_frac``
        (its start / n, -1.0 when none), ``n_flat_runs`` (runs >= min_len samples), ``flat_total_frac``
        (samples in such runs / n). A constant series is one flat run.
    """
    x = as_series(y, 4)
    if x is None or not float(tol) >= 0 or int(min_len) < 2:
        return None
    n = x.size
    d = np.abs(np.diff(x))
    if is_flat(x):
        flat = np.ones(d.size, dtype=bool)
    else:
        ds = max(robust_scale(np.diff(x)), 1e-3 * float(np.std(x)), 1e-12)
        flat = d <= float(tol) * ds
    st, en = _runs(flat)
    lengths = en - st + 1
    keep = lengths >= int(min_len)
    st, lengths = st[keep], lengths[keep]
    if st.size == 0:
        return finish(
            {
                "longest_flat_frac": 0.0,
                "flat_start_frac": -1.0,
                "n_flat_runs": 0,
                "flat_total_frac": 0.0,
            }
        )
    b = int(np.argmax(lengths))
    return finish(
        {
            "longest_flat_frac": float(lengths[b]) / n,
            "flat_start_frac": float(st[b]) / n,
            "n_flat_runs": int(st.size),
            "flat_total_frac": float(np.sum(lengths)) / n,
        }
    )
