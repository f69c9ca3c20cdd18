"""``extremum`` reading rules fitted from one reading of each row (the builtin planner's statistics).

An ``extremum`` rule names the candidate series whose score is the least or the greatest. Fitting
one on a handful of rows happens thousands of times per round (the screen, cross-validation, margin
tuning); every fit on a subset of the rows, and every reading of a fitted rule at any margin, is
indexed here from a single reading of each row's candidate scores (:class:`~.rules._Fits`
folds them for cross-validation and margin tuning).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, Protocol

import numpy as np

from tsevo.library.reading import extremum_reads
from tsevo.library.tool import ReadingRule

__all__ = ["MARGIN", "ExtremumTable"]

_TOK = re.compile(r"[a-z0-9_]+")

MARGIN = 0.02


class Row(Protocol):
    """What a fit row holds for an extremum fit (:class:`~.rules.Row` is one)."""

    @property
    def values(self) -> Mapping[str, Any] | None: ...
    @property
    def options(self) -> tuple[str, ...]: ...
    @property
    def candidates(self) -> tuple[str, ...]: ...
    @property
    def gold(self) -> int: ...
    @property
    def question(self) -> str: ...


Mode = Literal["min", "max"]
_PAIRS: tuple[tuple[Mode, Mode], ...] = (("min", "max"), ("max", "min"))


class ExtremumTable:
    """``extremum`` fits on rows, from one reading of each row's candidate scores.

    A plain extremum rule (no invert words) reads a row the same way at every fit: per mode, the
    option :func:`~tsevo.library.reading.extremum_reads` gives and the gap that decides where a
    margin abstains. Fits on folds (cross-validation, margin tuning) and their readings are indexed
    from that table instead of reading the rows again (the same rules and options, pinned by tests).
    """

    def __init__(self, rows: Sequence[Row], prefix: str) -> None:
        self.rows, self.prefix = rows, prefix
        n = len(rows)
        self.opt = np.full((2, n), -1, dtype=np.int64)
        self.gap = np.full((2, n), -np.inf)
        for i, r in enumerate(rows):
            lo, hi = extremum_reads(prefix, r.values, r.options, r.candidates)
            self.opt[:, i] = lo[0], hi[0]
            self.gap[:, i] = lo[1], hi[1]
        self.gold = np.fromiter((r.gold for r in rows), np.int64, n)
        self.toks = [set(_TOK.findall(r.question.lower())) for r in rows]

    def reads(self, rule: ReadingRule, idx: np.ndarray) -> np.ndarray:
        """The options ``rule`` (fitted by :meth:`fit`, any margin) reads on rows ``idx`` (-1: abstains)."""
        m = 0 if rule.mode == "min" else 1
        flip = np.zeros(len(idx), dtype=bool)
        if rule.invert_words:
            words = set(rule.invert_words)
            flip = np.fromiter((not words.isdisjoint(self.toks[i]) for i in idx), bool, len(idx))
        which = np.where(flip, 1 - m, m)
        opt, gap = self.opt[which, idx], self.gap[which, idx]
        return np.where(gap < rule.margin, -1, opt)

    def fit(self, idx: np.ndarray) -> ReadingRule:
        """The extremum rule fitted on rows ``idx``: min or max, and a question word flipping it."""
        gold = self.gold[idx]
        hit = {
            mode: (self.opt[m, idx] == gold) & ~(self.gap[m, idx] < MARGIN)
            for m, mode in enumerate(("min", "max"))
        }
        best: Mode = "min"
        best_acc = -1.0
        for mode, _ in _PAIRS:
            acc = float(hit[mode].mean()) if len(idx) else 0.0
            if acc > best_acc + 1e-12:
                best, best_acc = mode, acc
        plain = ReadingRule("extremum", prefix=self.prefix, mode=best, margin=MARGIN)
        n = len(idx)
        if best_acc >= 1.0 or n < 8:
            return plain
        # one question word may flip the extremum (e.g. "mirrors": the least correlated candidate)
        toks = [self.toks[i] for i in idx]
        df: dict[str, int] = {}
        for t in toks:
            for w in t:
                df[w] = df.get(w, 0) + 1
        words = sorted(
            w for w, c in df.items() if 0.1 * n <= c <= 0.9 * n and len(w) > 2 and w.isalpha()
        )
        found: tuple[float, Mode, str] | None = None
        for w in words:
            has = np.asarray([w in t for t in toks])
            for mode, other in _PAIRS:
                hits = float(np.sum(np.where(has, hit[other], hit[mode])))
                if found is None or hits > found[0]:
                    found = (hits, mode, w)
        if found is None or found[0] < best_acc * n + max(2.0, 0.05 * n):
            return plain
        _, mode, w = found
        return replace(plain, mode=mode, invert_words=(w,))
