"""One question kind's few-row search over the whole catalog, for the ``mixed`` tie benches.

Shared by :mod:`tests.bench.mixed_ties` and :mod:`tests.bench.mixed_ties_learned`: a planner whose
cache is filled from a seed's measured rows (:func:`tests.bench.mixed_ceiling.measure_seed`), rows
grouped by the generator's kind, and each kind's ranking, ties and whether the shipped search would
serve it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.bench.mixed_ceiling import _examples
from tsevo.data import QuestionView
from tsevo.roles.builtin.kindplan import KindPlanSettings
from tsevo.roles.builtin.kinds import KindIndex
from tsevo.roles.builtin.planner import MeasurementPlanner


@dataclass(frozen=True)
class KindTies:
    """One kind's few-row search over the whole catalog on a seed's train rows."""

    rows: list[dict[str, Any]]
    ex: list[Any]
    words: frozenset[str]
    ranked: list[Any]
    ties: list[Any]
    served: bool  # the search's bar met, and ``min_gain`` rows recovered beyond the base answerer


def full_planner(rows: Sequence[dict[str, Any]]) -> MeasurementPlanner:
    """A planner ranking the whole catalog, its cache filled from the measured rows (no recompute)."""
    planner = MeasurementPlanner()
    planner.top_k = planner.few_top_k = 1_000_000
    for r in rows:
        fp = QuestionView.of(r["q"], r["id"]).fingerprint
        for spec, vals in r["vals"].items():
            planner.cache.data[(spec, fp)] = vals
    return planner


def by_kind(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``rows`` grouped by the generator's kind, kinds in sorted order."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[r["kind"]].append(r)
    return dict(sorted(out.items()))


def ties_of(ranked: Sequence[Any]) -> list[Any]:
    """The measurements that cross-validate as well as the first (none if nothing is ranked)."""
    return [r for r in ranked if r.cv_acc >= ranked[0].cv_acc - 1e-9] if ranked else []


def kind_ties(
    planner: MeasurementPlanner, rows: list[dict[str, Any]], settings: KindPlanSettings
) -> KindTies | None:
    """The kind's search on its rows, with its words; ``None`` below ``min_rows`` or unranked."""
    ex = _examples(rows)
    if len(ex) < settings.min_rows:
        return None
    words = frozenset().union(*(k.anchor for k in KindIndex(e.question for e in ex).kinds))
    _, _, ranked = planner.rank(ex, few=True, words=words)
    if not ranked:
        return None
    top = ranked[0].cv_acc
    current = sum(bool(e.record.correct) for e in ex)
    served = top >= settings.bar and round(top * len(ex)) - current >= settings.min_gain
    return KindTies(rows, ex, words, ranked, ties_of(ranked), served)
