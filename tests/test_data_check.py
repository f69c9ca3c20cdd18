"""``tsevo data check FILE``: every bad record with its id, field and reason, a summary, no writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tsevo
from tsevo.cli import main

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "experiments" / "example_questions.jsonl"


def _record(qid: str, **over: object) -> dict[str, object]:
    rec: dict[str, object] = {
        "id": qid,
        "source": "my-lab",
        "task": "my-benchmark",
        "question": f"Is the series in {qid} trending upward?",
        "options": ["Yes", "No"],
        "gold": 0,
        "series": {"ts": [1.0, 2.0, 3.0, 4.5, 5.0, 6.5]},
        "primary": ["ts"],
    }
    rec.update(over)
    return rec


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    lines = [
        json.dumps({"__suite__": "mine", "schema_version": 1}),
        json.dumps(_record("ok-1")),
        '{"id": "broken", "question": "unterminated',
        json.dumps({k: v for k, v in _record("no-options").items() if k != "options"}),
        json.dumps(_record("bad-gold", gold=2)),
        json.dumps(_record("nan-series", series={"ts": [1.0, float("nan"), 2.0]})),
        json.dumps(_record("bad-primary", primary=["price"])),
        json.dumps(_record("unknown-field", answer="Yes")),
        json.dumps(_record("ok-1", question="Another question under a used id?")),
        json.dumps(_record("bad-split") | {"split": "training"}),
        json.dumps({k: v for k, v in _record("x").items() if k != "id"}),
        json.dumps(_record("copy-of-ok-1", question="Is the series in ok-1 trending upward?")),
        json.dumps(_record("ok-2", series={"ts": [3.0, 2.0, 1.0, 0.5]}) | {"split": "train"}),
    ]
    p = tmp_path / "mine.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


EXPECTED = {  # record id (or position) -> field
    "<line 3>": "<json>",
    "no-options": "options",
    "bad-gold": "gold",
    "nan-series": "series.ts",
    "bad-primary": "primary",
    "unknown-field": "answer",
    "ok-1": "id",
    "bad-split": "split",
    "<line 11>": "id",
}


def test_every_bad_record_is_reported_and_nothing_is_written(
    bad_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {p: p.stat().st_mtime_ns for p in bad_file.parent.iterdir()}
    assert main(["data", "check", str(bad_file)]) == 1
    out = capsys.readouterr().out
    assert "12 records read, 2 questions kept, 9 rejected" in out
    for rid, fld in EXPECTED.items():
        assert re.search(rf"^  {re.escape(rid)}\s+{re.escape(fld)}\s+\S", out, re.M), (rid, out)
    assert "out of range" in out and "non-finite" in out and "unknown split" in out
    assert "dropped as duplicates of an earlier record: copy-of-ok-1" in out
    assert "questions  2 (2 labeled, 2 groups)" in out
    assert "splits     train: 1, unassigned: 1" in out
    assert {p: p.stat().st_mtime_ns for p in bad_file.parent.iterdir()} == before


def test_json_report(bad_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "check", str(bad_file), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] is False and rep["read"] == 12 and rep["kept"] == 2
    assert {(e["record_id"], e["field"]) for e in rep["rejected"]} == set(EXPECTED.items())
    assert all(e["reason"] for e in rep["rejected"])
    assert rep["duplicates"] == ["copy-of-ok-1"]
    assert rep["summary"]["series_length"] == {"min": 4, "median": 6, "max": 6}


def test_the_example_file_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "check", str(EXAMPLE)]) == 0
    assert "5 records read, 5 questions kept, 0 rejected" in capsys.readouterr().out
    assert main(["data", "check", str(EXAMPLE), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)["summary"]
    assert rep["questions"] == 5 and rep["groups"] == 4 and rep["tasks"] == {"my-benchmark": 5}
    assert rep["series_roles"] == {"primary": 5, "covariate": 1, "candidate": 3}
    assert rep["series_per_question"] == {"1": 3, "2": 1, "4": 1}
    suite, report = tsevo.load_suite(EXAMPLE)
    assert report.ok and len(suite.split(seed=0).train) >= 1


def test_a_file_that_cannot_be_read_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["data", "check", str(tmp_path / "missing.jsonl")]) == 2
    assert "no suite file" in capsys.readouterr().err
    (tmp_path / "q.csv").write_text("id,question\n")
    assert main(["data", "check", str(tmp_path / "q.csv")]) == 2


def test_readme_documents_every_field_of_a_record() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Your own questions", 1)[1].split("\n## ", 1)[0]
    q = next(iter(tsevo.load_suite(EXAMPLE)[0]))
    for field in [*q.to_dict(), "split"]:
        assert f"`{field}`" in section, field
    assert "tsevo data check" in section and "example_questions.jsonl" in section
