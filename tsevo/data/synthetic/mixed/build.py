"""Building the ``mixed`` preset: kind counts, items, opaque ids, splits per kind, and the oracle."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from tsevo.data.question import Question
from tsevo.data.suite import Suite

from .._base import Phrasebook, clean, family_key, option_index, resample
from ._kind import Item, Kind
from .kinds import KINDS

__all__ = [
    "ID_PREFIX",
    "PER_KIND",
    "PRESET",
    "TASK",
    "kind_counts",
    "make_mixed_suite",
    "mixed_oracle",
]

PRESET = "mixed"
TASK = "mixed"
ID_PREFIX = "mix-"
#: Questions per kind (inclusive range); 3-6 of them go to train.
PER_KIND = (6, 12)
BOOK = Phrasebook(PRESET, TASK, {k.name: k.phrasings for k in KINDS.values()})


def _seq(seed: int, *keys: str | int) -> np.random.SeedSequence:
    return np.random.SeedSequence(
        [int(seed)] + [family_key(k) if isinstance(k, str) else int(k) for k in keys]
    )


def kind_counts(seed: int) -> dict[str, int]:
    """How many questions each kind gets under ``seed`` (between ``PER_KIND`` bounds)."""
    lo, hi = PER_KIND
    return {
        name: int(np.random.default_rng(_seq(seed, "mixed-count", name)).integers(lo, hi + 1))
        for name in KINDS
    }


def _split_counts(n: int, odd: bool) -> tuple[int, int, int]:
    train = max(3, min(6, n // 2))
    rest = n - train
    val = rest // 2 + (rest % 2 if odd else 0)
    return train, val, rest - val


def _opaque_id(seed: int, name: str, index: int) -> str:
    h = hashlib.sha256(f"tsevo-mixed\x00{seed}\x00{name}\x00{index}".encode()).hexdigest()
    return ID_PREFIX + h[:12]


def _question(kind: Kind, rng: np.random.Generator, index: int, qid: str) -> Question:
    hard = index % 2 == 1

    def attempt() -> tuple[Item, tuple[str, ...], object] | None:
        item = kind.make(rng, hard)
        if item is None:
            return None
        item.series = {k: clean(v) for k, v in item.series.items()}
        labels = item.labels or kind.labels
        stat = kind.measure(item.series, item.slots)
        if kind.decide(stat, True, labels) != item.label:
            return None
        return item, labels, stat

    (item, labels, stat), tries = resample(attempt, f"mixed/{kind.name}")
    q = BOOK.labelled(
        rng,
        index,
        "hard" if hard else "easy",
        kind.name,
        labels,
        item.label,
        item.series,
        {**item.latent, "slots": item.slots, "statistic": stat},
        tries,
        slots=item.slots,
        primary=tuple(item.series),
    )
    meta = {
        **q.metadata,
        "kind": kind.name,
        "category": kind.category,
        "option_set": kind.option_set,
        "direct": kind.direct,
    }
    return dataclasses.replace(q, id=qid, group=qid, metadata=meta)


def make_mixed_suite(seed: int = 0) -> Suite:
    """The ``mixed`` preset: one task label, opaque ids, 6-12 questions per kind, split per kind.

    Item ``i`` of kind ``k`` is drawn from its own generator seeded by ``(seed, k, i)``. Each
    kind's questions are split 3-6 train and the rest halved between val and test, so every kind
    has a few training questions (the regime of public TS-QA benchmarks).

    Returns:
        A :class:`~tsevo.data.Suite` named ``synthetic-mixed-s<seed>`` with splits assigned.
    """
    questions: list[Question] = []
    splits: dict[str, str] = {}
    for j, (name, n) in enumerate(kind_counts(seed).items()):
        kind = KINDS[name]
        ids = []
        for i in range(n):
            qid = _opaque_id(seed, name, i)
            rng = np.random.default_rng(_seq(seed, "mixed-item", name, i))
            questions.append(_question(kind, rng, i, qid))
            ids.append(qid)
        order = np.random.default_rng(_seq(seed, "mixed-split", name)).permutation(n)
        tr, va, _te = _split_counts(n, j % 2 == 1)
        for rank, i in enumerate(order):
            splits[ids[int(i)]] = "train" if rank < tr else "val" if rank < tr + va else "test"
    questions.sort(key=lambda q: q.id)
    return Suite(f"synthetic-{PRESET}-s{seed}", questions, splits)


def mixed_oracle(q: Question) -> int:
    """The kind's solver: its statistic on the series (and the stated numbers), read strictly."""
    kind = KINDS[str(q.metadata["kind"])]
    slots = dict(q.metadata.get("latent", {}).get("slots", {}))
    label = kind.decide(kind.measure(q.series, slots), False, q.options)
    return option_index(q, label or "")
