"""The near-miss family (Mara chains, design §8.14): the separating measurement is k template moves away.

A named covariate leads the target by ``L`` steps, and each series carries its own strong linear
trend. The measurement that recovers ``L`` is the cross-correlation of first differences searched out
to half the series (``xcorr`` with ``diff=True`` and ``max_lag=0.5``). The builtin planner enumerates
each catalog primitive at its defaults and at one grid alternative at a time
(:func:`tsevo.roles.builtin.specs.enumerate_specs`), so how far that measurement sits from what
direct attempts can reach is set by ``k``:

* ``k = 1``: ``L`` stays within a quarter of the series, so ``diff=True`` alone (one move from the
  default ``max_lag=0.25``) separates; direct attempts can find it (the control);
* ``k = 2``: ``L`` ranges from a sixth to ~49% of the series, about three leads in four beyond the
  default quarter, so both moves are needed: ``diff=True`` alone recovers only the leads within the
  quarter (on development seeds ~45% of ``lag`` items and ~58% of directions, against a third and
  a half by chance), ``max_lag=0.5`` alone reads the trends. No direct attempt holds both; a chain
  step from the one-move attempt can.

The ``lag`` options are a ladder of three values spaced by one ratio inside the lag range, the
right one drawn uniformly, so no value is typical of the answer: answering the option nearest one
fixed number is right a third of the time. (Version 2 drew three to five distractors from 5 to 160
around a lag between 25 and 95: the option nearest 60 was right ~70% of the time, so any measurement
with a fitted reading cleared the bar on ``lag`` items, and its one-move attempt already read ~75% of
directions; chains seldom started.)

Both series carry white noise of their own, each level drawn from one wide range, so the direction
is not readable from which series is noisier (an earlier version added noise to the follower only,
and a roughness comparison read the direction right for ~85% of items). The height of the peak
within the default quarter still falls as the lag grows; that partial cue is the near miss itself.

Nothing here is read by a role: the family is ordinary questions (series, text, options, gold). Two
subtasks: ``lag`` (numeric options, by how many steps the covariate leads) and ``direction`` (does
the covariate lead or lag). The oracle measures with both moves made.
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
    option_index,
    pick,
    resample,
    subtask_for,
)
from .lag import lag_question, xcorr_diff

NAME = "nearmiss"
SUBTASKS = ("lag", "direction")
TARGET = "output"
COVARIATES = ("inflow", "feed_rate", "load", "orders", "sunlight", "wind_speed", "upstream")
DIRECTION = ("it leads the output", "it lags behind the output")
#: Series length; a quarter of it (the default search) and its bound for ``k = 1``.
N = 240
QUARTER = N // 4
#: The lag range per ``k`` (inclusive): within the default search, or mostly beyond it.
LAGS: dict[int, tuple[int, int]] = {1: (25, QUARTER - 2), 2: (40, 118)}
#: The ``lag`` options' ladder: this many values, each this ratio above the last (hard, easy).
LADDER = 3
LADDER_RATIO: tuple[float, float] = (1.25, 1.3)
#: The range of each series' own white-noise level (the driver has unit variance).
NOISE: tuple[float, float] = (0.1, 0.6)
NOISE_HARD: tuple[float, float] = (0.3, 0.8)

PHRASINGS: dict[str, tuple[str, ...]] = {
    "lag": (
        "By how many time steps does {cov} lead the output series?",
        "A change in {cov} reaches the output series some steps later. How many steps later?",
        "What is the delay, in time steps, from a move in {cov} to the matching move in the output?",
    ),
    "direction": (
        "Does {cov} lead or lag the output series?",
        "Which is true about the timing of {cov} relative to the output series?",
        "Between {cov} and the output, which one moves first?",
    ),
}


def lag_of(cov: FloatArray, target: FloatArray) -> int:
    """The lag by which ``cov`` leads ``target``: the peak of the differences' correlation.

    The oracle's measurement (both moves made): first differences, z-scored, biased
    cross-correlation (:func:`~tsevo.data.synthetic.lag.xcorr_diff`) for ``|k| <= n / 2``;
    positive when the covariate leads.
    """
    half = (len(cov) - 1) // 2
    lags = range(-half, half + 1)
    return lags[int(np.argmax(xcorr_diff(cov, target, lags, biased=True)))]


def option_ladder(rng: np.random.Generator, lo: int, hi: int, ratio: float) -> list[float]:
    """:data:`LADDER` whole numbers in ``[lo, hi]``, each ``ratio`` times the last (rounded)."""
    top = hi / ratio ** (LADDER - 1)
    if top < lo:
        raise ValueError(f"a ladder of {LADDER} at ratio {ratio} does not fit in [{lo}, {hi}]")
    start = float(np.exp(rng.uniform(np.log(lo), np.log(top))))
    return [float(min(hi, max(lo, round(start * ratio**i)))) for i in range(LADDER)]


def _make(k: int) -> Family:
    if k not in LAGS:
        raise ValueError(f"near_miss k must be one of {sorted(LAGS)}, got {k!r}")
    name = NAME if k == 2 else f"{NAME}{k}"
    task = f"synthetic/{name}"
    book = Phrasebook(name, task, PHRASINGS)
    lo, hi = LAGS[k]

    def gen(
        rng: np.random.Generator, sub: str, hard: bool, difficulty: str, index: int
    ) -> Question:
        cov = pick(rng, COVARIATES)
        label = pick(rng, DIRECTION)

        def attempt() -> tuple[FloatArray, FloatArray, list[float], dict[str, object]] | None:
            L = int(rng.integers(lo, hi + 1))
            values: list[float] = []
            if sub == "lag":
                ladder = option_ladder(rng, lo, hi, LADDER_RATIO[0 if hard else 1])
                L = int(ladder.pop(int(rng.integers(LADDER))))
                values = [float(L), *ladder]
            phi = rng.uniform(0.55, 0.75) if hard else rng.uniform(0.35, 0.6)
            driver = ar_noise(rng, N + L, phi)
            gain = rng.uniform(0.8, 1.5)
            # both series carry their own noise from one wide range: which is noisier says nothing
            # about which leads
            noise = rng.uniform(*(NOISE_HARD if hard else NOISE), size=2)
            follower = gain * driver[:N] + noise[0] * rng.standard_normal(N)
            lead = driver[L:] + noise[1] * rng.standard_normal(N)
            x, y = (
                (follower, lead)
                if sub == "direction" and label == DIRECTION[1]
                else (lead, follower)
            )
            t = np.arange(N) / N
            slopes = [float(rng.choice([-1.0, 1.0]) * rng.uniform(6.0, 12.0)) for _ in range(2)]
            sx, sy = (float(np.exp(rng.uniform(np.log(0.5), np.log(20)))) for _ in range(2))
            x = np.round(rng.uniform(-50, 50) + sx * (x + slopes[0] * t), 4)
            y = np.round(rng.uniform(-50, 50) + sy * (y + slopes[1] * t), 4)
            want = L if sub == "lag" or label == DIRECTION[0] else -L
            if lag_of(x, y) != want:
                return None
            latent = dict(n=N, lag=L, phi=phi, gain=gain, noise=noise.tolist(), slopes=slopes)
            return x, y, values, latent

        (x, y, values, latent), tries = resample(attempt, f"{name}/{sub}")
        return lag_question(
            book, rng, index, difficulty, sub, cov=cov, target=TARGET, x=x, y=y, values=values,
            directions=DIRECTION, label=label, latent={"near_miss": k, **latent}, tries=tries,
        )  # fmt: skip

    def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
        hard = check_difficulty(difficulty)
        return gen(rng, subtask_for(SUBTASKS, index), hard, difficulty, index)

    return Family(
        name=name,
        task=task,
        subtasks=SUBTASKS,
        generate=generate,
        oracle=oracle,
        phrasings=PHRASINGS,
        description=f"near miss k={k}: lead of a named covariate under strong trends",
        oracle_measurement="cross-correlation peak of first differences out to half the series",
    )


def oracle(q: Question) -> int:
    """Answer from the output series, the covariate the question names, and the options."""
    y = np.asarray(q.series[q.primary[0]])
    named = [c for c in q.covariates if c in q.question]
    x = np.asarray(q.series[named[0] if named else q.covariates[0]])
    k = lag_of(x, y)
    if q.subtask == "lag":
        return nearest_option_log(q, float(max(k, 1)))
    return option_index(q, DIRECTION[0] if k >= 0 else DIRECTION[1])


def near_miss_family(k: int = 2) -> Family:
    """The near-miss family whose separating measurement is ``k`` template moves away (1 or 2)."""
    return _FAMILIES[k] if k in _FAMILIES else _make(k)


_FAMILIES: dict[int, Family] = {k: _make(k) for k in LAGS}
#: The family objects the suite registers (``nearmiss`` is k = 2, ``nearmiss1`` the k = 1 control).
FAMILIES: dict[str, Family] = {f.name: f for f in _FAMILIES.values()}
