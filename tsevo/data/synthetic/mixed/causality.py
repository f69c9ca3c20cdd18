"""Causality between two series: lead and lag, Granger causality, direction, delay, feedback.

The delay is asked in seconds of series sampled every stated number of seconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._base import FloatArray, pick
from ..lag import best_lag
from ._kind import (
    SERIES12,
    YES_NO,
    Item,
    Kind,
    Series,
    Slots,
    affine,
    ar,
    decide_nearest,
    length,
    numeric_labels,
    pair,
    yes_no,
)
from ._stats import granger_f

__all__ = ["KINDS"]

DIRECTIONS = (
    "Series 1 drives series 2",
    "Series 2 drives series 1",
    "Neither drives the other",
)
_F_YES, _F_NO, _F_CUT = 10.0, 2.5, 5.0


def _ab(s: Series) -> tuple[FloatArray, FloatArray]:
    return np.asarray(s["ts1"]), np.asarray(s["ts2"])


def _coupled(
    rng: np.random.Generator, n: int, b12: float, b21: float, lag: int
) -> tuple[FloatArray, FloatArray]:
    """Two AR(1) series; ``b12`` is the effect of series 1 on series 2 ``lag`` steps later."""
    m = n + 100
    e1, e2 = rng.standard_normal(m), rng.standard_normal(m)
    p1, p2 = rng.uniform(0.1, 0.5), rng.uniform(0.1, 0.5)
    x1, x2 = np.zeros(m), np.zeros(m)
    for t in range(1, m):
        x1[t] = p1 * x1[t - 1] + e1[t] + (b21 * x2[t - lag] if t >= lag else 0.0)
        x2[t] = p2 * x2[t - 1] + e2[t] + (b12 * x1[t - lag] if t >= lag else 0.0)
    return x1[100:], x2[100:]


def _strength(rng: np.random.Generator, hard: bool) -> float:
    return float(rng.uniform(0.6, 0.8) if hard else rng.uniform(0.8, 1.2))


def _scenario_pair(
    rng: np.random.Generator, hard: bool, scenario: str
) -> dict[str, FloatArray] | None:
    n = length(rng)
    lag = int(rng.integers(1, 4))
    b = _strength(rng, hard)
    # feedback: weaker effects of opposite signs, so the loop oscillates instead of exploding
    fb = (rng.uniform(0.65, 0.75), -rng.uniform(0.65, 0.75))
    b12, b21 = {"12": (b, 0.0), "21": (0.0, b), "both": fb}.get(scenario, (0.0, 0.0))
    x1, x2 = _coupled(rng, n, b12, b21, lag)
    if max(float(x1.std()), float(x2.std())) > 50:
        return None
    return pair(affine(rng, x1), affine(rng, x2))


def _make_granger(rng: np.random.Generator, hard: bool, forward: bool) -> Item | None:
    scenario = pick(rng, ("12", "12", "21", "none") if forward else ("21", "21", "12", "none"))
    s = _scenario_pair(rng, hard, scenario)
    if s is None:
        return None
    return Item(s, yes_no(scenario == ("12" if forward else "21")), {"scenario": scenario})


def _decide_f(f: float, strict: bool, _o: object) -> str | None:
    if strict:
        return "Yes" if f >= _F_YES else "No" if f <= _F_NO else None
    return yes_no(f > _F_CUT)


def _make_direction(rng: np.random.Generator, hard: bool) -> Item | None:
    label = pick(rng, DIRECTIONS)
    scenario = {DIRECTIONS[0]: "12", DIRECTIONS[1]: "21"}.get(label, "none")
    s = _scenario_pair(rng, hard, scenario)
    return None if s is None else Item(s, label, {"scenario": scenario})


def _both_f(s: Series, _slots: Slots) -> tuple[float, float]:
    a, b = _ab(s)
    return granger_f(a, b), granger_f(b, a)


def _decide_direction(f: tuple[float, float], strict: bool, _o: object) -> str | None:
    f12, f21 = f
    if strict:
        if max(f12, f21) <= _F_NO:
            return DIRECTIONS[2]
        if min(f12, f21) > _F_NO or max(f12, f21) < _F_YES:
            return None
    elif max(f12, f21) < _F_CUT:
        return DIRECTIONS[2]
    return DIRECTIONS[0] if f12 > f21 else DIRECTIONS[1]


def _make_feedback(rng: np.random.Generator, hard: bool) -> Item | None:
    scenario = pick(rng, ("both", "12", "21"))
    s = _scenario_pair(rng, hard, scenario)
    return None if s is None else Item(s, yes_no(scenario == "both"), {"scenario": scenario})


def _lead_pair(rng: np.random.Generator, n: int, lag: int) -> tuple[FloatArray, FloatArray]:
    base = ar(rng, n + lag, rng.uniform(0.5, 0.8))
    lead, follow = base[lag:], base[:n] + rng.uniform(0.1, 0.4) * rng.standard_normal(n)
    return lead, follow


def _make_lead(rng: np.random.Generator, hard: bool) -> Item:
    n = length(rng)
    label = pick(rng, SERIES12)
    lag = int(rng.integers(2, 5) if hard else rng.integers(4, 13))
    lead, follow = _lead_pair(rng, n, lag)
    a, b = (lead, follow) if label == SERIES12[0] else (follow, lead)
    return Item(pair(affine(rng, a), affine(rng, b)), label, {"lag": lag})


def _measure_lead(s: Series, _slots: Slots) -> tuple[int, float]:
    return best_lag(*_ab(s), range(-20, 21))


def _decide_lead(f: tuple[int, float], strict: bool, _o: object) -> str | None:
    lag, margin = f
    if strict and (abs(lag) < 2 or margin < 0.15):
        return None
    return SERIES12[0] if lag > 0 else SERIES12[1]


def _make_delay(rng: np.random.Generator, hard: bool) -> Item | None:
    n = length(rng)
    dt = int(pick(rng, (2, 5, 10, 30)))
    lag = int(rng.integers(2, 26))
    lead, follow = _lead_pair(rng, n, lag)
    cands = [k * dt for k in range(1, 41)]
    got = numeric_labels(
        rng, lag * dt, cands, int(pick(rng, (2, 3))), 1.4, lambda v: f"{v:g} seconds"
    )
    if got is None:
        return None
    labels, label = got
    return Item(
        pair(affine(rng, lead), affine(rng, follow)),
        label,
        {"lag": lag, "dt": dt},
        {"dt": dt},
        labels,
    )


def _measure_delay(s: Series, slots: Slots) -> tuple[float, float]:
    lag, margin = best_lag(*_ab(s), range(0, 41))
    return float(lag * slots["dt"]), margin


def _decide_delay(f: tuple[float, float], strict: bool, options: Sequence[str]) -> str | None:
    if strict and f[1] < 0.15:
        return None
    return decide_nearest(f[0], options, strict, 0.1)


KINDS: tuple[Kind, ...] = (
    Kind(
        "lead_series",
        "causality",
        "series12",
        SERIES12,
        (
            "Which of the two series leads the other (moves first)?",
            "One series follows the other with a delay. Which series moves first?",
        ),
        _make_lead,
        _measure_lead,
        _decide_lead,
        pair=True,
        measurement="sign of the best cross-correlation lag of first differences",
    ),
    Kind(
        "granger_12_yn",
        "causality",
        "yes_no",
        YES_NO,
        (
            "Does series 1 Granger-cause series 2?",
            "Do past values of series 1 help predict series 2 beyond series 2's own past?",
        ),
        lambda rng, hard: _make_granger(rng, hard, True),
        lambda s, _sl: granger_f(*_ab(s)),
        _decide_f,
        pair=True,
        measurement="Granger F statistic, series 1 to series 2 (4 lags)",
    ),
    Kind(
        "granger_21_yn",
        "causality",
        "yes_no",
        YES_NO,
        (
            "Does series 2 Granger-cause series 1?",
            "Is series 1 predictable from the past of series 2, beyond its own past?",
        ),
        lambda rng, hard: _make_granger(rng, hard, False),
        lambda s, _sl: granger_f(_ab(s)[1], _ab(s)[0]),
        _decide_f,
        pair=True,
        measurement="Granger F statistic, series 2 to series 1 (4 lags)",
    ),
    Kind(
        "causal_direction",
        "causality",
        "causal_direction",
        DIRECTIONS,
        (
            "What is the causal relationship between the two series?",
            "In the Granger sense, which series drives the other, if any?",
        ),
        _make_direction,
        _both_f,
        _decide_direction,
        pair=True,
        direct=False,
        measurement="Granger F statistics in both directions",
    ),
    Kind(
        "delay_seconds",
        "causality",
        "numeric:seconds",
        (),
        (
            "Both series are sampled every {dt} seconds, and series 2 follows series 1 with a "
            "delay. About how long is the delay, in seconds?",
            "With a sample every {dt} seconds, by how many seconds does series 2 lag behind "
            "series 1?",
        ),
        _make_delay,
        _measure_delay,
        _decide_delay,
        pair=True,
        measurement="best cross-correlation lag of first differences times the sampling interval",
    ),
    Kind(
        "feedback_yn",
        "causality",
        "yes_no",
        YES_NO,
        (
            "Do the two series influence each other in both directions (feedback)?",
            "Is there a two-way (bidirectional) Granger-causal relationship between the series?",
        ),
        _make_feedback,
        lambda s, sl: min(_both_f(s, sl)),
        _decide_f,
        pair=True,
        direct=False,
        measurement="the smaller of the Granger F statistics in the two directions",
    ),
)
