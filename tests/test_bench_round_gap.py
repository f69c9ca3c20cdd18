"""The round-gap diagnostic's scoring and its copy of the round's reconcile rule (tests.bench.mixed_round_gap)."""

from __future__ import annotations

from typing import Any

from tests.bench.mixed_round_gap import reconciled, score, unserved
from tsevo.library.tool import ReadingRule
from tsevo.roles.builtin.composite import Branch
from tsevo.roles.builtin.measure import Spec

TREND = Spec("trend")
OPTIONS = ("downward", "upward")


def _branch(word: str) -> Branch:
    rule = ReadingRule("label", key="slope", bins=(0.0,), labels=OPTIONS)
    return Branch((word,), (word,), (), TREND, ("slope",), rule, {"cv_acc": 1.0})


def _row(word: str, slope: float, gold: int, base: int) -> dict[str, Any]:
    return {
        "text": f"Which way does the {word} go?",
        "kind": word,
        "options": OPTIONS,
        "cands": (),
        "vals": {TREND: {"slope": slope}},
        "gold": gold,
        "base": base,
    }


def test_reconcile_drops_branches_that_harmed_validation_as_often_as_they_helped():
    helps, harms, ties, idle = (_branch(w) for w in ("alpha", "beta", "gamma", "delta"))
    val = [
        _row("alpha", 1.0, gold=1, base=0),  # helped
        _row("beta", 1.0, gold=0, base=0),  # harmed: the base answer was right
        _row("gamma", 1.0, gold=1, base=0),  # helped once ...
        _row("gamma", 1.0, gold=0, base=0),  # ... and harmed once
        _row("delta", 1.0, gold=1, base=1),  # the same answer: neither
        _row("omega", -1.0, gold=0, base=1),  # no branch holds its words
    ]
    kept = reconciled([helps, harms, ties, idle], val)
    assert [b.kinds for b in kept] == [("alpha",), ("delta",)]


def test_score_counts_gain_and_harm_over_the_base_answer_in_pp():
    rows = [
        _row("alpha", 1.0, gold=1, base=0),  # +1
        _row("alpha", 1.0, gold=0, base=0),  # -1, harmed
        _row("alpha", -1.0, gold=0, base=0),  # right before and after
        _row("omega", 1.0, gold=1, base=0),  # not dispatched: stays wrong
    ]
    assert score([_branch("alpha")], rows) == (0.0, 25.0)
    assert score([], rows) == (0.0, 0.0)


def test_score_with_given_kinds_sends_each_question_to_its_own_kinds_branch():
    # a branch of kind "alpha" whose words the question lacks: only the given kind reaches it
    alpha = Branch(("alpha",), ("never",), (), TREND, ("slope",), _branch("alpha").rule)
    rows = [_row("alpha", 1.0, gold=1, base=0), _row("omega", 1.0, gold=1, base=0)]
    assert score([alpha], rows) == (0.0, 0.0)
    assert score([alpha], rows, given=True) == (50.0, 0.0)


def test_unserved_keeps_the_recovered_branches_of_kinds_the_given_plan_left_without_one():
    given = [_branch("alpha")]  # true kind "alpha" served on the given kinds
    k1, k2, k3 = (
        Branch((k,), (w,), (), TREND, ("slope",), _branch(w).rule)
        for k, w in (("k1", "alpha"), ("k2", "beta"), ("k3", "gamma"))
    )
    # recovered kinds: k1 and k2 are phrasings of alpha and beta, k3 of gamma
    kinds = [
        ("k1", ("alpha",), (), "alpha"),
        ("k2", ("beta",), (), "beta"),
        ("k3", ("gamma",), (), "gamma"),
    ]
    assert [b.kinds for b in unserved(given, [k1, k2, k3], kinds)] == [("k2",), ("k3",)]
    assert unserved([], [k1], kinds) == [k1]
