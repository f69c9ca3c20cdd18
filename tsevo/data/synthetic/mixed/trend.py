"""Pattern recognition: trend direction, presence, slope, shape and reversal.

The same concept is asked under several option sets: a trend as a direction, as "is there an upward
trend?", as "is there a trend?", inside a stated window, as a numeric slope per stated number of days,
as a shape and as "is it accelerating?".
"""

from __future__ import annotations

import numpy as np

from .._base import FloatArray, pick
from ..trend import half_slope_contrast, window_trend_z
from ._kind import (
    DIRECTION,
    YES_NO,
    Item,
    Kind,
    Series,
    Slots,
    affine,
    ar,
    decide_nearest,
    length,
    numeric_labels,
    one,
    single,
    yes_no,
)
from ._stats import trend_z

__all__ = ["KINDS"]

SHAPES = ("linear", "exponential", "logarithmic")


def _y(series: Series) -> FloatArray:
    return np.asarray(series["ts"])


# ---------------------------------------------------------------------- trend
_DIR_CUT, _DIR_MARGIN = 1.5, 0.6


def _direction(z: float, strict: bool, _opts: object = None) -> str | None:
    m = _DIR_MARGIN if strict else 0.0
    if abs(z) >= _DIR_CUT + m:
        return DIRECTION[0] if z > 0 else DIRECTION[1]
    if abs(z) <= _DIR_CUT - m:
        return DIRECTION[2]
    return None


def _trend_series(rng: np.random.Generator, n: int, direction: str, hard: bool) -> FloatArray:
    t = np.linspace(0.0, 1.0, n)
    mag = rng.uniform(2.5, 4.5) if hard else rng.uniform(4.5, 9.0)
    delta = {"upward": mag, "downward": -mag}.get(direction, rng.uniform(-0.4, 0.4))
    y = delta * t + ar(rng, n, rng.uniform(0.0, 0.5))
    if rng.random() < 0.5:
        y += rng.uniform(0.4, 1.2) * np.sin(2 * np.pi * np.arange(n) / rng.uniform(8, 32))
    return affine(rng, y)


def _make_direction(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, DIRECTION)
    return Item(one(_trend_series(rng, length(rng), label, hard)), label, {"direction": label})


def _make_up(rng: np.random.Generator, hard: bool) -> Item:
    direction = pick(rng, ("upward", "upward", "downward", "none"))
    y = _trend_series(rng, length(rng), direction, hard)
    return Item(one(y), yes_no(direction == "upward"), {"direction": direction})


def _decide_up(z: float, strict: bool, _o: object) -> str | None:
    return {DIRECTION[0]: "Yes", None: None}.get(_direction(z, strict), "No")


def _make_presence(rng: np.random.Generator, hard: bool) -> Item:
    direction = pick(rng, ("upward", "downward", "none", "none"))
    y = _trend_series(rng, length(rng), direction, hard)
    return Item(one(y), yes_no(direction != "none"), {"direction": direction})


def _decide_presence(z: float, strict: bool, _o: object) -> str | None:
    d = _direction(z, strict)
    return None if d is None else yes_no(d != DIRECTION[2])


def _make_window(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, DIRECTION)
    n = length(rng)
    L = round(n * rng.uniform(0.3, 0.45))
    a = int(rng.integers(round(0.1 * n), n - L - round(0.1 * n) + 1))
    b = a + L
    mag = rng.uniform(2.5, 4.0) if hard else rng.uniform(4.0, 8.0)
    delta = {"upward": mag, "downward": -mag}.get(label, 0.0)
    sgn = rng.choice([-1.0, 1.0])
    big = rng.uniform(1.5, 3.0) * max(abs(delta), 4.0)
    knots = [-sgn * big, 0.0, delta, delta + sgn * big]
    y = np.interp(np.arange(n), [0, a, b - 1, n - 1], knots) + ar(rng, n, rng.uniform(0, 0.3))
    return Item(one(affine(rng, y)), label, {"a": a, "b": b, "delta": delta}, {"a": a, "b": b})


def _make_slope(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    k = int(pick(rng, (7, 10, 30)))
    mag = rng.uniform(5.0, 9.0) if hard else rng.uniform(9.0, 16.0)
    sign = pick(rng, (-1.0, 1.0))
    y = sign * mag * np.linspace(0.0, 1.0, n) + ar(rng, n, rng.uniform(0.0, 0.4))
    scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20.0))))
    y = rng.uniform(-50, 50) + scale * y
    truth = float(f"{sign * scale * mag / (n - 1) * k:.3g}")
    factors = (0.25, 0.4, 0.5, 0.6, 1.7, 2.0, 2.5, 3.0, 4.0)
    got = numeric_labels(
        rng,
        abs(truth),
        [abs(truth) * f * rng.uniform(0.92, 1.08) for f in factors],
        int(pick(rng, (2, 3))),
        1.45,
        lambda v: f"{sign * float(f'{v:.3g}'):g}",
    )
    if got is None:
        return None
    labels, label = got
    return Item(one(y), label, {"slope_per_k": truth, "k": k}, {"k": k}, labels)


def _measure_slope(s: Series, slots: Slots) -> float:
    y = _y(s)
    t = np.arange(y.size, dtype=np.float64)
    return float(np.polyfit(t, y, 1)[0]) * slots["k"]


# ---------------------------------------------------------------------- trend shape
_SHAPE_CUT, _SHAPE_MARGIN = 0.18, 0.07


def _shape(r: float, strict: bool, _o: object = None) -> str | None:
    m = _SHAPE_MARGIN if strict else 0.0
    if r >= _SHAPE_CUT + m:
        return "exponential"
    if r <= -_SHAPE_CUT - m:
        return "logarithmic"
    if abs(r) <= _SHAPE_CUT - m:
        return "linear"
    return None


def _shape_series(rng: np.random.Generator, shape: str, hard: bool) -> FloatArray:
    n = length(rng)
    t = np.linspace(0.0, 1.0, n)
    amp = rng.uniform(6, 10) if hard else rng.uniform(12, 20)
    if shape == "exponential":
        k = rng.uniform(1.5, 2.5) if hard else rng.uniform(2.5, 4.0)
        f = (np.exp(k * t) - 1.0) / (np.exp(k) - 1.0)
    elif shape == "logarithmic":
        k = rng.uniform(4, 10) if hard else rng.uniform(10, 40)
        f = np.log1p(k * t) / np.log1p(k)
    else:
        f = t
    return affine(rng, pick(rng, (-1.0, 1.0)) * amp * f + rng.standard_normal(n))


def _make_shape(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, SHAPES)
    return Item(one(_shape_series(rng, label, hard)), label, {"shape": label})


def _make_accel(rng: np.random.Generator, hard: bool) -> Item:
    shape = pick(rng, ("exponential", "exponential", "linear", "logarithmic"))
    y = _shape_series(rng, shape, hard)
    return Item(one(y), yes_no(shape == "exponential"), {"shape": shape})


def _decide_accel(r: float, strict: bool, _o: object) -> str | None:
    s = _shape(r, strict)
    return None if s is None else yes_no(s == "exponential")


def _make_reversal(rng: np.random.Generator, hard: bool) -> Item:
    scenario = pick(rng, ("reversal", "reversal", "monotone", "flat"))
    n = length(rng)
    mag = rng.uniform(3.0, 5.0) if hard else rng.uniform(5.0, 9.0)
    turn = rng.uniform(0.42, 0.58) * (n - 1)
    sgn = pick(rng, (-1.0, 1.0))
    if scenario == "reversal":
        knots = [0.0, sgn * mag, sgn * mag * rng.uniform(-0.3, 0.3)]
    elif scenario == "monotone":
        knots = [0.0, sgn * mag * rng.uniform(0.35, 0.65), sgn * mag * rng.uniform(1.4, 1.8)]
    else:
        knots = [0.0, 0.0, 0.0]
    y = np.interp(np.arange(n), [0, turn, n - 1], knots) + ar(rng, n, rng.uniform(0, 0.3))
    return Item(one(affine(rng, y)), yes_no(scenario == "reversal"), {"scenario": scenario})


def _measure_reversal(s: Series, _slots: Slots) -> float:
    y = _y(s)
    k = round(0.4 * y.size)
    z1, z2 = trend_z(y[:k]), trend_z(y[-k:])
    m = min(abs(z1), abs(z2))
    return m if z1 * z2 < 0 else -m


def _decide_reversal(r: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if r >= 2.5 else "No" if r <= 0.6 else None
    return yes_no(r > 1.5)


KINDS: tuple[Kind, ...] = (
    Kind(
        "trend_direction",
        "pattern",
        "direction",
        DIRECTION,
        (
            "What is the overall trend of this time series?",
            "Which best describes the long-term direction of the series?",
            "Is the series trending upward, downward, or neither?",
        ),
        _make_direction,
        single(trend_z),
        _direction,
        measurement="OLS change over the series in residual sd",
    ),
    Kind(
        "trend_upward_yn",
        "pattern",
        "yes_no",
        YES_NO,
        (
            "Does this time series show an upward trend?",
            "Is the series generally increasing over time?",
        ),
        _make_up,
        single(trend_z),
        _decide_up,
        measurement="OLS change over the series in residual sd",
    ),
    Kind(
        "trend_presence_yn",
        "pattern",
        "yes_no",
        YES_NO,
        (
            "Does this series have a trend (in either direction)?",
            "Is there a clear long-term trend in this time series?",
        ),
        _make_presence,
        single(trend_z),
        _decide_presence,
        measurement="absolute OLS change over the series in residual sd",
    ),
    Kind(
        "trend_window_direction",
        "pattern",
        "direction",
        DIRECTION,
        (
            "Between t={a} and t={b}, what is the direction of the trend?",
            "Consider only the segment from t={a} to t={b}. Is the series going upward, "
            "downward, or showing no clear trend there?",
        ),
        _make_window,
        lambda s, sl: window_trend_z(_y(s), sl["a"], sl["b"]),
        _direction,
        measurement="OLS change inside the stated window in residual sd",
    ),
    Kind(
        "trend_slope_value",
        "pattern",
        "numeric:slope",
        (),
        (
            "The series is recorded once per day. On average, by how much does its level "
            "change every {k} days?",
            "This daily series follows a linear trend. What is the approximate change in its "
            "level per {k} days?",
        ),
        _make_slope,
        _measure_slope,
        lambda v, strict, o: decide_nearest(v, o, strict, 0.2),
        measurement="OLS slope per step times the stated number of days",
    ),
    Kind(
        "trend_shape",
        "pattern",
        "trend_shape",
        SHAPES,
        (
            "Which function best describes the trend of this time series?",
            "Is the trend of this series linear, exponential, or logarithmic?",
        ),
        _make_shape,
        single(half_slope_contrast),
        _shape,
        measurement="slope of the second half against the first (normalized)",
    ),
    Kind(
        "trend_accelerating_yn",
        "pattern",
        "yes_no",
        YES_NO,
        (
            "Is the growth of this series accelerating over time?",
            "Does the series change faster and faster as time goes on?",
        ),
        _make_accel,
        single(half_slope_contrast),
        _decide_accel,
        measurement="slope of the second half against the first (normalized)",
    ),
    Kind(
        "trend_reversal_yn",
        "pattern",
        "yes_no",
        YES_NO,
        (
            "Does the trend of this series change direction partway through?",
            "Does the series first move one way and then turn around and move the other way?",
        ),
        _make_reversal,
        _measure_reversal,
        _decide_reversal,
        direct=False,
        measurement="trend z of the first and last 40%: opposite signs, the smaller magnitude",
    ),
)
