"""How steadily a fitted rule reads its own train rows when their series get a little noise.

A kind offers a handful of train rows, and many measurements read them equally well: the one the
question asks for and flukes that fit a few rows by chance. They differ in how they read a slightly
different input with the same answer. :func:`noisy_copy` adds Gaussian noise at a fraction of a
series' own noise level (a robust sd of its first differences, over sqrt 2, so a trend or a level
shift does not count as noise); :func:`stability` is the share of such copies of the rows that a
rule reads right. A measurement of the asked-for property keeps its answer under noise half its
series' own; a fluke sitting near its rule's threshold flips. Only train rows are read, and each
row's copies are drawn from a generator seeded by its fingerprint, so a plan is reproducible and
does not depend on the order kinds are planned in.

Used by :mod:`.kindplan` to weight a branch's votes (``KindPlanSettings.stability_copies``); the
ties bench (``tests.bench.mixed_ties``) measures it as a tie-break.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from tsevo.data import QuestionView
from tsevo.library.reading import read_options

from ..protocols import Example
from .measure import SpecCache

__all__ = ["noise_level", "noisy_copy", "read_right", "stability"]


def noise_level(y: Any) -> float:
    """A series' noise level: robust sd of first differences / sqrt 2 (1% of its sd if flat).

    Missing values (NaN, inf) are left out, so a series with gaps still gets a finite level.
    """
    x = np.asarray(y, dtype=float)
    x = x[np.isfinite(x)]
    d = np.diff(x)
    level = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / np.sqrt(2) if d.size > 2 else 0.0
    if not level > 0:
        sd = float(np.std(x)) if x.size else 0.0
        level = 0.01 * (sd or 1.0)
    return level


def noisy_copy(view: QuestionView, rng: np.random.Generator, noise: float) -> QuestionView:
    """A copy of ``view`` whose series carry Gaussian noise at ``noise`` times their noise level.

    The copy has its own fingerprint (so measurement caches keep it apart); its question text,
    options and candidates are the original's.
    """
    series = {
        name: np.asarray(y, dtype=float) + noise * noise_level(y) * rng.standard_normal(len(y))
        for name, y in view.series.items()
    }
    tag = f"{view.fingerprint}~noise{rng.integers(1 << 62)}"
    return dataclasses.replace(view, series=series, fingerprint=tag)


def _rng(fingerprint: str) -> np.random.Generator:
    return np.random.default_rng(int(hashlib.sha256(fingerprint.encode()).hexdigest()[:12], 16))


def stability(
    cache: SpecCache,
    members: Sequence[Any],
    examples: Sequence[Example],
    *,
    noise: float = 0.5,
    copies: int = 3,
) -> list[float]:
    """Per member (anything with ``spec`` and ``rule``), the share of noisy copies read right.

    Args:
        cache: Measurement memo; the copies' values are stored in it under their own fingerprints.
        members: Fitted measurements, e.g. a branch's chosen one and its peers.
        examples: The labelled train rows they were fitted on.
        noise: Added noise in units of each series' noise level.
        copies: Noisy copies per row.

    Returns:
        One share in [0, 1] per member (1.0 each when there is nothing to read).
    """
    views = [
        (e.gold, noisy_copy(e.question, rng, noise))
        for e in examples
        if e.gold is not None
        for rng in [_rng(e.question.fingerprint)]
        for _ in range(copies)
    ]
    return read_right(cache, members, views)


def read_right(
    cache: SpecCache, members: Sequence[Any], views: Sequence[tuple[int, QuestionView]]
) -> list[float]:
    """Per member, the share of ``(gold, view)`` pairs its rule reads as ``gold`` (1.0 if none)."""
    if not views:
        return [1.0] * len(members)
    gold = [g for g, _ in views]
    options = [v.options for _, v in views]
    candidates = [v.candidates for _, v in views]
    questions = [v.question for _, v in views]
    out = []
    for m in members:
        values = [cache.get(m.spec, v) for _, v in views]
        read = read_options(m.rule, values, options, candidates, questions)
        out.append(sum(o == g for o, g in zip(read, gold, strict=True)) / len(views))
    return out
