"""``tests.bench.mixed_relax``: a short vote's plurality, and the classes of branches by validation."""

from __future__ import annotations

from tests.bench.mixed_relax import branch_classes, plurality
from tsevo.library.reading import apply_rule
from tsevo.library.tool import ReadingRule

OPTIONS = ("No", "Yes")


def _yes_above(key: str) -> ReadingRule:
    return ReadingRule("label", key, (0.5,), ("no", "yes"))


def _vote(weights: tuple[float, ...] = ()) -> ReadingRule:
    members = tuple(_yes_above(k) for k in ("a", "b", "c", "d"))
    return ReadingRule("consensus", branches=members, quorum=1.0, weights=weights)


def test_a_short_vote_is_answered_by_its_plurality_only_with_its_own_measurement_in_it():
    rule = _vote()
    three_yes = {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.1}
    # the quorum (all four) is not met: the branch itself abstains
    assert apply_rule(rule, three_yes, OPTIONS).option is None
    assert plurality(rule, three_yes, OPTIONS) == 1
    # the lead names the minority option: no relaxed answer
    assert plurality(rule, {"a": 0.1, "b": 0.8, "c": 0.7, "d": 0.9}, OPTIONS) is None
    # two against two: no plurality
    assert plurality(rule, {"a": 0.9, "b": 0.8, "c": 0.1, "d": 0.2}, OPTIONS) is None
    # weights decide the plurality: the lead's side outweighs the other two
    weighted = _vote((3.0, 1.0, 1.0, 1.0))
    assert plurality(weighted, {"a": 0.9, "b": 0.1, "c": 0.2, "d": 0.7}, OPTIONS) == 1
    # a member without its output does not vote
    assert plurality(rule, {"a": 0.9, "b": 0.2}, OPTIONS) is None
    assert plurality(rule, {"a": 0.9, "b": 0.8, "c": 0.2}, OPTIONS) == 1


def test_branches_are_classed_by_what_they_did_on_validation():
    assert branch_classes({}) == ["all", "val_relaxed_no_harm"]
    helped = {"helped": 1, "harmed": 0, "relaxed_harmed": 0}
    assert branch_classes(helped) == ["all", "val_helped_no_harm", "val_relaxed_no_harm"]
    assert branch_classes({**helped, "harmed": 1}) == ["all", "val_relaxed_no_harm"]
    assert branch_classes({**helped, "relaxed_harmed": 1}) == ["all"]
