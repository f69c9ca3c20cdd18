"""F7 two-series matching among named candidates (MMTS-Match-like).

The reference is the primary series; candidates are named ``A``, ``B``, ``C`` (and ``D`` on hard
items), each with its own random offset and scale, so their global summaries say nothing.

* ``match`` — one candidate shares the reference's pattern (plus noise; on hard items also a small
  time shift); distractors are other patterns (hard: partly mixed with the reference's).
  Measurement: best Pearson correlation over lags within +-5 per candidate; rule ``extremum`` (max).
* ``flipped`` — one candidate is an upside-down copy; the others are an upright copy, a time-reversed
  copy (hard) or unrelated patterns. Measurement: lag-0 correlation per candidate; rule
  ``extremum`` (min).
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
    resample,
    subtask_for,
)

NAME = "matching"
TASK = "synthetic/matching"
SUBTASKS = ("match", "flipped")
REFERENCE = "reference"
MAX_LAG = 5

PHRASINGS: dict[str, tuple[str, ...]] = {
    "match": (
        "Which candidate series ({names}) follows the same pattern as the reference series?",
        "One of the candidates {names} is a noisy, rescaled copy of the reference. Which one?",
        "Compare the candidates {names} with the reference series. Which candidate matches it?",
    ),
    "flipped": (
        "Which candidate series ({names}) is an upside-down (vertically flipped) copy of the "
        "reference?",
        "One of the candidates {names} mirrors the reference vertically: its peaks are the "
        "reference's troughs. Which one?",
        "Among the candidates {names}, which is the reference turned upside down?",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)


def _pattern(rng: np.random.Generator, n: int) -> FloatArray:
    t = np.arange(n, dtype=np.float64) / n
    y = np.zeros(n)
    for _ in range(3):
        y += rng.uniform(0.3, 1.0) * np.sin(
            2 * np.pi * rng.uniform(1.0, 6.0) * t + rng.uniform(0, 7)
        )
    for _ in range(int(rng.integers(1, 3))):
        y += rng.uniform(-1.5, 1.5) * np.exp(-0.5 * ((t - rng.uniform(0.1, 0.9)) / 0.04) ** 2)
    return (y - y.mean()) / y.std()


def _corr(a: FloatArray, b: FloatArray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    return float((a * b).sum() / max(np.sqrt((a * a).sum() * (b * b).sum()), 1e-12))


def lagged_similarity(ref: FloatArray, cand: FloatArray, max_lag: int = MAX_LAG) -> float:
    """Best Pearson correlation between ``ref`` and ``cand`` over shifts within ``max_lag``."""
    best = -1.0
    for lag in range(-max_lag, max_lag + 1):
        if lag >= 0:
            c = _corr(ref[lag:], cand[: cand.size - lag])
        else:
            c = _corr(ref[: ref.size + lag], cand[-lag:])
        best = max(best, c)
    return best


def zero_lag_correlation(ref: FloatArray, cand: FloatArray) -> float:
    """Pearson correlation at lag 0."""
    return _corr(ref, cand)


def _scores(ref: FloatArray, cands: dict[str, FloatArray], sub: str) -> dict[str, float]:
    if sub == "match":
        return {k: lagged_similarity(ref, v) for k, v in cands.items()}
    return {k: -zero_lag_correlation(ref, v) for k, v in cands.items()}


def _gen(rng: np.random.Generator, sub: str, hard: bool, difficulty: str, index: int) -> Question:
    names = ("A", "B", "C", "D") if hard else ("A", "B", "C")
    gold = names[int(rng.integers(len(names)))]

    def attempt() -> tuple[FloatArray, dict[str, FloatArray], dict[str, object]] | None:
        n = int(rng.choice((96, 128, 160)))
        pad = MAX_LAG
        base = _pattern(rng, n + 2 * pad)
        ref_p = base[pad : pad + n]
        noise = 0.35 if hard else 0.2
        cands: dict[str, FloatArray] = {}
        kinds: dict[str, str] = {}
        for nm in names:
            if nm == gold:
                if sub == "match":
                    shift = int(rng.integers(1, 5)) * int(rng.choice((-1, 1))) if hard else 0
                    p = base[pad + shift : pad + shift + n]
                    kinds[nm] = f"match(shift={shift})"
                else:
                    p = -ref_p
                    kinds[nm] = "flipped"
            else:
                other = _pattern(rng, n)
                if sub == "match":
                    p = 0.55 * ref_p + 0.85 * other if hard else other
                    kinds[nm] = "mixed" if hard else "other"
                else:
                    choice = rng.random()
                    if choice < 0.35:
                        p, kinds[nm] = ref_p.copy(), "upright"
                    elif hard and choice < 0.7:
                        p, kinds[nm] = ref_p[::-1].copy(), "time_reversed"
                    else:
                        p, kinds[nm] = other, "other"
            c = p + noise * rng.standard_normal(n)
            scale = float(np.exp(rng.uniform(np.log(0.3), np.log(30))))
            cands[nm] = np.round(rng.uniform(-50, 50) + scale * c, 4)
        ref = np.round(
            rng.uniform(-50, 50)
            + np.exp(rng.uniform(np.log(0.3), np.log(30)))
            * (ref_p + noise * rng.standard_normal(n)),
            4,
        )
        sc = _scores(ref, cands, sub)
        ranked = sorted(sc, key=lambda k: -sc[k])
        margin = 0.1 if hard else 0.2
        if ranked[0] != gold or sc[ranked[0]] - sc[ranked[1]] < margin:
            return None
        return ref, cands, {"n": n, "kinds": kinds, "scores": sc}

    (ref, cands, latent), tries = resample(attempt, f"matching/{sub}")
    listed = ", ".join(names[:-1]) + " or " + names[-1]
    labels = tuple(f"Series {nm}" for nm in names)
    return BOOK.question(
        rng,
        index,
        difficulty,
        sub,
        labels=labels,
        gold_label=f"Series {gold}",
        series={REFERENCE: ref, **cands},
        primary=(REFERENCE,),
        candidates=names,
        latent={"gold_candidate": gold, **latent},
        attempts=tries,
        slots={"names": listed},
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one matching question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    return _gen(rng, subtask_for(SUBTASKS, index), hard, difficulty, index)


def oracle(q: Question) -> int:
    """Pick the candidate with the extreme similarity score to the reference."""
    ref = np.asarray(q.series[q.primary[0]])
    cands = {nm: np.asarray(q.series[nm]) for nm in q.candidates}
    sc = _scores(ref, cands, q.subtask)
    best = max(sc, key=lambda k: sc[k])
    return option_index(q, f"Series {best}")


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="which named candidate matches the reference pattern / is its upside-down copy",
    oracle_measurement="correlation of each candidate with the reference (extremum: max for copy, min for flipped)",
)
