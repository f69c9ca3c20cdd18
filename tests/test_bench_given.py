"""The kinds-given diagnostic's comparison of two runs (tests.bench.mixed_given.changes)."""

from tests.bench.mixed_given import changes


def test_changes_lists_every_kind_and_seed_whose_accuracy_moved():
    def entry(acc: float, m: str = "m") -> dict:
        return {"acc": acc, "rows": 4, "measurement": m}

    old = {"a": {"1": entry(0.5), "2": entry(0.7)}, "b": {"1": entry(0.2), "2": entry(0.2)}}
    new = {
        "a": {"1": entry(0.5), "2": entry(0.9, "x")},
        "b": {"1": entry(0.1), "2": entry(0.2)},
        "c": {"1": entry(1.0), "2": entry(1.0)},  # a kind the old run did not have
    }
    got = changes(old, new, [1, 2])
    assert [(k, s, w["acc"], n["acc"]) for k, s, w, n in got] == [
        ("a", "2", 0.7, 0.9),
        ("b", "1", 0.2, 0.1),
    ]
    assert got[0][3]["measurement"] == "x"
    assert changes(old, old, [1, 2]) == []
