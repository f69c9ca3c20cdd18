"""Deterministic train/val/test assignment by group: a property of a suite, not of a question.

Every *group* (the sibling unit: a series, a template or a row) goes to one split, so siblings never
straddle splits. The assignment depends only on the seed, the group ids and the group sizes, so it
is reproducible.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from .question import Question

__all__ = ["SPLITS", "assign_splits"]

SPLITS = ("train", "val", "test")


def assign_splits(
    questions: Iterable[Question],
    fractions: Sequence[float] = (0.5, 0.25, 0.25),
    *,
    seed: int = 0,
    stratify: bool = True,
) -> dict[str, str]:
    """Map every question id to ``"train"``, ``"val"`` or ``"test"`` by its group.

    Groups are ordered by a seeded hash and cut so each split gets about its fraction of
    *questions*; with ``stratify`` this happens separately per task (a group's stratum is its
    most common task). See :meth:`tsevo.data.Suite.split`.

    Raises:
        ValueError: If ``fractions`` is not three finite non-negative numbers with a positive
            sum.
    """
    fr = np.asarray(fractions, dtype=float)
    if fr.shape != (3,) or not np.isfinite(fr).all() or (fr < 0).any() or fr.sum() <= 0:
        raise ValueError(
            f"fractions must be three finite non-negative numbers (train, val, test) with a "
            f"positive sum, got {fractions!r}"
        )
    fr = fr / fr.sum()
    groups: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        groups[q.group].append(q)
    strata: dict[str, list[str]] = defaultdict(list)
    for g, members in groups.items():
        key = Counter(q.task for q in members).most_common(1)[0][0] if stratify else ""
        strata[key].append(g)
    assign: dict[str, str] = {}
    for key in sorted(strata):
        glist = sorted(strata[key], key=lambda g: (_unit_hash(seed, g), g))
        cut = _cut([len(groups[g]) for g in glist], fr)
        for g, k in zip(glist, cut, strict=True):
            for q in groups[g]:
                assign[q.id] = SPLITS[k]
    return assign


def _unit_hash(seed: int, key: str) -> float:
    h = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _cut(sizes: Sequence[int], fr: npt.NDArray[np.float64]) -> list[int]:
    """Assign groups (in hash order, with these question counts) to split indices 0/1/2.

    Each group goes to the split whose cumulative-fraction interval holds the group's midpoint,
    so every split gets about its fraction of questions. Then, if a split with a positive
    fraction got no group although there are enough groups, the most populous split hands over
    its group nearest to it in hash order.
    """
    bounds = np.cumsum(fr) * sum(sizes)
    out: list[int] = []
    done = 0.0
    for n in sizes:
        out.append(min(int(np.searchsorted(bounds, done + n / 2.0, side="right")), 2))
        done += n
    positive = [k for k in range(3) if fr[k] > 0]
    if len(sizes) >= len(positive):
        for k in positive:
            if k in out:
                continue
            counts = Counter(out)
            donor = max((c for c in positive if counts[c] >= 2), key=lambda c: (counts[c], -c))
            members = [i for i, c in enumerate(out) if c == donor]
            out[members[-1] if k > donor else members[0]] = k
    return out
