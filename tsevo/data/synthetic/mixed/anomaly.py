"""Anomaly detection on one series: presence, location, type, count and direction.

Locations are asked as Beginning / Middle / End of a spike, a level shift or a stuck segment.
Anomalies are injected into a noisy background (optionally seasonal): spikes, level shifts, stuck
(flat-lined) segments, variance bursts, flipped segments and speed-ups. Several kinds share the
"Beginning / Middle / End", "Series 1 / Series 2", "upward / downward" and "Yes / No" option sets.
"""

from __future__ import annotations

import numpy as np

from .._base import FloatArray, pick
from ..anomaly import robust_residual_z, spike_peaks
from ..regimes import shift_position
from ._kind import (
    BME,
    UP_DOWN,
    YES_NO,
    Item,
    Kind,
    Series,
    Slots,
    affine,
    ar,
    decide_thirds,
    length,
    one,
    single,
    yes_no,
)
from ._stats import flat_run, max_window_gap

__all__ = [
    "KINDS",
    "SPIKE_NO",
    "SPIKE_YES",
    "at_third",
    "background",
    "peak",
    "shift_size",
    "spike_size",
    "stuck",
]

TYPES3 = ("a sudden spike", "a level shift", "a flat segment (the sensor got stuck)")
COUNTS = ("1", "2", "3", "4")
SPIKE_YES, SPIKE_NO = 6.5, 4.5


def _y(s: Series, name: str = "ts") -> FloatArray:
    return np.asarray(s[name])


def background(
    rng: np.random.Generator, n: int, seasonal: bool | None = None, trend: bool = True
) -> FloatArray:
    """Unit AR noise with a small trend, and (by default half the time) a seasonal swing."""
    t = np.arange(n, dtype=np.float64)
    y = ar(rng, n, rng.uniform(0.0, 0.3)) + (rng.uniform(-2, 2) * t / n if trend else 0.0)
    if seasonal if seasonal is not None else rng.random() < 0.5:
        y += rng.uniform(1.5, 3.0) * np.sin(2 * np.pi * t / rng.uniform(16, 40) + rng.uniform(0, 7))
    return y


def spike_size(rng: np.random.Generator, hard: bool) -> float:
    """A signed spike size in noise units (7-9 hard, 9-13 easy)."""
    return float((rng.uniform(7, 9) if hard else rng.uniform(9, 13)) * pick(rng, (-1.0, 1.0)))


def at_third(rng: np.random.Generator, third: int, n: int, half_width: int = 0) -> int:
    """An index well inside ``third`` (0, 1, 2) of ``n``, leaving ``half_width`` on each side."""
    lo = max(third / 3 + 0.06, 0.04) * n + half_width
    hi = min((third + 1) / 3 - 0.06, 0.96) * n - half_width
    return int(rng.uniform(lo, hi))


def peak(y: FloatArray) -> tuple[float, float]:
    """Position (fraction) and signed robust z of the largest robust residual."""
    z = robust_residual_z(y)
    i = int(np.argmax(np.abs(z)))
    return i / y.size, float(z[i])


def stuck(y: FloatArray, length_: int, start: int) -> FloatArray:
    """A copy of ``y`` that repeats ``y[start]`` for ``length_`` values (a stuck sensor)."""
    out = y.copy()
    out[start : start + length_] = out[start]
    return out


# ---------------------------------------------------------------------- single spikes
def _make_presence(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    yes = bool(rng.random() < 0.5)
    y = background(rng, n)
    if yes:
        y[int(rng.integers(5, n - 5))] += spike_size(rng, hard)
    return Item(one(affine(rng, y)), yes_no(yes), {"spike": yes})


def _decide_presence(z: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if z >= SPIKE_YES else "No" if z <= SPIKE_NO else None
    return yes_no(z > 5.5)


def _make_spike_location(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, BME)
    y = background(rng, n)
    i = at_third(rng, BME.index(label), n)
    y[i] += spike_size(rng, hard)
    return Item(one(affine(rng, y)), label, {"index": i})


def _decide_peak_third(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    if strict and abs(f[1]) < SPIKE_YES:
        return None
    return decide_thirds(f[0], strict)


def _make_spike_direction(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, UP_DOWN)
    y = background(rng, n)
    size = abs(spike_size(rng, hard)) * (1.0 if label == UP_DOWN[0] else -1.0)
    y[int(rng.integers(5, n - 5))] += size
    return Item(one(affine(rng, y, positive=True)), label, {"size": size})


def _decide_sign(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    if strict and abs(f[1]) < SPIKE_YES:
        return None
    return UP_DOWN[0] if f[1] > 0 else UP_DOWN[1]


def _make_count(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    label = pick(rng, COUNTS)
    k = int(label)
    idx = np.sort(rng.choice(np.arange(5, n - 5), size=k, replace=False))
    if k > 1 and np.diff(idx).min() < 10:
        return None
    y = background(rng, n)
    for i in idx:
        y[i] += spike_size(rng, hard)
    return Item(one(affine(rng, y)), label, {"indices": idx.tolist()})


def _measure_count(s: Series, _slots: Slots) -> tuple[int, float, float]:
    y = _y(s)
    peaks, rest = spike_peaks(y)
    z = np.abs(robust_residual_z(y))
    return len(peaks), min((float(z[i]) for i in peaks), default=0.0), rest


def _decide_count(f: tuple[int, float, float], strict: bool, _o: object) -> str | None:
    count, low, rest = f
    if strict and (low < 5.8 or rest > 4.2 or not 1 <= count <= 4):
        return None
    return COUNTS[min(max(count, 1), 4) - 1]


# ---------------------------------------------------------------------- level shifts, stuck
def shift_size(rng: np.random.Generator, hard: bool) -> float:
    """A signed level shift in noise units (2.5-3.5 hard, 3.5-6 easy)."""
    return float((rng.uniform(2.5, 3.5) if hard else rng.uniform(3.5, 6.0)) * pick(rng, (-1, 1)))


def _make_shift_location(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, BME)
    at = at_third(rng, BME.index(label), n)
    y = background(rng, n, seasonal=False) + shift_size(rng, hard) * (np.arange(n) >= at)
    return Item(one(affine(rng, y)), label, {"at": at})


def _make_shift_direction(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, UP_DOWN)
    at = int(rng.uniform(0.25, 0.75) * n)
    delta = abs(shift_size(rng, False)) * (1.0 if label == UP_DOWN[0] else -1.0)
    y = background(rng, n, seasonal=False) + delta * (np.arange(n) >= at)
    if hard:  # a trend against the shift: the overall slope points the other way
        y -= np.sign(delta) * rng.uniform(1.5, 2.5) * abs(delta) * np.linspace(0, 1, n)
    return Item(one(affine(rng, y, positive=True)), label, {"delta": delta, "at": at})


def _signed_gap(s: Series, _slots: Slots) -> float:
    y = _y(s)
    gap, j = max_window_gap(y, 12)
    return gap if y[j : j + 12].mean() > y[j - 12 : j].mean() else -gap


def _decide_gap_sign(g: float, strict: bool, _o: object) -> str | None:
    if strict and abs(g) < 4.0:
        return None
    return UP_DOWN[0] if g > 0 else UP_DOWN[1]


def _make_flat_location(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, BME)
    L = int(rng.integers(6, 10) if hard else rng.integers(10, 18))
    center = at_third(rng, BME.index(label), n, L // 2 + 1)
    y = stuck(background(rng, n, seasonal=True), L, center - L // 2)
    return Item(one(affine(rng, y)), label, {"start": center - L // 2, "length": L})


def _measure_flat(s: Series, _slots: Slots) -> tuple[float, int]:
    y = _y(s)
    run, start = flat_run(y)
    return (start + run / 2) / y.size, run


def _decide_flat_third(f: tuple[float, int], strict: bool, _o: object) -> str | None:
    if strict and f[1] < 6:
        return None
    return decide_thirds(f[0], strict)


def _make_type3(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, TYPES3)
    y = background(rng, n, seasonal=False)
    if label == TYPES3[0]:
        y[int(rng.integers(10, n - 10))] += spike_size(rng, hard)
    elif label == TYPES3[1]:
        y += shift_size(rng, False) * (np.arange(n) >= int(rng.uniform(0.2, 0.8) * n))
    else:
        L = int(rng.integers(8, 12) if hard else rng.integers(12, 20))
        y = stuck(y, L, int(rng.integers(10, n - L - 10)))
    return Item(one(affine(rng, y)), label, {"type": label})


def _measure_type3(s: Series, _slots: Slots) -> tuple[int, float, float]:
    y = _y(s)
    return flat_run(y)[0], float(np.abs(robust_residual_z(y)).max()), max_window_gap(y, 12)[0]


def _decide_type3(f: tuple[int, float, float], strict: bool, _o: object) -> str | None:
    run, z, gap = f
    if strict:
        if run >= 8:
            return TYPES3[2]
        if run > 2:
            return None
        if z >= 7.0 and gap <= 2.6:
            return TYPES3[0]
        if gap >= 3.4 and z <= 5.0:
            return TYPES3[1]
        return None
    if run >= 5:
        return TYPES3[2]
    return TYPES3[0] if z / 6.0 - gap / 3.0 > 0 else TYPES3[1]


KINDS: tuple[Kind, ...] = (
    Kind(
        "anomaly_presence_yn",
        "anomaly",
        "yes_no",
        YES_NO,
        (
            "Is there an anomaly in this time series?",
            "Does this series contain any anomalous point?",
        ),
        _make_presence,
        single(lambda y: float(np.abs(robust_residual_z(y)).max())),
        _decide_presence,
        measurement="largest robust residual z",
    ),
    Kind(
        "spike_location",
        "anomaly",
        "bme",
        BME,
        (
            "In which part of the time series does the anomaly occur?",
            "Where is the sudden spike located: at the beginning, in the middle, or at the end?",
        ),
        _make_spike_location,
        single(peak),
        _decide_peak_third,
        measurement="position of the largest robust residual",
    ),
    Kind(
        "level_shift_location",
        "anomaly",
        "bme",
        BME,
        (
            "In which part of the series does the level shift happen?",
            "The mean level of this series jumps once. Is the jump near the beginning, the "
            "middle, or the end?",
        ),
        _make_shift_location,
        single(shift_position),
        lambda p, strict, _o: decide_thirds(p, strict, 0.05),
        measurement="best single mean split (CUSUM) as a fraction of the length",
    ),
    Kind(
        "stuck_location",
        "anomaly",
        "bme",
        BME,
        (
            "The sensor got stuck and reported a constant value for a while. In which part of "
            "the series did this happen?",
            "Where in the series is the flat-lined (stuck) segment?",
        ),
        _make_flat_location,
        _measure_flat,
        _decide_flat_third,
        measurement="centre of the longest run of equal values",
    ),
    Kind(
        "anomaly_type",
        "anomaly",
        "anomaly_type",
        TYPES3,
        (
            "What type of anomaly does this series contain?",
            "The series contains one anomaly. Which kind is it?",
        ),
        _make_type3,
        _measure_type3,
        _decide_type3,
        direct=False,
        measurement="longest flat run, largest robust z, largest adjacent-window mean gap",
    ),
    Kind(
        "spike_count",
        "anomaly",
        "count4",
        COUNTS,
        (
            "How many spikes (isolated anomalous points) does this series contain?",
            "Count the sudden one-point spikes in this series. How many are there?",
        ),
        _make_count,
        _measure_count,
        _decide_count,
        measurement="number of separated robust residual peaks",
    ),
    Kind(
        "spike_direction",
        "anomaly",
        "up_down",
        UP_DOWN,
        (
            "Is the anomalous spike in this series pointing upward or downward?",
            "Does the single outlier in this series lie above or below the rest (upward or "
            "downward)?",
        ),
        _make_spike_direction,
        single(peak),
        _decide_sign,
        measurement="sign of the largest robust residual",
    ),
    Kind(
        "level_shift_direction",
        "anomaly",
        "up_down",
        UP_DOWN,
        (
            "This series has a sudden level shift. Is the shift upward or downward?",
            "Does the abrupt jump in this series go upward or downward?",
        ),
        _make_shift_direction,
        _signed_gap,
        _decide_gap_sign,
        measurement="sign of the largest adjacent-window mean gap",
    ),
)
