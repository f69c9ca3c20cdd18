"""Reading rules the option wording implies (positions, directions, which of two series, and a Yes /
No question's test verdict), and the kind planner's use of them: a handful of rows picks the measurement, and phrasings
that share no word pool their rows."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from tsevo.data import Question, QuestionView
from tsevo.library.reading import apply_rule
from tsevo.roles.builtin import MeasurementPlanner, optsem
from tsevo.roles.builtin.kindplan import KindPlanSettings, plan_kinds
from tsevo.roles.builtin.measure import SpecCache
from tsevo.roles.builtin.optsem import (
    ALPHA,
    LOCATION_KEY,
    P_VALUE_KEY,
    option_semantics,
    semantic_rank,
    semantic_rule,
    significance_rule,
    yes_no,
)
from tsevo.roles.builtin.rules import Row, read_option, train_accuracy
from tsevo.roles.protocols import Dossier, Example

BME = ("Beginning", "Middle", "End")
YN = ("Yes", "No")


@pytest.mark.parametrize(
    ("options", "want"),
    [
        (("End", "Beginning", "Middle"), ("position", ("beginning", "middle", "end"))),
        (("at the end", "at the beginning"), ("position", ("at the beginning", "at the end"))),
        (
            ("upward", "no clear trend", "downward"),
            ("direction", ("downward", "no clear trend", "upward")),
        ),
        (
            ("stays about the same", "increases", "decreases"),
            ("direction", ("decreases", "stays about the same", "increases")),
        ),
        (("positive", "negative"), ("direction", ("negative", "positive"))),
        (("Yes", "No"), None),
        (("Middle", "End"), None),  # positions without the start of the series
        (
            ("the second series", "the first series"),
            ("series", ("the first series", "the second series")),
        ),
        (("Series B", "Series A"), ("series", ("series a", "series b"))),
        (
            ("Series 2 drives series 1", "Neither drives the other", "Series 1 drives series 2"),
            (
                "series",
                (
                    "series 1 drives series 2",
                    "neither drives the other",
                    "series 2 drives series 1",
                ),
            ),
        ),
        (("Series 1", "Series 2", "Series 3"), None),  # a third series
        (("Series 1", "Series 1 twice", "Series 2"), None),  # a series named twice
        (("upward", "flat"), None),  # a direction needs both signs
        (("Beginning", "Middle", "End", "Nowhere"), None),
        (("a level shift", "a sudden spike", "a flat segment"), None),
    ],
)
def test_option_semantics_names_positions_directions_and_series_only(options, want):
    assert option_semantics(options) == want


def _rows(values, golds, options=BME, key="argmax_frac"):
    return [
        Row(f"q{i}", {key: v}, options, (), g)
        for i, (v, g) in enumerate(zip(values, golds, strict=True))
    ]


def test_a_position_is_read_in_thirds_from_a_location_only():
    meaning = option_semantics(BME)
    rule = semantic_rule(meaning, _rows([0.1, 0.5, 0.9], [0, 1, 2]), "argmax_frac")
    assert rule is not None and rule.bins == pytest.approx((1 / 3, 2 / 3))
    assert rule.labels == ("beginning", "middle", "end")
    # nothing is fitted: rows that disagree with thirds do not move the cuts
    same = semantic_rule(meaning, _rows([0.3, 0.3, 0.3], [2, 2, 2]), "argmax_frac")
    assert same == rule
    assert semantic_rule(meaning, _rows([0.1, 0.5], [0, 1], key="strength"), "strength") is None
    assert semantic_rule(meaning, _rows([0.1, 1.5], [0, 2]), "argmax_frac") is None
    assert LOCATION_KEY.search("largest_loc_frac") and LOCATION_KEY.search("flat_start_frac")
    assert not LOCATION_KEY.search("noise_frac") and not LOCATION_KEY.search("longest_up_frac")


def test_a_direction_is_read_by_its_sign_with_a_fitted_no_change_band():
    opts = ("downward", "upward")
    two = semantic_rule(option_semantics(opts), _rows([-2.0, 3.0], [0, 1], opts, "slope"), "slope")
    assert two is not None and two.bins == (0.0,) and two.labels == ("downward", "upward")
    # a measurement that never changes sign, or a location, cannot name a direction
    assert semantic_rule(option_semantics(opts), _rows([1.0, 3.0], [0, 1], opts, "s"), "s") is None
    loc = _rows([-1.0, 0.5], [0, 1], opts, "first_break_frac")
    assert semantic_rule(option_semantics(opts), loc, "first_break_frac") is None
    opts3 = ("upward", "flat", "downward")
    rows = _rows([-3.0, -2.5, 0.2, -0.4, 2.0, 2.8], [2, 2, 1, 1, 0, 0], opts3, "slope")
    three = semantic_rule(option_semantics(opts3), rows, "slope")
    assert three is not None and three.labels == ("downward", "flat", "upward")
    lo, hi = three.bins
    assert lo == -hi and 0.4 < hi < 2.0  # the band separates flat from the two trends


def test_a_three_way_direction_reads_rows_that_hold_no_no_change_answer():
    # a handful of rows often holds only trends: the band lies between zero and the nearest row
    opts = ("downward", "no clear trend", "upward")
    meaning = option_semantics(opts)
    rows = _rows([-2.0, 3.0, 1.0], [0, 2, 2], opts, "slope")
    rule = semantic_rule(meaning, rows, "slope")
    assert rule is not None and rule.labels == ("downward", "no clear trend", "upward")
    lo, hi = rule.bins
    assert lo == -hi and hi == pytest.approx(0.5)  # halfway from zero to the smallest trend
    assert train_accuracy(rule, rows) == 1.0
    flat = _rows([0.1], [1], opts, "slope")[0]
    assert read_option(rule, flat) == 1  # a value near zero reads "no clear trend"


def test_a_directions_leave_one_out_holds_out_the_only_row_of_one_sign():
    # the measurement is signed on all rows; a fold without the one downward row is still read by
    # sign (a fold's own rows would call it unsigned, and every measurement would miss the row)
    opts = ("downward", "no clear trend", "upward")
    rows = _rows([-1.0, 1.0, 1.0], [0, 2, 2], opts, "direction")
    assert optsem._loo(option_semantics(opts), rows, "direction") == 1.0
    s12 = ("Series 1", "Series 2")
    pair = _rows([-1.0, 2.0, 0.5, 1.5], [0, 1, 1, 1], s12, "d")
    assert optsem._loo(option_semantics(s12), pair, "d") == 1.0
    # a measurement that never takes both signs is still no direction
    unsigned = _rows([0.5, 1.0, 2.0], [0, 2, 2], opts, "count")
    assert optsem._loo(option_semantics(opts), unsigned, "count") == 0.0


def test_which_series_is_read_by_a_sign_whose_side_is_fitted():
    s12 = ("Series 1", "Series 2")
    meaning = option_semantics(s12)
    # larger values (second minus first) mean series 2 on these rows ("the noisier one") ...
    noisier = semantic_rule(meaning, _rows([-1.0, 2.0, -0.5], [0, 1, 0], s12, "d"), "d")
    assert noisier is not None and noisier.bins == (0.0,)
    assert noisier.labels == ("series 1", "series 2")
    # ... and series 1 on these ("the smoother one"): the side is the one fitted bit
    smoother = semantic_rule(meaning, _rows([-1.0, 2.0, -0.5], [1, 0, 1], s12, "d"), "d")
    assert smoother is not None and smoother.labels == ("series 2", "series 1")
    # a measurement that never changes sign cannot tell the two apart
    assert semantic_rule(meaning, _rows([1.0, 2.0, 0.5], [0, 1, 0], s12, "d"), "d") is None
    # a third option that names neither series is the band around zero
    opts = ("Series 2 is higher", "About the same", "Series 1 is higher")
    rows = _rows([2.0, 3.0, 0.1, -0.2, -2.5, -1.8], [0, 0, 1, 1, 2, 2], opts, "d")
    three = semantic_rule(option_semantics(opts), rows, "d")
    assert three is not None and three.labels == (
        "series 1 is higher",
        "about the same",
        "series 2 is higher",
    )
    lo, hi = three.bins
    assert lo == -hi and 0.2 < hi < 1.8


def _pair(qid: str, text: str, noisier: int, seed: int, n: int = 160) -> Example:
    """Two series with one signal, series ``noisier + 1`` carrying four times the noise."""
    rng = np.random.default_rng(seed)
    base = np.sin(np.arange(n) / rng.uniform(4.0, 9.0)) * rng.uniform(1.0, 3.0)
    noise = [0.15, 0.15]
    noise[noisier] = 0.6
    ys = [base * rng.uniform(0.7, 1.3) + s * rng.standard_normal(n) for s in noise]
    return _two_series(qid, text, ("Series 1", "Series 2"), ys[0], ys[1], noisier, 1 - noisier)


def _two_series(qid: str, text: str, options, a, b, gold: int, answer: int) -> Example:
    """A train row on two primary series ``ts1``, ``ts2``; the agent answered ``answer``."""
    q = Question(
        id=qid,
        source="test",
        task="mixed",
        question=text,
        options=options,
        series={"ts1": a, "ts2": b},
        primary=("ts1", "ts2"),
        gold=gold,
    )
    return Example(QuestionView.of(q, "v" + qid), gold, _Rec(final_answer=answer))


def test_four_pairs_pick_a_comparison_that_reads_new_questions():
    text = "Which of the two series is noisier?"
    train = [_pair(f"t{i}", text, w, i) for i, w in enumerate((0, 1, 1, 0))]
    cache = SpecCache()
    ranked = semantic_rank(cache, train, words=frozenset({"noisier"}), prefer=frozenset({"noise"}))
    assert ranked and ranked[0].cv_acc == 1.0
    best = ranked[0]
    assert best.spec.mode in ("dual_diff", "pair") and best.rule.bins == (0.0,)
    new = [_pair(f"n{i}", text, i % 2, 100 + i) for i in range(10)]
    assert _hits(best, cache, new) >= 9
    # one series per question: "Series 1 / Series 2" names no series of these rows
    one = [_example(f"o{i}", text, ("Series 1", "Series 2"), np.zeros(64), i % 2) for i in range(3)]
    assert semantic_rank(cache, one) == []


@dataclass(frozen=True)
class _Rec:
    correct: bool = False
    final_answer: int | None = None


def _example(qid: str, text: str, options, y, gold: int, answer: int | None = None) -> Example:
    """A train row on one series ``X``; the agent answered ``answer``."""
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
    return Example(QuestionView.of(q, "v" + qid), gold, _Rec(final_answer=answer))


def _hits(best, cache: SpecCache, new, options=None) -> int:
    """How many ``new`` rows a ranked reading answers right (their own options unless given)."""
    return sum(
        apply_rule(
            best.rule, cache.get(best.spec, e.question), options or e.question.options
        ).option
        == e.gold
        for e in new
    )


def _spike(qid: str, text: str, where: int, seed: int, n: int = 128) -> Example:
    rng = np.random.default_rng(seed)
    y = np.sin(np.arange(n) / 5.0) * 0.3 + 0.3 * rng.standard_normal(n)
    at = int((where + rng.uniform(0.2, 0.8)) * n / 3)
    y[at] += 6.0
    return _example(qid, text, BME, y, where, (where + 1) % 3)


def test_four_rows_pick_a_location_that_reads_new_questions():
    text = "Where in X is the spike?"
    train = [_spike(f"t{i}", text, w, i) for i, w in enumerate((0, 1, 2, 1))]
    cache = SpecCache()
    ranked = semantic_rank(cache, train, words=frozenset({"spike"}))
    assert ranked and ranked[0].cv_acc == 1.0
    best = ranked[0]
    assert LOCATION_KEY.search(best.key)
    new = [_spike(f"n{i}", text, i % 3, 100 + i) for i in range(9)]
    assert _hits(best, cache, new, BME) >= 8
    # options that name nothing, or rows that mix option sets, give no ranking
    yes = _example("y", "Is there a spike?", YN, np.zeros(64), 0)
    assert semantic_rank(cache, [yes, yes]) == []
    assert semantic_rank(cache, [yes, *train]) == []


def _injected(qid: str, text: str, where: int, seed: int, n: int = 180) -> Example:
    """Series 2 a copy of a busy series 1 with a bump injected in third ``where`` (0, 1, 2)."""
    rng = np.random.default_rng(seed)
    a = np.sin(np.arange(n) / rng.uniform(3.0, 6.0)) * 2.0 + 0.4 * rng.standard_normal(n)
    b = a + 0.05 * rng.standard_normal(n)
    at = int((where + rng.uniform(0.25, 0.75)) * n / 3)
    b[at : at + 4] += rng.choice([-1.0, 1.0]) * 2.5
    return _two_series(qid, text, BME, a, b, where, (where + 1) % 3)


def test_four_pairs_locate_an_anomaly_injected_into_a_copy_by_their_residual():
    # neither series alone shows where the bump is (series 1 swings further every cycle); their
    # difference does, read in thirds with nothing fitted
    text = "Series 2 is a copy of series 1 into which an anomaly was injected. Where is it?"
    train = [_injected(f"t{i}", text, w, i) for i, w in enumerate((0, 1, 2, 1))]
    cache = SpecCache()
    ranked = semantic_rank(cache, train, words=frozenset({"anomaly", "copy"}))
    assert ranked and ranked[0].cv_acc == 1.0
    best = ranked[0]
    assert best.spec.mode == "resid" and LOCATION_KEY.search(best.key)
    new = [_injected(f"n{i}", text, i % 3, 100 + i) for i in range(12)]
    assert _hits(best, cache, new) >= 11


def test_phrasings_that_share_no_word_pool_under_options_that_name_positions():
    a = "Where in X is the spike?"
    b = "In which part of X does the outlier occur?"
    rows = [_spike(f"a{i}", a, w, i) for i, w in enumerate((0, 2))]
    rows += [_spike(f"b{i}", b, w, 10 + i) for i, w in enumerate((1, 0))]
    d = Dossier("no_tool.c1", "no_tool", "mixed", "", tuple(rows), ())
    branches, report = plan_kinds(MeasurementPlanner(), d, KindPlanSettings(max_kind_share=0.5))
    assert all(e.get("pooled_rows") == 4 for e in report.values())
    assert len(branches) == 2
    assert {b.stats["source"] for b in branches} == {"options+pooled"}
    assert branches[0].spec == branches[1].spec and LOCATION_KEY.search(branches[0].keys[0])
    # without the option rules the phrasings still pool (a specific option set); a rule is then
    # learned from the words' concept groups, judged on the two rows of the class the rows show
    # twice (a lone row of a class cannot be read by a fit on the others)
    off = KindPlanSettings(max_kind_share=0.5, option_rules=False)
    branches, report = plan_kinds(MeasurementPlanner(), d, off)
    assert all(e.get("pooled_rows") == 4 for e in report.values())
    assert {b.stats["source"] for b in branches} == {"concepts+pooled"}
    assert {(b.spec.primitive, b.keys[0]) for b in branches} == {("spikes", "max_third")}


def test_a_yes_no_question_reads_a_p_value_at_the_conventional_level():
    assert yes_no(("No", "Yes")) == ("no", "yes") and yes_no(("Yes", "Maybe")) is None
    # gold 0 = "Yes": significant p-values mean yes on these rows
    rows = _rows([0.001, 0.2, 0.03, 0.6], [0, 1, 0, 1], YN, "p")
    rule = significance_rule(rows, "p")
    assert rule is not None and rule.bins == (ALPHA,) and rule.labels == ("yes", "no")
    assert semantic_rule(("significance", ("no", "yes")), rows, "p") == rule
    # the side is the only fitted part: rows where a significant result means "no" flip it
    flipped = significance_rule(_rows([0.001, 0.2, 0.03], [1, 0, 1], YN, "mk_p"), "mk_p")
    assert flipped is not None and flipped.labels == ("no", "yes")
    # only keys named as p-values, reading as ones: an order or a statistic is not a verdict
    assert significance_rule(_rows([0.01, 0.2], [0, 1], YN, "stat"), "stat") is None
    assert significance_rule(_rows([0.0, 1.0, 1.0], [0, 1, 1], YN, "p"), "p") is None
    assert significance_rule(_rows([0.01, 1.7], [0, 1], YN, "ks_p"), "ks_p") is None
    assert P_VALUE_KEY.search("p_a_to_b") and P_VALUE_KEY.search("levene_p")
    assert not P_VALUE_KEY.search("peak") and not P_VALUE_KEY.search("top_period")


def _stationary(qid: str, text: str, yes: bool, seed: int, n: int = 160) -> Example:
    rng = np.random.default_rng(seed)
    e = rng.standard_normal(n)
    y = e if yes else np.cumsum(e)
    return _example(qid, text, YN, y, 0 if yes else 1, 1 if yes else 0)


def test_a_test_verdict_is_searched_only_among_the_tests_the_words_name():
    text = "Is X stationary?"
    train = [_stationary(f"t{i}", text, y, i) for i, y in enumerate((True, False, True, False))]
    cache = SpecCache()
    ranked = semantic_rank(
        cache, train, words=frozenset({"stationary"}), prefer=frozenset({"stationarity"})
    )
    assert ranked and ranked[0].cv_acc == 1.0
    best = ranked[0]
    assert best.spec.primitive in ("adf", "kpss", "variance_ratio", "integration_order")
    assert best.rule.bins == (ALPHA,)
    new = [_stationary(f"n{i}", text, i % 2 == 0, 100 + i) for i in range(10)]
    assert _hits(best, cache, new, YN) >= 9
    # no concept named: hundreds of tests would read four rows by chance, so none is searched
    assert semantic_rank(cache, train, words=frozenset({"stationary"})) == []


def test_the_kind_planner_serves_a_yes_no_kind_by_its_test_verdict():
    text = "Is X stationary?"
    rows = [_stationary(f"s{i}", text, i % 2 == 0, 20 + i) for i in range(5)]
    d = Dossier("no_tool.c1", "no_tool", "mixed", "", tuple(rows), ())
    branches, report = plan_kinds(MeasurementPlanner(), d, KindPlanSettings(max_kind_share=1.0))
    assert len(branches) == 1 and report[branches[0].kinds[0]]["outcome"].endswith("(tests)")
    assert branches[0].stats["source"] == "tests"
    assert branches[0].rule.bins == (ALPHA,)
    # without option rules the same kind is searched by learned rules only, which serve it only
    # where yes_no_learned is on (it is off by default: the kind is left to the agent)
    learned = KindPlanSettings(max_kind_share=1.0, option_rules=False, yes_no_learned=True)
    off = plan_kinds(MeasurementPlanner(), d, learned)[0]
    assert off and all(b.stats["source"] != "tests" for b in off)
    none, why = plan_kinds(MeasurementPlanner(), d, replace(learned, yes_no_learned=False))
    assert none == [] and "yes_no_learned off" in next(iter(why.values()))["outcome"]
    # with learned rules allowed, the test verdict still wins where it reads the rows as well
    both = plan_kinds(MeasurementPlanner(), d, replace(learned, option_rules=True))[0]
    assert [b.stats["source"] for b in both] == ["tests"]


def _in_hours(qid: str, text: str, y, right: float, wrong: tuple[float, ...]) -> Example:
    """A row whose first option is ``right`` hours, the others ``right`` times ``wrong``."""
    options = tuple(f"{v:.3g} hours" for v in (right, *(right * f for f in wrong)))
    return _example(qid, text, options, y, 0)


def _period(qid: str, seed: int, n: int = 192) -> Example:
    """A cycle of ``p`` samples, "sampled every m minutes", its period asked in hours."""
    rng = np.random.default_rng(seed)
    p, m = int(rng.choice([8, 12, 16, 24])), int(rng.choice([5, 10, 15, 20, 30]))
    y = np.sin(2 * np.pi * np.arange(n) / p) + 0.1 * rng.standard_normal(n)
    text = f"The series is sampled every {m} minutes. What is the period of its cycle, in hours?"
    return _in_hours(qid, text, y, p * m / 60, (0.5, 2.0, 3.0))


def test_a_quantity_in_the_questions_units_is_read_per_its_stated_interval():
    """No one affine map turns samples into hours when the interval differs by question; a
    measurement read per the question's first number does, with one fitted scale (1 / 60)."""
    train = [_period(f"t{i}", i) for i in range(5)]
    _, _, ranked = MeasurementPlanner().rank(train, few=True)
    assert ranked and ranked[0].cv_acc == 1.0 and ranked[0].spec.per == 0
    best, cache = ranked[0], SpecCache()
    new = [_period(f"n{i}", 100 + i) for i in range(10)]
    assert _hits(best, cache, new) >= 9


def _shift_time(qid: str, seed: int) -> Example:
    """A level shift at sample ``t`` of a series whose length varies, "sampled every m minutes",
    asked when it happened in hours: a location fraction times the length times m / 60."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.choice([128, 160, 200, 256, 300])), int(rng.choice([5, 10, 15, 20, 30]))
    t = int(rng.integers(n // 5, 4 * n // 5))
    y = np.where(np.arange(n) < t, 0.0, 3.0) + 0.2 * rng.standard_normal(n)
    text = f"The series is sampled every {m} minutes. When did its level shift, in hours?"
    return _in_hours(qid, text, y, t * m / 60, (0.5, 1.6, 2.5))


def test_a_position_in_the_questions_units_is_read_per_interval_and_length():
    """A location is a fraction of the series: with lengths and intervals differing by question,
    only the fraction times both reads the stated time, its one fitted scale 1 / 60."""
    train = [_shift_time(f"t{i}", i) for i in range(5)]
    _, _, ranked = MeasurementPlanner().rank(train, few=True)
    assert ranked and ranked[0].cv_acc == 1.0
    best, cache = ranked[0], SpecCache()
    assert best.spec.per == 0 and best.spec.per_len
    new = [_shift_time(f"n{i}", 100 + i) for i in range(10)]
    assert _hits(best, cache, new) >= 9
