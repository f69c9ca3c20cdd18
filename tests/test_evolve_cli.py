"""``tsevo evolve`` and ``tsevo report`` on the shared tiny run (one real ``python -m tsevo`` round)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests import round_fixtures as rf
from tsevo.cli import main


@pytest.fixture(scope="module")
def cli() -> rf.Run:
    return rf.cli_run()


def _summary_part(stdout: str) -> str:
    """What ``tsevo evolve`` prints after its progress log: the summary text."""
    _head, sep, tail = stdout.partition("\n\ntsevo run ")
    assert sep, f"no summary in the output:\n{stdout[-2000:]}"
    return "tsevo run " + tail


def test_evolve_prints_funnel_gate_decision_and_test_table(cli: rf.Run) -> None:
    out = cli.stdout
    assert "round 1: base pass" in out  # the progress log comes first
    text = _summary_part(out)
    assert text.startswith(f"tsevo run {cli.path}")
    assert "== round 1: ACCEPTED" in text
    funnel = next(ln for ln in text.splitlines() if ln.startswith("funnel: "))
    for label in (
        "train errors",
        "buckets",
        "contracts",
        "synthesis attempts",
        "passed prefilter",
        "candidates to gate",
        "deployed artifacts",
        "gate path strict",
    ):
        assert label in funnel, label
    gate = _read(cli.path, "rounds/r1/reconcile.json")["final_gate"]  # the decision that deployed
    assert (
        f"gate (strict): helped {gate['h']}, harmed {gate['m']}, n {gate['n']} of {gate['n_attempted']}"
        in text
    )
    assert "report-only test (accuracy %, before → after):" in text
    table = text.split("report-only test (accuracy %, before → after):", 1)[1].splitlines()
    tasks = sorted({q.task for q in rf.tiny_suite().test})
    rows = {ln.split()[0]: ln.split() for ln in table[2:] if ln.startswith("  ") and ln.split()}
    for t in [*tasks, "ALL"]:
        assert t in rows, t
    test = _read(cli.path, "rounds/r1/test.json")
    for row in test["tasks"]:
        printed = rows[row["task"]]
        assert int(printed[1]) == row["n"]
        assert float(printed[2]) == pytest.approx(100 * row["before"], abs=0.051)
        assert float(printed[3]) == pytest.approx(100 * row["after"], abs=0.051)
        assert float(printed[4]) == pytest.approx(100 * row["delta"], abs=0.051)
        assert (int(printed[5]), int(printed[6])) == (row["helped"], row["harmed"])
    deployed = _read(cli.path, "rounds/r1/round.json")["deployed"]
    for tid in deployed:
        assert f"  + {tid} [" in text


def test_report_reprints_the_same_text(cli: rf.Run, capsys: Any) -> None:
    assert main(["report", str(cli.path)]) == 0
    printed = capsys.readouterr().out
    assert printed.rstrip("\n") == _summary_part(cli.stdout).rstrip("\n")


def test_report_json_for_scripts(cli: rf.Run) -> None:
    p = rf.run_cli(["report", str(cli.path), "--json"])
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    (rd,) = data["rounds"]
    assert rd["status"] == "accepted"
    gate = _read(cli.path, "rounds/r1/reconcile.json")["final_gate"]
    assert rd["final_gate"]["path"] == "strict" and rd["final_gate"]["passed"] is True
    for k in ("h", "m", "n", "delta", "delta_lb", "error_rate"):
        assert rd["final_gate"][k] == gate[k]
    f = rd["funnel"]
    for k in ("errors", "buckets", "contracts", "attempts", "survivors", "deployed", "gate_path"):
        assert k in f
    assert f["deployed"] == len(rd["deployed"]) and f["gate_path"] == "strict"
    assert set(rd["timings"]) >= {"base_pass", "cluster", "plan", "synthesize", "gate"}
    assert all(isinstance(v, float | int) and v >= 0 for v in rd["timings"].values())
    # per-task base/final test accuracy and delta, recomputed from the stored test records
    tp = pd.read_parquet(cli.path / "rounds/r1/test.parquet")
    tasks = rd["test"]["tasks"]
    assert [t["task"] for t in tasks] == [*sorted(tp.task.unique()), "ALL"]
    for row in tasks:
        sub = tp if row["task"] == "ALL" else tp[tp.task == row["task"]]
        assert row["before"] == pytest.approx(sub.before_correct.mean(), abs=1e-6)
        assert row["after"] == pytest.approx(sub.after_correct.mean(), abs=1e-6)
        assert row["delta"] == pytest.approx(row["after"] - row["before"], abs=2e-6)
        assert row["helped"] == int((sub.flip == "helped").sum())
        assert row["harmed"] == int((sub.flip == "harmed").sum())
    counts = rd["test"]["counts"]
    assert (counts["helped"], counts["harmed"]) == (tasks[-1]["helped"], tasks[-1]["harmed"])
    assert rd["test"]["report_only"] is True
    # the config is the frozen protocol with the CLI's seed; the manifest names the backend
    assert data["config"]["protocol"]["seed"] == rf.SEED
    assert data["config"]["suite"]["ref"] == f"synthetic:tiny:seed={rf.SEED}"
    assert data["manifest"]["backend"] == "builtin"
    assert data["library"] and {x["id"] for x in data["library"]} >= set(
        x["id"] for x in rd["deployed"]
    )


def test_evolve_refuses_a_folder_holding_another_config(cli: rf.Run, capsys: Any) -> None:
    before = (cli.path / "events.jsonl").read_bytes()
    lib = rf.tree_bytes(cli.path / "library")
    argv = rf.tsevo_cmd(cli.path, seed=rf.SEED + 1)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "different config" in err
    assert (cli.path / "events.jsonl").read_bytes() == before
    assert rf.tree_bytes(cli.path / "library") == lib


def test_report_on_a_missing_run_is_a_clean_error(tmp_path: Path, capsys: Any) -> None:
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "not a tsevo run" in capsys.readouterr().err


def _read(run: Path, rel: str) -> Any:
    return json.loads((run / rel).read_text(encoding="utf-8"))


def test_evolve_refuses_to_resume_a_run_under_other_lexicon_additions(
    cli: rf.Run, tmp_path: Path, capsys: Any
) -> None:
    # the additions change what the builtin planner searches: config.json records them (under
    # "roles"), so the shared run, made without any, is not resumed under some
    extra = tmp_path / "concepts.json"
    extra.write_text(json.dumps({"wobbl": ["noise"]}))
    before = (cli.path / "events.jsonl").read_bytes()
    assert "roles" not in _read(cli.path, "config.json")
    assert main([*rf.tsevo_cmd(cli.path), "--concepts", str(extra)]) == 2
    assert "different config (differs in ['roles'])" in capsys.readouterr().err
    assert (cli.path / "events.jsonl").read_bytes() == before
