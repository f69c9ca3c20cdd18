"""The errors diagnostic's phrasing table (tests.bench.mixed_errors._by_phrasing) and the bucket
spread of tests.bench.mixed_kinds."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from tests.bench.mixed_errors import PHRASINGS, _by_phrasing, served_everywhere
from tests.bench.mixed_kinds import bucket_spread


def _q(kind: str, template: int) -> SimpleNamespace:
    return SimpleNamespace(subtask=kind, metadata={"template": template})


def test_each_test_question_is_classed_by_what_train_held_of_its_own_phrasing():
    qs = {
        # train: kind a phrasing 0 has an error in support, phrasing 1 only right rows;
        # kind b phrasing 0 has its one error held out; kind c was never asked in train
        "t1": _q("a", 0),
        "t2": _q("a", 0),
        "t3": _q("a", 1),
        "t4": _q("b", 0),
        # test
        "x1": _q("a", 0),
        "x2": _q("a", 1),
        "x3": _q("a", 1),
        "x4": _q("b", 0),
        "x5": _q("c", 0),
        "x6": _q("a", 2),
    }
    train_ok = {"t1": False, "t2": True, "t3": True, "t4": False}
    role = {"t1": "support", "t4": "held_out"}
    test = pd.DataFrame(
        {
            "before_correct": [False, True, False, False, False, True],
            "after_correct": [True, False, False, False, False, True],
        },
        index=pd.Index(["x1", "x2", "x3", "x4", "x5", "x6"], name="qid"),
    )
    final = {
        q: {"steps": [{"decision": "replace"}] if q in ("x1", "x2") else []} for q in test.index
    }
    out = _by_phrasing(test, final, qs, train_ok, role)
    assert list(out) == list(PHRASINGS)
    assert out["support_errors"] == {"served_helped": 1}
    assert out["no_errors"] == {"served_harmed": 1, "unserved_wrong": 1}
    assert out["held_out_errors"] == {"unserved_wrong": 1}
    # another kind's phrasing, and an unseen phrasing of a known kind, are both unseen
    assert out["unseen"] == {"unserved_wrong": 1, "unserved_right": 1}


def test_serving_more_phrasings_is_projected_at_the_served_rates_and_the_bar_names_its_rates():
    table = {
        # served on phrasings with support errors: 6 of 10 wrong-before helped, 1 of 10 right harmed
        "support_errors": {
            "served_helped": 6,
            "served_wrong": 4,
            "served_harmed": 1,
            "served_right": 9,
            "unserved_wrong": 10,
            "unserved_right": 10,
        },
        "held_out_errors": {"unserved_wrong": 5, "unserved_right": 5},
        "no_errors": {"unserved_wrong": 20, "unserved_right": 30},
        "unseen": {"unserved_wrong": 0, "unserved_right": 0},
    }
    out = served_everywhere(table)
    assert (out["help_rate"], out["harm_rate"]) == (0.6, 0.1)
    assert out["now"] == {"gain_pp": 5.0, "harmed_pct": 1.0}  # 100 questions: +6 -1
    # with_errors: 15 more wrong-before at 0.6 (+9), 15 more right-before at 0.1 (-1.5)
    assert out["with_errors"] == {"gain_pp": 12.5, "harmed_pct": 2.5}
    # all: 20 + 30 more on top (+12, -3)
    assert out["all"] == {"gain_pp": 21.5, "harmed_pct": 5.5}
    # the bar over 55 right-before and 45 wrong-before: harm <= 2 of 55, help >= 27 of 45
    assert out["bar_all"] == {"harm_rate_at_most": round(2 / 55, 4), "help_rate_at_least": 0.6}


def test_bucket_spread_counts_a_kinds_errors_outside_its_main_bucket():
    buckets = [
        {"id": "c1", "members": ["a1", "a2", "b1"]},
        {"id": "c2", "members": ["a3", "c1", "c2"]},
    ]
    kind_of = {"a1": "a", "a2": "a", "a3": "a", "b1": "b", "c1": "c", "c2": "c"}
    out = bucket_spread(buckets, kind_of)
    assert out["a"] == {"errors_bucketed": 3, "buckets": 2, "outside_main_bucket": 1}
    assert out["b"] == {"errors_bucketed": 1, "buckets": 1, "outside_main_bucket": 0}
    assert out["c"] == {"errors_bucketed": 2, "buckets": 1, "outside_main_bucket": 0}
