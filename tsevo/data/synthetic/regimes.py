"""F4 change points and regimes: how many level regimes, where the shift is, what kind of break.

* ``count`` — 1-4 constant-level segments (jumps of random sign). Measurement: number of segments
  found by binary segmentation with a BIC-like penalty; reading rule ``nearest_number``.
* ``location`` — one level shift in the beginning, middle or end third. Measurement: position of
  the best single split (CUSUM argmax) as a fraction of the length; reading rule ``label``.
* ``break_type`` — the question states the break time; the change is a jump in the mean, a change
  in variability or a change in the trend slope. Measurements: per-side line fits give the
  discontinuity, the slope change and the residual log-variance ratio; reading rule ``label``
  (two or three numbers: a small tree).
"""

from __future__ import annotations

import numpy as np

from tsevo.data.question import Question

from ._base import (
    Family,
    FloatArray,
    Phrasebook,
    check_difficulty,
    diff_sigma,
    nearest_option_log,
    numbers,
    ols,
    option_index,
    pick,
    resample,
    subtask_for,
)

NAME = "regimes"
TASK = "synthetic/regimes"
SUBTASKS = ("count", "location", "break_type")
LOCATION = ("at the beginning", "in the middle", "at the end")
BREAK = ("a jump in the mean level", "a change in variability", "a change in the trend slope")
COUNTS = ("1", "2", "3", "4")

PHRASINGS: dict[str, tuple[str, ...]] = {
    "count": (
        "How many distinct regimes (stretches with a different mean level) does this series go "
        "through?",
        "Counting the stretches where the series sits at a stable level, how many are there?",
        "Into how many constant-level segments does this series split?",
    ),
    "location": (
        "Where in the series does the abrupt shift in level happen?",
        "The series changes its level once. In which part of the series does that happen?",
        "When does the level shift occur?",
    ),
    "break_type": (
        "The behaviour of the series changes at about t={tau}. What kind of change is it?",
        "Something about the process changes around t={tau}. What changes?",
        "At roughly t={tau} the series undergoes a structural break. Which kind of break is it?",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)

_MIN_SIZE = 5
_BREAK_VAR_CUT = float(np.log(1.6))
_BREAK_MARGIN = {"easy": (0.15, 1.0), "hard": (0.08, 0.5)}


def _best_split(y: FloatArray) -> tuple[int, float]:
    """Best single mean split of ``y``: (index, reduction of the sum of squares)."""
    n = y.size
    if n < 2 * _MIN_SIZE:
        return -1, 0.0
    c = np.cumsum(y - y.mean())
    k = np.arange(1, n)
    gain = c[:-1] ** 2 * n / (k * (n - k))
    gain[: _MIN_SIZE - 1] = -1.0
    gain[n - _MIN_SIZE :] = -1.0
    i = int(np.argmax(gain))
    return i + 1, float(gain[i])


def binseg(y: FloatArray, max_segments: int = 6) -> tuple[int, float, float]:
    """Binary segmentation for mean shifts with penalty ``3 log(n) sigma^2``.

    Returns:
        (number of segments, smallest accepted gain / penalty, largest rejected gain / penalty).
    """
    n = y.size
    pen = 3.0 * np.log(n) * diff_sigma(y) ** 2
    segs = [(0, n)]
    accepted: list[float] = []
    while len(segs) < max_segments:
        best = (-1.0, -1, -1)
        for j, (s, e) in enumerate(segs):
            i, g = _best_split(y[s:e])
            if i > 0 and g > best[0]:
                best = (g, j, s + i)
        g, j, cut = best
        if g <= pen:
            return len(segs), min(accepted, default=np.inf) / pen, max(g, 0.0) / pen
        s, e = segs.pop(j)
        segs[j:j] = [(s, cut), (cut, e)]
        accepted.append(g)
    return len(segs), min(accepted, default=np.inf) / pen, 0.0


def shift_position(y: FloatArray) -> float:
    """Position of the best single mean split as a fraction of the series length."""
    return _best_split(y)[0] / y.size


def break_features(y: FloatArray, tau: int) -> tuple[float, float, float]:
    """Per-side OLS fits around ``tau``: (discontinuity, slope change, residual log sd ratio).

    The first two are in units of the pooled residual sd (the slope change over half the length).
    """
    s1, i1, r1 = ols(y[:tau])
    s2, i2, r2 = ols(y[tau:])
    pooled = max(np.sqrt((r1**2 + r2**2) / 2.0), 1e-12)
    left_at_tau = i1 + s1 * tau
    right_at_tau = i2  # the right fit's t=0 is tau
    disc = (right_at_tau - left_at_tau) / pooled
    slope_change = (s2 - s1) * (y.size / 2.0) / pooled
    logvar = float(np.log(max(r2, 1e-12) / max(r1, 1e-12)))
    return float(disc), float(slope_change), logvar


def _classify_break(f: tuple[float, float, float], var_margin: float, margin: float) -> str | None:
    disc, slope, logvar = f
    if abs(logvar) >= _BREAK_VAR_CUT + var_margin:
        return "a change in variability"
    if abs(logvar) > _BREAK_VAR_CUT - var_margin:
        return None
    if abs(disc) - abs(slope) >= margin:
        return "a jump in the mean level"
    if abs(slope) - abs(disc) >= margin:
        return "a change in the trend slope"
    return None


def _classify_location(pos: float, margin: float) -> str | None:
    if min(abs(pos - 1 / 3), abs(pos - 2 / 3)) < margin:
        return None
    return LOCATION[min(int(pos * 3), 2)]


def _scale(rng: np.random.Generator, y: FloatArray) -> tuple[FloatArray, float]:
    scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
    return np.round(rng.uniform(-50, 50) + scale * y, 4), scale


def _gen_count(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    k = int(rng.integers(1, 5))

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        n = 240 if hard else 200
        cps = np.sort(rng.choice(np.arange(30, n - 29), size=k - 1, replace=False))
        if k > 1 and np.diff(np.r_[0, cps, n]).min() < 30:
            return None
        jumps = rng.uniform(1.8, 2.6, k - 1) if hard else rng.uniform(3.0, 5.0, k - 1)
        levels = np.r_[0.0, np.cumsum(jumps * rng.choice([-1.0, 1.0], k - 1))]
        seg = np.searchsorted(cps, np.arange(n), side="right")
        y, scale = _scale(rng, levels[seg] + rng.standard_normal(n))
        found, acc, rej = binseg(y)
        lo_acc, hi_rej = (1.4, 0.85) if hard else (2.0, 0.7)
        if found != k or acc < lo_acc or rej > hi_rej:
            return None
        return y, {"n": n, "k": k, "cps": cps.tolist(), "jumps": jumps.tolist(), "scale": scale}

    (y, latent), tries = resample(attempt, "regimes/count")
    return BOOK.labelled(
        rng, index, difficulty, "count", COUNTS, str(k), {"series": y}, latent, tries
    )


def _gen_location(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, LOCATION)

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        n = int(pick(rng, (150, 180, 210)))
        third = LOCATION.index(label)
        lo = max(third / 3 + 0.06, 0.1)
        hi = min((third + 1) / 3 - 0.06, 0.9)
        tau = int(rng.uniform(lo, hi) * n)
        jump = (rng.uniform(1.5, 2.2) if hard else rng.uniform(2.5, 4.0)) * pick(rng, (-1, 1))
        y = np.where(np.arange(n) >= tau, jump, 0.0) + rng.standard_normal(n)
        y, scale = _scale(rng, y)
        pos = shift_position(y)
        if _classify_location(pos, 0.03 if hard else 0.05) != label:
            return None
        return y, {"n": n, "tau": tau, "jump_sigma": jump, "scale": scale, "pos": pos}

    (y, latent), tries = resample(attempt, "regimes/location")
    return BOOK.labelled(
        rng, index, difficulty, "location", LOCATION, label, {"series": y}, latent, tries
    )


def _gen_break(rng: np.random.Generator, hard: bool, difficulty: str, index: int) -> Question:
    label = pick(rng, BREAK)

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        n = 240 if hard else 200
        tau = int(rng.uniform(0.35, 0.65) * n)
        t = np.arange(n, dtype=np.float64)
        after = t >= tau
        base = rng.uniform(-2, 2) * t / n
        noise = rng.standard_normal(n)
        sign = float(pick(rng, (-1.0, 1.0)))
        size = 0.0
        if label == "a jump in the mean level":
            size = rng.uniform(1.8, 2.6) if hard else rng.uniform(3.0, 5.0)
            base = base + after * sign * size
        elif label == "a change in variability":
            size = rng.uniform(1.8, 2.4) if hard else rng.uniform(2.5, 4.0)
            noise = noise * np.where(after, size if sign > 0 else 1.0 / size, 1.0)
        else:
            size = rng.uniform(3.0, 5.0) if hard else rng.uniform(5.0, 8.0)
            base = base + after * sign * size * (t - tau) / (n - tau)
        y, scale = _scale(rng, base + noise)
        feats = break_features(y, tau)
        if _classify_break(feats, *_BREAK_MARGIN[difficulty]) != label:
            return None
        return y, {
            "n": n,
            "tau": tau,
            "size": size,
            "sign": sign,
            "features": list(feats),
            "scale": scale,
        }

    (y, latent), tries = resample(attempt, "regimes/break_type")
    return BOOK.labelled(
        rng,
        index,
        difficulty,
        "break_type",
        BREAK,
        label,
        {"series": y},
        latent,
        tries,
        slots={"tau": latent["tau"]},
    )


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one regimes question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    sub = subtask_for(SUBTASKS, index)
    if sub == "count":
        return _gen_count(rng, hard, difficulty, index)
    if sub == "location":
        return _gen_location(rng, hard, difficulty, index)
    return _gen_break(rng, hard, difficulty, index)


def oracle(q: Question) -> int:
    """Answer from the series (and the stated break time) alone."""
    y = np.asarray(q.series[q.primary[0]])
    if q.subtask == "count":
        return nearest_option_log(q, float(binseg(y)[0]))
    if q.subtask == "location":
        return option_index(q, _classify_location(shift_position(y), 0.0) or LOCATION[1])
    tau = int(numbers(q.question)[0])
    lab = _classify_break(break_features(y, tau), 0.0, 0.0) or BREAK[0]
    return option_index(q, lab)


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="number of level regimes; location third of a shift; type of a stated break",
    oracle_measurement="segment count (nearest number); split point third (label); break features (label)",
)
