"""Faults a long run meets on disk: a full disk or a permission error at the store's write helpers,
a corrupted LLM response cache, and a tampered library folder.

* ENOSPC and EACCES are injected, one at a time, at every kind of write a run makes (an atomic
  file write, an append to an evaluation log that leaves a torn half line, the library folder's
  save); each stops the run with that error, and rerunning once "space returns" resumes it to the
  uninterrupted run's library, tables and report, with no evaluation spent twice.
* A corrupted or truncated ``llm_cache.sqlite`` is detected on open, set aside and rebuilt (never
  trusted); a corrupted replay cassette is an error.
* A library folder whose tool source was edited after saving, or whose hash is missing, is
  refused on load with the file's path in the message.
"""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import round_fixtures as rf
from tsevo import fileio, store
from tsevo.library.library import Library
from tsevo.roles.llm.accounting import Usage
from tsevo.roles.llm.cache import CacheCorrupted, CachedReply, ResponseCache, request_key

# ------------------------------------------------------------------------------------------
# disk full / permission denied at the store's write helpers


class _Fault:
    """Raise ``OSError(code)`` on the ``nth`` call of one write helper (once)."""

    def __init__(self, helper: str, nth: int, code: int) -> None:
        self.helper, self.nth, self.code = helper, nth, code
        self.calls = 0
        self.fired = False

    def due(self) -> bool:
        self.calls += 1
        if self.calls == self.nth and not self.fired:
            self.fired = True
            return True
        return False

    def error(self, where: Any) -> OSError:
        return OSError(self.code, f"injected: {errno.errorcode[self.code]}", str(where))


@contextlib.contextmanager
def inject(monkeypatch: pytest.MonkeyPatch, fault: _Fault) -> Iterator[_Fault]:
    """Patch one of the store's write helpers with ``fault``."""
    with monkeypatch.context() as m:
        if fault.helper == "atomic":
            original = fileio.atomic_writer

            @contextlib.contextmanager
            def writer(path: Any) -> Iterator[Any]:
                with original(path) as fh:
                    if fault.due():  # after the temporary file exists: it must be cleaned up
                        raise fault.error(path)
                    yield fh

            m.setattr(fileio, "atomic_writer", writer)
        elif fault.helper == "append":
            append = store.RecordLog.append

            def torn_append(self: Any, records: Any) -> None:
                recs = list(records)
                if recs and self.path.parent.name == "evals" and fault.due():
                    line = json.dumps(dict(recs[0]), sort_keys=True, default=str)
                    with self.path.open("a", encoding="utf-8") as fh:
                        fh.write(line[: len(line) // 2])  # the disk filled mid-line
                    raise fault.error(self.path)
                append(self, recs)

            m.setattr(store.RecordLog, "append", torn_append)
        else:
            save = store.RunStore.save

            def failing_save(self: Any, rel: Any, obj: Any) -> Any:
                if fault.due():
                    raise fault.error(rel)
                return save(self, rel, obj)

            m.setattr(store.RunStore, "save", failing_save)
        yield fault


FAULTS = [
    ("append", 2, errno.ENOSPC),  # during the base pass
    ("atomic", 4, errno.EACCES),  # a step's artifact
    ("append", 9, errno.EACCES),  # mid-synthesis / gate evaluations
    ("atomic", 10, errno.ENOSPC),
    ("save", 1, errno.ENOSPC),  # the accepted library
]


def test_write_faults_resume_to_the_uninterrupted_result(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = rf.cli_run()
    name = "faults"
    shutil.rmtree(rf.tmp_root() / name, ignore_errors=True)
    for helper, nth, code in FAULTS:
        with inject(monkeypatch, _Fault(helper, nth, code)) as fault, pytest.raises(OSError) as err:
            rf.run_inprocess(name)
        assert fault.fired and err.value.errno == code, (helper, nth, err.value)
    run = rf.run_inprocess(name).path  # space came back: the same call resumes
    assert not list(run.rglob("*.tmp")), "a failed atomic write left its temporary file"

    final, expected = rf.eval_logs(run), rf.eval_logs(ref.path)
    assert sorted(final) == sorted(expected)
    for arm, lines in final.items():
        ids = rf.qids(lines)
        assert len(ids) == len(set(ids)), f"{arm}: a question was answered twice"
        assert sorted(ids) == sorted(rf.qids(expected[arm])), arm
    assert rf.tree_bytes(run / "library") == rf.tree_bytes(ref.path / "library")
    for rel in rf.COMPARED_TABLES:
        a, b = (run / rel).read_bytes(), (ref.path / rel).read_bytes()
        assert a == b, f"{rel}: {rf.digest(a)} != {rf.digest(b)}"
    assert rf.summary_without_timings(run) == rf.summary_without_timings(ref.path)
    layers = json.loads((run / "manifest.json").read_text())["sandbox"]  # which layers ran
    assert layers["mode"] in ("require", "best") and {"seccomp", "landlock"} <= set(layers)


# ------------------------------------------------------------------------------------------
# the LLM response cache


def _filled_cache(path: Path, n: int = 300) -> list[str]:
    keys = []
    with ResponseCache(path) as c:
        for i in range(n):
            k = request_key({"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]})
            c.put(k, {"model": "m"}, CachedReply(f"reply {i} " + "x" * 400, Usage(10, 5)))
            keys.append(k)
    return keys


def _truncate(p: Path) -> None:
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _scribble(p: Path) -> None:
    data = bytearray(p.read_bytes())
    for off in range(4096, len(data), 8192):  # the first bytes of every other page
        data[off : off + 64] = b"\xa5" * 64
    p.write_bytes(bytes(data))


def _garbage(p: Path) -> None:
    p.write_bytes(b"this is not a database" * 100)


@pytest.mark.parametrize("damage", [_truncate, _scribble, _garbage], ids=lambda f: f.__name__)
def test_corrupted_cache_is_set_aside_and_rebuilt(tmp_path: Path, damage: Any) -> None:
    path = tmp_path / "llm_cache.sqlite"
    keys = _filled_cache(path)
    damage(path)
    with pytest.warns(RuntimeWarning, match="set aside"), ResponseCache(path) as c:
        assert c.set_aside is not None and c.set_aside.exists()
        assert c.set_aside.name == "llm_cache.sqlite.corrupt-1"
        assert len(c) == 0 and c.get(keys[0]) is None  # nothing of the damaged file is trusted
        c.put(keys[0], {"model": "m"}, CachedReply("fresh", Usage(1, 1)))
    with ResponseCache(path) as again:  # the rebuilt cache is sound
        assert again.set_aside is None and again.get(keys[0]).text == "fresh"  # type: ignore[union-attr]


def test_corrupted_cassette_is_refused_in_replay_mode(tmp_path: Path) -> None:
    path = tmp_path / "cassette.sqlite"
    _filled_cache(path, 50)
    _garbage(path)
    with pytest.raises(CacheCorrupted, match="corrupted"):
        ResponseCache(path, mode="replay")
    assert path.exists() and not list(tmp_path.glob("*.corrupt-*"))  # a cassette is not moved


def test_sound_cache_opens_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    keys = _filled_cache(path, 20)
    with ResponseCache(path) as c:
        assert c.set_aside is None and len(c) == 20 and c.get(keys[3]) is not None


def test_sqlite_rejects_our_garbage_on_its_own(tmp_path: Path) -> None:
    """Sanity: the damaged files really are unreadable to plain sqlite3 (else the test proves nothing)."""
    path = tmp_path / "g.sqlite"
    _filled_cache(path, 5)
    _garbage(path)
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(path).execute("SELECT * FROM responses").fetchall()


# ------------------------------------------------------------------------------------------
# a tampered library folder

EXPERT = Path(__file__).resolve().parents[1] / "tsevo" / "library" / "roots-data" / "expert"


@pytest.fixture
def lib_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "library"
    shutil.copytree(EXPERT, dst)
    Library.load(dst)  # sound as shipped
    return dst


def test_edited_tool_source_is_refused_naming_the_file(lib_copy: Path) -> None:
    src = sorted((lib_copy / "stage_0").glob("*.py"))[0]
    src.write_text(src.read_text() + "\n# edited after saving\n")
    with pytest.raises(ValueError) as err:
        Library.load(lib_copy)
    assert str(src) in str(err.value) and "hash" in str(err.value)


def test_missing_hash_is_refused_naming_the_file(lib_copy: Path) -> None:
    stage = lib_copy / "stage_0" / "stage.json"
    d = json.loads(stage.read_text())
    d["tools"][0].pop("hash")
    stage.write_text(json.dumps(d))
    with pytest.raises(ValueError) as err:
        Library.load(lib_copy)
    assert str(stage) in str(err.value) and "no stored hash" in str(err.value)


def test_edited_metadata_is_refused(lib_copy: Path) -> None:
    stage = lib_copy / "stage_0" / "stage.json"
    d = json.loads(stage.read_text())
    d["tools"][0]["guidance"]["text"] += " (tampered)"
    stage.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="does not match the hash"):
        Library.load(lib_copy)


# ------------------------------------------------------------------------------------------
# a killed writer leaves no worker process behind

_POOL_SCRIPT = """
import os, sys, time
from tsevo.evolve.plan import local_plans

class Dossier:
    def __init__(self, i):
        self.bucket_id = f"b{i}"

class SlowPlanner:
    parallel = "process"
    def plan(self, dossier, feedback=()):
        with open(sys.argv[1], "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(120)

local_plans([Dossier(i) for i in range(4)], SlowPlanner(), workers=2)
"""


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_killed_run_leaves_no_pool_worker_behind(tmp_path: Path) -> None:
    """SIGKILL of a run during the engine's forked planning pool takes the pool's workers along
    (they would otherwise wait forever on a queue whose other end is gone)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pids = tmp_path / "pids"
    p = subprocess.Popen([sys.executable, "-c", _POOL_SCRIPT, str(pids)], env=rf.env(), cwd=rf.REPO)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not pids.exists() or len(pids.read_text().split()) < 2):
        time.sleep(0.05)
    workers = [int(x) for x in pids.read_text().split()]
    assert len(workers) == 2 and p.pid not in workers
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.05)
    left = [w for w in workers if _alive(w)]
    for w in left:  # clean up before failing
        os.kill(w, signal.SIGKILL)
    assert not left, f"pool workers {left} outlived the killed run"


def test_every_process_pool_dies_with_its_parent() -> None:
    """The engine's and the builtin roles' process pools all come from tsevo.procs.forked_pool."""
    root = Path(__file__).resolve().parents[1] / "tsevo"
    offenders = [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*.py"))
        if p.name != "procs.py" and "ProcessPoolExecutor(" in p.read_text(encoding="utf-8")
    ]
    assert not offenders, offenders
