"""What a question kind of the ``mixed`` preset is, the option sets kinds share, and reading rules.

A :class:`Kind` is one question template (one to three phrasings of the same question), one option
set and one generator. Its ``make`` draws latent parameters and builds the series (gold by
construction); its ``measure`` computes the identifying statistic from the finished series (and the
numbers the text states); its ``decide`` reads that statistic into an option. The generator keeps an
item only when ``decide(measure(series), strict=True)`` returns the latent label, i.e. when the
statistic lies outside the kind's dead band; the oracle calls ``decide(..., strict=False)``, which
agrees with the strict reading wherever that one answers, so the oracle scores 100% by
construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._base import FloatArray, ar_noise, option_number, pick

__all__ = [
    "ADD_MULT",
    "BME",
    "CATEGORIES",
    "CHANGE3",
    "DIRECTION",
    "SERIES12",
    "UP_DOWN",
    "YES_NO",
    "Item",
    "Kind",
    "MeasureFn",
    "Series",
    "Slots",
    "affine",
    "ar",
    "both",
    "decide_add_mult",
    "decide_change3",
    "decide_nearest",
    "decide_thirds",
    "length",
    "numeric_labels",
    "one",
    "pair",
    "single",
    "yes_no",
]

CATEGORIES = ("pattern", "anomaly", "similarity", "noise", "causality")

# option sets shared by several kinds (canonical order; questions shuffle them)
YES_NO = ("Yes", "No")
DIRECTION = ("upward", "downward", "no clear trend")
UP_DOWN = ("upward", "downward")
BME = ("Beginning", "Middle", "End")
SERIES12 = ("Series 1", "Series 2")
CHANGE3 = ("increases", "decreases", "stays about the same")
ADD_MULT = ("additive", "multiplicative")

Series = Mapping[str, FloatArray]
Slots = Mapping[str, Any]


@dataclass
class Item:
    """One candidate item drawn by a kind's ``make`` (before the dead-band check).

    Attributes:
        series: Named series (``ts``, or ``ts1`` and ``ts2``).
        label: The gold option text (by construction).
        latent: Latent parameters (metadata only).
        slots: Values written into the question text (the oracle may read them).
        labels: Per-item options (numeric kinds); None means the kind's fixed option set.
    """

    series: dict[str, FloatArray]
    label: str
    latent: dict[str, Any] = field(default_factory=dict)
    slots: dict[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] | None = None


MakeFn = Callable[[np.random.Generator, bool], Item | None]
MeasureFn = Callable[[Series, Slots], Any]
DecideFn = Callable[[Any, bool, Sequence[str]], str | None]


@dataclass(frozen=True)
class Kind:
    """One question kind: a template, an option set and a generator with its identifying statistic.

    Attributes:
        name: Kind name (``Question.subtask``; never in the id).
        category: One of :data:`CATEGORIES`.
        option_set: Name of the option set (kinds sharing one share the name); ``numeric:<unit>``
            for per-item numeric options.
        labels: The fixed option set (empty for numeric kinds).
        phrasings: One to three phrasings of the same question (``{slot}`` fields allowed).
        make: ``make(rng, hard) -> Item | None`` (None: redraw).
        measure: ``measure(series, slots)``: the identifying statistic of the finished series.
        decide: ``decide(statistic, strict, options) -> label | None`` (None only when strict).
        pair: Two primary series ``ts1`` and ``ts2`` (else one, ``ts``).
        direct: Whether one call of a catalog primitive with a fixed reading answers it (False: it
            needs two measurements combined, or a concept the catalog lacks).
        measurement: The statistic in words.
    """

    name: str
    category: str
    option_set: str
    labels: tuple[str, ...]
    phrasings: tuple[str, ...]
    make: MakeFn
    measure: MeasureFn
    decide: DecideFn
    pair: bool = False
    direct: bool = True
    measurement: str = ""


# ---------------------------------------------------------------------- series helpers
def length(rng: np.random.Generator) -> int:
    """Series length: 128 most of the time, else 160-300 (as in public TS-QA benchmarks)."""
    return 128 if rng.random() < 0.8 else int(pick(rng, (160, 200, 256, 300)))


def affine(rng: np.random.Generator, y: FloatArray, *, positive: bool = False) -> FloatArray:
    """A random offset and scale (so raw values say nothing); ``positive`` keeps the sign of y."""
    scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20.0))))
    offset = 0.0 if positive else float(rng.uniform(-50.0, 50.0))
    out: FloatArray = offset + scale * np.asarray(y, dtype=np.float64)
    return out


def ar(rng: np.random.Generator, n: int, phi: float) -> FloatArray:
    """Unit-variance AR(1) noise."""
    return ar_noise(rng, n, float(phi))


def one(y: FloatArray) -> dict[str, FloatArray]:
    """The single-series mapping."""
    return {"ts": y}


def pair(a: FloatArray, b: FloatArray) -> dict[str, FloatArray]:
    """The two-series mapping."""
    return {"ts1": a, "ts2": b}


def single(fn: Callable[[FloatArray], Any]) -> MeasureFn:
    """A measurement of the single series ``ts`` (the slots unused)."""
    return lambda s, _slots: fn(np.asarray(s["ts"]))


def both(fn: Callable[[FloatArray], Any]) -> MeasureFn:
    """A measurement of each of ``ts1`` and ``ts2``, as a pair."""
    return lambda s, _slots: (fn(np.asarray(s["ts1"])), fn(np.asarray(s["ts2"])))


def yes_no(flag: bool) -> str:
    """``"Yes"`` or ``"No"``."""
    return YES_NO[0] if flag else YES_NO[1]


# ---------------------------------------------------------------------- reading rules
def decide_add_mult(lr: float, strict: bool, _o: object = None) -> str | None:
    """Additive / multiplicative from the log ratio of late to early spread (dead band 0.15-0.4)."""
    if strict:
        return ADD_MULT[1] if lr >= 0.4 else ADD_MULT[0] if abs(lr) <= 0.15 else None
    return ADD_MULT[1] if lr > 0.27 else ADD_MULT[0]


def decide_change3(lr: float, strict: bool, _o: object = None) -> str | None:
    """Increases / decreases / stays the same from a log ratio (cut 0.3, dead band +-0.15)."""
    m = 0.15 if strict else 0.0
    if abs(lr) >= 0.3 + m:
        return CHANGE3[0] if lr > 0 else CHANGE3[1]
    if abs(lr) <= 0.3 - m:
        return CHANGE3[2]
    return None


def decide_thirds(pos: float, strict: bool, margin: float = 0.04) -> str | None:
    """Beginning / Middle / End from a position in [0, 1]; strict: away from the third's edges."""
    if strict and min(abs(pos - 1 / 3), abs(pos - 2 / 3)) < margin:
        return None
    return BME[min(max(int(pos * 3), 0), 2)]


def decide_nearest(
    value: float, options: Sequence[str], strict: bool, margin: float, *, log: bool = True
) -> str | None:
    """The numeric option nearest ``value`` (log or linear distance).

    Strict: the nearest must be nearer than the second-nearest by at least ``margin`` (in log
    units when ``log``).
    """
    vals = [option_number(o) for o in options]
    dists = []
    for v in vals:
        if v is None:
            dists.append(np.inf)
        elif log:
            dists.append(abs(np.log(max(abs(v), 1e-12)) - np.log(max(abs(value), 1e-12))))
        else:
            dists.append(abs(v - value))
    order = np.argsort(dists, kind="stable")
    if strict and len(order) > 1 and dists[order[1]] - dists[order[0]] < margin:
        return None
    return options[int(order[0])]


def numeric_labels(
    rng: np.random.Generator,
    truth: float,
    candidates: Sequence[float],
    k: int,
    min_ratio: float,
    fmt: Callable[[float], str],
    *,
    log: bool = True,
    prefer: Sequence[float] = (),
) -> tuple[tuple[str, ...], str] | None:
    """The gold option text and ``k`` distractors drawn from ``candidates``.

    The gold's rank among the options is drawn uniformly first (so "the middle value" or "the
    largest value" says nothing), then that many distractors are drawn below the truth and the
    rest above, each at least ``min_ratio`` apart (a ratio when ``log``, a difference otherwise)
    from the truth and from each other; ``prefer`` lists candidates tried before the others (trap
    values such as the raw measurement). Returns None when too few fit (the caller redraws).
    """
    below_n = int(rng.integers(k + 1))
    pool = [float(c) for c in candidates]
    first = [float(c) for c in prefer]
    order = first + [pool[int(i)] for i in rng.permutation(len(pool))]
    chosen = [truth]
    want = {True: below_n, False: k - below_n}
    for c in order:
        side = c < truth
        if want[side] == 0:
            continue
        if log:
            ok = c > 0 and all(abs(np.log(c) - np.log(x)) >= np.log(min_ratio) for x in chosen)
        else:
            ok = all(abs(c - x) >= min_ratio for x in chosen)
        if ok:
            chosen.append(c)
            want[side] -= 1
        if len(chosen) == k + 1:
            break
    if len(chosen) < k + 1:
        return None
    texts = tuple(fmt(c) for c in chosen)
    if len(set(texts)) != len(texts):
        return None
    return texts, texts[0]
