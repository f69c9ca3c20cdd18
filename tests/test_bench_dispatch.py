"""The dispatch diagnostic's classification of why recovered kinds lose a question (tests.bench.mixed_dispatch)."""

from __future__ import annotations

import numpy as np

from tests.bench.mixed_dispatch import CAUSES, cause, per_phrasing, recovered_kinds, summarize
from tests.test_kindplan import YN, _view
from tsevo.library.tool import Matcher, ReadingRule, question_tokens
from tsevo.roles.builtin.composite import Branch
from tsevo.roles.builtin.kinds import KindIndex
from tsevo.roles.builtin.measure import Spec

# recovered kinds: id, require, forbid, the true kind most members are
KINDS = [
    ("k1", ("stationary",), (), "stationary_yn"),
    ("k2", ("upward", "trend"), (), "trend_upward_yn"),
    ("k3", ("trend",), ("upward",), "trend_presence_yn"),
    ("k4", ("noise", "white"), (), "white_noise_yn"),
]
REPORT = {
    "k1": {"outcome": "branch b1: acf.acf1 (concepts)"},
    "k3": {"outcome": "too few rows"},
    "k4": {"outcome": "recovers 2 of 3 rows, the agent 2"},
}


def _q(text: str, kind: str) -> dict[str, object]:
    return {"text": text, "kind": kind}


def test_causes_follow_the_recovered_kinds_and_their_plan_outcomes():
    def why(text: str, kind: str, served: bool = False) -> str:
        return cause(_q(text, kind), KINDS, REPORT, served)

    assert why("Is this series stationary?", "stationary_yn", served=True) == "both_served"
    # no recovered kind holds these words: the phrasing had no train question
    assert why("Does it wander like a random walk?", "random_walk_yn") == "unseen_phrasing"
    # the phrasing is a kind of the train split, but none of its rows was an error
    assert why("Is there an upward trend here?", "trend_upward_yn") == "phrasing_without_errors"
    assert why("Is there a trend at all?", "trend_presence_yn") == "too_few_rows"
    assert why("Is this pure white noise?", "white_noise_yn") == "kept_base"
    # the words reach only a kind whose members are mostly another true kind
    assert why("Is the upward trend accelerating?", "trend_accelerating_yn") == "other_kind"
    # a kind planned but not reaching the question is none of the named causes
    assert why("Is this stationary around a trend?", "stationary_yn") == "other"
    no_rule = {**REPORT, "k1": {"outcome": "no rule clears the bar"}}
    assert cause(_q("Is it stationary?", "stationary_yn"), KINDS, no_rule, False) == "no_rule"


def test_summary_nets_each_cause_over_all_eval_answers():
    def row(base: bool, given: bool, rec: bool, c: str | None) -> dict[str, object]:
        return {
            "kind": "a" if c != "unseen_phrasing" else "b",
            "base_right": base,
            "given_right": given,
            "recovered_right": rec,
            "given_words_right": rec,
            "given_per_phrasing_right": given,
            "cause": c,
        }

    rows = [
        row(False, True, False, "unseen_phrasing"),
        row(False, True, False, "unseen_phrasing"),
        row(True, False, True, "both_served"),
        row(False, True, True, None),
    ]
    doc = summarize([{"seed": 1, "rows": rows, "branches": [2, 2]}])
    assert set(doc["causes"]) == set(CAUSES)
    assert doc["causes"]["unseen_phrasing"] == {
        "given_only": 2,
        "recovered_only": 0,
        "net_pp": 50.0,
    }
    assert doc["causes"]["both_served"]["net_pp"] == -25.0
    assert doc["gap_pp"] == 25.0
    # given: +3 -1 of 4 = +50 pp; recovered: +1 of 4 = +25 pp
    assert doc["gain_pp"]["given"]["mean"] == 25.0 + 25.0
    assert doc["gain_pp"]["recovered"]["mean"] == 0.0 + 25.0
    assert doc["kinds_net_questions"] == {"b": 2, "a": -1}
    # harmed: right before, wrong after (the both_served row under the given plan)
    assert doc["harmed_pct"]["given"]["mean"] == 25.0
    assert doc["harmed_pct"]["recovered"]["mean"] == 0.0
    assert doc["gain_pp"]["given_words"] == doc["gain_pp"]["recovered"]
    assert doc["harmed_pct"]["given_per_phrasing"] == doc["harmed_pct"]["given"]


def test_a_given_kinds_branch_is_copied_once_per_recovered_phrasing_on_its_own_words():
    a1 = "Is there an upward trend in X?"
    a2 = "Does X trend upward as time goes on?"
    b1 = "Is the spread of X constant over time?"
    y = np.linspace(0.0, 1.0, 64)
    texts = {"1": (a1, "up"), "2": (a1, "up"), "3": (a2, "up"), "4": (b1, "spread")}
    views = [_view(qid, text, YN, y, 0) for qid, (text, _) in texts.items()]
    kinds = recovered_kinds(KindIndex(views), {v.id: texts[v.id[1:]][1] for v in views})
    rule = ReadingRule("label", key="slope", bins=(0.0,), labels=("no", "yes"))
    up = Branch(("up",), (), (), Spec("trend"), ("slope",), rule)
    copies = per_phrasing([up], kinds)
    assert len(copies) == 2  # the kind's two phrasings; the other kind's phrasing gets none
    assert {c.spec for c in copies} == {up.spec} and all(c.kinds == ("up",) for c in copies)
    fires = [
        [Matcher(require=c.require, forbid=c.forbid).matches(question_tokens(t)) for t in (a1, a2)]
        for c in copies
    ]
    assert sorted(fires) == [[False, True], [True, False]]  # each copy on its own phrasing only
    assert not any(Matcher(require=c.require).matches(question_tokens(b1)) for c in copies)
