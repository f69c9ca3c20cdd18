"""F10 spectral band dominance (EEG-like bands; TimeMQA-classification-like).

The question states the sampling rate and the band edges in Hz, so a tool must read them from the
text (a non-default parameter). Bands: delta 1-4, theta 4-8, alpha 8-13, beta 13-30 Hz.

* ``dominant_band`` — which band carries the most power? An oscillation in the gold band, weaker
  ones in other bands, on a red-noise background. Measurement: periodogram power per band;
  reading rule ``label`` (argmax).
* ``band_ratio`` — is the power in one band more than ``k`` times that in another? Two band
  powers (a log ratio against ``log k``); reading rule ``label``.
"""

from __future__ import annotations

import re

import numpy as np
from scipy.signal import periodogram

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

NAME = "spectral"
TASK = "synthetic/spectral"
SUBTASKS = ("dominant_band", "band_ratio")
BANDS: dict[str, tuple[float, float]] = {
    "delta": (1.0, 4.0),
    "theta": (4.0, 8.0),
    "alpha": (8.0, 13.0),
    "beta": (13.0, 30.0),
}
YES_NO = ("yes", "no")
N = 256
_BAND_RE = re.compile(r"([a-z]+) \((\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) Hz\)")

_BAND_LIST = "delta (1 to 4 Hz), theta (4 to 8 Hz), alpha (8 to 13 Hz) or beta (13 to 30 Hz)"
PHRASINGS: dict[str, tuple[str, ...]] = {
    "dominant_band": (
        "The signal is sampled at {fs} Hz. Which frequency band carries the most power: "
        + _BAND_LIST
        + "?",
        "This recording was sampled at {fs} Hz. In which band is its power concentrated: "
        + _BAND_LIST
        + "?",
        "Sampling rate: {fs} Hz. Which band dominates the spectrum of the signal: "
        + _BAND_LIST
        + "?",
    ),
    "band_ratio": (
        "The signal is sampled at {fs} Hz. Is the power in the {b1} band ({l1} to {h1} Hz) more "
        "than {k} times the power in the {b2} band ({l2} to {h2} Hz)?",
        "Sampled at {fs} Hz: does the {b1} band ({l1} to {h1} Hz) hold over {k} times as much "
        "power as the {b2} band ({l2} to {h2} Hz)?",
        "With a sampling rate of {fs} Hz, is {b1} power ({l1} to {h1} Hz) greater than {k} times "
        "{b2} power ({l2} to {h2} Hz)?",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)

_DOM_MARGIN = {"easy": 1.8, "hard": 1.25}
_RATIO_MARGIN = {"easy": float(np.log(1.6)), "hard": float(np.log(1.25))}


def band_power(y: FloatArray, fs: float, lo: float, hi: float) -> float:
    """Periodogram power summed over ``lo <= f < hi`` Hz."""
    f, p = periodogram(y, fs=fs, detrend="constant")
    return float(p[(f >= lo) & (f < hi)].sum())


def _parse_bands(text: str) -> list[tuple[str, float, float]]:
    return [(m.group(1), float(m.group(2)), float(m.group(3))) for m in _BAND_RE.finditer(text)]


def _oscillation(
    rng: np.random.Generator, t: FloatArray, band: tuple[float, float], amp: float
) -> FloatArray:
    lo, hi = band
    f = rng.uniform(lo + 0.5, hi - 0.5)
    out: FloatArray = amp * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
    return out


def _gen_dominant(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, tuple(BANDS))

    def attempt() -> tuple[FloatArray, int, dict[str, object]] | None:
        fs = int(pick(rng, (64, 100, 128)))
        t = np.arange(N) / fs
        amp = rng.uniform(1.5, 2.5)
        y = _oscillation(rng, t, BANDS[label], amp)
        others = [b for b in BANDS if b != label]
        rel = (0.5, 0.75) if hard else (0.2, 0.5)
        for b in rng.permutation(others)[: int(rng.integers(1, 3))]:
            y = y + _oscillation(rng, t, BANDS[str(b)], amp * rng.uniform(*rel))
        y = y + 0.6 * ar_noise(rng, N, 0.9) + 0.5 * rng.standard_normal(N)
        scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
        y = np.round(rng.uniform(-50, 50) + scale * y, 4)
        powers = {b: band_power(y, fs, *BANDS[b]) for b in BANDS}
        ranked = sorted(powers, key=lambda b: -powers[b])
        if ranked[0] != label or powers[ranked[0]] < _DOM_MARGIN[difficulty] * powers[ranked[1]]:
            return None
        return y, fs, {"fs": fs, "amp": amp, "powers": powers}

    (y, fs, latent), tries = resample(attempt, "spectral/dominant_band")
    return BOOK.labelled(
        rng,
        index,
        difficulty,
        "dominant_band",
        tuple(BANDS),
        label,
        {"signal": y},
        latent,
        tries,
        slots={"fs": fs},
    )


def _gen_ratio(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, YES_NO)
    b1, b2 = (str(b) for b in rng.permutation(list(BANDS))[:2])
    k = int(pick(rng, (2, 3)))

    def attempt() -> tuple[FloatArray, int, dict[str, object]] | None:
        fs = int(pick(rng, (64, 100, 128)))
        t = np.arange(N) / fs
        f = rng.uniform(1.8, 3.0) if not hard else rng.uniform(1.3, 1.7)
        ratio = k * f if label == "yes" else k / f
        a1 = rng.uniform(1.5, 2.5)
        a2 = a1 / np.sqrt(ratio)
        y = _oscillation(rng, t, BANDS[b1], a1) + _oscillation(rng, t, BANDS[b2], a2)
        y = y + 0.4 * ar_noise(rng, N, 0.9) + 0.4 * rng.standard_normal(N)
        scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
        y = np.round(rng.uniform(-50, 50) + scale * y, 4)
        lr = np.log(band_power(y, fs, *BANDS[b1]) / band_power(y, fs, *BANDS[b2])) - np.log(k)
        want = 1.0 if label == "yes" else -1.0
        if want * lr < _RATIO_MARGIN[difficulty]:
            return None
        return (
            y,
            fs,
            {
                "fs": fs,
                "bands": [b1, b2],
                "k": k,
                "target_ratio": ratio,
                "log_ratio_minus_log_k": float(lr),
            },
        )

    (y, fs, latent), tries = resample(attempt, "spectral/band_ratio")
    (l1, h1), (l2, h2) = BANDS[b1], BANDS[b2]
    return BOOK.labelled(
        rng,
        index,
        difficulty,
        "band_ratio",
        YES_NO,
        label,
        {"signal": y},
        latent,
        tries,
        slots={
            "fs": fs,
            "b1": b1,
            "b2": b2,
            "k": k,
            "l1": int(l1),
            "h1": int(h1),
            "l2": int(l2),
            "h2": int(h2),
        },
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one spectral question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    if subtask_for(SUBTASKS, index) == "dominant_band":
        return _gen_dominant(rng, hard, difficulty, index)
    return _gen_ratio(rng, hard, difficulty, index)


def oracle(q: Question) -> int:
    """Answer from the signal, the sampling rate and the band edges written in the question."""
    y = np.asarray(q.series[q.primary[0]])
    fs = numbers(q.question)[0]
    bands = _parse_bands(q.question)
    if q.subtask == "dominant_band":
        powers = {name: band_power(y, fs, lo, hi) for name, lo, hi in bands}
        return option_index(q, max(powers, key=lambda b: powers[b]))
    (_, l1, h1), (_, l2, h2) = bands[:2]
    k = float(re.findall(r"(\d+) times", q.question)[0])
    ratio = band_power(y, fs, l1, h1) / max(band_power(y, fs, l2, h2), 1e-300)
    return option_index(q, "yes" if ratio > k else "no")


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="dominant EEG-like frequency band at a stated sampling rate; band power ratio",
    oracle_measurement="Welch band power per stated band at the stated sampling rate (label)",
)
