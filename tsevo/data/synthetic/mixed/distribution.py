"""Similarity of two series' values and dynamics.

Same distribution, same variance, heavier tails, co-movement of their changes, which is smoother.
"""

from __future__ import annotations

import numpy as np

from .._base import FloatArray, pick
from ..distribution import ks_lambda
from ._kind import (
    SERIES12,
    YES_NO,
    Item,
    Kind,
    Series,
    Slots,
    affine,
    ar,
    both,
    length,
    pair,
    yes_no,
)
from ._stats import acf, corr, kurtosis

__all__ = ["KINDS"]

VAR3 = (
    "Yes, they have the same variance",
    "No, series 1 has higher variance",
    "No, series 2 has higher variance",
)
CO_MOVEMENT = ("positively correlated", "negatively correlated", "uncorrelated")


def _ab(s: Series) -> tuple[FloatArray, FloatArray]:
    return np.asarray(s["ts1"]), np.asarray(s["ts2"])


def _two(rng: np.random.Generator, a: FloatArray, b: FloatArray) -> dict[str, FloatArray]:
    return pair(affine(rng, a), affine(rng, b))


# ---------------------------------------------------------------------- distributions
def _shared_scale(rng: np.random.Generator, a: FloatArray, b: FloatArray) -> dict[str, FloatArray]:
    scale, offset = float(np.exp(rng.uniform(np.log(0.5), np.log(20)))), rng.uniform(-50, 50)
    return pair(offset + scale * a, offset + scale * b)


def _make_same_dist(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    scenario = pick(rng, ("same", "same", "shift", "scale"))
    a = rng.standard_normal(n)
    b = rng.standard_normal(n)
    if scenario == "shift":
        b += (rng.uniform(0.5, 0.8) if hard else rng.uniform(0.8, 1.3)) * pick(rng, (-1, 1))
    elif scenario == "scale":
        b *= rng.uniform(1.8, 2.2) if hard else rng.uniform(2.2, 3.0)
    if rng.random() < 0.5:
        a, b = b, a
    return Item(_shared_scale(rng, a, b), yes_no(scenario == "same"), {"scenario": scenario})


def _decide_same_dist(lam: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if lam <= 0.9 else "No" if lam >= 1.9 else None
    return yes_no(lam < 1.4)


def _make_var3(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, VAR3)
    r = rng.uniform(0.45, 0.7) if hard else rng.uniform(0.7, 1.1)
    r = {VAR3[1]: r, VAR3[2]: -r}.get(label, 0.0)
    a = np.exp(r / 2) * ar(rng, n, rng.uniform(0, 0.4))
    b = np.exp(-r / 2) * ar(rng, n, rng.uniform(0, 0.4))
    scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
    return Item(
        pair(rng.uniform(-50, 50) + scale * a, rng.uniform(-50, 50) + scale * b),
        label,
        {"log_sd": r},
    )


def _measure_var3(s: Series, _slots: Slots) -> float:
    a, b = _ab(s)
    return float(np.log(max(float(a.std()), 1e-12) / max(float(b.std()), 1e-12)))


def _decide_var3(lr: float, strict: bool, _o: object) -> str | None:
    if strict:
        if abs(lr) <= 0.1:
            return VAR3[0]
        if abs(lr) < 0.45:
            return None
    elif abs(lr) < 0.275:
        return VAR3[0]
    return VAR3[1] if lr > 0 else VAR3[2]


def _make_tails(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, SERIES12)
    nu = float(rng.uniform(3.5, 5.0) if hard else rng.uniform(2.5, 3.5))
    heavy = rng.standard_t(nu, n)
    heavy = heavy / max(float(heavy.std()), 1e-12)
    normal = rng.standard_normal(n)
    a, b = (heavy, normal) if label == SERIES12[0] else (normal, heavy)
    return Item(_two(rng, a, b), label, {"nu": nu})


def _decide_tails(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    if strict and abs(f[0] - f[1]) < 1.5:
        return None
    return SERIES12[0] if f[0] > f[1] else SERIES12[1]


def _make_co(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, CO_MOVEMENT)
    rho = rng.uniform(0.45, 0.6) if hard else rng.uniform(0.6, 0.9)
    rho = {CO_MOVEMENT[0]: rho, CO_MOVEMENT[1]: -rho}.get(label, 0.0)
    x = rng.standard_normal(n)
    y = rho * x + np.sqrt(1 - rho * rho) * rng.standard_normal(n)
    t = np.linspace(0, 1, n)
    x = x + rng.uniform(-3, 3) * t
    y = y + rng.uniform(-3, 3) * t
    return Item(_two(rng, x, y), label, {"rho": rho})


def _measure_co(s: Series, _slots: Slots) -> float:
    a, b = _ab(s)
    return corr(np.diff(a), np.diff(b))


def _decide_co(c: float, strict: bool, _o: object) -> str | None:
    if strict:
        if abs(c) >= 0.45:
            return CO_MOVEMENT[0] if c > 0 else CO_MOVEMENT[1]
        return CO_MOVEMENT[2] if abs(c) <= 0.12 else None
    if abs(c) < 0.285:
        return CO_MOVEMENT[2]
    return CO_MOVEMENT[0] if c > 0 else CO_MOVEMENT[1]


def _make_smoother(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, SERIES12)
    smooth = ar(rng, n, rng.uniform(0.75, 0.85) if hard else rng.uniform(0.85, 0.95))
    rough = ar(rng, n, rng.uniform(0.0, 0.4))
    a, b = (smooth, rough) if label == SERIES12[0] else (rough, smooth)
    return Item(_two(rng, a, b), label, {})


def _decide_smoother(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    if strict and abs(f[0] - f[1]) < 0.35:
        return None
    return SERIES12[0] if f[0] > f[1] else SERIES12[1]


KINDS: tuple[Kind, ...] = (
    Kind(
        "same_distribution_yn",
        "similarity",
        "yes_no",
        YES_NO,
        (
            "Are the values of the two series drawn from the same distribution?",
            "Ignoring the order of the values, do both series come from the same distribution?",
        ),
        _make_same_dist,
        lambda s, _sl: ks_lambda(*_ab(s)),
        _decide_same_dist,
        pair=True,
        measurement="scaled two-sample Kolmogorov-Smirnov distance",
    ),
    Kind(
        "same_variance",
        "similarity",
        "variance3",
        VAR3,
        (
            "Do the two series have the same variance?",
            "Compare the spread of the two series. Are their variances the same?",
        ),
        _make_var3,
        _measure_var3,
        _decide_var3,
        pair=True,
        measurement="log ratio of the standard deviations",
    ),
    Kind(
        "heavier_tails",
        "similarity",
        "series12",
        SERIES12,
        (
            "Which of the two series has heavier tails (more extreme values relative to its "
            "spread)?",
            "Which series is more prone to extreme values?",
        ),
        _make_tails,
        both(kurtosis),
        _decide_tails,
        pair=True,
        measurement="kurtosis of each series",
    ),
    Kind(
        "co_movement",
        "similarity",
        "co_movement",
        CO_MOVEMENT,
        (
            "How are the step-to-step changes of the two series related?",
            "Do the two series move together, move in opposite directions, or move "
            "independently from step to step?",
        ),
        _make_co,
        _measure_co,
        _decide_co,
        pair=True,
        measurement="correlation of first differences",
    ),
    Kind(
        "smoother_series",
        "similarity",
        "series12",
        SERIES12,
        ("Which of the two series is smoother?", "Which series changes more gradually?"),
        _make_smoother,
        both(lambda y: float(acf(y, 1)[0])),
        _decide_smoother,
        pair=True,
        measurement="lag-1 autocorrelation of each series",
    ),
)
