"""Anomaly detection: local anomaly type, recovery, duration, time, and anomalies in pairs.

The local type of an anomaly in a periodic series (variance burst, flipped segment, speed-up);
whether the level recovers; how long a sensor was stuck and when a level shift happened (numeric, in
stated units); and for two series, which one has the anomaly, where an injected anomaly is, and
whether two spikes lie in the same third.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .._base import FloatArray, detrend, dominant_period, pick
from ..anomaly import robust_residual_z
from ..regimes import shift_position
from ..window import level_gap
from ._kind import (
    BME,
    SERIES12,
    YES_NO,
    Item,
    Kind,
    Series,
    Slots,
    affine,
    both,
    decide_nearest,
    decide_thirds,
    length,
    numeric_labels,
    one,
    pair,
    yes_no,
)
from ._stats import acf, flat_run, local_roughness, moving_average, sine_fit
from .anomaly import SPIKE_NO, SPIKE_YES, at_third, background, peak, shift_size, spike_size, stuck

__all__ = ["KINDS"]

LOCAL_TYPES = ("a burst of high variance", "a flipped (upside-down) segment", "a sudden speed-up")


def _y(s: Series, name: str = "ts") -> FloatArray:
    return np.asarray(s[name])


# ---------------------------------------------------------------------- local anomaly type
def _make_local_type(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, LOCAL_TYPES)
    p = rng.uniform(20, 32)
    L = int(rng.uniform(1.3, 2.0) * p)
    s = int(rng.uniform(0.25 * n, 0.75 * n - L))
    e = s + L
    rate = np.ones(n)
    if label == LOCAL_TYPES[2]:
        rate[s:e] = rng.uniform(2.2, 3.0)
    phase = np.cumsum(rate) / p + rng.uniform(0, 1)
    season = np.sin(2 * np.pi * phase)
    if label == LOCAL_TYPES[1]:
        season[s:e] = -season[s:e]
    y = season + rng.uniform(0.05, 0.15) * rng.standard_normal(n)
    if label == LOCAL_TYPES[0]:
        y[s:e] += (rng.uniform(0.4, 0.6) if hard else rng.uniform(0.6, 1.0)) * rng.standard_normal(
            L
        )
    y += rng.uniform(-1, 1) * np.linspace(0, 1, n)
    return Item(one(affine(rng, y)), label, {"start": s, "end": e, "period": p})


def _measure_local(s: Series, _slots: Slots) -> tuple[float, float]:
    y = _y(s)
    p = 2.0 * dominant_period(detrend(y) ** 2)  # squaring undoes a flip; a burst adds no peak
    p = min(max(p, 8.0), y.size / 3)
    fit, _, _ = sine_fit(y, p)
    w = round(p)
    a = sliding_window_view(y, w)
    b = sliding_window_view(fit, w)
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    c_min = float(((a * b).sum(axis=1) / np.maximum(den, 1e-12)).min())
    _, j = local_roughness(y, w)
    return c_min, float(acf(np.diff(y[j : j + w + 1]), 1)[0])


def _decide_local(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    c_min, a = f
    if strict:
        if c_min <= -0.7:
            return LOCAL_TYPES[1]
        if c_min < -0.4:
            return None
        return LOCAL_TYPES[2] if a >= 0.25 else LOCAL_TYPES[0] if a <= -0.1 else None
    if c_min < -0.55:
        return LOCAL_TYPES[1]
    return LOCAL_TYPES[2] if a > 0.075 else LOCAL_TYPES[0]


# ---------------------------------------------------------------------- recovery, duration, time
def _make_recovers(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    yes = bool(rng.random() < 0.5)
    at = int(rng.uniform(0.3, 0.45) * n)
    end = at + int(rng.uniform(0.1, 0.25) * n) if yes else n
    delta = shift_size(rng, hard)
    t = np.arange(n)
    y = background(rng, n, seasonal=False, trend=False) + delta * ((t >= at) & (t < end))
    return Item(one(affine(rng, y)), yes_no(yes), {"at": at, "end": end, "delta": delta})


def _measure_recovers(s: Series, _slots: Slots) -> float:
    y = _y(s)
    k = y.size // 4
    return abs(level_gap(y, (0, k), (y.size - k, y.size)))


def _decide_recovers(g: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if g <= 0.7 else "No" if g >= 2.0 else None
    return yes_no(g < 1.35)


def _make_duration(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    dt = int(pick(rng, (1, 5, 10, 15)))
    L = int(rng.integers(6, 40))
    y = stuck(background(rng, n), L, int(rng.integers(5, n - L - 5)))
    cands = [k * dt for k in range(3, 60)]
    got = numeric_labels(
        rng, L * dt, cands, int(pick(rng, (2, 3))), 1.35, lambda v: f"{v:g} minutes"
    )
    if got is None:
        return None
    labels, label = got
    return Item(one(affine(rng, y)), label, {"length": L, "dt": dt}, {"dt": dt}, labels)


def _make_shift_time(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    dt = int(pick(rng, (10, 15, 20, 30)))
    at = int(rng.uniform(0.15, 0.85) * n)
    y = background(rng, n, seasonal=False) + shift_size(rng, hard) * (np.arange(n) >= at)
    cands = [k * dt / 60 for k in range(int(0.05 * n), int(0.95 * n))]
    got = numeric_labels(
        rng,
        at * dt / 60,
        cands,
        int(pick(rng, (2, 3))),
        n / 6 * dt / 60,
        lambda v: f"{v:.3g} hours",
        log=False,
    )
    if got is None:
        return None
    labels, label = got
    return Item(one(affine(rng, y)), label, {"at": at, "dt": dt}, {"dt": dt}, labels)


def _decide_time(v: float, strict: bool, options: Sequence[str]) -> str | None:
    vals = [float(o.split()[0]) for o in options]
    gaps = [abs(a - b) for i, a in enumerate(vals) for b in vals[i + 1 :]]
    return decide_nearest(v, options, strict, 0.5 * min(gaps), log=False)


# ---------------------------------------------------------------------- pairs
def _make_which(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, SERIES12)
    a, b = background(rng, n), background(rng, n)
    target = a if label == SERIES12[0] else b
    target[int(rng.integers(5, n - 5))] += spike_size(rng, hard)
    return Item(pair(affine(rng, a), affine(rng, b)), label, {})


def _max_z(y: FloatArray) -> float:
    return float(np.abs(robust_residual_z(y)).max())


def _decide_which(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    hi, lo = max(f), min(f)
    if strict and (hi < SPIKE_YES or lo > SPIKE_NO):
        return None
    return SERIES12[0] if f[0] > f[1] else SERIES12[1]


def _make_which_stuck(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, SERIES12)
    L = int(rng.integers(8, 12) if hard else rng.integers(12, 24))
    a, b = background(rng, n), background(rng, n)
    if label == SERIES12[0]:
        a = stuck(a, L, int(rng.integers(5, n - L - 5)))
    else:
        b = stuck(b, L, int(rng.integers(5, n - L - 5)))
    return Item(pair(affine(rng, a), affine(rng, b)), label, {"length": L})


def _decide_which_stuck(f: tuple[int, int], strict: bool, _o: object) -> str | None:
    if strict and (max(f) < 8 or min(f) > 2):
        return None
    return SERIES12[0] if f[0] > f[1] else SERIES12[1]


def _make_pair_location(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, BME)
    a = background(rng, n)
    b = a + rng.uniform(0.1, 0.2) * rng.standard_normal(n)
    w = int(rng.integers(4, 10))
    i = at_third(rng, BME.index(label), n, w)
    b[i - w // 2 : i - w // 2 + w] += (rng.uniform(2, 3) if hard else rng.uniform(3, 5)) * pick(
        rng, (-1, 1)
    )
    scale, offset = float(np.exp(rng.uniform(np.log(0.5), np.log(20)))), rng.uniform(-50, 50)
    return Item(pair(offset + scale * a, offset + scale * b), label, {"index": i, "width": w})


def _measure_pair_location(s: Series, _slots: Slots) -> float:
    d = moving_average(_y(s, "ts2") - _y(s, "ts1"), 5)
    d = np.abs(d - np.median(d))
    return int(np.argmax(d)) / d.size


def _make_same_part(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    yes = bool(rng.random() < 0.5)
    t1 = int(rng.integers(3))
    t2 = t1 if yes else int(pick(rng, [t for t in range(3) if t != t1]))
    a, b = background(rng, n), background(rng, n)
    a[at_third(rng, t1, n)] += spike_size(rng, hard)
    b[at_third(rng, t2, n)] += spike_size(rng, hard)
    return Item(pair(affine(rng, a), affine(rng, b)), yes_no(yes), {"thirds": [t1, t2]})


def _measure_same_part(s: Series, _slots: Slots) -> tuple[float, float, float, float]:
    p1, z1 = peak(_y(s, "ts1"))
    p2, z2 = peak(_y(s, "ts2"))
    return p1, z1, p2, z2


def _decide_same_part(f: tuple[float, float, float, float], strict: bool, _o: object) -> str | None:
    p1, z1, p2, z2 = f
    if strict and min(abs(z1), abs(z2)) < SPIKE_YES:
        return None
    a, b = decide_thirds(p1, strict), decide_thirds(p2, strict)
    return None if a is None or b is None else yes_no(a == b)


KINDS: tuple[Kind, ...] = (
    Kind(
        "local_anomaly_type",
        "anomaly",
        "local_anomaly_type",
        LOCAL_TYPES,
        (
            "Part of this oscillating series behaves abnormally. What kind of anomaly is it?",
            "Which description fits the anomalous segment of this periodic series?",
        ),
        _make_local_type,
        _measure_local,
        _decide_local,
        direct=False,
        measurement="lowest windowed correlation with the fitted sinusoid; lag-1 "
        "autocorrelation of differences in the roughest window",
    ),
    Kind(
        "anomaly_which_series",
        "anomaly",
        "series12",
        SERIES12,
        (
            "Which of the two time series contains an anomaly?",
            "One of these two series has an anomalous spike. Which one?",
        ),
        _make_which,
        both(_max_z),
        _decide_which,
        pair=True,
        measurement="largest robust residual z of each series",
    ),
    Kind(
        "stuck_which_series",
        "anomaly",
        "series12",
        SERIES12,
        (
            "One of the two sensors got stuck for a while (constant readings). Which series "
            "comes from it?",
            "Which of the two series contains a flat-lined segment?",
        ),
        _make_which_stuck,
        lambda s, _sl: (flat_run(_y(s, "ts1"))[0], flat_run(_y(s, "ts2"))[0]),
        _decide_which_stuck,
        pair=True,
        measurement="longest run of equal values of each series",
    ),
    Kind(
        "anomaly_recovers_yn",
        "anomaly",
        "yes_no",
        YES_NO,
        (
            "After the anomaly, does the series return to its original level?",
            "The level of this series changes abruptly at some point. Does it later recover to "
            "where it was before?",
        ),
        _make_recovers,
        _measure_recovers,
        _decide_recovers,
        direct=False,
        measurement="standardized gap between the first and last quarters",
    ),
    Kind(
        "stuck_duration_minutes",
        "anomaly",
        "numeric:minutes",
        (),
        (
            "The series is sampled every {dt} minutes, and the sensor got stuck once. For about "
            "how long did it report a constant value, in minutes?",
            "Readings arrive every {dt} minutes. How many minutes does the flat-lined segment "
            "last?",
        ),
        _make_duration,
        lambda s, sl: float(flat_run(_y(s))[0] * sl["dt"]),
        lambda v, strict, o: decide_nearest(v, o, strict, 0.1),
        measurement="longest run of equal values times the stated sampling interval",
    ),
    Kind(
        "level_shift_time_hours",
        "anomaly",
        "numeric:hours",
        (),
        (
            "The series is sampled every {dt} minutes, starting at hour 0. About how many hours "
            "after the start does the level shift occur?",
            "Measurements are taken every {dt} minutes from the start. When does the mean level "
            "jump, in hours from the start?",
        ),
        _make_shift_time,
        lambda s, sl: shift_position(_y(s)) * _y(s).size * sl["dt"] / 60.0,
        _decide_time,
        measurement="best single mean split times the stated sampling interval",
    ),
    Kind(
        "pair_anomaly_location",
        "anomaly",
        "bme",
        BME,
        (
            "Series 2 is a copy of series 1 into which an anomaly was injected. In which part "
            "of the series is the anomaly?",
            "The two series are identical except for an injected anomaly in series 2. Where is "
            "it: beginning, middle, or end?",
        ),
        _make_pair_location,
        _measure_pair_location,
        lambda p, strict, _o: decide_thirds(p, strict, 0.06),
        pair=True,
        direct=False,
        measurement="position of the largest smoothed difference between the series",
    ),
    Kind(
        "spikes_same_part_yn",
        "anomaly",
        "yes_no",
        YES_NO,
        (
            "Each series contains one spike. Do the two spikes occur in the same part of the "
            "series (beginning, middle or end)?",
            "Are the anomalous spikes of series 1 and series 2 located in the same third of the "
            "series?",
        ),
        _make_same_part,
        _measure_same_part,
        _decide_same_part,
        pair=True,
        direct=False,
        measurement="third of the largest robust residual of each series",
    ),
)
