"""The errors diagnostic's phrasing table (tests.bench.mixed_errors._by_phrasing)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from tests.bench.mixed_errors import PHRASINGS, _by_phrasing


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
