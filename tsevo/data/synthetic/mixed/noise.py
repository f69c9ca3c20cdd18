"""Noise understanding: colour, SNR, presence, additive or multiplicative, level, predictability.

White vs red, is it white noise, SNR in dB and as high/low, was noise added, additive vs
multiplicative, which series is noisier, the noise level as a percentage of the amplitude, and
whether the second half is more predictable than the first.
"""

from __future__ import annotations

import numpy as np

from .._base import FloatArray, pick
from ..noise import noise_sd_estimate
from ._kind import (
    ADD_MULT,
    SERIES12,
    YES_NO,
    Item,
    Kind,
    Series,
    affine,
    ar,
    both,
    decide_add_mult,
    decide_nearest,
    length,
    numeric_labels,
    one,
    pair,
    single,
    yes_no,
)
from ._stats import acf, sine_fit, snr_db
from .similarity import smooth_pattern

__all__ = ["KINDS"]

COLORS = ("white noise", "red noise")
HIGH_LOW = ("high", "low")
SNR_GRID = (-5.0, 0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0)
PCT_GRID = (5.0, 8.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 70.0, 100.0)


def _y(s: Series) -> FloatArray:
    return np.asarray(s["ts"])


def _sine(rng: np.random.Generator, n: int) -> FloatArray:
    t = np.arange(n, dtype=np.float64)
    out: FloatArray = np.sin(2 * np.pi * t / rng.uniform(10, 40) + rng.uniform(0, 7))
    return out


def _make_color(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, COLORS)
    phi = 0.0 if label == COLORS[0] else rng.uniform(0.45, 0.6) if hard else rng.uniform(0.6, 0.95)
    return Item(one(affine(rng, ar(rng, length(rng), phi))), label, {"phi": phi})


def _decide_color(r1: float, strict: bool, _o: object) -> str | None:
    if strict:
        return COLORS[0] if abs(r1) <= 0.15 else COLORS[1] if r1 >= 0.4 else None
    return COLORS[1] if r1 > 0.275 else COLORS[0]


def ljung_box(y: FloatArray, h: int = 10) -> float:
    """Ljung-Box Q statistic over lags 1..h."""
    n = y.size
    r = acf(y, h)
    return float(n * (n + 2) * np.sum(r * r / (n - np.arange(1, h + 1))))


def _make_white(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    scenario = pick(rng, ("white", "white", "red", "sine", "ma"))
    e = rng.standard_normal(n + 1)
    y = {
        "white": e[1:],
        "red": ar(rng, n, rng.uniform(0.4, 0.9)),
        "sine": e[1:] + rng.uniform(0.7, 1.2) * _sine(rng, n),
        "ma": e[1:] + rng.uniform(0.6, 0.9) * e[:-1],
    }[scenario]
    return Item(one(affine(rng, y)), yes_no(scenario == "white"), {"scenario": scenario})


def _decide_white(q: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if q <= 14.0 else "No" if q >= 35.0 else None
    return yes_no(q < 24.0)


def _sine_noise(rng: np.random.Generator, n: int, snr: float) -> FloatArray:
    sd = float(np.sqrt(0.5 / 10 ** (snr / 10)))
    return _sine(rng, n) + sd * rng.standard_normal(n)


def _make_snr(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    truth = float(pick(rng, SNR_GRID))
    y = affine(rng, _sine_noise(rng, n, truth))
    got = numeric_labels(
        rng, truth, SNR_GRID, int(pick(rng, (2, 3))), 10.0, lambda v: f"{v:g} dB", log=False
    )
    if got is None:
        return None
    labels, label = got
    return Item(one(y), label, {"snr_db": truth}, {}, labels)


def _make_snr_level(rng: np.random.Generator, hard: bool) -> Item:
    label = pick(rng, HIGH_LOW)
    snr = rng.uniform(15, 30) if label == HIGH_LOW[0] else rng.uniform(-6, 0)
    return Item(one(affine(rng, _sine_noise(rng, length(rng), snr))), label, {"snr_db": snr})


def _decide_snr_level(v: float, strict: bool, _o: object) -> str | None:
    if strict:
        return HIGH_LOW[0] if v >= 12.0 else HIGH_LOW[1] if v <= 3.0 else None
    return HIGH_LOW[0] if v > 7.5 else HIGH_LOW[1]


def _make_added(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    yes = bool(rng.random() < 0.5)
    t = np.arange(n, dtype=np.float64)
    y = np.sin(2 * np.pi * t / rng.uniform(24, 60) + rng.uniform(0, 7))
    y += rng.uniform(0.3, 0.8) * np.sin(2 * np.pi * t / rng.uniform(40, 120) + rng.uniform(0, 7))
    y = (y - y.mean()) / y.std() + rng.uniform(-1, 1) * t / n
    sd = (rng.uniform(0.1, 0.15) if hard else rng.uniform(0.15, 0.3)) if yes else 0.0
    return Item(one(affine(rng, y + sd * rng.standard_normal(n))), yes_no(yes), {"noise": sd})


def _measure_added(y: FloatArray) -> float:
    return float(np.diff(y, n=2).std() / max(float(y.std()), 1e-12))


def _decide_added(r: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if r >= 0.2 else "No" if r <= 0.1 else None
    return yes_no(r > 0.15)


def _make_add_mult(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, ADD_MULT)
    t = np.linspace(0.0, 1.0, n)
    g = rng.uniform(1.5, 2.0) if hard else rng.uniform(2.0, 4.0)
    level = rng.uniform(5, 10) * (1 + g * t) + rng.uniform(0, 1) * np.sin(2 * np.pi * t * 3)
    c = rng.uniform(0.05, 0.1)
    sd = c * level if label == ADD_MULT[1] else c * float(level.mean()) * np.ones(n)
    y = level + sd * rng.standard_normal(n)
    return Item(one(affine(rng, y, positive=True)), label, {"growth": g, "noise": c})


def _measure_add_mult(y: FloatArray) -> float:
    t = np.linspace(0.0, 1.0, y.size)
    r = y - np.polyval(np.polyfit(t, y, 3), t)
    k = y.size // 3
    return float(np.log(max(float(r[-k:].std()), 1e-12) / max(float(r[:k].std()), 1e-12)))


def _make_noisier(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, SERIES12)
    low = rng.uniform(0.05, 0.2)
    high = low * (rng.uniform(1.8, 2.5) if hard else rng.uniform(2.5, 4.0))
    sa, sb = (high, low) if label == SERIES12[0] else (low, high)
    a = smooth_pattern(rng, n) + sa * rng.standard_normal(n)
    b = smooth_pattern(rng, n) + sb * rng.standard_normal(n)
    return Item(pair(affine(rng, a), affine(rng, b)), label, {"noise": [sa, sb]})


def _rel_noise(y: FloatArray) -> float:
    return noise_sd_estimate(y) / max(float(y.std()), 1e-12)


def _decide_noisier(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    lr = float(np.log(max(f[0], 1e-12) / max(f[1], 1e-12)))
    if strict and abs(lr) < np.log(1.6):
        return None
    return SERIES12[0] if lr > 0 else SERIES12[1]


def _make_pct(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    pct = float(pick(rng, PCT_GRID))
    y = affine(rng, _sine(rng, n) + pct / 100.0 * rng.standard_normal(n))
    got = numeric_labels(rng, pct, PCT_GRID, int(pick(rng, (2, 3))), 1.45, lambda v: f"{v:g}%")
    if got is None:
        return None
    labels, label = got
    return Item(one(y), label, {"pct": pct}, {}, labels)


def _measure_pct(y: FloatArray) -> float:
    _, resid, amp = sine_fit(y)
    return 100.0 * float(resid.std()) / max(amp, 1e-12)


def _make_predictable(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    h = n // 2
    scenario = pick(rng, ("later", "later", "earlier", "same"))
    hi = rng.uniform(0.8, 0.9) if hard else rng.uniform(0.9, 0.97)
    lo = rng.uniform(0.0, 0.3)
    p1, p2 = {"later": (lo, hi), "earlier": (hi, lo)}.get(
        scenario, (lo, lo + rng.uniform(-0.1, 0.1))
    )
    y = np.r_[ar(rng, h, p1), ar(rng, n - h, p2)]
    return Item(one(affine(rng, y)), yes_no(scenario == "later"), {"phi": [p1, p2]})


def _measure_predictable(y: FloatArray) -> float:
    h = y.size // 2
    return float(acf(y[h:], 1)[0] ** 2 - acf(y[:h], 1)[0] ** 2)


def _decide_predictable(d: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if d >= 0.35 else "No" if d <= 0.1 else None
    return yes_no(d > 0.225)


KINDS: tuple[Kind, ...] = (
    Kind(
        "noise_color",
        "noise",
        "noise_color",
        COLORS,
        (
            "What kind of noise is this series?",
            "Is this series white noise or red (autocorrelated) noise?",
        ),
        _make_color,
        single(lambda y: float(acf(y, 1)[0])),
        _decide_color,
        measurement="lag-1 autocorrelation",
    ),
    Kind(
        "white_noise_yn",
        "noise",
        "yes_no",
        YES_NO,
        (
            "Is this series pure white noise?",
            "Could this series be a sequence of independent random values (white noise)?",
        ),
        _make_white,
        single(ljung_box),
        _decide_white,
        measurement="Ljung-Box Q over 10 lags",
    ),
    Kind(
        "snr_db",
        "noise",
        "numeric:db",
        (),
        (
            "The series is a sine wave plus noise. What is its approximate signal-to-noise "
            "ratio, in decibels?",
            "What is the SNR of this noisy sinusoid, in dB?",
        ),
        _make_snr,
        single(snr_db),
        lambda v, strict, o: decide_nearest(v, o, strict, 4.0, log=False),
        measurement="fitted sinusoid power over residual power, in dB",
    ),
    Kind(
        "snr_level",
        "noise",
        "high_low",
        HIGH_LOW,
        (
            "Is the signal-to-noise ratio of this series high or low?",
            "Does the periodic signal in this series stand out clearly from the noise (high "
            "SNR) or not (low SNR)?",
        ),
        _make_snr_level,
        single(snr_db),
        _decide_snr_level,
        measurement="fitted sinusoid power over residual power, in dB",
    ),
    Kind(
        "noise_added_yn",
        "noise",
        "yes_no",
        YES_NO,
        (
            "Has random noise been added to this otherwise smooth signal?",
            "Is this a clean smooth signal, or does it contain added noise? Answer yes if noise "
            "was added.",
        ),
        _make_added,
        single(_measure_added),
        _decide_added,
        measurement="spread of second differences over the spread of the series",
    ),
    Kind(
        "noise_add_mult",
        "noise",
        "add_mult",
        ADD_MULT,
        (
            "Is the noise in this series additive or multiplicative?",
            "Does the size of the noise stay constant as the level rises (additive), or grow "
            "with the level (multiplicative)?",
        ),
        _make_add_mult,
        single(_measure_add_mult),
        decide_add_mult,
        measurement="log ratio of residual spread around a cubic, last third over first",
    ),
    Kind(
        "noisier_series",
        "noise",
        "series12",
        SERIES12,
        (
            "Which of the two series is noisier?",
            "Which series has more noise relative to its signal?",
        ),
        _make_noisier,
        both(_rel_noise),
        _decide_noisier,
        pair=True,
        measurement="second-difference noise estimate over the spread, each series",
    ),
    Kind(
        "noise_percent",
        "noise",
        "numeric:percent",
        (),
        (
            "This series is a sine wave plus Gaussian noise. Roughly what is the noise standard "
            "deviation as a percentage of the sine wave's amplitude?",
            "Relative to the amplitude of its sinusoid, how large is the noise in this series "
            "(standard deviation, in percent)?",
        ),
        _make_pct,
        single(_measure_pct),
        lambda v, strict, o: decide_nearest(v, o, strict, 0.15),
        measurement="residual spread over the fitted amplitude, in percent",
    ),
    Kind(
        "predictability_halves_yn",
        "noise",
        "yes_no",
        YES_NO,
        (
            "Is the second half of this series more predictable than the first half?",
            "Can the next value be predicted from the previous one more accurately in the second "
            "half of the series than in the first?",
        ),
        _make_predictable,
        single(_measure_predictable),
        _decide_predictable,
        direct=False,
        measurement="squared lag-1 autocorrelation, second half minus first",
    ),
)
