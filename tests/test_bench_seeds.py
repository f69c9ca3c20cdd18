"""The seeds bench's multi-round numbers: round 1's base against the library a run ends with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.bench.seeds import _chain, main


def _round(out: Path, n: int, before: list[bool], after: list[bool], tasks: list[str]) -> None:
    d = out / "rounds" / f"r{n}"
    d.mkdir(parents=True)
    pd.DataFrame(
        {
            "qid": [f"q{i}" for i in range(len(before))],
            "task": tasks,
            "before_correct": before,
            "after_correct": after,
        }
    ).to_parquet(d / "test.parquet")


def _summary(status: str, delta: float, seconds: float) -> dict[str, Any]:
    return {"status": status, "test": {"tasks": [{"delta": delta}]}, "timings": {"x": seconds}}


def test_a_multi_round_run_is_its_last_library_against_round_one_base(tmp_path: Path) -> None:
    tasks = ["a", "a", "b", "b"]
    # round 1 fixes q0 and breaks q3; round 2 fixes q1 and breaks q2 (accepted)
    _round(tmp_path, 1, [False, False, True, True], [True, False, True, False], tasks)
    _round(tmp_path, 2, [True, False, True, False], [True, True, False, False], tasks)
    rounds = [_summary("accepted", 0.0, 10.0), _summary("accepted", 0.0, 5.0)]
    got = _chain(tmp_path, rounds)
    assert (got["base"], got["final"], got["gain"]) == (0.5, 0.5, 0.0)
    assert got["harmed_pct"] == 0.5  # q2 and q3: right before round 1, wrong at the end
    assert got["per_family"] == {"a": 1.0, "b": -1.0}
    assert (got["families_positive"], got["family_gain_min"]) == (1, -1.0)
    assert got["round_status"] == ["accepted", "accepted"] and got["rounds_s"] == [10.0, 5.0]


def test_a_rejected_last_round_leaves_the_library_it_found(tmp_path: Path) -> None:
    tasks = ["a"] * 3
    _round(tmp_path, 1, [False, False, True], [True, False, True], tasks)
    # a rejected round's after arm (e.g. a diagnostic candidate) is not what the run deploys
    _round(tmp_path, 2, [True, False, True], [False, False, False], tasks)
    got = _chain(tmp_path, [_summary("accepted", 1 / 3, 1.0), _summary("rejected", 0.0, 1.0)])
    assert got["final"] == pytest.approx(2 / 3) and got["harmed_pct"] == 0.0
    assert got["round_gains"] == [pytest.approx(1 / 3), 0.0]


def test_rounds_below_one_stop_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--seeds", "1", "--rounds", "0", "--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x").exists()


def test_one_wording_rewords_mixed_questions_to_their_kinds_first_phrasing() -> None:
    from tests.bench.seeds import one_wording
    from tsevo.data import QuestionView
    from tsevo.data.synthetic import make_suite
    from tsevo.roles.builtin.kinds import KindIndex

    suite = make_suite("mixed", seed=3)
    got = one_wording(suite)
    before = {q.id: q for q in suite}
    assert [q.id for q in got] == list(before) and got.splits == suite.splits
    for q in got:
        b = before[q.id]
        assert (q.options, q.gold, q.metadata["template"]) == (b.options, b.gold, 0)
        assert all((q.series[k] == b.series[k]).all() for k in b.series)
        if b.metadata["template"] == 0:  # the first phrasing is rendered exactly as generated
            assert q.question == b.question
    changed = sum(q.question != before[q.id].question for q in got)
    assert changed > len(before) // 4

    # one wording per kind: about one recovered kind per generator kind (a few first phrasings
    # differ in one word only, "noisier" / "smoother", and are recovered as one), not two or three
    def recovered(s: Any) -> int:
        return len(KindIndex(QuestionView.of(q, q.id) for q in s).kinds)

    n_kinds = len({q.metadata["kind"] for q in suite})
    assert recovered(got) <= n_kinds < 1.5 * n_kinds < recovered(suite)


def test_one_wording_is_for_mixed_only(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(
            [
                "--preset",
                "default",
                "--seeds",
                "1",
                "--one-wording",
                "--out",
                str(tmp_path / "x.json"),
            ]
        )


def test_a_reused_run_of_the_other_wording_is_not_summarized_as_this_one(tmp_path: Path) -> None:
    from tests.bench.seeds import _ref, one_seed

    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"suite": {"ref": "synthetic:mixed:seed=1"}}))
    assert _ref(out) == "synthetic:mixed:seed=1" and _ref(tmp_path) == ""
    with pytest.raises(ValueError, match="variant of mixed"):
        one_seed("default", 1, out, reuse=True, wording=True)
