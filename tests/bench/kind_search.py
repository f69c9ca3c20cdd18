"""One question kind's few-row search over the whole catalog, for the ``mixed`` tie benches.

Shared by :mod:`tests.bench.mixed_ties` and :mod:`tests.bench.mixed_ties_learned`: a planner whose
cache is filled from a seed's measured rows (:func:`tests.bench.mixed_ceiling.measure_seed`), rows
grouped by the generator's kind, and each kind's ranking, ties and whether the shipped search would
serve it; and :func:`cropped_copy`, the end-cropped copies the ties bench's ``--crop`` reads.

Two searches: the whole catalog ranked (the default: every measurement that reads the rows as well
is a tie), or ``planned``: the kind planner's own search (:func:`~tsevo.roles.builtin.kindplan._search`:
the test verdicts and rules the options fix, then the catalog groups the kind's words point at, then
the whole catalog at the strict bar, with the planner's screen of 48), every tie of it kept. Neither
pools rows across kinds, as a round's planner does for most branches.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tests.bench.mixed_ceiling import _examples
from tsevo.data import QuestionView
from tsevo.data.synthetic import make_suite
from tsevo.fileio import atomic_write_text
from tsevo.roles.builtin.kindplan import KindPlanSettings, _search
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
    source: str = "catalog"  # planned: options, tests, concepts or catalog


#: A crop of ``f`` drops these multiples of ``f`` of each series' points from its end, a copy each.
CROP_STEPS = (0.5, 1.0, 2.0)


def cropped_copy(view: QuestionView, share: float) -> QuestionView:
    """A copy of ``view`` without the last ``share`` of every series' points (at least one kept).

    Only the end is cropped, so positions a question names by index keep their place; the copy has
    its own fingerprint, and the question's text, options and candidates.
    """
    if not 0.0 <= share < 1.0:
        raise ValueError(f"crop share {share}: need 0 <= share < 1")
    series = {
        name: np.asarray(y, dtype=float)[: max(1, len(y) - round(share * len(y)))]
        for name, y in view.series.items()
    }
    return replace(view, series=series, fingerprint=f"{view.fingerprint}~crop{share}")


def full_planner(rows: Sequence[dict[str, Any]], whole: bool = True) -> MeasurementPlanner:
    """A planner with its cache filled from the measured rows (no recompute).

    ``whole``: it ranks every measurement of the catalog; otherwise it keeps the planner's screen.
    """
    planner = MeasurementPlanner()
    if whole:
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


def search(
    planner: MeasurementPlanner,
    ex: Sequence[Any],
    words: frozenset[str],
    settings: KindPlanSettings,
    planned: bool = False,
) -> tuple[list[Any], str]:
    """The measurements a search ranks on ``ex``, best first, and the search's source.

    The whole catalog (source ``catalog``), or ``planned``: the kind planner's search, its chosen
    measurement and every tie it found (source ``options``, ``tests``, ``concepts`` or ``catalog``;
    nothing and ``""`` where it chooses none).
    """
    if not planned:
        return planner.rank(ex, few=True, words=words)[2], "catalog"
    found = _search(planner, ex, words, replace(settings, peers=1_000_000), {})
    return ([found[0], *found[2]], found[1]) if found is not None else ([], "")


def kind_ties(
    planner: MeasurementPlanner,
    rows: list[dict[str, Any]],
    settings: KindPlanSettings,
    planned: bool = False,
) -> KindTies | None:
    """The kind's search on its rows, with its words; ``None`` below ``min_rows`` or unranked.

    ``planned``: the kind planner's search, its chosen measurement and every tie it found as
    ``ranked`` (``None`` where it chooses none).
    """
    ex = _examples(rows)
    if len(ex) < settings.min_rows:
        return None
    words = frozenset().union(*(k.anchor for k in KindIndex(e.question for e in ex).kinds))
    ranked, source = search(planner, ex, words, settings, planned)
    if not ranked:
        return None
    top = ranked[0].cv_acc
    current = sum(bool(e.record.correct) for e in ex)
    served = top >= settings.bar and round(top * len(ex)) - current >= settings.min_gain
    return KindTies(rows, ex, words, ranked, ties_of(ranked), served, source)


def with_questions(seed: int, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (one seed's measurements), each with its question attached (``"q"``)."""
    questions = {q.id: q for q in make_suite("mixed", seed=seed)}
    for r in rows:
        r["q"] = questions[r["id"]]
    return rows


def write_doc(path: str, doc: dict[str, Any]) -> Path:
    """Write a diagnostic's JSON atomically (floats as such) and say where."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(doc, indent=1, default=float) + "\n")
    print(f"-> {out}")
    return out
