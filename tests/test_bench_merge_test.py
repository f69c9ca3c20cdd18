"""The merge-test diagnostic's AUC and mutual-best merges (tests.bench.mixed_merge_test)."""

from __future__ import annotations

import pytest

from tests.bench.mixed_merge_test import auc, mutual_best, summarize


def test_auc_is_the_mann_whitney_share_with_ties_counting_half():
    assert auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5], [0.5]) == 0.5
    # 3 positives, 2 negatives: pairs won 0.9>0.4, 0.9>0.2, 0.4>0.2, 0.4=0.4 (half), 0.1 none
    assert auc([0.9, 0.4, 0.1], [0.4, 0.2]) == pytest.approx(3.5 / 6)
    assert auc([], [0.1]) is None


def _p(a: str, b: str, score: float, true: bool = True, generic: bool = False) -> dict:
    return {"seed": 1, "a": a, "b": b, "score": score, "true": true, "generic": generic}


def test_a_pair_merges_only_when_it_is_each_kinds_best_partner_above_the_floor():
    pairs = [
        _p("a", "b", 0.8),
        _p("a", "c", 0.5, False),
        _p("c", "d", 0.3),
        _p("b", "d", 0.1, False),
    ]
    # a-b is the best of both; c's best is a-c, whose a prefers b; so c-d is d's best, not c's
    assert [(p["a"], p["b"]) for p in mutual_best(pairs, 0.0)] == [("a", "b")]
    assert mutual_best(pairs, 0.8) == []  # strictly above the floor
    # another seed's kinds of the same names are other kinds
    other = [{**p, "seed": 2} for p in pairs]
    assert len(mutual_best([*pairs, *other], 0.0)) == 2


def test_summary_counts_precision_and_recall_per_option_shape():
    pairs = [
        _p("a", "b", 0.9),
        _p("c", "d", 0.7, False),
        _p("e", "f", 0.2),  # a true pair scored low: found, since each is the other's best
        _p("g", "h", 0.6, True, generic=True),
        _p("g", "i", 0.8, False, generic=True),
    ]
    out = summarize(pairs)
    assert out["all"]["pairs"] == 5 and out["all"]["true_pairs"] == 3
    spec = out["specific"]["mutual_best"]
    assert spec["0.0"] == {"merges": 3, "true": 2, "precision": 0.667, "recall": 1.0}
    assert spec["0.4"] == {"merges": 2, "true": 1, "precision": 0.5, "recall": 0.5}
    generic = out["generic"]
    assert generic["auc"] == 0.0  # its one true pair scores below its one false pair
    assert generic["mutual_best"]["0.0"] == {
        "merges": 1,
        "true": 0,
        "precision": 0.0,
        "recall": 0.0,
    }
