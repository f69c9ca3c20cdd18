"""Pattern recognition, part 2: stationarity, the first two moments by window, AR/MA, regimes.

Numeric moment questions state units the series is not in (a mean asked in degrees Fahrenheit of a
series in Celsius, a spread asked in centimetres of a series in metres), so reading them needs an
affine step after the measurement; the raw measurement itself is among the distractors.
"""

from __future__ import annotations

import numpy as np

from .._base import FloatArray, pick
from ..noise import df_rho
from ..window import level_gap
from ._kind import (
    CHANGE3,
    YES_NO,
    Item,
    Kind,
    Series,
    Slots,
    affine,
    ar,
    decide_change3,
    decide_nearest,
    length,
    numeric_labels,
    one,
    single,
    yes_no,
)
from ._stats import df_rho_detrended, trend_z

__all__ = ["KINDS"]

STAT_TYPES = ("stationary", "stationary around a deterministic trend", "a random walk")
HIGHER_LOWER = ("higher", "lower", "about the same")


def _y(s: Series) -> FloatArray:
    return np.asarray(s["ts"])


# ---------------------------------------------------------------------- stationarity
_DF_STAT, _DF_RW, _DF_CUT = -20.0, -9.0, -14.5


def _stationary(rng: np.random.Generator, hard: bool, *, with_trend: bool) -> Item:
    """Stationary AR(1) against a random walk (and, ``with_trend``, a trend plus noise)."""
    n = length(rng)
    scenario = pick(rng, ("ar", "ar", "rw", "trend") if with_trend else ("ar", "rw"))
    if scenario == "ar":
        phi = rng.uniform(0.6, 0.85) if hard else rng.uniform(0.0, 0.6)
        y = ar(rng, n, phi)
    elif scenario == "rw":
        phi = 1.0
        y = np.cumsum(rng.standard_normal(n)) + rng.uniform(-0.05, 0.05) * np.arange(n)
    else:
        phi = rng.uniform(0.0, 0.5)
        y = ar(rng, n, phi) + pick(rng, (-1, 1)) * rng.uniform(6, 12) * np.linspace(0, 1, n)
    label = yes_no(scenario == "ar") if with_trend else yes_no(scenario == "rw")
    return Item(one(affine(rng, y)), label, {"scenario": scenario, "phi": phi})


def _decide_df(r: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if r <= _DF_STAT else "No" if r >= _DF_RW else None
    return yes_no(r < _DF_CUT)


def _decide_rw(r: float, strict: bool, _o: object) -> str | None:
    d = _decide_df(r, strict, _o)
    return None if d is None else yes_no(d == "No")


def _make_stat_type(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, STAT_TYPES)
    y = ar(rng, n, rng.uniform(0.0, 0.6))
    if label == STAT_TYPES[1]:
        mag = rng.uniform(5, 8) if hard else rng.uniform(8, 14)
        y = y + pick(rng, (-1, 1)) * mag * np.linspace(0, 1, n)
    elif label == STAT_TYPES[2]:
        y = np.cumsum(rng.standard_normal(n))
    return Item(one(affine(rng, y)), label, {"type": label})


def _measure_stat_type(s: Series, _slots: Slots) -> tuple[float, float]:
    y = _y(s)
    return df_rho_detrended(y), trend_z(y)


def _decide_stat_type(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    rho, z = f[0], abs(f[1])
    if strict:
        if rho >= -12.0:
            return STAT_TYPES[2]
        if rho > -25.0:
            return None
        return STAT_TYPES[1] if z >= 4.0 else STAT_TYPES[0] if z <= 1.2 else None
    if rho > -18.0:
        return STAT_TYPES[2]
    return STAT_TYPES[1] if z > 2.5 else STAT_TYPES[0]


# ---------------------------------------------------------------------- moments by window
def _halves(y: FloatArray) -> tuple[tuple[int, int], tuple[int, int]]:
    h = y.size // 2
    return (0, h), (h, y.size)


def _make_mean_change(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, HIGHER_LOWER)
    mag = rng.uniform(1.2, 1.8) if hard else rng.uniform(1.8, 3.0)
    delta = {HIGHER_LOWER[0]: mag, HIGHER_LOWER[1]: -mag}.get(label, 0.0)
    at = int(rng.uniform(0.35, 0.65) * n)
    y = ar(rng, n, rng.uniform(0.0, 0.4)) + delta * (np.arange(n) >= at)
    if hard:
        y = y + rng.uniform(0.3, 0.8) * np.sin(2 * np.pi * np.arange(n) / rng.uniform(8, 20))
    return Item(one(affine(rng, y)), label, {"delta": delta, "at": at})


def _decide_mean_change(g: float, strict: bool, _o: object) -> str | None:
    m = 0.4 if strict else 0.0
    if abs(g) >= 0.6 + m:
        return HIGHER_LOWER[0] if g > 0 else HIGHER_LOWER[1]
    if abs(g) <= 0.6 - m:
        return HIGHER_LOWER[2]
    return None


def _make_var_change(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, CHANGE3)
    r = rng.uniform(0.5, 0.75) if hard else rng.uniform(0.75, 1.2)
    r = {CHANGE3[0]: r, CHANGE3[1]: -r}.get(label, 0.0)
    sd = np.where(np.arange(n) < n // 2, 1.0, np.exp(r))
    y = sd * ar(rng, n, rng.uniform(0.0, 0.4)) + rng.uniform(-3, 3) * np.linspace(0, 1, n)
    return Item(one(affine(rng, y)), label, {"log_sd_ratio": r})


def _measure_var_change(s: Series, _slots: Slots) -> float:
    y = _y(s)
    t = np.arange(y.size, dtype=np.float64)
    x = y - np.polyval(np.polyfit(t, y, 1), t)
    h = y.size // 2
    return float(np.log(max(float(x[h:].std()), 1e-12) / max(float(x[:h].std()), 1e-12)))


def _make_mean_f(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    k = int(pick(rng, (24, 36, 48)))
    t = np.arange(n, dtype=np.float64)
    y = rng.uniform(-5, 25) + rng.uniform(2, 8) * np.sin(2 * np.pi * t / 24 + rng.uniform(0, 6.3))
    y = y + rng.uniform(-6, 6) * t / n + rng.uniform(0.5, 1.5) * ar(rng, n, 0.5)
    y = np.round(y, 2)
    truth = round(1.8 * float(y[-k:].mean()) + 32.0, 1)
    traps = [round(float(y[-k:].mean()), 1), round(1.8 * float(y.mean()) + 32.0, 1)]
    offsets = [truth + d for d in (-9.0, -6.0, -3.5, 3.5, 6.0, 9.0)]
    got = numeric_labels(
        rng,
        truth,
        traps + offsets,
        int(pick(rng, (2, 3))),
        2.0,
        lambda v: f"{v:.1f} °F",
        log=False,
        prefer=traps if hard else (),
    )
    if got is None:
        return None
    labels, label = got
    return Item(one(y), label, {"mean_c": float(y[-k:].mean()), "k": k}, {"k": k}, labels)


def _make_std_cm(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    k = int(pick(rng, (32, 48, 64)))
    t = np.arange(n, dtype=np.float64)
    amp = rng.uniform(0.05, 0.5)
    y = rng.uniform(1, 5) + amp * np.sin(2 * np.pi * t / rng.uniform(20, 60) + rng.uniform(0, 6.3))
    y = np.round(y + rng.uniform(0.01, 0.05) * rng.standard_normal(n), 4)
    truth = float(f"{100.0 * float(y[:k].std()):.3g}")
    cands = [truth * f * rng.uniform(0.92, 1.08) for f in (0.18, 0.3, 0.5, 0.6, 1.8, 2.2, 3.0)]
    traps = [100.0 * float(y.std()), float(f"{float(y[:k].std()):.3g}")]
    got = numeric_labels(
        rng,
        truth,
        traps + cands,
        int(pick(rng, (2, 3))),
        1.4,
        lambda v: f"{v:.3g} cm",
        prefer=traps if hard else (),
    )
    if got is None:
        return None
    labels, label = got
    return Item(one(y), label, {"std_m": float(y[:k].std()), "k": k}, {"k": k}, labels)


KINDS: tuple[Kind, ...] = (
    Kind(
        "stationary_yn",
        "pattern",
        "yes_no",
        YES_NO,
        (
            "Is this time series stationary?",
            "Would you describe this series as stationary (constant mean and variance over time)?",
        ),
        lambda rng, hard: _stationary(rng, hard, with_trend=True),
        single(df_rho),
        _decide_df,
        measurement="Dickey-Fuller rho of the demeaned series",
    ),
    Kind(
        "random_walk_yn",
        "pattern",
        "yes_no",
        YES_NO,
        (
            "Does this series behave like a random walk, wandering without returning to a fixed "
            "level?",
            "Is this series a random walk rather than a mean-reverting process?",
        ),
        lambda rng, hard: _stationary(rng, hard, with_trend=False),
        single(df_rho),
        _decide_rw,
        measurement="Dickey-Fuller rho of the demeaned series",
    ),
    Kind(
        "stationarity_type",
        "pattern",
        "stationarity_type",
        STAT_TYPES,
        (
            "Which description fits this time series best?",
            "Is this series stationary, stationary around a deterministic trend, or a random walk?",
        ),
        _make_stat_type,
        _measure_stat_type,
        _decide_stat_type,
        direct=False,
        measurement="Dickey-Fuller rho after detrending, and the trend z",
    ),
    Kind(
        "mean_change_halves",
        "pattern",
        "higher_lower",
        HIGHER_LOWER,
        (
            "Compared with the first half of the series, is the mean of the second half higher, "
            "lower, or about the same?",
            "Is the average level in the second half of the series higher, lower, or about the "
            "same as in the first half?",
        ),
        _make_mean_change,
        lambda s, _sl: level_gap(_y(s), *_halves(_y(s))),
        _decide_mean_change,
        measurement="standardized gap between the means of the halves",
    ),
    Kind(
        "variance_change_halves",
        "pattern",
        "change3",
        CHANGE3,
        (
            "How does the variance of the series change from the first half to the second half?",
            "From the first half to the second half, does the variability of this series "
            "increase, decrease, or stay about the same?",
        ),
        _make_var_change,
        _measure_var_change,
        decide_change3,
        measurement="log ratio of detrended spread, second half over first",
    ),
    Kind(
        "mean_recent_fahrenheit",
        "pattern",
        "numeric:fahrenheit",
        (),
        (
            "This series is an hourly temperature in degrees Celsius. What is its average over "
            "the last {k} observations, in degrees Fahrenheit?",
            "The values are hourly temperatures in °C. Expressed in °F, what is the mean "
            "temperature of the last {k} hours?",
        ),
        _make_mean_f,
        lambda s, sl: 1.8 * float(_y(s)[-sl["k"] :].mean()) + 32.0,
        lambda v, strict, o: decide_nearest(v, o, strict, 0.5, log=False),
        measurement="mean of the stated last window, converted from °C to °F",
    ),
    Kind(
        "std_first_cm",
        "pattern",
        "numeric:cm",
        (),
        (
            "This series is a water level in metres. What is its standard deviation over the "
            "first {k} observations, in centimetres?",
            "The values are water levels in metres. How large is the standard deviation of the "
            "first {k} readings, in cm?",
        ),
        _make_std_cm,
        lambda s, sl: 100.0 * float(_y(s)[: sl["k"]].std()),
        lambda v, strict, o: decide_nearest(v, o, strict, 0.15),
        measurement="standard deviation of the stated first window, converted from m to cm",
    ),
)
