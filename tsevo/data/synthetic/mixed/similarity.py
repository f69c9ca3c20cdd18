"""Shape similarity of two series: under noise, scale, offset and time shift; flips, reversals.

Both series are primaries ``ts1`` and ``ts2``, each with its own offset and scale.
"""

from __future__ import annotations

import numpy as np

from .._base import FloatArray, pick
from ._kind import (
    YES_NO,
    Item,
    Kind,
    Series,
    Slots,
    affine,
    length,
    pair,
    yes_no,
)
from ._stats import corr, lagged_corr, moving_average

__all__ = ["KINDS", "smooth_pattern"]

TRANSFORMS = (
    "it was flipped upside down",
    "it was reversed in time",
    "it is a noisy copy (no transformation)",
)
LEVELS = ("very similar", "somewhat similar", "not similar")


def smooth_pattern(rng: np.random.Generator, n: int, busy: float = 1.0) -> FloatArray:
    """A smooth random shape with unit variance: three sinusoids and a smoothed random walk.

    The sinusoids have periods between ``n / (6 busy)`` and ``n / (1.2 busy)``: a busier shape
    has more wiggles, so two independent shapes correlate less.
    """
    t = np.arange(n, dtype=np.float64)
    y = np.zeros(n)
    for _ in range(3):
        per = rng.uniform(n / (6 * busy), n / (1.2 * busy))
        y += rng.uniform(0.5, 1.5) * np.sin(2 * np.pi * t / per + rng.uniform(0, 7))
    walk = moving_average(np.cumsum(rng.standard_normal(n)), 9)
    y += 0.5 * (walk - walk.mean()) / max(float(walk.std()), 1e-12)
    out: FloatArray = (y - y.mean()) / max(float(y.std()), 1e-12)
    return out


def _ab(s: Series) -> tuple[FloatArray, FloatArray]:
    return np.asarray(s["ts1"]), np.asarray(s["ts2"])


def _corr(s: Series, _slots: Slots) -> float:
    return corr(*_ab(s))


def _noisy(rng: np.random.Generator, y: FloatArray, sd: float) -> FloatArray:
    out: FloatArray = y + sd * rng.standard_normal(y.size)
    return out


def _two(rng: np.random.Generator, a: FloatArray, b: FloatArray) -> dict[str, FloatArray]:
    return pair(affine(rng, a), affine(rng, b))


# ---------------------------------------------------------------------- shape
def _make_similar(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    yes = bool(rng.random() < 0.5)
    p = smooth_pattern(rng, n)
    sd = rng.uniform(0.35, 0.55) if hard else rng.uniform(0.1, 0.35)
    b = _noisy(rng, p if yes else smooth_pattern(rng, n), sd)
    return Item(_two(rng, _noisy(rng, p, 0.05), b), yes_no(yes), {"noise": sd})


def _decide_similar(c: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if c >= 0.8 else "No" if c <= 0.35 else None
    return yes_no(c > 0.575)


def _make_shifted(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    yes = bool(rng.random() < 0.5)
    shift = int(rng.uniform(0.08, 0.2) * n)
    base = smooth_pattern(rng, n + shift, 2.5)
    a = base[:n]
    b = base[shift : shift + n] if yes else smooth_pattern(rng, n, 2.5)
    sd = rng.uniform(0.2, 0.35) if hard else rng.uniform(0.05, 0.2)
    return Item(_two(rng, _noisy(rng, a, sd), _noisy(rng, b, sd)), yes_no(yes), {"shift": shift})


def _measure_shifted(s: Series, _slots: Slots) -> float:
    a, b = _ab(s)
    return lagged_corr(a, b, a.size // 4)[0]


def _decide_shifted(c: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if c >= 0.85 else "No" if c <= 0.5 else None
    return yes_no(c > 0.675)


def _make_flipped(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    scenario = pick(rng, ("flipped", "flipped", "upright", "other"))
    p = smooth_pattern(rng, n)
    b = {"flipped": -p, "upright": p}.get(scenario, smooth_pattern(rng, n))
    sd = rng.uniform(0.3, 0.5) if hard else rng.uniform(0.05, 0.3)
    return Item(
        _two(rng, p, _noisy(rng, b, sd)), yes_no(scenario == "flipped"), {"scenario": scenario}
    )


def _decide_flipped(c: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if c <= -0.8 else "No" if c >= -0.35 else None
    return yes_no(c < -0.575)


def _make_transform(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, TRANSFORMS)
    p = smooth_pattern(rng, n)
    b = {TRANSFORMS[0]: -p, TRANSFORMS[1]: p[::-1]}.get(label, p)
    sd = rng.uniform(0.25, 0.45) if hard else rng.uniform(0.05, 0.25)
    return Item(_two(rng, p, _noisy(rng, b, sd)), label, {"transform": label})


def _measure_transform(s: Series, _slots: Slots) -> tuple[float, float]:
    a, b = _ab(s)
    return corr(a, b), corr(a, b[::-1])


def _decide_transform(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    c0, cr = f
    if strict:
        if c0 <= -0.8:
            return TRANSFORMS[0]
        if c0 < -0.3:
            return None
        if cr >= 0.8 and cr - c0 >= 0.4:
            return TRANSFORMS[1]
        if c0 >= 0.8 and c0 - cr >= 0.4:
            return TRANSFORMS[2]
        return None
    if c0 < -0.55:
        return TRANSFORMS[0]
    return TRANSFORMS[1] if cr > c0 else TRANSFORMS[2]


def _make_level(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, LEVELS)
    rho = {LEVELS[0]: rng.uniform(0.96, 1.0), LEVELS[1]: rng.uniform(0.6, 0.75)}.get(label, 0.0)
    p = smooth_pattern(rng, n, 2.0)
    b = rho * p + np.sqrt(1 - rho * rho) * smooth_pattern(rng, n, 2.0)
    return Item(_two(rng, p, _noisy(rng, b, 0.1)), label, {"rho": rho})


def _decide_level(c: float, strict: bool, _o: object) -> str | None:
    if strict:
        if c >= 0.9:
            return LEVELS[0]
        if 0.5 <= c <= 0.75:
            return LEVELS[1]
        return LEVELS[2] if abs(c) <= 0.25 else None
    return LEVELS[0] if c >= 0.825 else LEVELS[1] if c >= 0.375 else LEVELS[2]


def _make_noisy_same(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    yes = bool(rng.random() < 0.5)
    p = smooth_pattern(rng, n)
    sd = rng.uniform(1.2, 1.5) if hard else rng.uniform(0.8, 1.2)
    b = _noisy(rng, p if yes else smooth_pattern(rng, n), sd)
    return Item(_two(rng, _noisy(rng, p, 0.05), b), yes_no(yes), {"noise": sd})


def _measure_noisy_same(s: Series, _slots: Slots) -> float:
    a, b = _ab(s)
    return corr(a, moving_average(b, 9))


def _decide_noisy_same(c: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if c >= 0.7 else "No" if c <= 0.3 else None
    return yes_no(c > 0.5)


KINDS: tuple[Kind, ...] = (
    Kind(
        "shape_similar_yn",
        "similarity",
        "yes_no",
        YES_NO,
        (
            "Do the two time series have a similar shape (ignoring differences in scale and "
            "offset)?",
            "Apart from scale, offset and a little noise, do these two series look alike?",
        ),
        _make_similar,
        _corr,
        _decide_similar,
        pair=True,
        measurement="Pearson correlation",
    ),
    Kind(
        "shape_shifted_yn",
        "similarity",
        "yes_no",
        YES_NO,
        (
            "Do the two series follow the same pattern if one is allowed to be shifted in time?",
            "Is series 2 a time-shifted version of the pattern in series 1?",
        ),
        _make_shifted,
        _measure_shifted,
        _decide_shifted,
        pair=True,
        measurement="best correlation over lags up to a quarter of the length",
    ),
    Kind(
        "flipped_yn",
        "similarity",
        "yes_no",
        YES_NO,
        (
            "Is series 2 an upside-down (vertically flipped) version of series 1?",
            "Does series 2 look like series 1 mirrored around a horizontal line?",
        ),
        _make_flipped,
        _corr,
        _decide_flipped,
        pair=True,
        measurement="Pearson correlation",
    ),
    Kind(
        "transform_kind",
        "similarity",
        "transform",
        TRANSFORMS,
        (
            "How was series 2 obtained from series 1?",
            "Series 2 was derived from series 1. Which transformation was applied?",
        ),
        _make_transform,
        _measure_transform,
        _decide_transform,
        pair=True,
        direct=False,
        measurement="correlation with series 2 as is and reversed in time",
    ),
    Kind(
        "similarity_level",
        "similarity",
        "similarity_level",
        LEVELS,
        (
            "How similar are the shapes of the two series?",
            "Rate the similarity of these two series' patterns.",
        ),
        _make_level,
        _corr,
        _decide_level,
        pair=True,
        measurement="Pearson correlation (bands)",
    ),
    Kind(
        "same_pattern_under_noise_yn",
        "similarity",
        "yes_no",
        YES_NO,
        (
            "Series 2 is much noisier than series 1. Underneath the noise, do they follow the "
            "same pattern?",
            "Ignoring the heavy noise in series 2, does it have the same underlying shape as "
            "series 1?",
        ),
        _make_noisy_same,
        _measure_noisy_same,
        _decide_noisy_same,
        pair=True,
        direct=False,
        measurement="correlation of series 1 with a moving average of series 2",
    ),
)
