"""One writer per run folder: an advisory lock on ``run.lock``.

``evolve``, studies and a notebook's ``ensure_run`` (only while it writes) hold the lock; readers
(reports, analysis frames, widgets) never take it and never wait. A second writer gets
:class:`RunFolderBusy` naming the holder's PID at once instead of interleaving appends and
renames with it. The lock is a POSIX record lock (``fcntl.lockf``), which belongs to the process
that took it: the kernel drops it when that process dies, even while processes it forked (a
worker pool) live on, so a lock left by a killed writer is recovered by the next writer without
any cleanup (the stale PID in the file is just overwritten). Within one process the lock is
re-entrant: a notebook call that runs ``evolve`` on the same folder takes it once. (A POSIX lock
is also dropped when its process closes *any* descriptor of the file, so this module is the only
code that opens it, and reads it through the held descriptor.)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from .layout import RunLayout

__all__ = ["RunFolderBusy", "RunLock", "holder", "run_lock"]


class RunFolderBusy(RuntimeError):
    """Another process holds the run folder's lock."""

    def __init__(self, root: Path, pid: int | None) -> None:
        who = f"PID {pid}" if pid else "another process"
        super().__init__(
            f"run folder {root} in use by {who}; wait for it to finish (or stop it), "
            "or choose another folder. Reading it (tsevo report, notebooks) needs no lock."
        )
        self.root = root
        self.pid = pid


_HELD: dict[str, list[int]] = {}  # lock path -> [fd, depth, pid] for the locks held here
_GUARD = threading.Lock()


def _held(key: str) -> list[int] | None:
    entry = _HELD.get(key)
    if entry is not None and entry[2] != os.getpid():  # inherited through fork: not ours
        _HELD.clear()
        return None
    return entry


def holder(root: str | Path) -> int | None:
    """The PID recorded by the lock's current or last holder (None when there is none)."""
    path = RunLayout(root).lock
    with _GUARD:
        entry = _held(str(path))
        try:
            if entry is not None:
                data = os.pread(entry[0], 32, 0)
            else:
                with path.open("rb") as fh:  # this process holds no lock on it: safe to close
                    data = fh.read(32)
        except OSError:
            return None
    text = data.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def _read_pid(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:  # only called by a process that does not hold this lock
            text = fh.read(32).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class RunLock:
    """The writer's lock of one run folder (a context manager; re-entrant within a process).

    Args:
        root: The run folder (created if missing, so the lock can live in it).
    """

    def __init__(self, root: str | Path) -> None:
        self.layout = RunLayout(root)
        self.path = self.layout.lock
        self.held = False

    def acquire(self) -> RunLock:
        """Take the lock without waiting.

        Raises:
            RunFolderBusy: another process holds it.
        """
        key = str(self.path)
        with _GUARD:
            if _held(key) is not None:
                _HELD[key][1] += 1
                self.held = True
                return self
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                pid = _read_pid(self.path)
                raise RunFolderBusy(self.layout.root, pid) from None
            except BaseException:
                os.close(fd)
                raise
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            _HELD[key] = [fd, 1, os.getpid()]
            self.held = True
            return self

    def release(self) -> None:
        """Give the lock back (the last release of this process unlocks the file)."""
        if not self.held:
            return
        self.held = False
        key = str(self.path)
        with _GUARD:
            entry = _held(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del _HELD[key]
            fd = entry[0]
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no stale PID for readers of a released lock
            fcntl.lockf(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


@contextlib.contextmanager
def run_lock(root: str | Path | None) -> Iterator[RunLock | None]:
    """Hold ``root``'s writer lock for a block (``None``: nothing to lock)."""
    if root is None:
        yield None
        return
    with RunLock(root) as lock:
        yield lock
