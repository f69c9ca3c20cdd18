"""Trace sources (issue 12): the base pass, the train-side evolution arms, and both together.

The evolution source reads the candidate libraries' train arms that a real round's synthesis wrote
(the shared tiny run, seed 5). It must keep train questions only, skip every round's base pass,
keep only records where a candidate of the round was shortlisted, and normalize them with the
base pass under one tool naming; a single-arm normalization stays byte-identical to ``normalize``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.taxonomy_fixtures import planted_parts
from tsevo.agent import AnswerRecord
from tsevo.data import Suite
from tsevo.store import RunStore
from tsevo.taxonomy.sources import SOURCES, base_arms, evolution_arms, source_arms
from tsevo.taxonomy.traces import normalize, normalize_arms, trace_id


def _dump(traces: list) -> str:
    return json.dumps([t.to_dict() for t in traces], sort_keys=True)


def test_one_arm_normalizes_byte_identically_to_normalize() -> None:
    questions, records, splits, _ = planted_parts(80, 3, 0.2)
    a = normalize(records, questions, splits, round_=1, library="lib0", seed=3)
    b = normalize_arms([("lib0", "answer", records)], questions, splits, round_=1, seed=3)
    assert _dump(a) == _dump(b)


def test_unknown_kind_and_source_are_refused(tiny_run: Path) -> None:
    questions, records, splits, _ = planted_parts(20, 0, 0.2)
    with pytest.raises(ValueError, match="unknown trace kind 'probe'"):
        normalize_arms([("x", "probe", records)], questions, splits, round_=1)
    with pytest.raises(ValueError, match="unknown trace source 'val'"):
        source_arms(RunStore.open(tiny_run), 1, "val")


@pytest.fixture(scope="module")
def parts(tiny_run: Path) -> tuple[RunStore, Suite]:
    store = RunStore.open(tiny_run)
    return store, Suite.load(store.layout.suite)


def test_evolution_arms_are_candidate_train_records(parts: tuple[RunStore, Suite]) -> None:
    store, suite = parts
    ((base_fp, _, base_recs),) = base_arms(store, 1)
    arms = evolution_arms(store, 1)
    assert arms, "the tiny round synthesized candidates; their train arms must be found"
    names = {p.name[: -len(".jsonl")] for p in store.layout.evals.glob("*.jsonl")}
    for fp, kind, recs in arms:
        assert kind == "candidate" and fp != base_fp
        assert f"train.{fp}" in names
        for qid, rec in recs.items():
            assert suite.splits[qid] == "train"
            assert any(t.startswith("r1.") for s in rec.steps for t in s.shortlisted), qid
    # A record of a candidate arm that never shortlisted the candidate is left out: it exists.
    fp0 = arms[0][0]
    raw = store.records(f"train.{fp0}").load()
    left = [
        q for q, d in raw.items()
        if not any(t.startswith("r1.") for s in AnswerRecord.from_dict(d).steps for t in s.shortlisted)
    ]  # fmt: skip
    assert set(arms[0][2]) == set(raw) - set(left)
    assert len(base_recs) == sum(1 for s in suite.splits.values() if s == "train")


def test_all_source_joins_base_and_evolution_under_one_naming(
    parts: tuple[RunStore, Suite],
) -> None:
    store, suite = parts
    qs = {q.id: q for q in suite}
    base = normalize_arms(source_arms(store, 1, "base"), qs, suite.splits, round_=1)
    evo = normalize_arms(source_arms(store, 1, "evolution"), qs, suite.splits, round_=1)
    both = normalize_arms(source_arms(store, 1, "all"), qs, suite.splits, round_=1)
    assert {t.problem_id for t in both} == {t.problem_id for t in base} | {
        t.problem_id for t in evo
    }
    assert len(both) == len(base) + len(evo)
    assert {t.metadata["kind"] for t in both} == {"answer", "candidate"}
    assert any(t.features["tool.n_run"] > 0 for t in evo)  # the point: tools ran on these
    # One question reads the same wherever it appears: same pool, same subdomain.
    by_id = {t.problem_id: t for t in both}
    (base_fp, _, _), *evo_arms = source_arms(store, 1, "all")
    checked = 0
    for fp, _, recs in evo_arms:
        for qid in recs:
            fpq = qs[qid].fingerprint
            a = by_id.get(trace_id(fpq, 1, "train", fp))
            b = by_id.get(trace_id(fpq, 1, "train", base_fp))
            if a is None or b is None:  # equal content elsewhere: a later sample index
                continue
            assert a.metadata["pool"] == b.metadata["pool"]
            assert a.features["domain.subdomain"] == b.features["domain.subdomain"]
            checked += 1
    assert checked >= len(evo) // 2
    # No validation or test text.
    val_text = {q.question for q in suite if suite.splits[q.id] != "train"}
    train_text = {q.question for q in suite if suite.splits[q.id] == "train"}
    only_heldout = val_text - train_text
    assert not any(
        t.task.split("\nOptions:")[0].split("\nContext:")[0] in only_heldout for t in both
    )
    assert SOURCES == ("base", "evolution", "all")
