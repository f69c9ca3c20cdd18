"""The phrasings diagnostic (tests.bench.mixed_phrasings): one branch copy per recovered phrasing."""

from __future__ import annotations

import numpy as np

from tests.bench.mixed_phrasings import per_phrasing
from tsevo.data import Question
from tsevo.library.tool import Matcher, ReadingRule, question_tokens
from tsevo.roles.builtin.composite import Branch
from tsevo.roles.builtin.measure import Spec


def _row(qid: str, text: str, kind: str) -> dict[str, object]:
    y = np.linspace(0.0, 1.0, 64) + 0.01 * np.arange(64) % 3
    q = Question(
        id=qid,
        source="test",
        task="mixed",
        question=text,
        options=("Yes", "No"),
        series={"X": y},
        primary=("X",),
        gold=0,
    )
    return {"id": qid, "q": q, "kind": kind, "gold": 0, "base": 1}


def test_a_given_kinds_branch_is_copied_once_per_recovered_phrasing_on_its_own_words():
    a1 = "Is there an upward trend in X?"
    a2 = "Does X trend upward as time goes on?"
    b1 = "Is the spread of X constant over time?"
    train = [
        _row("1", a1, "up"),
        _row("2", a1, "up"),
        _row("3", a2, "up"),
        _row("4", b1, "spread"),
    ]
    rule = ReadingRule("label", key="slope", bins=(0.0,), labels=("no", "yes"))
    up = Branch(("up",), (), (), Spec("trend"), ("slope",), rule)
    copies = per_phrasing([up], train)
    assert len(copies) == 2  # the kind's two phrasings; the other kind's phrasing gets none
    assert {c.spec for c in copies} == {up.spec} and all(c.kinds == ("up",) for c in copies)
    fires = [
        [Matcher(require=c.require, forbid=c.forbid).matches(question_tokens(t)) for t in (a1, a2)]
        for c in copies
    ]
    assert sorted(fires) == [[False, True], [True, False]]  # each copy on its own phrasing only
    assert not any(Matcher(require=c.require).matches(question_tokens(b1)) for c in copies)
