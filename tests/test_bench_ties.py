"""The ties diagnostics: the cross-kind tie-break (tests.bench.mixed_ties._shared_ties), crops, and
the few-row search they share (tests.bench.kind_search.search)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from tests.bench.kind_search import cropped_copy, search, ties_of
from tests.bench.mixed_ties import _shared_ties
from tests.test_kindplan import _ex
from tsevo.data import Question, QuestionView
from tsevo.roles.builtin import MeasurementPlanner
from tsevo.roles.builtin.kindplan import KindPlanSettings, _search
from tsevo.roles.builtin.measure import Spec


def _ties(*keys: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(spec=Spec("summary"), key=k) for k in keys]


def test_a_tie_shared_with_related_kinds_scores_their_share_and_chance_overlap_relates_nothing():
    common = [f"m{i}" for i in range(8)]  # two kinds about one property tie on the same eight
    tied = {
        "up_yn": (_ties(*common, "fluke_a"), 700),
        "direction": (_ties(*common, "fluke_b"), 700),
        "other": (_ties("m0", *(f"x{i}" for i in range(8))), 700),  # one measurement by chance
    }
    shared = _shared_ties(tied)
    assert shared["up_yn"] == [1.0] * 8 + [0.0]  # related to "direction" only
    assert shared["direction"] == [1.0] * 8 + [0.0]
    assert shared["other"] == [0.0] * 9  # an overlap of one in 700 relates no kind


def test_related_kinds_need_an_overlap_beyond_chance_in_the_catalog_ranked():
    keys = [f"m{i}" for i in range(8)]
    few = {"a": (_ties(*keys), 10), "b": (_ties(*keys), 10)}  # 8 of 10 ranked: chance
    assert _shared_ties(few) == {"a": [0.0] * 8, "b": [0.0] * 8}


def test_a_cropped_copy_drops_only_the_end_of_every_series():
    q = Question(
        id="q", source="test", task="mixed", question="Which way does X trend?",
        options=("upward", "downward"), series={"X": np.arange(200.0), "Y": np.arange(40.0)},
        primary=("X",), covariates=("Y",), gold=0,
    )  # fmt: skip
    v = QuestionView.of(q, "v")
    c = cropped_copy(v, 0.05)
    assert np.array_equal(c.series["X"], np.arange(190.0))  # indices keep their place
    assert np.array_equal(c.series["Y"], np.arange(38.0)) and len(v.series["X"]) == 200
    assert c.fingerprint != v.fingerprint and (c.question, c.options) == (v.question, v.options)
    assert c.fingerprint == cropped_copy(v, 0.05).fingerprint != cropped_copy(v, 0.1).fingerprint
    assert len(cropped_copy(v, 0.999).series["Y"]) == 1  # never empty
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="crop share"):
            cropped_copy(v, bad)


def test_the_learned_benchs_left_out_ties_come_from_the_search_it_is_asked_for():
    text = "Is there an upward trend in X?"
    rows = [_ex(f"r{i}", text, i % 2 == 0, i) for i in range(5)]
    words = frozenset({"upward", "trend"})
    settings = KindPlanSettings()
    planner = MeasurementPlanner()
    whole = ties_of(search(planner, rows, words, settings, planned=False)[0])
    assert whole and whole == ties_of(planner.rank(rows, few=True, words=words)[2])
    planned = ties_of(search(planner, rows, words, settings, planned=True)[0])
    found = _search(planner, rows, words, replace(settings, peers=1_000_000), {})
    assert found is not None and planned == ties_of([found[0], *found[2]])
    # two searches, two tie sets (the planner's reads the rules the options fix first)
    assert planned and planned != whole
