"""F1 trend: direction inside a stated window, and the shape (curvature) of the overall trend.

* ``window_direction`` — the series is piecewise linear with random slopes outside a stated window
  ``t=a..b``; inside the window it rises, falls or stays flat. The global slope is unrelated to the
  answer, so reading the whole series fails. Measurement: OLS change over the window in units of the
  window's residual spread; reading rule ``label``.
* ``shape`` — accelerating (exponential), decelerating (logarithmic) or linear change. Measurement:
  the slopes of the two halves (their normalized difference); reading rule ``label``.
"""

from __future__ import annotations

import numpy as np

from tsevo.data.question import Question

from ._base import (
    Family,
    FloatArray,
    Phrasebook,
    check_difficulty,
    numbers,
    ols,
    option_index,
    pick,
    resample,
    subtask_for,
)

NAME = "trend"
TASK = "synthetic/trend"
SUBTASKS = ("window_direction", "shape")
DIRECTION = ("upward", "downward", "flat")
SHAPE = ("accelerating", "decelerating", "linear (constant rate)")

PHRASINGS: dict[str, tuple[str, ...]] = {
    "window_direction": (
        "Between t={a} and t={b}, is the series trending upward, downward, or is it flat?",
        "Look only at the window from t={a} to t={b}. Which way does the trend go there?",
        "Describe the trend of the series over the interval from t={a} to t={b}.",
        "Within t={a} to t={b}, does the series mostly go up, go down, or stay flat?",
    ),
    "shape": (
        "How would you describe the shape of the trend in this series?",
        "Is the change in this series steady, speeding up, or slowing down over time?",
        "Which description fits how the rate of change of the series evolves?",
        "Looking at the whole series, how does the speed of its change behave?",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)

# Decision thresholds (oracle) and dead-band half-widths (generator) per difficulty.
_DIR_CUT = 1.5
_DIR_MARGIN = {"easy": 0.8, "hard": 0.4}
_SHAPE_CUT = 0.18
_SHAPE_MARGIN = {"easy": 0.08, "hard": 0.05}


def window_trend_z(y: FloatArray, a: int, b: int) -> float:
    """OLS change over ``y[a:b]`` divided by the residual standard deviation of that fit."""
    w = y[a:b]
    slope, _, resid = ols(w)
    return slope * (w.size - 1) / max(resid, 1e-12)


def half_slope_contrast(y: FloatArray) -> float:
    """Normalized difference of the second-half and first-half slopes, in the trend's direction.

    Positive for accelerating change, negative for decelerating, near zero for linear.
    """
    h = y.size // 2
    s1 = ols(y[:h])[0]
    s2 = ols(y[h:])[0]
    d = 1.0 if (s1 + s2) >= 0 else -1.0
    s1, s2 = d * s1, d * s2
    return (s2 - s1) / max(abs(s1) + abs(s2), 1e-12)


def _classify_direction(z: float, margin: float) -> str | None:
    a = abs(z)
    if a >= _DIR_CUT + margin:
        return "upward" if z > 0 else "downward"
    if a <= _DIR_CUT - margin:
        return "flat"
    return None


def _classify_shape(r: float, margin: float) -> str | None:
    if r >= _SHAPE_CUT + margin:
        return "accelerating"
    if r <= -_SHAPE_CUT - margin:
        return "decelerating"
    if abs(r) <= _SHAPE_CUT - margin:
        return "linear (constant rate)"
    return None


def _gen_direction(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, DIRECTION)

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        n = int(pick(rng, (128, 160, 192)))
        frac = rng.uniform(0.22, 0.3) if hard else rng.uniform(0.3, 0.4)
        L = round(n * frac)
        edge = round(0.1 * n)
        a = int(rng.integers(edge, n - L - edge + 1))
        b = a + L
        mag = rng.uniform(1.8, 3.5) if hard else rng.uniform(4.0, 8.0)
        delta = {"upward": mag, "downward": -mag, "flat": 0.0}[label]
        # outside the window: larger changes of random sign, so the global slope says nothing
        sgn = np.repeat(rng.choice([-1.0, 1.0]), 2)
        v0 = -sgn[0] * rng.uniform(1.5, 3.0) * max(abs(delta), 4.0)
        v_end = delta + sgn[1] * rng.uniform(1.5, 3.0) * max(abs(delta), 4.0)
        knots_t = [0.0, float(a), float(b - 1), float(n - 1)]
        knots_v = [v0, 0.0, delta, v_end]
        t = np.arange(n, dtype=np.float64)
        y = np.interp(t, knots_t, knots_v) + rng.standard_normal(n)
        season_amp, period = 0.0, 0.0
        if hard:
            season_amp = rng.uniform(0.4, 0.9)
            period = rng.uniform(12, 30)
            y += season_amp * np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi))
        scale, offset = float(np.exp(rng.uniform(np.log(0.5), np.log(20)))), rng.uniform(-50, 50)
        y = np.round(offset + scale * y, 4)
        z = window_trend_z(y, a, b)
        if _classify_direction(z, _DIR_MARGIN[difficulty]) != label:
            return None
        latent: dict[str, object] = {
            "n": n,
            "a": a,
            "b": b,
            "delta_sigma": delta,
            "season_amp": season_amp,
            "period": period,
            "scale": scale,
            "offset": offset,
            "z": z,
        }
        return y, latent

    (y, latent), tries = resample(attempt, "trend/window_direction")
    return BOOK.labelled(
        rng,
        index,
        difficulty,
        "window_direction",
        DIRECTION,
        label,
        {"series": y},
        latent,
        tries,
        slots={"a": latent["a"], "b": latent["b"]},
    )


def _gen_shape(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, SHAPE)

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        n = int(pick(rng, (96, 128, 160)))
        t = np.linspace(0.0, 1.0, n)
        amp = rng.uniform(6, 10) if hard else rng.uniform(12, 20)
        if label == "accelerating":
            k = rng.uniform(1.5, 2.5) if hard else rng.uniform(2.5, 4.0)
            f = (np.exp(k * t) - 1.0) / (np.exp(k) - 1.0)
        elif label == "decelerating":
            k = rng.uniform(4, 10) if hard else rng.uniform(10, 40)
            f = np.log1p(k * t) / np.log1p(k)
        else:
            k = 0.0
            f = t.copy()
        sign = 1.0 if rng.random() < 0.5 else -1.0
        y = sign * amp * f + rng.standard_normal(n)
        scale, offset = float(np.exp(rng.uniform(np.log(0.5), np.log(20)))), rng.uniform(-50, 50)
        y = np.round(offset + scale * y, 4)
        r = half_slope_contrast(y)
        if _classify_shape(r, _SHAPE_MARGIN[difficulty]) != label:
            return None
        latent: dict[str, object] = {
            "n": n,
            "amp_sigma": amp,
            "k": k,
            "sign": sign,
            "scale": scale,
            "contrast": r,
        }
        return y, latent

    (y, latent), tries = resample(attempt, "trend/shape")
    return BOOK.labelled(
        rng, index, difficulty, "shape", SHAPE, label, {"series": y}, latent, tries
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one trend question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    if subtask_for(SUBTASKS, index) == "window_direction":
        return _gen_direction(rng, hard, difficulty, index)
    return _gen_shape(rng, hard, difficulty, index)


def oracle(q: Question) -> int:
    """Answer from the series and the question text alone."""
    y = np.asarray(q.series[q.primary[0]])
    if q.subtask == "window_direction":
        a, b = (int(v) for v in numbers(q.question)[:2])
        lab = _classify_direction(window_trend_z(y, a, b), 0.0) or "flat"
    else:
        lab = _classify_shape(half_slope_contrast(y), 0.0) or "linear (constant rate)"
    return option_index(q, lab)


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="trend direction in a stated window; accelerating/decelerating/linear shape",
    oracle_measurement="Theil-Sen slope z in the stated window; slope of first vs second half (label)",
)
