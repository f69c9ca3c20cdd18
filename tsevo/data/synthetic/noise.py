"""F6 noise and stationarity: mean-reverting vs random walk, and the noise level around a signal.

* ``stationarity`` — a stationary AR(1) (phi up to 0.88 on hard items) or a random walk. Measurement:
  the Dickey-Fuller rho statistic ``n (phi_hat - 1)`` of the demeaned series; reading rule ``label``.
* ``noise_level`` — white noise of a stated-grid standard deviation on a large smooth signal (two
  slow sinusoids and a trend). Measurement: spread of second differences (``sd / sqrt 6``), which
  the smooth signal barely touches while the global spread is dominated by it; reading rule
  ``nearest_number``.
"""

from __future__ import annotations

import numpy as np

from tsevo.data.question import Question

from ._base import (
    Family,
    FloatArray,
    Phrasebook,
    check_difficulty,
    log_margin,
    nearest_option_log,
    option_index,
    pick,
    resample,
    subtask_for,
)

NAME = "noise"
TASK = "synthetic/noise"
SUBTASKS = ("stationarity", "noise_level")
STATIONARITY = ("stationary (mean-reverting)", "non-stationary (random walk)")
_GRID = {
    "easy": (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4),
    "hard": (0.1, 0.15, 0.25, 0.4, 0.6, 1.0, 1.5, 2.5, 4.0, 6.0),
}

PHRASINGS: dict[str, tuple[str, ...]] = {
    "stationarity": (
        "Is this series stationary, or does it behave like a random walk?",
        "Does the series keep returning to a fixed mean, or does it wander like a random walk?",
        "Which best describes the process that generated this series?",
    ),
    "noise_level": (
        "What is the standard deviation of the random noise on top of the smooth signal?",
        "Roughly how large is the noise (its standard deviation) around the underlying smooth "
        "curve?",
        "Estimate the noise level, i.e. the standard deviation of the irregular component.",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)

_DF_CUT = -13.0
_DF_MARGIN = {"easy": 6.0, "hard": 3.0}
_LEVEL_MARGIN = {"easy": 0.2, "hard": 0.12}


def df_rho(y: FloatArray) -> float:
    """Dickey-Fuller rho statistic ``n (phi_hat - 1)`` for the demeaned series (AR(1) by OLS)."""
    x = y - y.mean()
    a, b = x[:-1], x[1:]
    phi = float((a * b).sum() / max((a * a).sum(), 1e-12))
    return (y.size - 1) * (phi - 1.0)


def noise_sd_estimate(y: FloatArray) -> float:
    """Noise standard deviation from second differences: ``sd(diff2) / sqrt(6)``."""
    return float(np.diff(y, n=2).std() / np.sqrt(6.0))


def _classify_df(r: float, margin: float) -> str | None:
    if r <= _DF_CUT - margin:
        return STATIONARITY[0]
    if r >= _DF_CUT + margin:
        return STATIONARITY[1]
    return None


def _gen_stationarity(
    rng: np.random.Generator, hard: bool, difficulty: str, index: int
) -> Question:
    label = pick(rng, STATIONARITY)

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        n = int(pick(rng, (160, 200, 240)))
        if label == STATIONARITY[0]:
            phi = rng.uniform(0.75, 0.88) if hard else rng.uniform(0.3, 0.7)
        else:
            phi = 1.0
        e = rng.standard_normal(n + 50)
        x = np.empty(n + 50)
        x[0] = e[0] / np.sqrt(max(1 - phi * phi, 1e-3)) if phi < 1 else 0.0
        for i in range(1, n + 50):
            x[i] = phi * x[i - 1] + e[i]
        x = x[50:]
        scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
        y = np.round(rng.uniform(-50, 50) + scale * x, 4)
        stat = df_rho(y)
        if _classify_df(stat, _DF_MARGIN[difficulty]) != label:
            return None
        return y, {"n": n, "phi": phi, "scale": scale, "df_rho": stat}

    (y, latent), tries = resample(attempt, "noise/stationarity")
    return BOOK.labelled(
        rng, index, difficulty, "stationarity", STATIONARITY, label, {"series": y}, latent, tries
    )


def _gen_level(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    grid = _GRID[difficulty]
    j = int(rng.integers(len(grid)))
    sigma = grid[j]
    start = int(rng.integers(max(0, j - 3), min(j, len(grid) - 4) + 1))
    values = list(grid[start : start + 4])

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        n = int(pick(rng, (160, 200, 240)))
        t = np.arange(n, dtype=np.float64)
        amp1 = sigma * rng.uniform(3.0, 8.0)
        amp2 = amp1 * rng.uniform(0.2, 0.6)
        y = amp1 * np.sin(2 * np.pi * t / rng.uniform(50, 120) + rng.uniform(0, 2 * np.pi))
        y += amp2 * np.sin(2 * np.pi * t / rng.uniform(25, 50) + rng.uniform(0, 2 * np.pi))
        y += rng.uniform(-3, 3) * amp1 * t / n
        y = np.round(rng.uniform(-20, 20) * sigma + y + sigma * rng.standard_normal(n), 4)
        est = noise_sd_estimate(y)
        if log_margin(values, sigma, est) < _LEVEL_MARGIN[difficulty]:
            return None
        return y, {"n": n, "sigma": sigma, "signal_amp": amp1, "estimate": est}

    (y, latent), tries = resample(attempt, "noise/noise_level")
    labels = tuple(f"{v:g}" for v in values)
    return BOOK.labelled(
        rng, index, difficulty, "noise_level", labels, f"{sigma:g}", {"series": y}, latent, tries
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one noise/stationarity question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    if subtask_for(SUBTASKS, index) == "stationarity":
        return _gen_stationarity(rng, hard, difficulty, index)
    return _gen_level(rng, hard, difficulty, index)


def oracle(q: Question) -> int:
    """Answer from the series and the options alone."""
    y = np.asarray(q.series[q.primary[0]])
    if q.subtask == "stationarity":
        return option_index(q, _classify_df(df_rho(y), 0.0) or STATIONARITY[0])
    return nearest_option_log(q, noise_sd_estimate(y))


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="stationary (AR) vs random walk; noise standard deviation around a smooth signal",
    oracle_measurement="Dickey-Fuller statistic (label); spread of second differences (nearest number)",
)
