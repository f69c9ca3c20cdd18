"""One writer per run folder: a second process gets "in use by PID N"; readers never block;
a lock left by a killed writer is recovered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import round_fixtures as rf
from tsevo.store import RunFolderBusy, RunLayout, RunLock, RunStore
from tsevo.store.lock import holder

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from tsevo.store import RunLock
    lock = RunLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    sys.stdin.read()   # hold the lock until the test closes our stdin (or kills us)
    lock.release()
    print("released", flush=True)
    """
)


@pytest.fixture
def other_writer(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A second process holding the lock of a run folder."""
    run = tmp_path / "run"
    p = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=rf.env(),
        cwd=rf.REPO,
    )
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "locked"
    yield p, run
    if p.poll() is None:
        p.kill()
    p.wait(10)


def test_second_writer_is_refused_with_the_holders_pid(
    other_writer: tuple[subprocess.Popen[str], Path],
) -> None:
    p, run = other_writer
    with pytest.raises(RunFolderBusy, match=f"in use by PID {p.pid}") as err:
        RunLock(run).acquire()
    assert err.value.pid == p.pid and holder(run) == p.pid
    # the engine refuses before writing anything
    from tsevo.evolve import ProtocolConfig, evolve

    with pytest.raises(RunFolderBusy, match=f"PID {p.pid}"):
        evolve(rf.tiny_suite(), config=ProtocolConfig(seed=rf.SEED, root="empty"), out=run)
    assert not RunLayout(run).is_run()
    # the holder finishes; now the folder is free
    assert p.stdin is not None and p.stdout is not None
    p.stdin.close()
    assert p.stdout.readline().strip() == "released"
    p.wait(10)
    with RunLock(run):
        assert holder(run) == os.getpid()
    assert holder(run) is None


def test_stale_lock_of_a_killed_writer_is_recovered(
    other_writer: tuple[subprocess.Popen[str], Path],
) -> None:
    p, run = other_writer
    p.send_signal(signal.SIGKILL)
    p.wait(10)
    assert holder(run) == p.pid  # the dead writer's PID is still in the file
    with RunLock(run) as lock:
        assert lock.held and holder(run) == os.getpid()


def test_readers_never_block(other_writer: tuple[subprocess.Popen[str], Path]) -> None:
    p, run = other_writer
    store = RunStore.create(run, {"x": 1})  # in-process writer of a test: no lock taken here
    assert RunStore.open(run).config == {"x": 1}
    assert [e["kind"] for e in store.events()] == ["create"]
    assert holder(run) == p.pid


def test_lock_is_reentrant_within_a_process(tmp_path: Path) -> None:
    run = tmp_path / "r"
    with RunLock(run), RunLock(run):
        assert holder(run) == os.getpid()
    with RunLock(run):
        pass


def test_cli_reports_a_busy_folder(other_writer: tuple[subprocess.Popen[str], Path]) -> None:
    from tsevo.cli import main

    _, run = other_writer
    assert main(["evolve", "--suite", "synthetic:tiny", "--out", str(run), "--quiet"]) == 2


def _hold(run: Path) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=rf.env(),
        cwd=rf.REPO,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    return p


def _let_go(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.close()
    assert p.stdout.readline().strip() == "released"
    p.wait(10)


def test_notebook_holds_the_lock_only_while_its_call_writes(tmp_path: Path) -> None:
    """ensure_run locks the run while its round writes and gives it back when the call returns
    (not for the kernel's lifetime); afterwards a report, the tidy frames and a notebook's
    ensure_run all read the run while another process holds it, and a notebook call that would
    write to a folder another process holds is refused naming that PID."""
    from tsevo.analysis import flips_df, run_summary
    from tsevo.cli import main
    from tsevo.notebook import QuickstartConfig, ensure_run

    run = tmp_path / "nb"
    cfg = QuickstartConfig(run_dir=str(run), size="2", seed=0)  # 24 questions: a few seconds
    seen: list[int | None] = []
    assert ensure_run(cfg, log=lambda _: seen.append(holder(run))) == run
    assert seen and set(seen) == {os.getpid()}  # held by this kernel while the round wrote
    assert holder(run) is None  # ... and given back when the call returned
    p = _hold(run)  # so another process takes it at once
    try:
        assert holder(run) == p.pid
        assert ensure_run(cfg, log=lambda _: None) == run  # finished: reused, no lock needed
        assert run_summary(run)["rounds"] and len(flips_df(run)) > 0
        assert main(["report", str(run), "--json"]) == 0
        busy = tmp_path / "busy"
        other = _hold(busy)
        try:
            with pytest.raises(RunFolderBusy, match=f"in use by PID {other.pid}"):
                ensure_run(QuickstartConfig(run_dir=str(busy), size="2", seed=0), log=print)
            assert not RunLayout(busy).is_run()
        finally:
            _let_go(other)
    finally:
        _let_go(p)


def test_a_study_cell_held_by_another_process_is_reported_busy(tmp_path: Path) -> None:
    """A study cell runs under its folder's lock: a second runner gets ``busy`` naming the PID
    and starts nothing."""
    from tsevo.studies.attempt import run_attempt
    from tsevo.studies.cells import Cell

    folder = tmp_path / "study" / "seed=0"
    cell = Cell("study", "seed=0", tmp_path / "nb.ipynb", "python3", {"seed": 0}, folder)
    p = _hold(folder)
    try:
        out = run_attempt(cell, 1)
        assert out["outcome"] == "busy" and f"in use by PID {p.pid}" in out["stderr_tail"]
        assert not cell.log_path(1).exists()
    finally:
        _let_go(p)
