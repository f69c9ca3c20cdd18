"""A naive global-summary solver: the analogue of a model that "reads a summary and never computes".

It sees each series only through a handful of global statistics (length, mean, standard deviation,
range, overall OLS slope, first and last value, lag-1 autocorrelation) and scores options with a
tiny lexicon:

* rising words (``upward``, ``higher``, ``growing``, ...) score the primary's normalized overall
  change; falling words score its negative;
* "no change" words (``no``, ``none``, ``constant``, ``flat``, ``same``, ...) score high when the
  overall change is small;
* a number in an option scores by its relative closeness to the nearest summary value;
* an option naming a candidate series (``Series A``) scores by how close that candidate's summary
  is to the reference's summary;
* otherwise every option scores 0 and the first option wins (ties go to the earliest option).

It never sees gold, the family, the subtask or any metadata.
"""

from __future__ import annotations

import re

import numpy as np

from tsevo.data.question import Question

from ._base import FloatArray, numbers

__all__ = ["global_summary", "naive_answer"]

RISING = frozenset(
    [
        "up",
        "upward",
        "upwards",
        "rise",
        "rising",
        "rises",
        "increase",
        "increasing",
        "increases",
        "higher",
        "grow",
        "growing",
        "grows",
        "ascending",
        "positive",
        "above",
        "gain",
        "gains",
    ]
)
FALLING = frozenset(
    [
        "down",
        "downward",
        "downwards",
        "fall",
        "falling",
        "falls",
        "decrease",
        "decreasing",
        "decreases",
        "lower",
        "shrink",
        "shrinking",
        "shrinks",
        "declining",
        "decline",
        "descending",
        "negative",
        "below",
    ]
)
NO_CHANGE = frozenset(
    ["no", "none", "constant", "flat", "same", "unchanged", "stable", "steady", "similar"]
)
_WORD = re.compile(r"[a-z]+")


def global_summary(y: FloatArray) -> dict[str, float]:
    """The global statistics the naive solver may read."""
    y = np.asarray(y, dtype=np.float64)
    n = y.size
    t = np.arange(n, dtype=np.float64)
    std = float(y.std())
    slope = float(np.polyfit(t, y, 1)[0]) if n > 1 else 0.0
    if n > 2 and std > 0:
        x = y - y.mean()
        ac1 = float((x[1:] * x[:-1]).sum() / (x * x).sum())
    else:
        ac1 = 0.0
    return {
        "length": float(n),
        "mean": float(y.mean()),
        "std": std,
        "range": float(y.max() - y.min()),
        "slope": slope,
        "first": float(y[0]),
        "last": float(y[-1]),
        "ac1": ac1,
    }


def _candidate_distance(a: dict[str, float], b: dict[str, float]) -> float:
    s = max(a["std"], 1e-12)
    return (
        abs(a["mean"] - b["mean"]) / s
        + abs(np.log(max(b["std"], 1e-12) / s))
        + abs(a["slope"] * a["length"] / s - b["slope"] * b["length"] / max(b["std"], 1e-12))
        + abs(a["ac1"] - b["ac1"])
    )


def naive_answer(q: Question) -> int:
    """Pick an option using only global summaries of the series and a small lexicon."""
    summaries = {name: global_summary(np.asarray(v)) for name, v in q.series.items()}
    main = summaries[q.primary[0]]
    change = main["slope"] * max(main["length"] - 1, 1) / max(main["std"], 1e-12)
    values = [v for s in summaries.values() for v in s.values()]
    scores: list[float] = []
    for opt in q.options:
        low = opt.lower()
        words = set(_WORD.findall(low))
        score = 0.0
        if words & RISING:
            score += change
        if words & FALLING:
            score -= change
        if words & NO_CHANGE:
            score += 1.0 - abs(change)
        named = [c for c in q.candidates if re.search(rf"\b{re.escape(c.lower())}\b", low)]
        if named:
            score -= _candidate_distance(main, summaries[named[0]])
        else:
            nums = numbers(opt)
            if nums:
                x = nums[0]
                score -= min(abs(x - v) / (abs(x) + abs(v) + 1e-12) for v in values)
        scores.append(score)
    return int(np.argmax(scores))
