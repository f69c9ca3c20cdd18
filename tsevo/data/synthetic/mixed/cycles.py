"""Pattern recognition: cycles, seasonality type, amplitude change and speed-up.

Cycles are asked as presence, period in hours, count and wave shape.

A period is asked in hours of a series sampled every stated number of minutes, so reading it needs
an affine step after the measurement.
"""

from __future__ import annotations

import numpy as np

from .._base import FloatArray, dominant_period, pick
from ..seasonality import amplitude_log_ratio
from ._kind import (
    ADD_MULT,
    CHANGE3,
    YES_NO,
    Item,
    Kind,
    Series,
    Slots,
    affine,
    ar,
    decide_add_mult,
    decide_change3,
    decide_nearest,
    length,
    numeric_labels,
    one,
    single,
    yes_no,
)
from ._stats import kurtosis, skew, spectral_peak_ratio

__all__ = ["KINDS", "wave"]

WAVES = ("sine wave", "square wave", "sawtooth wave")


def wave(shape: str, phase: FloatArray) -> FloatArray:
    """A unit wave of ``shape`` (sine / square / saw) at ``phase`` measured in cycles."""
    f = np.mod(phase, 1.0)
    if shape == "square":
        out: FloatArray = np.where(f < 0.5, 1.0, -1.0)
    elif shape == "saw":
        out = 2.0 * f - 1.0
    else:
        out = np.sin(2 * np.pi * phase)
    return out


def _y(series: Series) -> FloatArray:
    return np.asarray(series["ts"])


# ---------------------------------------------------------------------- cycles
def _cycle(
    rng: np.random.Generator, n: int, period: float, noise: float, shape: str = "sine"
) -> FloatArray:
    t = np.arange(n, dtype=np.float64)
    y = wave(shape, t / period + rng.uniform(0, 1)) + noise * rng.standard_normal(n)
    return y + rng.uniform(-0.5, 0.5) * t / n


def _make_presence_cycle(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    yes = bool(rng.random() < 0.5)
    if yes:
        period = rng.uniform(6, n / 4)
        noise = rng.uniform(0.6, 0.9) if hard else rng.uniform(0.3, 0.6)
        y = _cycle(rng, n, period, noise, pick(rng, ("sine", "sine", "square", "saw")))
    else:
        period = 0.0
        y = ar(rng, n, rng.uniform(0.0, 0.5)) + rng.uniform(-1, 1) * np.linspace(0, 1, n)
    return Item(one(affine(rng, y)), yes_no(yes), {"period": period})


def _decide_presence_cycle(r: float, strict: bool, _o: object) -> str | None:
    lr = float(np.log(r))
    if strict:
        return "Yes" if lr >= np.log(60) else "No" if lr <= np.log(25) else None
    return yes_no(lr > np.log(40))


def _make_period(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    dt = int(pick(rng, (5, 10, 15, 20, 30)))
    p = int(rng.integers(8, n // 4 + 1))
    noise = rng.uniform(0.5, 0.9) if hard else rng.uniform(0.2, 0.5)
    y = affine(rng, _cycle(rng, n, p, noise, pick(rng, ("sine", "sine", "square"))))
    cands = [q * dt / 60 for q in range(4, n // 2 + 1)]
    fmt = lambda v: f"{v:.3g} hours"  # noqa: E731
    got = numeric_labels(rng, p * dt / 60, cands, int(pick(rng, (2, 3))), 1.3, fmt)
    if got is None:
        return None
    labels, label = got
    return Item(one(y), label, {"period": p, "dt": dt}, {"dt": dt}, labels)


def _make_count(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    c = int(rng.integers(3, 13))
    noise = rng.uniform(0.5, 0.9) if hard else rng.uniform(0.2, 0.5)
    y = affine(rng, _cycle(rng, n, n / c, noise))
    got = numeric_labels(rng, c, range(2, 17), int(pick(rng, (2, 3))), 1.25, lambda v: f"{v:g}")
    if got is None:
        return None
    labels, label = got
    return Item(one(y), label, {"cycles": c}, {}, labels)


def _cycle_shape_stats(s: Series, _slots: Slots) -> tuple[float, float]:
    y = _y(s)
    return skew(np.diff(y)), kurtosis(
        y - np.polyval(np.polyfit(np.arange(y.size), y, 1), np.arange(y.size))
    )


def _decide_wave(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    sk, ku = abs(f[0]), f[1]
    if strict:
        if sk >= 3.0:
            return WAVES[2]
        if sk > 1.0:
            return None
        return WAVES[1] if ku <= 1.15 else WAVES[0] if 1.35 <= ku <= 1.65 else None
    if sk >= 2.0:
        return WAVES[2]
    return WAVES[1] if ku < 1.25 else WAVES[0]


def _make_wave(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, WAVES)
    n = length(rng)
    noise = rng.uniform(0.08, 0.15) if hard else rng.uniform(0.02, 0.08)
    shape = {WAVES[0]: "sine", WAVES[1]: "square", WAVES[2]: "saw"}[label]
    y = _cycle(rng, n, rng.uniform(12, n / 5), noise, shape)
    return Item(one(affine(rng, y)), label, {"wave": label})


def _seasonal_growth(rng: np.random.Generator, hard: bool, label: str) -> FloatArray:
    n = length(rng)
    t = np.linspace(0.0, 1.0, n)
    g = rng.uniform(1.2, 2.0) if hard else rng.uniform(2.0, 3.5)
    level = rng.uniform(5, 10) * (1 + g * t)
    s = np.sin(2 * np.pi * np.arange(n) / rng.uniform(8, 24) + rng.uniform(0, 6.3))
    a = rng.uniform(0.15, 0.3)
    if label == "multiplicative":
        y = level * (1 + a * s)
    else:
        y = level + a * float(level.mean()) * s
    return affine(rng, y + 0.02 * float(level.mean()) * rng.standard_normal(n), positive=True)


def _make_season_type(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, ADD_MULT)
    return Item(one(_seasonal_growth(rng, hard, label)), label, {"seasonality": label})


def _make_amplitude(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, CHANGE3)
    n = length(rng)
    t = np.linspace(0.0, 1.0, n)
    r = rng.uniform(0.7, 1.0) if hard else rng.uniform(1.0, 1.6)
    r = {CHANGE3[0]: r, CHANGE3[1]: -r}.get(label, 0.0)
    y = np.exp(r * t) * np.sin(2 * np.pi * np.arange(n) / rng.uniform(8, 20))
    y = y + rng.uniform(0.05, 0.2) * rng.standard_normal(n) + rng.uniform(-2, 2) * t
    return Item(one(affine(rng, y)), label, {"log_growth": r})


def _make_period_change(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    scenario = pick(rng, ("faster", "faster", "same", "slower"))
    p1 = rng.uniform(8, n / 8)
    ratio = {
        "faster": rng.uniform(0.5, 0.65) if hard else rng.uniform(0.4, 0.55),
        "same": 1.0,
        "slower": rng.uniform(1.5, 1.8),
    }[scenario]
    per = np.where(np.arange(n) < n // 2, p1, p1 * ratio)
    phase = np.cumsum(1.0 / per) + rng.uniform(0, 1)
    y = np.sin(2 * np.pi * phase) + rng.uniform(0.1, 0.4) * rng.standard_normal(n)
    return Item(one(affine(rng, y)), yes_no(scenario == "faster"), {"p1": p1, "ratio": ratio})


def _measure_period_change(s: Series, _slots: Slots) -> float:
    y = _y(s)
    h = y.size // 2
    return float(np.log(dominant_period(y[h:]) / dominant_period(y[:h])))


def _decide_period_change(lr: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if lr <= np.log(0.72) else "No" if lr >= np.log(0.9) else None
    return yes_no(lr < np.log(0.8))


KINDS: tuple[Kind, ...] = (
    Kind(
        "cycle_presence_yn",
        "pattern",
        "yes_no",
        YES_NO,
        (
            "Does this time series exhibit cyclic (periodic) behaviour?",
            "Is there a repeating seasonal pattern in this series?",
        ),
        _make_presence_cycle,
        single(spectral_peak_ratio),
        _decide_presence_cycle,
        measurement="highest periodogram value over the median one",
    ),
    Kind(
        "cycle_period_hours",
        "pattern",
        "numeric:hours",
        (),
        (
            "The series is sampled every {dt} minutes. What is the period of its cycle, in hours?",
            "Measurements are taken every {dt} minutes. How many hours does one full cycle of "
            "the pattern last?",
        ),
        _make_period,
        lambda s, sl: dominant_period(_y(s)) * sl["dt"] / 60.0,
        lambda v, strict, o: decide_nearest(v, o, strict, 0.1),
        measurement="periodogram peak period times the stated sampling interval",
    ),
    Kind(
        "cycle_count",
        "pattern",
        "numeric:count",
        (),
        (
            "How many complete cycles does this series go through?",
            "Count the full periods of the oscillation in this series. How many are there?",
        ),
        _make_count,
        single(lambda y: y.size / dominant_period(y)),
        lambda v, strict, o: decide_nearest(v, o, strict, 0.08),
        measurement="length over the periodogram peak period",
    ),
    Kind(
        "cycle_wave_shape",
        "pattern",
        "wave_shape",
        WAVES,
        (
            "Which waveform best describes the cycles in this series?",
            "Are the oscillations in this series shaped like a sine wave, a square wave, or a "
            "sawtooth wave?",
        ),
        _make_wave,
        _cycle_shape_stats,
        _decide_wave,
        direct=False,
        measurement="skewness of first differences and kurtosis of detrended values",
    ),
    Kind(
        "seasonality_add_mult",
        "pattern",
        "add_mult",
        ADD_MULT,
        (
            "Is the seasonality in this series additive or multiplicative?",
            "Does the seasonal swing stay the same size as the level grows (additive), or grow "
            "with the level (multiplicative)?",
        ),
        _make_season_type,
        single(amplitude_log_ratio),
        decide_add_mult,
        measurement="log ratio of detrended spread, last third over first third",
    ),
    Kind(
        "cycle_amplitude_change",
        "pattern",
        "change3",
        CHANGE3,
        (
            "How does the amplitude of the oscillation change over time?",
            "Over the course of the series, do the swings get bigger, get smaller, or stay "
            "about the same?",
        ),
        _make_amplitude,
        single(amplitude_log_ratio),
        decide_change3,
        measurement="log ratio of detrended spread, last third over first third",
    ),
    Kind(
        "cycle_speedup_yn",
        "pattern",
        "yes_no",
        YES_NO,
        (
            "Does the oscillation become faster (a shorter period) in the second half of the "
            "series?",
            "Is the cycle in the second half of the series quicker than in the first half?",
        ),
        _make_period_change,
        _measure_period_change,
        _decide_period_change,
        direct=False,
        measurement="log ratio of the periodogram periods of the two halves",
    ),
)
