"""F11 data-transformation identification (TSAQA-DT-like): which operation maps series A to B.

Menu: first difference (first value set to 0), cumulative sum, trailing moving average (window
3-9), time reversal, z-score standardization, natural logarithm (A is always positive). Four
options: the gold transform and three others. Hard items are shorter and add noise to B.
Measurement: for each transform on the menu, the RMS residual of ``B - T(A)`` relative to the
spread of B (the moving average takes its best window); reading rule ``label`` (argmin).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tsevo.data.question import Question

from ._base import (
    Family,
    FloatArray,
    Phrasebook,
    check_difficulty,
    option_index,
    pick,
    resample,
)

NAME = "transform"
TASK = "synthetic/transform"
SUBTASKS = ("which_transform",)
TRANSFORMS = (
    "first difference",
    "cumulative sum",
    "moving average",
    "time reversal",
    "z-score standardization",
    "natural logarithm",
)
MA_WINDOWS = range(2, 12)

PHRASINGS: dict[str, tuple[str, ...]] = {
    "which_transform": (
        "Which transformation turns series A into series B?",
        "Series B was computed from series A. Which operation was applied?",
        "What operation maps series A onto series B?",
        "B is a transformed version of A. Which transformation produced it?",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)


def moving_average(a: FloatArray, w: int) -> FloatArray:
    """Trailing moving average of width ``w`` (shorter windows at the start; same length)."""
    c = np.cumsum(np.r_[0.0, a])
    idx = np.arange(1, a.size + 1)
    lo = np.maximum(idx - w, 0)
    out: FloatArray = (c[idx] - c[lo]) / (idx - lo)
    return out


def _apply(name: str, a: FloatArray, w: int = 5) -> FloatArray:
    fns: dict[str, Callable[[], FloatArray]] = {
        "first difference": lambda: np.diff(a, prepend=a[0]),
        "cumulative sum": lambda: np.cumsum(a),
        "moving average": lambda: moving_average(a, w),
        "time reversal": lambda: a[::-1].copy(),
        "z-score standardization": lambda: (a - a.mean()) / a.std(),
        "natural logarithm": lambda: np.log(np.maximum(a, 1e-12)),
    }
    return fns[name]()


def transform_residual(name: str, a: FloatArray, b: FloatArray) -> float:
    """RMS of ``b - T(a)`` over the spread of ``b`` (best window for the moving average)."""
    sd = max(float(b.std()), 1e-12)
    if name == "moving average":
        return (
            min(float(np.sqrt(np.mean((b - moving_average(a, w)) ** 2))) for w in MA_WINDOWS) / sd
        )
    return float(np.sqrt(np.mean((b - _apply(name, a)) ** 2))) / sd


def _series_a(rng: np.random.Generator, n: int) -> FloatArray:
    t = np.arange(n, dtype=np.float64)
    level = rng.uniform(5, 20)
    x = rng.uniform(0.5, 2.0) * np.sin(2 * np.pi * t / rng.uniform(10, 40) + rng.uniform(0, 7))
    x += np.cumsum(rng.standard_normal(n)) * rng.uniform(0.1, 0.3)
    x += rng.standard_normal(n) * rng.uniform(0.2, 0.6)
    x = x - x.min() + 0.5 if (level + x).min() <= 0.5 else x
    return np.round(level + x, 4)


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one transformation question (gold transform drawn from the menu)."""
    hard = check_difficulty(difficulty)
    label = pick(rng, TRANSFORMS)
    others = [t for t in TRANSFORMS if t != label]
    distract = [others[int(i)] for i in rng.permutation(len(others))[:3]]
    labels = (label, *distract)

    def attempt() -> tuple[FloatArray, FloatArray, dict[str, object]] | None:
        n = int(pick(rng, (64, 96))) if hard else int(pick(rng, (96, 128)))
        a = _series_a(rng, n)
        w = int(rng.integers(3, 10))
        b = _apply(label, a, w)
        noise = 0.05 if hard else 0.0
        b = np.round(b + noise * b.std() * rng.standard_normal(n), 4)
        res = {t: transform_residual(t, a, b) for t in labels}
        ranked = sorted(res, key=lambda t: res[t])
        need = 0.15 if hard else 0.3
        if ranked[0] != label or res[ranked[1]] - res[ranked[0]] < need:
            return None
        return (
            a,
            b,
            {
                "n": n,
                "ma_window": w if label == "moving average" else 0,
                "noise": noise,
                "residuals": res,
            },
        )

    (a, b, latent), tries = resample(attempt, "transform/which_transform")
    return BOOK.labelled(
        rng,
        index,
        difficulty,
        "which_transform",
        labels,
        label,
        {"A": a, "B": b},
        latent,
        tries,
        primary=("A", "B"),
    )


def oracle(q: Question) -> int:
    """Pick the offered transform whose application to A best reproduces B."""
    a, b = (np.asarray(q.series[n]) for n in q.primary)
    offered = [o for o in q.options if o in TRANSFORMS]
    res = {t: transform_residual(t, a, b) for t in offered}
    return option_index(q, min(res, key=lambda t: res[t]))


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="which transform (diff, cumsum, moving average, reverse, z-score, log) maps A to B",
    oracle_measurement="residual of B against each transform of A (argmin)",
)
