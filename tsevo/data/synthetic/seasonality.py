"""F2 seasonality: the period of a repeating pattern, and whether its amplitude grows or shrinks.

* ``period`` — sine (easy) or sine/square/sawtooth (hard) cycles on a random trend; numeric options in
  time steps, distractors at least 35% (easy) / 25% (hard) apart. Measurement: periodogram peak;
  reading rule ``nearest_number``.
* ``amplitude_change`` — a sinusoid whose envelope grows, shrinks or stays constant, on a random
  trend. Measurement: log ratio of the detrended spread in the last and first thirds; rule ``label``.
"""

from __future__ import annotations

import numpy as np

from tsevo.data.question import Question

from ._base import (
    Family,
    FloatArray,
    Phrasebook,
    check_difficulty,
    detrend,
    dominant_period,
    log_margin,
    nearest_option_log,
    numeric_distractors,
    option_index,
    pick,
    resample,
    subtask_for,
)

NAME = "seasonality"
TASK = "synthetic/seasonality"
SUBTASKS = ("period", "amplitude_change")
AMPLITUDE = ("growing", "shrinking", "constant")

PHRASINGS: dict[str, tuple[str, ...]] = {
    "period": (
        "What is the period of the repeating pattern, in time steps?",
        "The series has a seasonal cycle. How many steps does one full cycle take?",
        "Estimate the length of one season of this series (in samples).",
        "After how many time steps does the pattern of this series repeat?",
    ),
    "amplitude_change": (
        "How does the amplitude of the seasonal oscillation change over time?",
        "Do the periodic swings of this series get larger, smaller, or stay the same size?",
        "Over the course of the series, the size of the periodic fluctuations is...",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)

_AMP_CUT = 0.15
_AMP_MARGIN = {"easy": 0.07, "hard": 0.05}
_PERIOD_MARGIN = {"easy": 0.12, "hard": 0.06}


def amplitude_log_ratio(y: FloatArray) -> float:
    """Log ratio of the detrended standard deviation in the last third to that in the first third."""
    x = detrend(y)
    k = x.size // 3
    return float(np.log(max(x[-k:].std(), 1e-12) / max(x[:k].std(), 1e-12)))


def _classify_amp(r: float, margin: float) -> str | None:
    if r >= _AMP_CUT + margin:
        return "growing"
    if r <= -_AMP_CUT - margin:
        return "shrinking"
    if abs(r) <= _AMP_CUT - margin:
        return "constant"
    return None


def _wave(kind: str, phase: FloatArray) -> FloatArray:
    if kind == "square":
        out: FloatArray = np.tanh(4.0 * np.sin(phase)) / 0.93
    elif kind == "sawtooth":
        out = 2.0 * ((phase / (2 * np.pi)) % 1.0) - 1.0
        out = out * 1.5
    else:
        out = np.sin(phase)
    return out


def _gen_period(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    def attempt() -> tuple[FloatArray, list[float], dict[str, object]] | None:
        n = int(pick(rng, (160, 192, 224)))
        p = int(rng.integers(6, min(48, n // 5) + 1))
        ratio = 1.25 if hard else 1.35
        distract = numeric_distractors(rng, float(p), 3, 4, 64, ratio)
        if distract is None:
            return None
        kind = pick(rng, ("sine", "square", "sawtooth")) if hard else "sine"
        amp = rng.uniform(1.0, 1.5) if hard else rng.uniform(2.0, 3.0)
        t = np.arange(n, dtype=np.float64)
        y = amp * _wave(kind, 2 * np.pi * t / p + rng.uniform(0, 2 * np.pi))
        y += rng.uniform(-3, 3) * amp * t / n + rng.standard_normal(n)
        scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
        y = np.round(rng.uniform(-50, 80) + scale * y, 4)
        est = dominant_period(y)
        values = [float(p), *distract]
        if log_margin(values, float(p), est) < _PERIOD_MARGIN[difficulty]:
            return None
        latent = {"n": n, "period": p, "wave": kind, "amp_sigma": amp, "scale": scale, "est": est}
        return y, values, latent

    (y, values, latent), tries = resample(attempt, "seasonality/period")
    labels = [f"{int(v)} steps" for v in values]
    return BOOK.question(
        rng,
        index,
        difficulty,
        "period",
        labels=labels,
        gold_label=labels[0],
        series={"series": y},
        latent=latent,
        attempts=tries,
    )


def _gen_amp(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, AMPLITUDE)

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        n = int(pick(rng, (160, 192, 224)))
        p = rng.uniform(10, 24)
        r = rng.uniform(1.5, 2.0) if hard else rng.uniform(2.0, 3.5)
        mean_amp = 2.0 if hard else 3.0
        env = np.linspace(1.0, r, n) if label != "constant" else np.ones(n)
        if label == "shrinking":
            env = env[::-1]
        env = env * mean_amp / env.mean()
        t = np.arange(n, dtype=np.float64)
        y = env * np.sin(2 * np.pi * t / p + rng.uniform(0, 2 * np.pi))
        y += rng.uniform(-4, 4) * t / n + rng.standard_normal(n)
        scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
        y = np.round(rng.uniform(-50, 50) + scale * y, 4)
        stat = amplitude_log_ratio(y)
        if _classify_amp(stat, _AMP_MARGIN[difficulty]) != label:
            return None
        return y, {"n": n, "period": p, "ratio": r if label != "constant" else 1.0, "stat": stat}

    (y, latent), tries = resample(attempt, "seasonality/amplitude_change")
    return BOOK.labelled(
        rng, index, difficulty, "amplitude_change", AMPLITUDE, label, {"series": y}, latent, tries
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one seasonality question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    if subtask_for(SUBTASKS, index) == "period":
        return _gen_period(rng, hard, difficulty, index)
    return _gen_amp(rng, hard, difficulty, index)


def oracle(q: Question) -> int:
    """Answer from the series and the options alone."""
    y = np.asarray(q.series[q.primary[0]])
    if q.subtask == "period":
        return nearest_option_log(q, dominant_period(y))
    lab = _classify_amp(amplitude_log_ratio(y), 0.0) or "constant"
    return option_index(q, lab)


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="period of the seasonal cycle (numeric); growing/shrinking/constant amplitude",
    oracle_measurement="periodogram peak period (nearest number); log spread ratio of first vs last cycles (label)",
)
