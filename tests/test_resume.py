"""Kill a real ``tsevo evolve`` subprocess at several points, rerun it, and get the uninterrupted run.

The run is killed (SIGKILL) four times in a row, resuming in between:

1. from outside, as soon as the base pass's ``step_done`` event is on disk;
2. by itself mid-synthesis, on the third prefilter evaluation log, leaving a torn half line;
3. by itself mid-gate, after the current library's val arm is stored and while the candidate's
   val arm is half written;
4. by itself during the report-only test, after the round finished, on a torn test-arm line;

then it runs to completion. The library folder, every compared table and the report (without
timings) must equal those of an uninterrupted run of the same command, and no stored evaluation
may be recomputed: every log's lines before a kill are a prefix of its lines after, no question
is answered twice in an arm, and every arm holds exactly the questions of the uninterrupted run.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from tests import round_fixtures as rf


def _steps(run: Path) -> list[str]:
    return [
        e["step"]
        for e in map(json.loads, rf.jsonl_lines(run / "events.jsonl"))
        if e["kind"] == "step_done"
    ]


def _assert_prefix(before: dict[str, list[str]], after: dict[str, list[str]]) -> None:
    for arm, lines in before.items():
        assert after[arm][: len(lines)] == lines, f"stored records of {arm} were rewritten"


def _kill_externally_after_step(argv: list[str], run: Path, step: str) -> None:
    p = subprocess.Popen(
        [rf.PY, "-m", "tsevo", *argv],
        cwd=rf.REPO,
        env=rf.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    events = run / "events.jsonl"
    deadline = time.monotonic() + 120
    try:
        while p.poll() is None and time.monotonic() < deadline:
            if events.exists() and f'"step": "{step}"' in events.read_text(encoding="utf-8"):
                p.send_signal(signal.SIGKILL)
                break
            time.sleep(0.005)
    finally:
        if p.poll() is None and time.monotonic() >= deadline:
            p.kill()
        p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL, f"the run ended before it was killed ({p.returncode})"


def test_killed_run_resumes_to_the_uninterrupted_result() -> None:
    ref = rf.cli_run()
    run = rf.tmp_root() / "resumed"
    argv = rf.tsevo_cmd(run)

    # 1. external SIGKILL right after the base pass is stored
    _kill_externally_after_step(argv, run, "base_pass")
    assert "base_pass" in _steps(run) and "round" not in _steps(run)
    snap = rf.eval_logs(run)
    assert len(snap[f"train.{_root_fp()}"]) == len(rf.tiny_suite().train)

    # 2.-4. the process kills itself at precise points, each after resuming the previous kill
    kills = [
        ({"append": "train.", "nth": 3, "torn": True}, "synthesize"),
        ({"append": "val.", "nth": 2, "torn": True}, "gate"),
        ({"append": "test.", "nth": 1, "torn": True}, None),
    ]
    for spec, unfinished in kills:
        p = rf.run_cli(argv, kill=spec)
        assert p.returncode == -signal.SIGKILL, (spec, p.returncode, p.stderr[-2000:])
        if unfinished is not None:
            assert unfinished not in _steps(run), f"killed too late: {unfinished} already done"
        torn = [
            f
            for f in (run / "evals").glob(f"{spec['append']}*.jsonl")
            if not f.read_bytes().endswith(b"\n")
        ]
        assert len(torn) == 1, f"expected one torn log after {spec}"
        after = rf.eval_logs(run)
        _assert_prefix(snap, after)
        snap = after
    assert "round" in _steps(run), "the last kill was meant to hit the report step"
    assert not (run / "rounds/r1/test.json").exists()

    # 5. run to completion
    p = rf.run_cli(argv)
    assert p.returncode == 0, p.stderr[-3000:]
    final = rf.eval_logs(run)
    _assert_prefix(snap, final)

    # nothing answered twice; exactly the evaluations of the uninterrupted run
    expected = rf.eval_logs(ref.path)
    assert sorted(final) == sorted(expected)
    for arm, lines in final.items():
        ids = rf.qids(lines)
        assert len(ids) == len(set(ids)), f"{arm}: a question was answered twice"
        assert sorted(ids) == sorted(rf.qids(expected[arm])), arm
        assert (run / "evals" / f"{arm}.jsonl").read_bytes().endswith(b"\n")

    # byte-identical library and tables, identical report (timings aside)
    assert rf.tree_bytes(run / "library") == rf.tree_bytes(ref.path / "library")
    assert rf.tree_bytes(run / "rounds/r1/library") == rf.tree_bytes(ref.path / "rounds/r1/library")
    for rel in rf.COMPARED_TABLES:
        a, b = (run / rel).read_bytes(), (ref.path / rel).read_bytes()
        assert a == b, f"{rel}: {rf.digest(a)} != {rf.digest(b)}"
    assert rf.summary_without_timings(run) == rf.summary_without_timings(ref.path)
    kinds = [e["kind"] for e in map(json.loads, rf.jsonl_lines(run / "events.jsonl"))]
    assert kinds.count("resume") == 4 and kinds.count("finished") == 1
    assert _steps(run).count("round") == 1
    # the printed summary is the uninterrupted run's, up to the folder name and the timings
    assert _summary_text(p.stdout, run) == _summary_text(ref.stdout, ref.path)


def _summary_text(stdout: str, run: Path) -> list[str]:
    text = stdout.split("\n\n", 1)[1].replace(str(run), "RUN")
    return [ln for ln in text.splitlines() if not ln.startswith("timings (s):")]


def test_rerunning_a_finished_run_spends_nothing(capsys) -> None:  # type: ignore[no-untyped-def]
    """The same command on a finished run reprints its summary without a single new evaluation."""
    from tsevo.cli import main

    ref = rf.cli_run()
    logs = rf.eval_logs(ref.path)
    lib = rf.tree_bytes(ref.path / "library")
    tables = {rel: (ref.path / rel).read_bytes() for rel in rf.COMPARED_TABLES}
    assert main(rf.tsevo_cmd(ref.path)) == 0
    out = capsys.readouterr().out
    assert rf.eval_logs(ref.path) == logs
    assert rf.tree_bytes(ref.path / "library") == lib
    assert {rel: (ref.path / rel).read_bytes() for rel in rf.COMPARED_TABLES} == tables
    assert "== round 1: ACCEPTED" in out


def _root_fp() -> str:
    from tsevo.library.library import Library

    return Library().fingerprint()
