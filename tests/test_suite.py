"""Suites: deterministic group splits, dedup, pandas/parquet/JSONL round trips, summary, atomic save."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsevo.data import SPLITS, Question, RecordError, Suite, load_suite
from tsevo.data.suite import SUMMARY_COLUMNS

TRICKY = [0.1 + 0.2, -0.0, 5e-324, 1.7976931348623157e308, -np.pi, 1e-300, 123456789.123456789]


def make_q(
    qid: str,
    group: str,
    task: str = "trend",
    *,
    k: int = 0,
    gold: int | None = 0,
    n: int = 8,
    metadata: dict[str, Any] | None = None,
) -> Question:
    rng = np.random.default_rng(k)
    y = np.round(rng.normal(size=n), 6) + np.arange(n) * 0.01 + k
    return Question(
        id=qid,
        source="unit",
        task=task,
        question=f"Question {qid} about the series?",
        options=("up", "down", "flat"),
        series={"y": y, "x": np.linspace(0, 1, n)},
        primary=("y",),
        covariates=("x",),
        gold=gold,
        group=group,
        subtask=f"sub-{k % 3}",
        metadata=metadata if metadata is not None else {"k": k},
    )


def grouped_suite(
    n_groups: int = 60, sizes: tuple[int, ...] = (1, 2, 3), tasks: tuple[str, ...] = ("a", "b", "c")
) -> Suite:
    qs = []
    for g in range(n_groups):
        task = tasks[g % len(tasks)]
        for j in range(sizes[g % len(sizes)]):
            qs.append(make_q(f"q{g}-{j}", f"g{g}", task, k=g * 10 + j))
    return Suite("grouped", qs)


# --------------------------------------------------------------------------- splits


def test_split_is_deterministic_and_seed_dependent() -> None:
    s = grouped_suite()
    a, b = s.split(seed=3), s.split(seed=3)
    assert a.splits == b.splits and len(a.splits) == len(s)
    assert s.split(seed=4).splits != a.splits
    # the input order of questions does not matter either
    shuffled = Suite("x", list(reversed(s.questions)))
    assert shuffled.split(seed=3).splits == a.splits


def test_split_is_stable_across_processes() -> None:
    code = (
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.test_suite import grouped_suite\n"
        "print(json.dumps(grouped_suite().split(seed=11).splits, sort_keys=True))\n"
    )
    repo = str(Path(__file__).resolve().parents[1])
    out = subprocess.run(
        [sys.executable, "-c", code, repo],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "random", "PATH": ""},
    )
    assert json.loads(out.stdout) == grouped_suite().split(seed=11).splits


def test_siblings_never_straddle_splits() -> None:
    s = grouped_suite(sizes=(1, 4, 2, 7)).split((0.6, 0.2, 0.2), seed=1)
    by_group: dict[str, set[str]] = defaultdict(set)
    for q in s:
        by_group[q.group].add(s.splits[q.id])
    assert all(len(v) == 1 for v in by_group.values())


def test_fractions_are_roughly_respected() -> None:
    s = grouped_suite(n_groups=300, sizes=(1, 2, 3, 1, 5))
    for fr in [(0.5, 0.25, 0.25), (0.7, 0.15, 0.15), (0.2, 0.3, 0.5)]:
        for stratify in (True, False):
            counts = Counter(s.split(fr, seed=7, stratify=stratify).splits.values())
            got = np.array([counts[sp] for sp in SPLITS]) / len(s)
            assert np.allclose(got, fr, atol=0.04), (fr, stratify, got)


def test_train_val_test_partition_the_suite() -> None:
    s = grouped_suite().split(seed=2)
    parts = [s.train, s.val, s.test]
    ids = [i for p in parts for i in p.ids]
    assert sorted(ids) == sorted(s.ids)
    for sp, part in zip(SPLITS, parts, strict=True):
        assert set(part.splits.values()) == {sp} and part.name == f"grouped/{sp}"
    assert s.subset("val").ids == s.val.ids


def test_stratified_split_puts_every_task_with_three_groups_in_every_split() -> None:
    # Uneven group sizes and skewed fractions: a plain cut would leave val or test empty.
    qs = []
    for t, sizes in {"big": [10, 1, 1], "three": [1, 1, 1], "skew": [1, 6, 1, 1]}.items():
        for gi, n in enumerate(sizes):
            qs += [make_q(f"{t}{gi}-{j}", f"{t}-g{gi}", t, k=gi * 20 + j) for j in range(n)]
    qs += [make_q(f"two{gi}", f"two-g{gi}", "two", k=99 + gi) for gi in range(2)]
    s = Suite("strat", qs)
    for seed in range(25):
        for fr in [(0.8, 0.1, 0.1), (0.5, 0.25, 0.25), (0.34, 0.33, 0.33)]:
            sp = s.split(fr, seed=seed, stratify=True)
            for task in ("big", "three", "skew"):
                got = {sp.splits[q.id] for q in s if q.task == task}
                assert got == set(SPLITS), (seed, fr, task, got)


def test_stratified_beats_unstratified_on_rare_tasks() -> None:
    qs = [make_q(f"c{i}", f"c{i}", "common", k=i) for i in range(60)]
    qs += [make_q(f"r{i}", f"r{i}", "rare", k=100 + i) for i in range(3)]
    s = Suite("rare", qs)
    for seed in range(10):
        sp = s.split(seed=seed, stratify=True)
        assert {sp.splits[f"r{i}"] for i in range(3)} == set(SPLITS)


def test_zero_fractions_leave_splits_empty() -> None:
    s = grouped_suite(n_groups=20)
    assert set(s.split((1, 0, 0)).splits.values()) == {"train"}
    assert set(s.split((0.5, 0, 0.5), seed=5).splits.values()) == {"train", "test"}
    assert set(s.split((0, 0, 3)).splits.values()) == {"test"}


@pytest.mark.parametrize(
    "fractions",
    [(0.5, 0.5), (0.5, -0.1, 0.6), (0, 0, 0), (0.5, float("nan"), 0.5), (1, 1, float("inf"))],
)
def test_bad_fractions_raise(fractions: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="fractions"):
        grouped_suite(n_groups=5).split(fractions)


@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=25),
    fr=st.tuples(*[st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0])] * 3).filter(lambda t: sum(t) > 0),
    seed=st.integers(0, 10_000),
    stratify=st.booleans(),
)
def test_split_properties(
    sizes: list[int], fr: tuple[float, float, float], seed: int, stratify: bool
) -> None:
    qs = [
        make_q(f"q{g}-{j}", f"g{g}", "ab"[g % 2], k=g * 7 + j, n=3)
        for g, n in enumerate(sizes)
        for j in range(n)
    ]
    s = Suite("p", qs, dedup=False).split(fr, seed=seed, stratify=stratify)
    assert len(s.splits) == len(qs)
    by_group: dict[str, set[str]] = defaultdict(set)
    for q in s:
        by_group[q.group].add(s.splits[q.id])
    assert all(len(v) == 1 for v in by_group.values())
    used = set(s.splits.values())
    positive = {sp for sp, f in zip(SPLITS, fr, strict=True) if f > 0}
    assert used <= positive
    strata = (
        [{g for g in by_group if int(g[1:]) % 2 == t} for t in (0, 1)]
        if stratify
        else [set(by_group)]
    )
    for groups in strata:
        if len(groups) >= len(positive):
            assert {next(iter(by_group[g])) for g in groups} == positive


def test_subset_on_unsplit_suite_raises_clearly() -> None:
    s = grouped_suite(n_groups=4)
    for get in (lambda: s.train, lambda: s.val, lambda: s.test, lambda: s.subset("train")):
        with pytest.raises(ValueError, match=r"no split assignment; call \.split\(\) first"):
            get()
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        s.split().subset("dev")


# --------------------------------------------------------------------------- dedup


def test_dedup_by_fingerprint_lists_duplicates() -> None:
    a = make_q("a", "g1", k=1)
    b = make_q("b", "g2", k=2)
    a_copy = Question.from_dict(
        a.to_dict() | {"id": "a-copy", "gold": 2, "group": "g9", "fingerprint": None}
    )
    assert a_copy.fingerprint == a.fingerprint
    s = Suite("d", [a, b, a_copy])
    assert s.ids == ["a", "b"] and s.duplicates == ["a-copy"]
    assert Suite("d", [a, b, a_copy], dedup=False).ids == ["a", "b", "a-copy"]
    assert s.split(seed=1).duplicates == ["a-copy"]  # kept through a re-split
    suite, report = Suite.from_records([q.to_dict() for q in (a, a_copy, b)])
    assert suite.ids == ["a", "b"] and report.duplicates == ["a-copy"] and report.n_kept == 2


# --------------------------------------------------------------------------- round trips


def rich_suite() -> Suite:
    qs = [
        make_q(f"r{i}", f"g{i // 2}", "abc"[i % 3], k=i, gold=None if i % 4 == 0 else i % 3)
        for i in range(12)
    ]
    qs.append(
        Question(
            id="tricky-ünï",
            source="unit",
            task="matching",
            question="Which candidate matches the reference “ref”? 😀",
            context="line one\nline two",
            options=("A", "B", "none of them"),
            series={"ref": TRICKY, "A": TRICKY[::-1], "B": [1.0]},
            primary=("ref",),
            candidates=("A", "B"),
            gold=1,
            metadata={"nested": {"list": [1, 2.5, None, "x"]}, "flag": True},
        )
    )
    return Suite("rich", qs)


def assert_same_suite(a: Suite, b: Suite) -> None:
    assert a.name == b.name
    assert a.ids == b.ids and a.splits == b.splits
    for qa, qb in zip(a, b, strict=True):
        assert qa == qb and qa.to_dict() == qb.to_dict()
        for name in qa.series:
            # bit-exact, including -0.0 and subnormals
            assert qa.series[name].tobytes() == qb.series[name].tobytes()
            assert not qb.series[name].flags.writeable


@pytest.mark.parametrize("split", [True, False], ids=["split", "unsplit"])
def test_frame_round_trip(split: bool) -> None:
    s = rich_suite().split(seed=5) if split else rich_suite()
    df = s.to_frame()
    assert len(df) == len(s) and df["id"].tolist() == s.ids
    assert list(df.columns)[-1] == "split"
    back = Suite.from_frame(df, name="rich")
    assert_same_suite(s, back)
    assert back["r0"].gold is None and back["r1"].gold == 1


def test_frame_round_trip_partially_split() -> None:
    s = rich_suite()
    part = Suite("rich", s.questions, {"r1": "train", "r2": "test"})
    back = Suite.from_frame(part.to_frame(), name="rich")
    assert back.splits == {"r1": "train", "r2": "test"}


@pytest.mark.parametrize("ext", ["parquet", "jsonl"])
def test_file_round_trip(tmp_path: Path, ext: str) -> None:
    s = rich_suite().split((0.5, 0.25, 0.25), seed=9)
    p = s.save(tmp_path / f"sub/suite.{ext}")
    assert p.exists() and p.parent.name == "sub"
    back, report = load_suite(p)
    assert report.ok and report.n_read == report.n_kept == len(s)
    assert_same_suite(s, back)
    assert_same_suite(s, Suite.load(p))
    # saving again gives the same bytes (deterministic writer) for JSONL
    if ext == "jsonl":
        p2 = back.save(tmp_path / "again.jsonl")
        assert p2.read_bytes() == p.read_bytes()


def test_unsplit_suite_round_trips_without_splits(tmp_path: Path) -> None:
    s = rich_suite()
    for ext in ("parquet", "jsonl"):
        back = Suite.load(s.save(tmp_path / f"u.{ext}"))
        assert back.splits == {} and back.ids == s.ids


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_suite(tmp_path / "missing.jsonl")
    bad = tmp_path / "suite.csv"
    bad.write_text("id\n")
    with pytest.raises(ValueError, match=r"use \.parquet or \.jsonl"):
        load_suite(bad)
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"__suite__": "n", "schema_version": 99}) + "\n")
    with pytest.raises(ValueError, match="schema 99"):
        load_suite(newer)


def test_tampered_jsonl_is_caught_by_fingerprint(tmp_path: Path) -> None:
    p = rich_suite().save(tmp_path / "s.jsonl")
    lines = p.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[3])
    rec["series"]["y"][0] += 1.0
    lines[3] = json.dumps(rec)
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordError) as ei:
        load_suite(p)
    assert (ei.value.record_id, ei.value.field) == (rec["id"], "fingerprint")


def test_suite_pickles() -> None:
    s = rich_suite().split(seed=1)
    s2 = pickle.loads(pickle.dumps(s))
    assert_same_suite(s, s2)


# --------------------------------------------------------------------------- summary


def test_summary_columns_and_counts() -> None:
    s = rich_suite().split(seed=3)
    df = s.summary()
    assert list(df.columns) == SUMMARY_COLUMNS == [
        "task", "questions", "groups", "mean_len", "series_per_q", "options", "labeled", "train", "val", "test",
    ]  # fmt: skip
    assert df["task"].tolist() == sorted(s.tasks)
    assert df["questions"].sum() == len(s)
    assert (df[list(SPLITS)].sum(axis=1) == df["questions"]).all()
    row = df.set_index("task").loc["matching"]
    assert row["questions"] == 1 and row["series_per_q"] == 3 and row["labeled"] == 1
    assert row["mean_len"] == pytest.approx((7 + 7 + 1) / 3)
    assert df.set_index("task").loc["a", "labeled"] == 3  # r0, r3, r6, r9; r0 is unlabeled
    empty = Suite("e", []).summary()
    assert list(empty.columns) == SUMMARY_COLUMNS and len(empty) == 0


# --------------------------------------------------------------------------- atomic save


@pytest.mark.parametrize("ext", ["parquet", "jsonl"])
def test_failed_save_leaves_existing_file_intact(
    tmp_path: Path, ext: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = rich_suite()
    p = s.save(tmp_path / f"s.{ext}")
    before = p.read_bytes()
    calls = {"n": 0}
    real = Question.to_dict

    def flaky(self: Question) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("disk on fire")
        return real(self)

    monkeypatch.setattr(Question, "to_dict", flaky)
    with pytest.raises(RuntimeError, match="disk on fire"):
        s.split(seed=1).save(p)
    assert p.read_bytes() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == [p.name]  # no temp file left behind
    monkeypatch.undo()
    assert Suite.load(p).ids == s.ids


def test_unsupported_suffix_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unsupported suite file"):
        rich_suite().save(tmp_path / "new" / "s.csv")
    assert not (tmp_path / "new").exists()
