"""kill -9 at three points of a Mara chain: the resumed run is byte-identical, nothing re-spent.

A driver process (``python -m tests.test_marachain_resume OUT``, started by the test) imports tsevo
once and forks one child per phase, each running the real ``tsevo evolve`` command line
(``synthetic:tiny``, seed 5, chains on with depth 3, where work group ``g3`` misses the bar with
every direct attempt). A child kills itself with SIGKILL at a precise point:

0. right after the ``plan`` step is stored (the shared starting state ``S``: planning is the slow
   part of the round and happens before any chain);
1. on ``S``'s copy ``K``: right after the first chain node is scored (its evaluations are stored;
   its ledger entry and candidate files are not);
2. resumed, mid-mutation of the second node (its draft written and checked, nothing recorded);
3. resumed, right after the chain's last ledger entry is appended, before synthesis is stored
   (the round's next step);

then ``K`` runs to completion. ``S``'s other copy ``R`` runs to completion uninterrupted. The
round's tables, candidate folders, chain ledger and library of ``K`` must equal ``R``'s byte for
byte, every evaluation log's lines before a kill must be a prefix of its lines after, no question
may be answered twice in an arm, and every ledger key is recorded once.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import round_fixtures as rf

SEED = 5
DEPTH = 3
#: The chain of this seed's round (work group ``g3`` misses the bar with every direct attempt).
_NODE = "r1.g3.c1.s"
TABLES = list(rf.COMPARED_TABLES)
TIMES: list[float] = []


def _argv(cfg: Path, run: Path) -> list[str]:
    return [
        "evolve",
        "--suite",
        "synthetic:tiny",
        "--seed",
        str(SEED),
        "--config",
        str(cfg),
        "--out",
        str(run),
        "--quiet",
    ]


# --------------------------------------------------------------------------- the driver
def _die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _start(argv: list[str], install: Callable[[], None] | None) -> int:
    """Fork a child that runs the command line (hooks installed there); returns its pid."""
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            if install is not None:
                install()
            from tsevo.cli import main

            code = main(argv)
        finally:
            os._exit(code)
    return pid


def _wait(pid: int) -> int:
    """A child's wait status decoded: its exit code, or minus the signal that killed it."""
    t = time.monotonic()
    _, status = os.waitpid(pid, 0)
    TIMES.append(round(time.monotonic() - t, 1))
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _phase(argv: list[str], install: Callable[[], None] | None) -> int:
    """Run the command line in a forked child and wait for it."""
    return _wait(_start(argv, install))


def _kill_after_event(step: str) -> Callable[[], None]:
    def install() -> None:
        from tsevo import store

        original = store.RecordLog.append

        def append(self: Any, records: Any) -> None:
            recs = list(records)
            original(self, recs)
            if self.path.name == "events.jsonl" and any(
                r.get("kind") == "step_done" and r.get("step") == step for r in recs
            ):
                _die()

        store.RecordLog.append = append  # type: ignore[method-assign]

    return install


def _kill_after_scoring(node_id: str) -> Callable[[], None]:
    def install() -> None:
        from tsevo.evolve import chain_walk

        original = chain_walk.score_node

        def score(inp: Any, draft: Any, *rest: Any) -> Any:
            out = original(inp, draft, *rest)
            if draft.id == node_id:
                _die()
            return out

        chain_walk.score_node = score  # type: ignore[assignment]

    return install


def _kill_mid_mutation(node_id: str) -> Callable[[], None]:
    def install() -> None:
        from tsevo.evolve import chain_walk

        original = chain_walk._mutate

        def mutate(inp: Any, move: Any, suffix: str, nid: str) -> Any:
            out = original(inp, move, suffix, nid)
            if nid == node_id:
                _die()
            return out

        chain_walk._mutate = mutate  # type: ignore[assignment]

    return install


def _kill_after_ledger_append(key: str) -> Callable[[], None]:
    def install() -> None:
        from tsevo import store

        original = store.RecordLog.append

        def append(self: Any, records: Any) -> None:
            recs = list(records)
            original(self, recs)
            if self.path.name == "ledger.jsonl" and any(r.get("key") == key for r in recs):
                _die()

        store.RecordLog.append = append  # type: ignore[method-assign]

    return install


def drive(out: Path) -> dict[str, Any]:
    """Run every phase under ``out``; returns what the test checks (statuses, log snapshots)."""
    from tsevo.evolve.config import ProtocolConfig
    from tsevo.evolve.support import SupportConfig
    from tsevo.marachain import MaraConfig

    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    cfg = out / "config.json"
    # the paper's split: the chain story this test kills was found under it
    paper = SupportConfig(planner_requests=False, triage_bound=False)
    ProtocolConfig(marachain=MaraConfig(depth=DEPTH), support=paper).save(cfg)
    start, ref, killed = out / "S", out / "R", out / "K"
    report: dict[str, Any] = {"phases": [], "snapshots": []}
    rc = _phase(_argv(cfg, start), _kill_after_event("plan"))
    report["phases"].append(["plan", rc])
    shutil.copytree(start, ref)
    shutil.copytree(start, killed)
    # the uninterrupted reference runs beside the killed run (they share nothing but the code);
    # the kill points are the chain's first and second node and the round's last ledger entry
    reference = _start(_argv(cfg, ref), None)
    first, second, last = f"{_NODE}1", f"{_NODE}2", f"{_NODE}{DEPTH}:score"
    kills = [
        ("after scoring " + first, _kill_after_scoring(first)),
        ("mid-mutation of " + second, _kill_mid_mutation(second)),
        ("after the ledger append " + last, _kill_after_ledger_append(last)),
    ]
    report["snapshots"].append(rf.eval_logs(killed))
    for name, install in kills:
        report["phases"].append([name, _phase(_argv(cfg, killed), install)])
        report["snapshots"].append(rf.eval_logs(killed))
        report.setdefault("ledger_after", []).append(
            [json.loads(x)["key"] for x in _lines(killed / "rounds/r1/chains/ledger.jsonl")]
        )
        report.setdefault("synthesized", []).append((killed / "rounds/r1/synthesis.json").exists())
    report["phases"].append(["resume to the end", _phase(_argv(cfg, killed), None)])
    report["phases"].append(["reference", _wait(reference)])
    ledger = [json.loads(x) for x in _lines(ref / "rounds/r1/chains/ledger.jsonl")]
    report["ledger_keys"] = [e["key"] for e in ledger]
    report["snapshots"].append(rf.eval_logs(killed))
    report["seconds"] = round(time.monotonic() - t0, 1)
    report["phase_seconds"] = TIMES
    return report


def _lines(path: Path) -> list[str]:
    return rf.jsonl_lines(path) if path.exists() else []


# --------------------------------------------------------------------------- the test
@pytest.mark.slow
def test_chain_killed_at_three_points_resumes_byte_identical() -> None:
    out = rf.tmp_root() / "marachain_resume"
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run(
        [rf.PY, "-m", "tests.test_marachain_resume", str(out)],
        cwd=rf.REPO,
        env=rf.env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    phases = dict((n, rc) for n, rc in report["phases"])
    assert phases.pop("plan") == -signal.SIGKILL
    assert phases.pop("reference") == 0
    assert phases.pop("resume to the end") == 0
    assert len(phases) == 3, f"the reference chain has fewer than two nodes: {report}"
    assert all(rc == -signal.SIGKILL for rc in phases.values()), phases
    ref, run = out / "R", out / "K"

    # each kill left what it should: no ledger entry for the scored node, one for the mutated
    # node's predecessor, every entry after the last kill, and synthesis never stored before it
    keys = report["ledger_keys"]
    after = report["ledger_after"]
    assert after[0] == [] and after[1] == keys[:1] and after[2] == keys
    assert report["synthesized"] == [False, False, False]

    # nothing re-spent: stored evaluation lines are never rewritten, no question twice in an arm
    snaps = report["snapshots"]
    for before, later in itertools.pairwise(snaps):
        for arm, lines in before.items():
            assert later[arm][: len(lines)] == lines, f"{arm}: stored evaluations were rewritten"
    final, expected = snaps[-1], rf.eval_logs(ref)
    assert sorted(final) == sorted(expected)
    for arm, lines in final.items():
        ids = rf.qids(lines)
        assert len(ids) == len(set(ids)), f"{arm}: a question was answered twice"
        assert sorted(ids) == sorted(rf.qids(expected[arm])), arm

    # the ledger: the same entries, each key once (a resumed chain never records a step twice)
    assert (run / "rounds/r1/chains/ledger.jsonl").read_bytes() == (
        ref / "rounds/r1/chains/ledger.jsonl"
    ).read_bytes()
    assert len(set(keys)) == len(keys)

    # byte-identical tables, candidates and library; the report equal up to timings
    for rel in TABLES:
        a, b = (run / rel).read_bytes(), (ref / rel).read_bytes()
        assert a == b, f"{rel}: {rf.digest(a)} != {rf.digest(b)}"
    syn = json.loads((run / "rounds/r1/synthesis.json").read_text())
    assert any("chain" in g and g["chain"]["nodes"] for g in syn)
    assert rf.tree_bytes(run / "rounds/r1/candidates") == rf.tree_bytes(
        ref / "rounds/r1/candidates"
    )
    assert rf.tree_bytes(run / "library") == rf.tree_bytes(ref / "library")
    assert rf.summary_without_timings(run) == rf.summary_without_timings(ref)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    rep = drive(target)
    (target / "report.json").write_text(json.dumps(rep))
