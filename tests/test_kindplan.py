"""Composite planning per question kind: pooling the rows of kinds that share a concept word or a
specific option set (two phrasings of one question), and not pooling kinds that share only Yes / No."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tsevo.data import Question, QuestionView
from tsevo.library.primitives import CATALOG
from tsevo.roles.builtin import MeasurementPlanner
from tsevo.roles.builtin.kindplan import KindPlanSettings, plan_kinds, pooling_partners
from tsevo.roles.builtin.kinds import KindIndex, generic_shape
from tsevo.roles.protocols import Dossier, Example

YN = ("Yes", "No")


@dataclass(frozen=True)
class _Rec:
    correct: bool = False
    final_answer: int | None = None


def _view(qid: str, text: str, options: tuple[str, ...], y: np.ndarray, gold: int) -> QuestionView:
    q = Question(
        id=qid,
        source="test",
        task="mixed",
        question=text,
        options=options,
        series={"X": y},
        primary=("X",),
        gold=gold,
    )
    return QuestionView.of(q, "v" + qid)


def _ex(qid: str, text: str, rising: bool, seed: int, options: tuple[str, str] = YN) -> Example:
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, 96)
    y = (t if rising else -t) * 3.0 + 0.2 * rng.standard_normal(96)
    gold = 0 if rising else 1
    return Example(_view(qid, text, options, y, gold), gold, _Rec())


def _dossier() -> Dossier:
    a = "Is there an upward trend in X?"
    b = "Does X trend upward as time goes on?"
    c = "Is the spread of X constant over time?"  # same options, no shared concept word
    rows = [
        _ex("a1", a, True, 1),
        _ex("a2", a, False, 2),
        _ex("b1", b, True, 3),
        _ex("b2", b, False, 4),
        _ex("c1", c, True, 5),
        _ex("c2", c, False, 6),
    ]
    return Dossier("no_tool.c1", "no_tool", "mixed", "", tuple(rows), ())


def test_two_phrasings_pool_their_rows_into_one_rule_served_per_kind():
    # three kinds with two errors each: no kind holds more than half of the support (their Yes /
    # No rows are read by learned rules, which the default leaves to the agent)
    settings = KindPlanSettings(max_kind_share=0.5, yes_no_learned=True, min_rows=3)
    branches, report = plan_kinds(MeasurementPlanner(), _dossier(), settings)
    pooled = [e for e in report.values() if e.get("pooled_with")]
    assert len(pooled) == 2 and all(e["pooled_rows"] == 4 for e in pooled)
    assert len(branches) == 2  # one branch per phrasing, both from the pooled rows
    assert all(b.stats["source"].endswith("+pooled") for b in branches)
    assert branches[0].spec == branches[1].spec and branches[0].rule == branches[1].rule
    # the kind that shares only the option set is neither pooled nor served from two rows
    alone = [e for e in report.values() if "pooled_with" not in e]
    assert len(alone) == 1 and alone[0]["outcome"] == "too few rows"


def test_phrasings_that_share_no_word_pool_under_a_specific_option_set():
    # "climbing / sinking" names no position or direction the option rules know, and the two
    # wordings share no concept word: only the option set says they ask one question
    opts = ("climbing", "sinking")
    a = "Which description fits X best?"
    b = "How would you characterise the path of X?"
    rows = [_ex(f"a{i}", a, r, i, opts) for i, r in enumerate((True, False))]
    rows += [_ex(f"b{i}", b, r, 10 + i, opts) for i, r in enumerate((False, True))]
    d = Dossier("no_tool.c1", "no_tool", "mixed", "", tuple(rows), ())
    three = KindPlanSettings(max_kind_share=0.5, min_rows=3)
    branches, report = plan_kinds(MeasurementPlanner(), d, three)
    assert all(e.get("pooled_rows") == 4 for e in report.values())
    assert len(branches) == 2 and all(b.stats["source"].endswith("+pooled") for b in branches)
    assert branches[0].rule == branches[1].rule
    # the stage notebooks' planner pools only under options that name positions or directions
    off = dataclasses.replace(three, pool_option_sets=False)
    branches, report = plan_kinds(MeasurementPlanner(), d, off)
    assert branches == [] and {e["outcome"] for e in report.values()} == {"too few rows"}
    # the same wordings under Yes / No share nothing that says they ask one question
    yn = [_ex(e.question.id, e.question.question, bool(e.gold == 0), i) for i, e in enumerate(rows)]
    d = Dossier("no_tool.c1", "no_tool", "mixed", "", tuple(yn), ())
    branches, report = plan_kinds(MeasurementPlanner(), d, three)
    assert branches == [] and {e["outcome"] for e in report.values()} == {"too few rows"}


def test_without_pooling_two_rows_per_kind_are_too_few_at_three():
    branches, report = plan_kinds(
        MeasurementPlanner(),
        _dossier(),
        KindPlanSettings(pool=False, max_kind_share=0.5, min_rows=3),
    )
    assert branches == [] and {e["outcome"] for e in report.values()} == {"too few rows"}


def test_two_rows_of_its_own_are_searched_by_default():
    # the shipped floor is two rows. Leave-one-out on two rows of two answers fits each reading
    # on one row, so no threshold between the answers reads both; readings one row fits do:
    # directions by a sign here, while a learned Yes / No threshold clears no bar
    assert KindPlanSettings().min_rows == 2
    ud = ("upward", "downward")
    a, b = "Which way does X go?", "Is X climbing or sinking over time?"
    rows = [_ex("a1", a, True, 1, ud), _ex("a2", a, False, 2, ud)]
    rows += [_ex("b1", b, True, 3, ud), _ex("b2", b, False, 4, ud)]
    d = Dossier("no_tool.c1", "no_tool", "mixed", "", tuple(rows), ())
    alone = KindPlanSettings(pool=False, max_kind_share=0.5)
    branches, report = plan_kinds(MeasurementPlanner(), d, alone)
    assert [e["rows"] for e in report.values()] == [2, 2]
    assert len(branches) == 2 and {x.stats["source"] for x in branches} == {"options"}
    assert all(x.stats["cv_acc"] == 1.0 for x in branches)
    three = dataclasses.replace(alone, min_rows=3)
    branches, report = plan_kinds(MeasurementPlanner(), d, three)
    assert branches == [] and {e["outcome"] for e in report.values()} == {"too few rows"}
    learned = dataclasses.replace(alone, yes_no_learned=True)
    branches, report = plan_kinds(MeasurementPlanner(), _dossier(), learned)
    assert branches == [] and {e["outcome"] for e in report.values()} == {"no rule clears the bar"}
    # a kind of one row with no partner is still too few
    one = Dossier("no_tool.c1", "no_tool", "mixed", "", tuple(rows[1:]), ())
    _, report = plan_kinds(
        MeasurementPlanner(), one, dataclasses.replace(alone, max_kind_share=0.7)
    )
    assert sorted((e["rows"], e.get("outcome", "")[:6]) for e in report.values()) == [
        (1, "too fe"),
        (2, "branch"),
    ]


def test_a_dominant_kind_leaves_the_bucket_to_the_one_measurement_planner():
    d = _dossier()
    a = "Is there an upward trend in X?"
    more = (_ex("a3", a, True, 7), _ex("a4", a, False, 8), _ex("a5", a, True, 9))
    d = Dossier(d.bucket_id, d.side, d.label, d.criteria, d.support + more, ())
    assert plan_kinds(MeasurementPlanner(), d, KindPlanSettings()) == ([], {})  # 5 of 9 errors
    allow = KindPlanSettings(max_kind_share=0.6, yes_no_learned=True)
    branches, _ = plan_kinds(MeasurementPlanner(), d, allow)
    assert branches  # the same bucket is composite when the share allows it


def _numeric(qid: str, text: str, options: tuple[str, ...]) -> QuestionView:
    return _view(qid, text, options, np.zeros(32), 0)


def test_numbers_in_one_unit_are_one_option_set_and_other_units_another():
    a = "About how long does the flat stretch in X last?"
    b = "For what time did the sensor behind X report one value?"
    views = [
        _numeric("a1", a, ("6 seconds", "12 seconds")),
        _numeric("a2", a, ("18 seconds", "3 seconds")),
        _numeric("b1", b, ("30 seconds", "9 seconds")),
        _numeric("m1", a, ("6 minutes", "12 minutes")),  # a's words, another unit
        _numeric("c1", "How many bumps does X have?", ("3", "5")),
        _numeric("d1", "What count of bumps in X?", ("2", "4")),
    ]
    index = KindIndex(views)
    kind = {v.id: index.of[v.id] for v in views}
    assert index.by_id[kind["va1"]].shape == "numeric:seconds"
    assert kind["va1"] == kind["va2"] != kind["vm1"] and kind["vb1"] != kind["va1"]
    everyone = {k.id: [] for k in index.kinds}
    assert pooling_partners(index, kind["va1"], everyone) == [kind["vb1"]]
    assert pooling_partners(index, kind["vm1"], everyone) == []
    # bare numbers say nothing of the question: only a shared concept word would pool them
    assert pooling_partners(index, kind["vc1"], everyone) == []


def test_given_kinds_replace_the_recovered_ones():
    # the diagnostic seam of the ceiling bench: the two phrasings given as one kind of four rows
    d = _dossier()
    views = [e.question for e in d.support]
    group = {
        v.id: ("trend" if v.question.startswith(("Is there", "Does X")) else "spread")
        for v in views
    }
    index = KindIndex.from_groups(views, group)
    assert [k.id for k in index.kinds] == ["spread", "trend"]
    trend = index.by_id["trend"]
    assert len(trend.members) == 4 and {"upward", "trend"} <= trend.anchor
    assert "there" not in trend.anchor  # only the words both phrasings share
    assert index.of == {v.id: group[v.id] for v in views}

    def given(qs):
        return KindIndex.from_groups(qs, group)

    branches, report = plan_kinds(
        MeasurementPlanner(),
        d,
        KindPlanSettings(max_kind_share=0.7, yes_no_learned=True, min_rows=3),
        given,
    )
    assert set(report) == {"trend", "spread"}
    assert report["trend"]["rows"] == 4 and "pooled_with" not in report["trend"]
    # the lexicon's stems the kind's words hit: what its search looks at first
    assert {"trend", "upward"} <= set(report["trend"]["concepts"])
    assert report["trend"]["concepts"] == sorted(report["trend"]["concepts"])
    assert [b.kinds for b in branches] == [("trend",)]
    assert report["spread"]["outcome"] == "too few rows"


def test_options_that_only_name_a_series_make_no_pooling_partners():
    """ "Series 1 / Series 2" answers "which is noisier?" and "which has heavier tails?" alike."""
    s12 = ("Series 1", "Series 2")
    views = [
        _numeric("n1", "Which of the two series is noisier?", s12),
        _numeric("t1", "Which of the two series has heavier tails?", s12),
        _numeric("a1", "Which series contains the anomaly?", ("Series A", "Series B")),
        _numeric("b1", "In which series is the anomaly?", ("series a", "series b")),
    ]
    assert generic_shape("numeric:series") and generic_shape("label:series a|series b")
    assert generic_shape("label:no|yes") and generic_shape(
        "label:the first series|the second series"
    )
    assert not generic_shape("label:no series 1 has higher variance|yes they are the same")
    assert not generic_shape("numeric:seconds") and not generic_shape(
        "label:additive|multiplicative"
    )
    index = KindIndex(views)
    kind = {v.id: index.of[v.id] for v in views}
    everyone = {k.id: [] for k in index.kinds}
    assert pooling_partners(index, kind["vn1"], everyone) == []
    # a shared concept word still makes partners under such options
    assert pooling_partners(index, kind["va1"], everyone) == [kind["vb1"]]


def test_numbers_in_one_unit_pool_only_where_the_words_name_one_family_of_measurements():
    period = "Sampled every 10 minutes: what is the period of the cycle, in hours?"
    cycle = "Readings every 10 minutes. How many hours does one oscillation last?"
    shift = "Sampled every 10 minutes: when does the level shift occur, in hours?"
    views = [
        _numeric("p1", period, ("2 hours", "6 hours")),
        _numeric("c1", cycle, ("3 hours", "5 hours")),
        _numeric("s1", shift, ("12 hours", "20 hours")),
        _numeric("u1", "After how many hours does X stop?", ("1 hours", "4 hours")),  # no concept
    ]
    index = KindIndex(views)
    kind = {v.id: index.of[v.id] for v in views}
    assert len(set(kind.values())) == 4
    assert {index.by_id[k].shape for k in kind.values()} == {"numeric:hours"}
    everyone = {k.id: [] for k in index.kinds}
    # a cycle's period and its oscillation: words of one family (the spectral groups)
    assert kind["vc1"] in pooling_partners(index, kind["vp1"], everyone)
    # a period and a level shift share the unit, not the question
    assert kind["vs1"] not in pooling_partners(index, kind["vp1"], everyone)
    assert kind["vp1"] not in pooling_partners(index, kind["vs1"], everyone)
    # a kind whose words name no concept keeps the unit alone as its evidence
    assert set(pooling_partners(index, kind["vu1"], everyone)) == {
        kind["vp1"],
        kind["vc1"],
        kind["vs1"],
    }
    # with option sets making no partners, only a shared concept word does, as before
    assert pooling_partners(index, kind["vp1"], everyone, option_sets=False) == []


def test_a_benchmark_word_added_to_the_lexicon_pools_its_phrasings_and_guides_their_search():
    # "climb" is no word of the shipped lexicon: under bare Yes / No the two phrasings share
    # nothing the planner may pool on, and each kind's two rows are too few alone
    a = "Is X climbing?"
    b = "Does X keep climbing all the way?"
    rows = [_ex("a1", a, True, 1), _ex("a2", a, False, 2)]
    rows += [_ex("b1", b, True, 3), _ex("b2", b, False, 4)]
    rows += [_ex("c1", "Is the spread of X constant?", True, 5)]
    d = Dossier("no_tool.c1", "no_tool", "mixed", "", tuple(rows), ())
    base = KindPlanSettings(max_kind_share=0.5, yes_no_learned=True, min_rows=3)
    _, report = plan_kinds(MeasurementPlanner(), d, base)
    climbing = [e for e in report.values() if "climbing" in e["template"]]
    assert len(climbing) == 2
    assert all(e["concepts"] == [] and "pooled_with" not in e for e in climbing)
    assert all(e["outcome"] == "too few rows" for e in climbing)

    added = dataclasses.replace(base, concepts={"climb": ["trend"]})
    branches, report = plan_kinds(MeasurementPlanner(), d, added)
    climbing = [e for e in report.values() if "climbing" in e["template"]]
    assert all(e["concepts"] == ["climb"] and e["pooled_rows"] == 4 for e in climbing)
    # served from the pooled rows, found in the trend group the new word points at
    assert len(branches) == 2
    assert all(b.stats["source"] == "concepts+pooled" for b in branches)
    assert all(CATALOG[b.spec.primitive].group == "trend" for b in branches)
