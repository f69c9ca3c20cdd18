"""Normalized answer traces (design §2): canonical form, no ids or val/test text, AdaMAST reads them."""

from __future__ import annotations

import json

import pytest

from tests.taxonomy_fixtures import SENTINEL, planted
from tsevo.taxonomy.traces import FEATURES, project, read_traces, render, write_traces


@pytest.fixture(scope="module")
def traces():
    return planted(n=120)[0]


def test_only_train_traces_and_canary(traces, tmp_path):
    assert len(traces) == 120
    assert {t.metadata["split"] for t in traces} == {"train"}
    path = write_traces(traces, tmp_path / "train.jsonl")
    text = path.read_text(encoding="utf-8")
    assert SENTINEL not in text


def test_no_task_labels_or_source_ids(traces):
    for t in traces:
        blob = json.dumps(t.to_dict())
        assert "synthetic/task" not in blob and "src-" not in blob and "grp-" not in blob
        assert "sub0" not in blob and "period_probe" not in blob  # tools by position: tool1
        assert "Options:" in t.task and len(t.problem_id) == 16


def test_rendering_numbers_events_without_outcome(traces):
    t = traces[0]
    lines = t.raw_trajectory.splitlines()
    assert [ln.split()[0] for ln in lines] == [f"[#{i}" for i in range(1, len(lines) + 1)]
    assert render(t.events) == t.raw_trajectory
    assert "correct" not in t.raw_trajectory


def test_features_in_registry_and_projection(traces):
    for t in traces:
        assert set(t.features) <= set(FEATURES)
        assert all(FEATURES[k].outcome_blind for k in t.features)
    p = project(traces[0])
    assert p.outcome is None and "outcome" not in p.metadata
    assert {t.metadata["pool"] for t in traces} == {"induction", "gate"}


def test_write_read_round_trip_byte_identical(traces, tmp_path):
    a = write_traces(traces, tmp_path / "a.jsonl").read_bytes()
    back = read_traces(tmp_path / "a.jsonl")
    assert write_traces(back, tmp_path / "b.jsonl").read_bytes() == a


def test_adamast_validates_our_traces(traces, tmp_path):
    formats = pytest.importorskip("adamast.core.trace_formats")
    path = write_traces(traces, tmp_path / "traces" / "train.jsonl")
    bundle = formats.load_trace_bundle(path)
    report = bundle.report()
    assert report["trace_count"] == len(traces)
    assert report["empty_trajectories"] == 0
    assert report["formats"] == {"adamast": len(traces)}
    assert [b["problem_id"] for b in bundle.traces] == [t.problem_id for t in traces]
    assert [b["task"] for b in bundle.traces] == [t.task for t in traces]


def test_adamast_validate_command_accepts_our_traces(traces, tmp_path, capsys):
    cli = pytest.importorskip("adamast.foundation_cli")
    path = write_traces(traces, tmp_path / "train.jsonl")
    assert cli.main(["validate", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["trace_count"] == len(traces) and report["empty_trajectories"] == 0
    assert cli.main(["normalize", str(path), "--output", str(tmp_path / "norm.jsonl")]) == 0
    theirs = [json.loads(x) for x in (tmp_path / "norm.jsonl").read_text().splitlines()]
    for ours, t in zip(traces, theirs, strict=True):
        assert t["raw_trajectory"] == ours.raw_trajectory
        assert {k: v for k, v in t["metadata"].items() if k != "source_format"} == ours.metadata
