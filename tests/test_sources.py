"""Public-source loaders: hand-written fixtures (tests/data/<source>/) and the shared real samples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tsevo.data import RecordError, Suite
from tsevo.data.sources import (
    SOURCES,
    SourceReport,
    load_merrill,
    load_mmts,
    load_source,
    load_temporalbench,
    load_timemqa,
    load_timeseriesexam,
    load_tsaqa,
)

TASKS = {
    "timeseriesexam": {"TimeSeriesExam"},
    "merrill": {"Merrill"},
    "temporalbench": {f"TemporalBench T{k}" for k in range(1, 5)},
    "timemqa": {"TimeMQA anomaly", "TimeMQA classification"},
    "mmts": {"MMTS match"},
    "tsaqa": {"TSAQA data transformation"},
}
GOOD = {
    "timeseriesexam": ("timeseriesexam/good", 4),
    "merrill": ("merrill/good", 4),
    "temporalbench": ("temporalbench/good", 12),
    "timemqa": ("timemqa/good", 9),
    "mmts": ("mmts/good", 3),
    "tsaqa": ("tsaqa/good", 3),
}
# (fixture folder, questions kept leniently, rejected records)
MALFORMED = {
    "timeseriesexam": (1, 6),
    "merrill": (1, 5),
    "temporalbench": (4, 6),
    "timemqa": (1, 5),
    "mmts": (1, 5),
    "tsaqa": (1, 4),
}


# ---------------------------------------------------------------------------- registry


def test_registry_and_errors(tmp_path: Path) -> None:
    assert set(SOURCES) == set(TASKS)
    with pytest.raises(ValueError, match="known sources: timeseriesexam, merrill"):
        load_source("nope", tmp_path)
    with pytest.raises(FileNotFoundError):
        load_source("timeseriesexam", tmp_path / "missing.json")
    with pytest.raises(FileNotFoundError):
        load_merrill(tmp_path)  # an empty folder holds no file


def test_name_is_normalised(tests_data: Path) -> None:
    suite, _ = load_source("Time-Series_Exam", tests_data / "timeseriesexam/good")
    assert len(suite) == 4


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_fixtures_load_strictly(name: str, tests_data: Path) -> None:
    folder, n = GOOD[name]
    suite, report = load_source(name, tests_data / folder)
    assert isinstance(report, SourceReport) and report.ok
    assert len(suite) == n == report.n_kept
    assert {q.task for q in suite} <= TASKS[name]
    for q in suite:
        assert q.source == name
        assert q.gold is not None
        assert q.group and q.group != ""
        for arr in q.series.values():
            assert np.isfinite(arr).all()
        # finer labels never leak into the task name
        if q.subtask:
            assert q.subtask not in q.task


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_strict_raises_lenient_reports(name: str, tests_data: Path) -> None:
    folder = tests_data / name / "malformed"
    with pytest.raises(RecordError) as exc:
        load_source(name, folder)
    assert exc.value.record_id and exc.value.field
    kept, rejected = MALFORMED[name]
    suite, report = load_source(name, folder, lenient=True)
    assert len(suite) == kept
    assert len(report.errors) == rejected
    assert report.n_read == kept + rejected
    assert not report.ok
    assert "rejected" in str(report)
    frame = report.to_frame()
    assert list(frame.columns) == ["record_id", "field", "reason"]
    assert frame["field"].str.len().min() > 0


# ---------------------------------------------------------------------------- per source


def test_timeseriesexam_fixture(tests_data: Path) -> None:
    suite, _ = load_timeseriesexam(tests_data / "timeseriesexam/good/qa_dataset.json")
    q = suite["timeseriesexam:3"]
    assert q.primary == ("ts1", "ts2") and q.series["ts1"].size != q.series["ts2"].size
    assert q.gold_option == "Yes, they have the same variance"
    num = suite["timeseriesexam:5"]
    assert num.options == ("7.56", "1.0", "4.21") and num.gold == 1
    assert num.subtask == "Pattern Recognition/Cycle Recognition"
    assert num.metadata["tid"] == 21 and num.group == num.id
    for q in suite:
        assert "HINT" not in q.question + q.context
        assert "option letter" not in q.question + q.context
        assert not {"question_hint", "relevant_concepts", "format_hint"} & set(q.metadata)


def test_timeseriesexam_malformed_fields(tests_data: Path) -> None:
    _, report = load_timeseriesexam(tests_data / "timeseriesexam/malformed", lenient=True)
    by_id = {e.record_id: e.field for e in report.errors}
    assert by_id["timeseriesexam:11"] == "answer"
    assert by_id["timeseriesexam:12"] == "ts"
    assert by_id["timeseriesexam:13"] == "ts"  # NaN
    assert by_id["timeseriesexam:14"] == "ts2"
    assert by_id["timeseriesexam:15"] == "options"


def test_merrill_fixture(tests_data: Path) -> None:
    suite, report = load_merrill(tests_data / "merrill/good")
    assert report.skipped == {"etiological row (etiological=False)": 1}
    assert len({q.group for q in suite}) == 3  # u-0001 carries two questions
    two = [q for q in suite if q.group == "merrill:u-0001"]
    assert len(two) == 2 and two[0].series["series"].tolist() == two[1].series["series"].tolist()
    q = two[0]
    assert q.context.startswith("Description: Daily toy sales\nMetaData: start: 2022-10-01")
    assert q.subtask == "explanation" and "gpt_pred" not in json.dumps(dict(q.metadata))
    dual = next(q for q in suite if q.group == "merrill:u-0003")
    assert dual.primary == ("series1", "series2")
    suite2, report2 = load_merrill(tests_data / "merrill/good", etiological=True)
    assert len(suite2) == 5 and not report2.skipped
    eti = next(q for q in suite2 if q.subtask == "etiological")
    assert eti.gold_option == "A pendulum swinging."


def test_temporalbench_fixture(tests_data: Path) -> None:
    suite, _ = load_temporalbench(tests_data / "temporalbench/good")
    assert {q.task for q in suite} == TASKS["temporalbench"]
    assert len({q.group for q in suite}) == 2  # fr_001 (T1-T3 share it) and psml_007
    t1 = [q for q in suite if q.task == "TemporalBench T1"]
    assert [q.subtask for q in t1] == ["trend", "volatility", "seasonality", "outliers"]
    assert t1[1].gold_option == "constant"  # label "Constant", matched case-insensitively
    assert (
        "[5, 6, NaN" not in t1[0].context and "Input: main series 'sales_censored'" in t1[0].context
    )
    assert "Return ONLY" not in t1[0].context and "1) Trend" not in t1[0].context
    # NaN handled explicitly: filled, with a 0/1 mask covariate
    q = suite["temporalbench:fr_001_T2:future_vs_history"]
    assert q.primary == ("sales_censored",)
    mask = q.series["sales_censored_missing"]
    assert mask.tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    assert q.series["sales_censored"][2] == pytest.approx(7.0)  # interpolated between 6 and 8
    assert q.series["sales_censored"][-1] == pytest.approx(8.0)  # edge: nearest observed
    # future covariates named by channel; ground truth never exposed
    assert q.series["discount"].size == 16 and q.series["holiday_flag"].size == 4
    assert set(q.covariates) == {"discount", "holiday_flag", "sales_censored_missing"}
    everything = json.dumps(
        [[q.to_dict()["series"], q.question, q.context, dict(q.metadata)] for q in suite]
    )
    assert "99.0" not in everything and "ground_truth" not in everything
    assert "Heatwave" in suite["temporalbench:psml_007_T4:seasonality_shift"].context
    t3 = suite["temporalbench:fr_001_T3:S1:B"]
    assert t3.gold_option == "C Evening" and "Options" not in t3.question
    assert "evidence" not in json.dumps(dict(t3.metadata))
    only_t1, rep = load_temporalbench(tests_data / "temporalbench/good", tiers=["T1"])
    assert len(only_t1) == 4 and sum(rep.skipped.values()) == 3
    tc, _ = load_temporalbench(tests_data / "temporalbench/timeclaw/task_modified.json")
    assert len(tc) == 4 and {q.group for q in tc} == {"temporalbench:m5_042"}


def test_timemqa_fixture(tests_data: Path) -> None:
    suite, report = load_timemqa(tests_data / "timemqa/good")
    assert report.skipped == {"task_type=forecasting": 1}
    assert len(report.files) == 2  # the forecasting file is not read
    yes = suite["timemqa:anomaly_detection:1"]
    assert yes.options == ("Yes", "No") and yes.gold == 0
    assert "[series]" in yes.question and "9.5" not in yes.question
    assert suite["timemqa:anomaly_detection:3"].gold_option == "a single spike"
    assert suite["timemqa:anomaly_detection:5"].gold_option == "Anomalous"
    cls = [q for q in suite if q.task == "TimeMQA classification" and q.subtask == "Activity"]
    assert {q.options for q in cls} == {("Running", "sitting", "walking")}
    assert [q.gold_option for q in cls] == ["walking", "Running", "sitting", "Running"]
    assert suite["timemqa:classification:4"].gold_option == "N2"
    two = suite["timemqa:classification:5"]
    assert two.primary == ("channel1", "channel2")
    # same series -> same group
    assert yes.group == suite["timemqa:anomaly_detection:3"].group


def test_mmts_fixture(tests_data: Path) -> None:
    suite, _ = load_mmts(tests_data / "mmts/good")
    q = suite["mmts:1"]
    assert q.primary == ("reference",) and q.candidates == ("A", "B", "C")
    assert q.series["C"].size == 6 and q.gold == 1 and q.subtask == "choose it"
    assert suite["mmts:2"].options[0] == "the first candidate"
    assert suite["mmts:3"].options == ("A", "B") and suite["mmts:3"].gold == 0
    assert all(q.group == q.id for q in suite)


def test_tsaqa_fixture(tests_data: Path, tmp_path: Path) -> None:
    suite, report = load_tsaqa(tests_data / "tsaqa/good")
    assert sum(report.skipped.values()) == 2
    q = suite["tsaqa:dt-1"]
    assert q.candidates == ("A", "B", "C", "D") and q.gold == 1
    assert "[series B]" in q.question and "0.5" not in q.question
    assert np.allclose(q.series["B"], np.diff(q.series["input"]), atol=1e-4)
    assert q.context.startswith("The input is an hourly load")
    wav = suite["tsaqa:dt-2"]
    assert wav.metadata["candidate_parts"] == {"A": [4, 4], "B": [4, 4]}
    assert wav.metadata["contaminated_sunspot"] is True
    assert "[input series]" in suite["tsaqa:dt-3"].question
    assert len({q.group for q in suite}) == 1  # all three share one input series
    ex, rep = load_tsaqa(tests_data / "tsaqa/good", exclude_sunspot=True)
    assert len(ex) == 2 and rep.skipped["dataset=sunspot (exclude_sunspot)"] == 1
    # the Parquet path reads the same rows
    rows = [json.loads(line) for line in (tests_data / "tsaqa/good/test.jsonl").open()]
    keys = sorted({k for r in rows for k in r})
    table = pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])
    pq.write_table(table, tmp_path / "test.parquet")
    via_parquet, _ = load_tsaqa(tmp_path / "test.parquet")
    assert [q.fingerprint for q in via_parquet] == [q.fingerprint for q in suite]


def test_loaded_suite_splits_by_group(tests_data: Path) -> None:
    suite, _ = load_temporalbench(tests_data / "temporalbench/good")
    split = suite.split(seed=1)
    for group in {q.group for q in split}:
        assert len({split.splits[q.id] for q in split if q.group == group}) == 1


# ---------------------------------------------------------------------------- real samples


def test_real_timeseriesexam_sample(shared_data: Path) -> None:
    path = shared_data / "timeseriesexam_sample" / "qa_sample.json"
    rows = json.loads(path.read_text())
    suite, report = load_timeseriesexam(path)
    assert report.ok and len(suite) == len(rows) == 38
    for row in rows:
        q = suite[f"timeseriesexam:{row['id']}"]
        assert q.group == q.id
        assert q.options[q.gold] == (
            row["answer"] if isinstance(row["answer"], str) else repr(row["answer"])
        )
        if "ts" in row:
            assert q.primary == ("ts",) and q.series["ts"].tolist() == row["ts"]
        else:
            assert q.primary == ("ts1", "ts2")
            assert q.series["ts2"].tolist() == row["ts2"]
        assert row["question_hint"] not in q.question + q.context
        assert q.metadata["tid"] == row["tid"]
    assert sum(len(q.primary) == 2 for q in suite) == 11
    assert suite["timeseriesexam:280"].series["ts1"].size == 188


def test_real_merrill_sample(shared_data: Path) -> None:
    path = shared_data / "merrill_qa_subset" / "qa_mcq_subset.jsonl"
    rows = [json.loads(line) for line in path.open() if line.strip()]
    suite, report = load_merrill(path)
    assert report.ok and not report.skipped and len(suite) == len(rows) == 270
    assert len({q.group for q in suite}) == len({r["uuid"] for r in rows}) == 208
    golds = {(r["uuid"], r["question"]): r["label"] for r in rows}
    for q in suite:
        assert golds[(q.metadata["uuid"], q.question)] == q.gold
        assert "gpt_pred" not in json.dumps(dict(q.metadata))
    assert {q.subtask for q in suite} == {
        "analogical_reasoning",
        "fact_checking",
        "counterfactual_reasoning",
        "argumentation",
        "explanation",
    }


# ---------------------------------------------------------------------------- CLI


def test_cli_round_trip(tests_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "tmp.parquet"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tsevo",
            "data",
            "load",
            "timeseriesexam",
            str(tests_data / "timeseriesexam/good"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote 4 questions" in proc.stdout
    direct, _ = load_timeseriesexam(tests_data / "timeseriesexam/good")
    back = Suite.load(out)
    assert [q.fingerprint for q in back] == [q.fingerprint for q in direct]
    assert [q.gold for q in back] == [q.gold for q in direct]
    assert [q.group for q in back] == [q.group for q in direct]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "tsevo",
            "data",
            "load",
            "mmts",
            str(tests_data / "mmts/malformed"),
            "--out",
            str(tmp_path / "b.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "record 'mmts:11'" in bad.stderr
