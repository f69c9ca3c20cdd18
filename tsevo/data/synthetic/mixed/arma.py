"""Pattern recognition: AR/MA behaviour and regime switching.

AR or MA, the sign of the lag-1 autocorrelation and the AR order; whether a series switches between
calm and volatile periods, and whether its regimes differ in level or in volatility.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from .._base import FloatArray, pick
from ._kind import (
    YES_NO,
    Item,
    Kind,
    Series,
    Slots,
    affine,
    ar,
    length,
    one,
    single,
    yes_no,
)
from ._stats import acf, pacf2, vol_log_range, window_t

__all__ = ["KINDS"]

AR_MA = ("an AR(1) process", "an MA(1) process")
SIGNS = ("positive", "negative")
AR_ORDERS = ("AR(1)", "AR(2)")
REGIME_TYPES = ("the mean level", "the volatility")


def _y(s: Series) -> FloatArray:
    return np.asarray(s["ts"])


def _arma(rng: np.random.Generator, n: int, ar_coef: list[float], ma: list[float]) -> FloatArray:
    """A unit-innovation ARMA series (200 samples of burn-in dropped)."""
    e = rng.standard_normal(n + 200)
    out: FloatArray = lfilter([1.0, *ma], [1.0, *[-a for a in ar_coef]], e)[200:]
    return out


# ---------------------------------------------------------------------- AR / MA
def _make_ar_ma(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, AR_MA)
    if label == AR_MA[0]:
        c = rng.uniform(0.55, 0.7) if hard else rng.uniform(0.7, 0.9)
        y = _arma(rng, n, [c], [])
    else:
        c = rng.uniform(0.7, 1.0)
        y = _arma(rng, n, [], [c])
    return Item(one(affine(rng, y)), label, {"coef": c})


def _measure_ar_ma(s: Series, _slots: Slots) -> tuple[float, float]:
    r1, r2 = acf(_y(s), 2)
    return float(r1), float(r2)


def _decide_ar_ma(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    r1, r2 = f
    ratio = r2 / max(r1, 1e-3)
    if strict:
        if r1 < 0.3:
            return None
        return AR_MA[0] if ratio >= 0.45 else AR_MA[1] if ratio <= 0.2 else None
    return AR_MA[0] if ratio > 0.32 else AR_MA[1]


def _make_sign(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, SIGNS)
    phi = rng.uniform(0.3, 0.5) if hard else rng.uniform(0.5, 0.85)
    phi = phi if label == SIGNS[0] else -phi
    y = ar(rng, length(rng), phi)
    return Item(one(affine(rng, y)), label, {"phi": phi})


def _decide_sign(r1: float, strict: bool, _o: object) -> str | None:
    if strict and abs(r1) < 0.2:
        return None
    return SIGNS[0] if r1 > 0 else SIGNS[1]


def _make_order(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, AR_ORDERS)
    n = length(rng)
    if label == AR_ORDERS[0]:
        coefs = [float(pick(rng, (-1, 1)) * rng.uniform(0.3, 0.9))]
    else:
        p2 = float(pick(rng, (-1, 1)) * (rng.uniform(0.35, 0.5) if hard else rng.uniform(0.5, 0.7)))
        p1 = rng.uniform(p2 - 1 + 0.15, 1 - p2 - 0.15)
        coefs = [float(p1), p2]
    return Item(one(affine(rng, _arma(rng, n, coefs, []))), label, {"ar": coefs})


def _decide_order(p2: float, strict: bool, _o: object) -> str | None:
    if strict:
        return AR_ORDERS[1] if abs(p2) >= 0.3 else AR_ORDERS[0] if abs(p2) <= 0.1 else None
    return AR_ORDERS[1] if abs(p2) > 0.2 else AR_ORDERS[0]


# ---------------------------------------------------------------------- regimes
def _segments(rng: np.random.Generator, n: int) -> FloatArray:
    """0/1 regime indicator with 3 or 4 segments, each at least n/5 long."""
    k = int(rng.integers(3, 5))
    for _ in range(200):
        cuts = np.sort(rng.integers(n // 5, n - n // 5, size=k - 1))
        if np.diff(np.r_[0, cuts, n]).min() >= n // 5:
            break
    reg = np.zeros(n)
    for j, c in enumerate(cuts):
        reg[c:] = (j + 1) % 2
    return reg


def _make_vol_regime(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    yes = bool(rng.random() < 0.5)
    if yes:
        hi = rng.uniform(3.0, 4.0) if hard else rng.uniform(4.0, 6.0)
        y = np.where(_segments(rng, n) > 0, hi, 1.0) * rng.standard_normal(n)
    else:
        hi = 1.0
        y = ar(rng, n, rng.uniform(0.0, 0.5))
    y = y + rng.uniform(-3, 3) * np.linspace(0, 1, n)
    return Item(one(affine(rng, y)), yes_no(yes), {"sd_ratio": hi})


def _decide_vol_regime(v: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if v >= np.log(3.3) else "No" if v <= np.log(2.4) else None
    return yes_no(v > np.log(2.85))


def _make_regime_type(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, REGIME_TYPES)
    reg = _segments(rng, n)
    if label == REGIME_TYPES[0]:
        y = rng.uniform(3.0, 5.0) * reg + rng.standard_normal(n)
    else:
        y = np.where(reg > 0, rng.uniform(4.0, 6.0), 1.0) * rng.standard_normal(n)
    return Item(one(affine(rng, y)), label, {"type": label})


def _measure_regime(s: Series, _slots: Slots) -> tuple[float, float]:
    y = _y(s)
    return window_t(y, 16), vol_log_range(y)


def _decide_regime(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    t, v = f
    if strict:
        if t >= 7.0 and v <= np.log(2.4):
            return REGIME_TYPES[0]
        if v >= np.log(3.5) and t <= 4.5:
            return REGIME_TYPES[1]
        return None
    return REGIME_TYPES[0] if t / 7.0 - v / np.log(3.5) > 0 else REGIME_TYPES[1]


KINDS: tuple[Kind, ...] = (
    Kind(
        "ar_or_ma",
        "pattern",
        "ar_ma",
        AR_MA,
        (
            "Which process most likely generated this series?",
            "Is this series better described as an autoregressive AR(1) process or a moving "
            "average MA(1) process?",
        ),
        _make_ar_ma,
        _measure_ar_ma,
        _decide_ar_ma,
        direct=False,
        measurement="autocorrelation at lag 2 over that at lag 1",
    ),
    Kind(
        "autocorrelation_sign",
        "pattern",
        "sign",
        SIGNS,
        (
            "Is the lag-1 autocorrelation of this series positive or negative?",
            "Do consecutive values of this series tend to move together (positive "
            "autocorrelation) or alternate (negative autocorrelation)?",
        ),
        _make_sign,
        lambda s, _sl: float(acf(_y(s), 1)[0]),
        _decide_sign,
        measurement="lag-1 autocorrelation",
    ),
    Kind(
        "ar_order",
        "pattern",
        "ar_order",
        AR_ORDERS,
        (
            "This series was generated by an autoregressive process. What is its order?",
            "Which autoregressive model generated this series?",
        ),
        _make_order,
        single(pacf2),
        _decide_order,
        measurement="partial autocorrelation at lag 2",
    ),
    Kind(
        "volatility_regimes_yn",
        "pattern",
        "yes_no",
        YES_NO,
        (
            "Does this series switch between calm and volatile periods?",
            "Are there distinct regimes of low and high volatility in this series?",
        ),
        _make_vol_regime,
        single(lambda y: vol_log_range(y)),
        _decide_vol_regime,
        measurement="log range of the windowed median absolute first difference",
    ),
    Kind(
        "regime_type",
        "pattern",
        "regime_type",
        REGIME_TYPES,
        (
            "This series switches between regimes. What mainly differs between the regimes?",
            "The series alternates between two regimes. Do they differ in the mean level or in "
            "the volatility?",
        ),
        _make_regime_type,
        _measure_regime,
        _decide_regime,
        direct=False,
        measurement="largest adjacent-window t statistic and log volatility range",
    ),
)
