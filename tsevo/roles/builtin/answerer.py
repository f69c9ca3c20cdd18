"""The builtin base answerer: reads a global summary of each series and never computes more.

It is the analogue of an LLM that "reads a global summary and never computes": per series it sees
only length, mean, spread, range, the overall slope, the first and last values and the lag-1
autocorrelation, and scores options with a small fixed lexicon. It is deliberately weak, fixed and
never tuned; it never sees gold. Evolved tools supply the measurements it lacks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from tsevo.data import QuestionView

from ..protocols import BaseAnswer

__all__ = ["GlobalSummaryAnswerer", "SeriesSummary", "series_summary"]

_RISE = (
    "up",
    "upward",
    "upwards",
    "increase",
    "increasing",
    "increases",
    "increased",
    "rising",
    "rise",
    "rises",
    "higher",
    "grow",
    "growing",
    "grows",
    "positive",
    "ascending",
    "uptrend",
)
_FALL = (
    "down",
    "downward",
    "downwards",
    "decrease",
    "decreasing",
    "decreases",
    "decreased",
    "falling",
    "fall",
    "falls",
    "lower",
    "decline",
    "declining",
    "negative",
    "descending",
    "downtrend",
)
_FLAT = (
    "no",
    "none",
    "constant",
    "flat",
    "stable",
    "same",
    "similar",
    "unchanged",
    "steady",
    "neither",
    "stationary",
    "equal",
)
_NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_TOK = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class SeriesSummary:
    """The global summary the base answerer reads (nothing more).

    Attributes:
        n: Length.
        mean: Mean.
        std: Standard deviation.
        lo: Minimum.
        hi: Maximum.
        slope_z: Overall OLS slope times length, in units of the series' standard deviation.
        first: First value.
        last: Last value.
        acf1: Lag-1 autocorrelation.
    """

    n: int
    mean: float
    std: float
    lo: float
    hi: float
    slope_z: float
    first: float
    last: float
    acf1: float

    def values(self) -> tuple[float, ...]:
        """The numbers a reader could quote from the summary."""
        return (
            float(self.n),
            self.mean,
            self.std,
            self.lo,
            self.hi,
            self.hi - self.lo,
            self.first,
            self.last,
            self.acf1,
        )


def series_summary(y: np.ndarray) -> SeriesSummary:
    """Compute the global summary of one series."""
    y = np.asarray(y, dtype=float)
    n = int(y.size)
    mean = float(y.mean())
    std = float(y.std())
    if n >= 2 and std > 0:
        t = np.arange(n, dtype=float)
        slope = float(np.polyfit(t, y, 1)[0])
        slope_z = slope * n / std
        d = y - mean
        acf1 = float((d[1:] * d[:-1]).sum() / (d * d).sum())
    else:
        slope_z, acf1 = 0.0, 0.0
    return SeriesSummary(
        n, mean, std, float(y.min()), float(y.max()), slope_z, float(y[0]), float(y[-1]), acf1
    )


def _tokens(s: str) -> set[str]:
    return set(_TOK.findall(s.lower()))


class GlobalSummaryAnswerer:
    """Scores options from global summaries with a fixed lexicon; ties go to the first option.

    Per option: rising words score the primary's slope, falling words its negative, "no change"
    words score a small absolute slope; a number in the option scores closeness to the nearest
    summary value; an option naming a candidate series scores how similar that candidate's mean and
    spread are to the reference's; anything else scores zero.
    """

    name = "builtin-global-summary"

    def answer(self, q: QuestionView) -> BaseAnswer:
        """Return the base answer for one question."""
        sums = {k: series_summary(v) for k, v in q.series.items()}
        ref = sums[q.primary[0]]
        cand_names = {c.lower(): c for c in q.candidates}
        scores = []
        for opt in q.options:
            toks = _tokens(opt)
            s = 0.0
            named = [cand_names[t] for t in toks if t in cand_names]
            if len(named) == 1:
                c = sums[named[0]]
                scale = ref.std + 1e-9
                s += -(abs(c.mean - ref.mean) + abs(c.std - ref.std)) / scale
            elif toks & set(_RISE):
                s += math.tanh(ref.slope_z / 3.0)
            elif toks & set(_FALL):
                s += -math.tanh(ref.slope_z / 3.0)
            elif toks & set(_FLAT):
                s += 0.5 - math.tanh(abs(ref.slope_z) / 3.0)
            m = _NUM.search(opt)
            if m and not named:
                x = float(m.group())
                vals = [v for sm in sums.values() for v in sm.values()]
                gap = min(abs(x - v) for v in vals)
                s += -gap / (abs(x) + 1.0)
            scores.append(round(s, 12))
        best = int(np.argmax(scores))
        return BaseAnswer(
            best, f"global summary of {q.primary[0]}: slope {ref.slope_z:+.2f} sd", tuple(scores)
        )
