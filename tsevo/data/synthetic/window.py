"""F3 window comparison: level and volatility of two windows whose bounds the question states.

* ``level`` — is the mean of the second window higher, lower or about the same as the first? The
  series has a random global trend and a level step placed between the windows; the second window
  may lie before or after the first, so the global slope does not give the answer. Measurement:
  standardized gap ``(mean2 - mean1) / pooled sd``; reading rule ``label``.
* ``volatility`` — which window fluctuates more? Noise scale differs across a cut between the
  windows, on a smooth random background. Measurement: log ratio of the spread of first
  differences in the two windows; reading rule ``label``.
"""

from __future__ import annotations

import numpy as np

from tsevo.data.question import Question

from ._base import (
    Family,
    FloatArray,
    Phrasebook,
    ar_noise,
    check_difficulty,
    numbers,
    option_index,
    pick,
    resample,
    subtask_for,
)

NAME = "window_compare"
TASK = "synthetic/window_compare"
SUBTASKS = ("level", "volatility")
LEVEL = ("higher", "lower", "about the same")
VOLATILITY = ("the first window", "the second window", "about equally volatile")

PHRASINGS: dict[str, tuple[str, ...]] = {
    "level": (
        "Compare the window from t={a1} to t={b1} with the window from t={a2} to t={b2}. Is the "
        "average level in the second window higher, lower, or about the same as in the first?",
        "Relative to the stretch from t={a1} to t={b1}, is the mean of the series during "
        "t={a2} to t={b2} higher, lower, or about the same?",
        "Take the mean of the series over t={a1} to t={b1} and over t={a2} to t={b2}. How does "
        "the second mean compare with the first?",
    ),
    "volatility": (
        "Which window is more volatile: the first, from t={a1} to t={b1}, or the second, from "
        "t={a2} to t={b2}?",
        "Compare the variability of the series in the first window (t={a1} to t={b1}) and in "
        "the second window (t={a2} to t={b2}). Which one fluctuates more?",
        "Is the series noisier in the first window, t={a1} to t={b1}, or in the second, t={a2} "
        "to t={b2}?",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)

_LEVEL_CUT = 0.9
_LEVEL_MARGIN = {"easy": 0.35, "hard": 0.15}
_VOL_CUT = float(np.log(1.4))
_VOL_MARGIN = {"easy": 0.15, "hard": 0.1}


def level_gap(y: FloatArray, w1: tuple[int, int], w2: tuple[int, int]) -> float:
    """Standardized gap between the window means: ``(mean2 - mean1) / pooled sd``."""
    x1, x2 = y[w1[0] : w1[1]], y[w2[0] : w2[1]]
    pooled = np.sqrt((x1.var() + x2.var()) / 2.0)
    return float((x2.mean() - x1.mean()) / max(pooled, 1e-12))


def volatility_log_ratio(y: FloatArray, w1: tuple[int, int], w2: tuple[int, int]) -> float:
    """Log ratio of the standard deviation of first differences, second window over first."""
    d1 = np.diff(y[w1[0] : w1[1]]).std()
    d2 = np.diff(y[w2[0] : w2[1]]).std()
    return float(np.log(max(d2, 1e-12) / max(d1, 1e-12)))


def _classify_level(g: float, margin: float) -> str | None:
    cut = _LEVEL_CUT
    if g >= cut + margin:
        return "higher"
    if g <= -cut - margin:
        return "lower"
    if abs(g) <= cut - margin:
        return "about the same"
    return None


def _classify_vol(r: float, margin: float) -> str | None:
    if r >= _VOL_CUT + margin:
        return "the second window"
    if r <= -_VOL_CUT - margin:
        return "the first window"
    if abs(r) <= _VOL_CUT - margin:
        return "about equally volatile"
    return None


def _windows(rng: np.random.Generator, n: int, L: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Two non-overlapping windows of length ``L`` (gap >= 10); order of mention is random."""
    lo = int(rng.integers(5, n - 2 * L - 15 + 1))
    hi = int(rng.integers(lo + L + 10, n - L - 5 + 1))
    a, b = (lo, lo + L), (hi, hi + L)
    return (a, b) if rng.random() < 0.5 else (b, a)


def _gen(rng: np.random.Generator, sub: str, hard: bool, difficulty: str, index: int) -> Question:
    labels = LEVEL if sub == "level" else VOLATILITY
    label = pick(rng, labels)

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        n = int(pick(rng, (160, 200, 240)))
        L = int(rng.integers(24, 33)) if hard else 40
        w1, w2 = _windows(rng, n, L)
        t = np.arange(n, dtype=np.float64)
        # the cut between the windows: the level step (level) or the noise change (volatility)
        first, second = sorted((w1, w2))
        cut = int(rng.integers(first[1], second[0] + 1))
        side2 = (t >= cut) if w2[0] > w1[0] else (t < cut)
        latent: dict[str, object] = {"n": n, "w1": list(w1), "w2": list(w2), "cut": cut}
        if sub == "level":
            y = rng.uniform(-6, 6) * t / n + ar_noise(rng, n, 0.4 if hard else 0.0)
            mag = rng.uniform(1.3, 2.2) if hard else rng.uniform(2.0, 4.0)
            target = {"higher": mag, "lower": -mag}.get(label, rng.uniform(-0.2, 0.2))
            x1, x2 = y[w1[0] : w1[1]], y[w2[0] : w2[1]]
            pooled = np.sqrt((x1.var() + x2.var()) / 2.0)
            y = y + side2 * (target * pooled - (x2.mean() - x1.mean()))
            latent["target_gap"] = target
        else:
            r = rng.uniform(1.6, 2.0) if hard else rng.uniform(2.0, 3.0)
            ratio = {"the second window": r, "the first window": 1.0 / r}.get(label, 1.0)
            sd = np.where(side2, ratio, 1.0)
            y = rng.uniform(-4, 4) * t / n + rng.uniform(1, 3) * np.sin(
                2 * np.pi * t / rng.uniform(60, 120) + rng.uniform(0, 2 * np.pi)
            )
            y = y + sd * rng.standard_normal(n)
            latent["noise_ratio"] = ratio
        scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
        y = np.round(rng.uniform(-50, 50) + scale * y, 4)
        if sub == "level":
            stat = level_gap(y, w1, w2)
            ok = _classify_level(stat, _LEVEL_MARGIN[difficulty]) == label
        else:
            stat = volatility_log_ratio(y, w1, w2)
            ok = _classify_vol(stat, _VOL_MARGIN[difficulty]) == label
        if not ok:
            return None
        latent.update(scale=scale, stat=stat)
        return y, latent

    (y, latent), tries = resample(attempt, f"window_compare/{sub}")
    w1, w2 = latent["w1"], latent["w2"]
    assert isinstance(w1, list) and isinstance(w2, list)
    return BOOK.labelled(
        rng,
        index,
        difficulty,
        sub,
        labels,
        label,
        {"series": y},
        latent,
        tries,
        slots={"a1": w1[0], "b1": w1[1], "a2": w2[0], "b2": w2[1]},
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one window-comparison question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    return _gen(rng, subtask_for(SUBTASKS, index), hard, difficulty, index)


def oracle(q: Question) -> int:
    """Answer from the series and the window bounds written in the question."""
    y = np.asarray(q.series[q.primary[0]])
    a1, b1, a2, b2 = (int(v) for v in numbers(q.question)[:4])
    if q.subtask == "level":
        lab = _classify_level(level_gap(y, (a1, b1), (a2, b2)), 0.0) or "about the same"
    else:
        lab = _classify_vol(volatility_log_ratio(y, (a1, b1), (a2, b2)), 0.0) or "the first window"
    return option_index(q, lab)


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="mean level and volatility of two stated windows (higher/lower/same; which)",
    oracle_measurement="standardized level gap; log ratio of first-difference spread between the stated windows (label)",
)
