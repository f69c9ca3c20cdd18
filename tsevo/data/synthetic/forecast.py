"""F12 forecast direction: will the next ``h`` values average higher or lower than the recent level?

Gold comes from the generator's known continuation (its noise-free future mean) compared with the
mean of the last ``m`` observed values; the question states ``h`` and ``m``.

* ``recent_drift`` — the drift changed some time ago; the future follows the recent drift. The earlier
  segment moves either way and more strongly, so the global slope is no guide. Measurement: OLS
  line on the last quarter, extrapolated; reading rule ``label`` (sign).
* ``mean_reversion`` — an AR(1) series that ends far from its mean; it will revert. Measurement:
  AR(1) forecast (mean and phi estimated from the series); reading rule ``label`` (sign).
* ``seasonal`` — a seasonal series ending at a phase where the next steps rise or fall.
  Measurement: periodogram period plus a least-squares harmonic fit, extrapolated; rule ``label``.
"""

from __future__ import annotations

import numpy as np

from tsevo.data.question import Question

from ._base import (
    Family,
    FloatArray,
    Phrasebook,
    check_difficulty,
    dominant_period,
    numbers,
    ols,
    option_index,
    pick,
    resample,
    subtask_for,
)

NAME = "forecast"
TASK = "synthetic/forecast"
SUBTASKS = ("recent_drift", "mean_reversion", "seasonal")
DIRECTION = ("higher", "lower")

_TEMPLATES = (
    "Will the next {h} values, on average, be higher or lower than the mean of the last {m} "
    "observed values?",
    "If the process continues as before, will the average of the next {h} steps be higher or "
    "lower than the average of the final {m} observations?",
    "Forecast the next {h} steps. Compared with the mean of the last {m} values, will their "
    "average be higher or lower?",
)
PHRASINGS: dict[str, tuple[str, ...]] = {s: _TEMPLATES for s in SUBTASKS}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)

_GOLD_MARGIN = {"easy": 0.8, "hard": 0.5}
_ORACLE_MARGIN = 0.3


def drift_forecast_gap(y: FloatArray, h: int, m: int) -> tuple[float, float]:
    """Line on the last quarter, extrapolated ``h`` steps: (future mean - recent mean, resid sd)."""
    w = y[-max(y.size // 4, 8) :]
    slope, intercept, resid = ols(w)
    future = intercept + slope * (w.size - 1 + (h + 1) / 2.0)
    return float(future - y[-m:].mean()), resid


def ar1_forecast_gap(y: FloatArray, h: int, m: int) -> tuple[float, float]:
    """AR(1) forecast with mean and phi estimated from ``y``: (future mean - recent mean, sd)."""
    mu = float(y.mean())
    x = y - mu
    phi = float((x[:-1] * x[1:]).sum() / max((x[:-1] ** 2).sum(), 1e-12))
    phi = min(max(phi, -0.999), 0.999)
    avg = float(np.mean(phi ** np.arange(1, h + 1)))
    resid = float(np.std(x[1:] - phi * x[:-1]))
    return float(mu + (y[-1] - mu) * avg - y[-m:].mean()), resid


def seasonal_forecast_gap(y: FloatArray, h: int, m: int) -> tuple[float, float]:
    """Harmonic fit at the periodogram period, extrapolated: (future mean - recent mean, sd)."""
    n = y.size
    p = dominant_period(y)
    t = np.arange(n + h, dtype=np.float64)
    X = np.column_stack(
        [np.ones(n + h), t / n, np.cos(2 * np.pi * t / p), np.sin(2 * np.pi * t / p)]
    )
    coef, *_ = np.linalg.lstsq(X[:n], y, rcond=None)
    fit = X @ coef
    resid = float(np.std(y - fit[:n]))
    return float(fit[n:].mean() - y[-m:].mean()), resid


_GAPS = {
    "recent_drift": drift_forecast_gap,
    "mean_reversion": ar1_forecast_gap,
    "seasonal": seasonal_forecast_gap,
}


def _scale(rng: np.random.Generator, y: FloatArray) -> tuple[FloatArray, float]:
    scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
    return np.round(rng.uniform(-50, 50) + scale * y, 4), scale


def _gen(rng: np.random.Generator, sub: str, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, DIRECTION)
    want = 1.0 if label == "higher" else -1.0

    def attempt() -> tuple[FloatArray, int, int, dict[str, object]] | None:
        latent: dict[str, object] = {}
        if sub == "recent_drift":
            n = 160
            h, m = int(pick(rng, (10, 15, 20))), int(pick(rng, (5, 10)))
            c = int(rng.uniform(0.45, 0.7) * n)
            seg = n - c
            d = want * (rng.uniform(2.5, 4.0) if hard else rng.uniform(4.0, 8.0)) / seg
            early = pick(rng, (-1.0, 1.0)) * (rng.uniform(6, 10) if hard else rng.uniform(4, 8))
            t = np.arange(n + h, dtype=np.float64)
            sig = np.where(t < c, early * (t - c) / c, d * (t - c))
            y = sig[:n] + rng.standard_normal(n)
            future = sig[n:]
            latent.update(change=c, drift=d, early_change=early)
        elif sub == "mean_reversion":
            n = int(pick(rng, (120, 160)))
            h, m = int(pick(rng, (5, 10))), 5
            phi = rng.uniform(0.85, 0.93) if hard else rng.uniform(0.7, 0.85)
            total = n + 400
            e = rng.standard_normal(total)
            x = np.empty(total)
            x[0] = e[0] / np.sqrt(1 - phi * phi)
            for i in range(1, total):
                x[i] = phi * x[i - 1] + e[i]
            sd = 1.0 / np.sqrt(1 - phi * phi)
            recent = np.convolve(x, np.ones(m) / m, mode="valid")  # recent[j] ends at j + m - 1
            ends = np.arange(m - 1, total)
            need = (1.2 if hard else 1.5) * sd
            ok = (ends >= n + 50) & (want * (0.0 - recent) >= need)
            cands = ends[ok]
            if cands.size == 0:
                return None
            end = int(cands[int(rng.integers(cands.size))])
            y = x[end - n + 1 : end + 1]
            future = y[-1] * phi ** np.arange(1, h + 1)
            latent.update(phi=phi)
        else:
            p = int(rng.integers(12, 31))
            n = int(p * rng.uniform(4, 7))
            h, m = int(rng.integers(3, p // 2 + 1)), int(pick(rng, (3, 5)))
            amp = rng.uniform(1.2, 1.8) if hard else rng.uniform(2.0, 3.0)
            t = np.arange(n + h, dtype=np.float64)
            sig = amp * np.sin(2 * np.pi * t / p + rng.uniform(0, 2 * np.pi))
            sig += (rng.uniform(-1, 1) if hard else 0.0) * t / n
            y = sig[:n] + rng.standard_normal(n)
            future = sig[n:]
            latent.update(period=p, amp=amp)
        gold_gap = float(future.mean() - y[-m:].mean())
        if want * gold_gap < _GOLD_MARGIN[difficulty]:
            return None
        y, scale = _scale(rng, y)
        gap, resid = _GAPS[sub](y, h, m)
        if want * gap < _ORACLE_MARGIN * resid:
            return None
        latent.update(n=n, h=h, m=m, gold_gap_sigma=gold_gap, scale=scale)
        return y, h, m, latent

    (y, h, m, latent), tries = resample(attempt, f"forecast/{sub}")
    return BOOK.labelled(
        rng,
        index,
        difficulty,
        sub,
        DIRECTION,
        label,
        {"series": y},
        latent,
        tries,
        slots={"h": h, "m": m},
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one forecast-direction question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    return _gen(rng, subtask_for(SUBTASKS, index), hard, difficulty, index)


def oracle(q: Question) -> int:
    """Forecast with the family's model and compare with the recent mean stated in the text."""
    y = np.asarray(q.series[q.primary[0]])
    h, m = (int(v) for v in numbers(q.question)[:2])
    gap, _ = _GAPS[q.subtask](y, h, m)
    return option_index(q, "higher" if gap > 0 else "lower")


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="will the next h steps average higher or lower than the last m (known continuation)",
    oracle_measurement="extrapolated line / AR(1) / harmonic fit of the continuation vs the last m values (sign)",
)
