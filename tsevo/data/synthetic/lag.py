"""F9 lag and lead/lag with a named covariate that the question mentions by name.

The primary series is ``target``; the covariate carries a domain name (``rainfall``, ``ad_spend``,
...) that appears in the question text, so a tool may read it.

* ``lag`` — the target follows the covariate after ``L`` steps (``target(t) = g cov(t-L) + noise``);
  numeric options. Measurement: cross-correlation of first differences over lags 0..40, argmax;
  reading rule ``nearest_number``.
* ``direction`` — the covariate leads or lags the target. Measurement: signed argmax of the
  cross-correlation of differences over lags -30..30; reading rule ``label``.
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
    nearest_option_log,
    numeric_distractors,
    option_index,
    pick,
    resample,
    subtask_for,
)

NAME = "lag"
TASK = "synthetic/lag"
SUBTASKS = ("lag", "direction")
TARGET = "target"
COVARIATES = ("rainfall", "temperature", "ad_spend", "price", "traffic", "pressure", "demand")
DIRECTION = ("it leads the target", "it lags behind the target")
MAX_LAG = 40
MAX_DIR_LAG = 30

PHRASINGS: dict[str, tuple[str, ...]] = {
    "lag": (
        "By how many time steps does {cov} lead the target series?",
        "Changes in {cov} show up in the target series some steps later. How many steps later?",
        "What is the delay, in time steps, between a move in {cov} and the matching move in the "
        "target?",
    ),
    "direction": (
        "Does {cov} lead or lag the target series?",
        "Which is true about the timing of {cov} relative to the target series?",
        "Looking at {cov} and the target, which one moves first?",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)


def xcorr_diff(
    cov: FloatArray, target: FloatArray, lags: range, *, biased: bool = False
) -> FloatArray:
    """Correlation of ``diff(cov)[t - k]`` with ``diff(target)[t]`` for each ``k`` in ``lags``.

    The mean over each lag's overlap, or with ``biased`` the sum over the overlap divided by the
    full length (as the ``xcorr`` primitive computes it), which shrinks long lags.
    """
    dx, dy = np.diff(cov), np.diff(target)
    dx = (dx - dx.mean()) / max(dx.std(), 1e-12)
    dy = (dy - dy.mean()) / max(dy.std(), 1e-12)
    n = dx.size
    out = np.empty(len(lags))
    for j, k in enumerate(lags):
        prod = dx[: n - k] * dy[k:] if k >= 0 else dx[-k:] * dy[: n + k]
        out[j] = prod.sum() / n if biased else prod.mean()
    return out


def best_lag(cov: FloatArray, target: FloatArray, lags: range) -> tuple[int, float]:
    """The lag with the highest cross-correlation and its margin over the best lag >= 3 away."""
    c = xcorr_diff(cov, target, lags)
    j = int(np.argmax(c))
    far = [c[i] for i in range(len(c)) if abs(i - j) >= 3]
    return lags[j], float(c[j] - (max(far) if far else -1.0))


def _gen(rng: np.random.Generator, sub: str, hard: bool, difficulty: str, index: int) -> Question:
    cov = pick(rng, COVARIATES)
    label = pick(rng, DIRECTION)

    def attempt() -> tuple[FloatArray, FloatArray, list[float], dict[str, object]] | None:
        n = 160 if hard else 200
        if sub == "lag":
            L = int(rng.integers(2, 31))
            distract = numeric_distractors(rng, float(L), 3, 2, MAX_LAG, 1.4 if hard else 1.6)
            if distract is None or min(abs(d - L) for d in distract) < 3:
                return None
            values = [float(L), *distract]
        else:
            L = int(rng.integers(2, 9)) if hard else int(rng.integers(3, 16))
            values = []
        phi = rng.uniform(0.8, 0.9) if hard else rng.uniform(0.3, 0.6)
        driver = ar_noise(rng, n + L, phi)
        g = rng.uniform(0.8, 1.5)
        follower = g * driver[:n] + (0.9 if hard else 0.4) * rng.standard_normal(n)
        lead = driver[L:]
        if sub == "direction" and label == DIRECTION[1]:
            x, y = follower, lead  # the covariate follows the target
        else:
            x, y = lead, follower
        sx, sy = (float(np.exp(rng.uniform(np.log(0.5), np.log(20)))) for _ in range(2))
        x = np.round(rng.uniform(-50, 50) + sx * x, 4)
        y = np.round(rng.uniform(-50, 50) + sy * y, 4)
        need = 0.08 if hard else 0.15
        if sub == "lag":
            k, margin = best_lag(x, y, range(0, MAX_LAG + 1))
            if k != L or margin < need:
                return None
        else:
            k, margin = best_lag(x, y, range(-MAX_DIR_LAG, MAX_DIR_LAG + 1))
            want = L if label == DIRECTION[0] else -L
            if k != want or margin < need:
                return None
        return x, y, values, {"n": n, "lag": L, "phi": phi, "gain": g, "margin": margin}

    (x, y, values, latent), tries = resample(attempt, f"lag/{sub}")
    return lag_question(
        BOOK, rng, index, difficulty, sub, cov=cov, target=TARGET, x=x, y=y, values=values,
        directions=DIRECTION, label=label, latent=latent, tries=tries,
    )  # fmt: skip


def lag_question(
    book: Phrasebook,
    rng: np.random.Generator,
    index: int,
    difficulty: str,
    sub: str,
    *,
    cov: str,
    target: str,
    x: FloatArray,
    y: FloatArray,
    values: list[float],
    directions: tuple[str, str],
    label: str,
    latent: dict[str, object],
    tries: int,
) -> Question:
    """A lead/lag question on ``target`` (series ``y``) and the named covariate ``cov`` (``x``).

    ``lag`` has numeric options (``values``, gold first); ``direction`` the two ``directions``
    (gold ``label``).
    """
    if sub == "lag":
        labels = tuple(f"{int(v)} steps" for v in values)
        gold = labels[0]
    else:
        labels, gold = directions, label
    return book.question(
        rng,
        index,
        difficulty,
        sub,
        labels=labels,
        gold_label=gold,
        series={target: y, cov: x},
        primary=(target,),
        covariates=(cov,),
        latent={"covariate": cov, "label": gold, **latent},
        attempts=tries,
        slots={"cov": cov},
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one lag question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    return _gen(rng, subtask_for(SUBTASKS, index), hard, difficulty, index)


def oracle(q: Question) -> int:
    """Answer from the target, the covariate the question names, and the options."""
    y = np.asarray(q.series[q.primary[0]])
    named = [c for c in q.covariates if c in q.question]
    x = np.asarray(q.series[named[0] if named else q.covariates[0]])
    if q.subtask == "lag":
        return nearest_option_log(q, float(max(best_lag(x, y, range(0, MAX_LAG + 1))[0], 1)))
    k = best_lag(x, y, range(-MAX_DIR_LAG, MAX_DIR_LAG + 1))[0]
    return option_index(q, DIRECTION[0] if k >= 0 else DIRECTION[1])


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="lag (steps) by which a named covariate leads the target; leads or lags",
    oracle_measurement="cross-correlation peak of first differences (nearest number / sign label)",
)
