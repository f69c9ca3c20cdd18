"""F8 distribution comparison of two primary series ``A`` and ``B`` (i.i.d. draws; order is noise).

* ``same_distribution`` — same family and parameters, or different (easy: a large shift, a doubled
  scale or a bimodal-vs-unimodal shape with equal mean and variance; hard: a shift of 0.35-0.5 sd
  or a scale ratio of 1.4-1.7). Measurement: Kolmogorov-Smirnov statistic scaled by
  ``sqrt(nm/(n+m))``; reading rule ``label``.
* ``median`` — which series has the higher median? Skewed (log-normal) draws whose means are
  ordered the other way on hard items. Measurement: median difference over the pooled IQR;
  reading rule ``label``.
"""

from __future__ import annotations

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
    subtask_for,
)

NAME = "distribution"
TASK = "synthetic/distribution"
SUBTASKS = ("same_distribution", "median")
SAME = ("yes, the same distribution", "no, different distributions")
MEDIAN = ("series A", "series B")

PHRASINGS: dict[str, tuple[str, ...]] = {
    "same_distribution": (
        "Were the values of series A and series B drawn from the same distribution?",
        "Ignoring the order in time, do A and B look like samples of one and the same "
        "distribution?",
        "Judging only by the distribution of their values, are series A and series B the same?",
    ),
    "median": (
        "Which series has the higher median value, A or B?",
        "Comparing typical values (the median), which is larger: series A or series B?",
        "Half of the values of a series lie above its median. Which series, A or B, has the "
        "higher median?",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)

_KS_CUT = 1.36
_KS_MARGIN = {"easy": (1.0, 1.9), "hard": (1.15, 1.6)}
_MED_MARGIN = {"easy": 0.3, "hard": 0.15}
_SHAPES = ("normal", "uniform", "laplace", "bimodal", "skewed")


def ks_lambda(a: FloatArray, b: FloatArray) -> float:
    """Two-sample Kolmogorov-Smirnov distance times ``sqrt(n m / (n + m))``."""
    xa, xb = np.sort(a), np.sort(b)
    grid = np.concatenate([xa, xb])
    fa = np.searchsorted(xa, grid, side="right") / xa.size
    fb = np.searchsorted(xb, grid, side="right") / xb.size
    d = float(np.abs(fa - fb).max())
    return d * np.sqrt(xa.size * xb.size / (xa.size + xb.size))


def median_gap(a: FloatArray, b: FloatArray) -> float:
    """``(median(A) - median(B))`` divided by the mean of the two interquartile ranges."""
    iqr = [np.subtract(*np.percentile(x, [75, 25])) for x in (a, b)]
    return float((np.median(a) - np.median(b)) / max((iqr[0] + iqr[1]) / 2.0, 1e-12))


def _draw(rng: np.random.Generator, shape: str, n: int) -> FloatArray:
    """Standardized draws (mean 0, sd 1 in expectation) of a named shape."""
    if shape == "uniform":
        x = rng.uniform(-np.sqrt(3), np.sqrt(3), n)
    elif shape == "laplace":
        x = rng.laplace(0.0, 1 / np.sqrt(2), n)
    elif shape == "bimodal":
        x = rng.choice((-0.9, 0.9), n) + np.sqrt(1 - 0.81) * rng.standard_normal(n)
    elif shape == "skewed":
        s = 0.6
        x = (rng.lognormal(0.0, s, n) - np.exp(s * s / 2)) / np.sqrt(
            (np.exp(s * s) - 1) * np.exp(s * s)
        )
    else:
        x = rng.standard_normal(n)
    return x


def _gen_same(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, SAME)

    def attempt() -> tuple[FloatArray, FloatArray, dict[str, object]] | None:
        n = 150 if hard else 200
        shape = pick(rng, _SHAPES)
        a = _draw(rng, shape, n)
        kind = "same"
        if label == SAME[0]:
            b = _draw(rng, shape, n)
        else:
            kind = pick(rng, ("shift", "scale") if hard else ("shift", "scale", "shape"))
            if kind == "shift":
                d = rng.uniform(0.35, 0.5) if hard else rng.uniform(0.8, 1.2)
                b = _draw(rng, shape, n) + d * pick(rng, (-1.0, 1.0))
            elif kind == "scale":
                r = rng.uniform(1.4, 1.7) if hard else rng.uniform(2.0, 2.5)
                b = _draw(rng, shape, n) * (r if rng.random() < 0.5 else 1 / r)
            else:
                other = "normal" if shape == "bimodal" else "bimodal"
                b = _draw(rng, other, n)
                kind = f"shape:{other}"
        if rng.random() < 0.5:
            a, b = b, a
        scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
        off = rng.uniform(-50, 50)
        a, b = np.round(off + scale * a, 4), np.round(off + scale * b, 4)
        lam = ks_lambda(a, b)
        lo, hi = _KS_MARGIN[difficulty]
        ok = lam <= lo if label == SAME[0] else lam >= hi
        if not ok:
            return None
        return a, b, {"n": n, "shape": shape, "difference": kind, "ks_lambda": lam}

    (a, b, latent), tries = resample(attempt, "distribution/same_distribution")
    return BOOK.labelled(
        rng,
        index,
        difficulty,
        "same_distribution",
        SAME,
        label,
        {"A": a, "B": b},
        latent,
        tries,
        primary=("A", "B"),
    )


def _gen_median(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, MEDIAN)

    def attempt() -> tuple[FloatArray, FloatArray, dict[str, object]] | None:
        n = 150 if hard else 200
        s_hi, s_lo = (rng.uniform(0.9, 1.2), rng.uniform(0.2, 0.4))
        # "winner" has the higher median; on hard items it is the less skewed one (lower mean)
        if hard:
            mu_w = rng.uniform(0.15, 0.35)
            s_w, s_l = s_lo, s_hi
        else:
            mu_w = rng.uniform(0.5, 1.0)
            s_w, s_l = (s_lo, s_hi) if rng.random() < 0.5 else (s_hi, s_lo)
        win = rng.lognormal(mu_w, s_w, n)
        lose = rng.lognormal(0.0, s_l, n)
        scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
        off = rng.uniform(-50, 50)
        win, lose = np.round(off + scale * win, 4), np.round(off + scale * lose, 4)
        a, b = (win, lose) if label == MEDIAN[0] else (lose, win)
        gap = median_gap(a, b)
        want = 1.0 if label == MEDIAN[0] else -1.0
        if want * gap < _MED_MARGIN[difficulty]:
            return None
        return (
            a,
            b,
            {
                "n": n,
                "mu_winner": mu_w,
                "sigma_winner": s_w,
                "sigma_loser": s_l,
                "median_gap": gap,
                "mean_gap": float(a.mean() - b.mean()),
            },
        )

    (a, b, latent), tries = resample(attempt, "distribution/median")
    return BOOK.labelled(
        rng,
        index,
        difficulty,
        "median",
        MEDIAN,
        label,
        {"A": a, "B": b},
        latent,
        tries,
        primary=("A", "B"),
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one distribution-comparison question (subtask round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    if subtask_for(SUBTASKS, index) == "same_distribution":
        return _gen_same(rng, hard, difficulty, index)
    return _gen_median(rng, hard, difficulty, index)


def oracle(q: Question) -> int:
    """Answer from the two series alone."""
    a, b = (np.asarray(q.series[n]) for n in q.primary)
    if q.subtask == "same_distribution":
        lab = SAME[0] if ks_lambda(a, b) < _KS_CUT else SAME[1]
    else:
        lab = MEDIAN[0] if median_gap(a, b) > 0 else MEDIAN[1]
    return option_index(q, lab)


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="same distribution or not (KS); which of two series has the higher median",
    oracle_measurement="Kolmogorov-Smirnov statistic (label); median gap (label)",
)
