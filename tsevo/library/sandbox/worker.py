"""Layer 3: the pre-warmed worker ("zygote") that forks the children that run tools.

The zygote is a fresh interpreter started by :class:`~tsevo.library.sandbox.Sandbox` with
``OMP/OPENBLAS/MKL_NUM_THREADS=1`` and ``PYTHONHASHSEED=0`` in its environment. Its imports
(numpy, scipy, the primitives, the facades) happen once, when this module is imported; it then
builds the facades, freezes the GC, and serves requests read from its stdin. It keeps one *spare*
child forked in advance (what a child does is in :mod:`.child`). A batch goes to the spare, which
applies the remaining rlimits and runs the items one after the other.

Results travel through a shared memory buffer (an anonymous ``MAP_SHARED`` mapping made by the
zygote for each child) instead of one pipe write per item: before each item the child stores the
item's index and start time in the buffer's header; after it, it appends the item's record and
publishes the count of finished items and bytes used. The zygote sleeps until the running item's
wall-clock deadline (it is not woken per item), SIGKILLs a child that misses it, and reads back
every finished record even from a killed child, so a runaway item costs only itself; the remaining
items go to a new child. A child that completes its range writes one byte to its pipe. The frame
and record formats are in :mod:`.wire`.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import mmap
import os
import pickle
import select
import signal
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

# what primitives commonly use, loaded here so children never import lazily under rlimits
import scipy.fft
import scipy.linalg
import scipy.signal
import scipy.special
import scipy.stats  # noqa: F401

from tsevo.library.primitives import CATALOG

from .child import PR_SET_PDEATHSIG, ChildRunner, exc_message, libc, vm_bytes
from .facades import build_base_namespace
from .limits import cpu_budget
from .oslayer import UnconfinedError
from .oslayer import prepare as prepare_os_layer
from .wire import (
    CUR,
    DONE,
    FULL,
    PROGRESS,
    RANGE,
    REC_KILL,
    SHM_BYTES,
    SHM_HEAD,
    T_START,
    TAG_KILL,
    grow_pipe,
    map_inputs,
    read_frame,
    write_frame,
)

__all__ = ["main"]


class _Child:
    """A forked child waiting for (or running) a batch: pid, pipe ends and its result buffer."""

    __slots__ = ("pid", "res_r", "shm", "task_w")

    def __init__(self, pid: int, task_w: int, res_r: int, shm: mmap.mmap) -> None:
        self.pid = pid
        self.task_w = task_w
        self.res_r = res_r
        self.shm = shm


class _Zygote:
    def __init__(
        self, preload: Sequence[str], inputs_fd: int | None = None, os_layer: str = "off"
    ) -> None:
        for spec in preload:
            modname, _, func = spec.partition(":")
            pre = importlib.import_module(modname)
            if func:
                getattr(pre, func)()

        warnings.simplefilter("ignore")  # numpy RuntimeWarnings would only cost time
        np.seterr(all="ignore")
        base_ns = build_base_namespace(CATALOG)
        self.primitive_names = sorted(
            n for n in type(base_ns["P"]).__dict__ if not n.startswith("_")
        )
        self.pid = os.getpid()
        self.spare: _Child | None = None
        self.zombies: list[int] = []
        self.live_shm: list[mmap.mmap] = []
        self.runner = ChildRunner(base_ns, map_inputs(inputs_fd), libc())
        self.runner.warm_up()
        self.runner.oslayer = prepare_os_layer(os_layer, self.runner.libc)
        gc.collect()
        gc.freeze()  # keep the GC from touching (and copying) the inherited heap in children

    # -- children --------------------------------------------------------------------------
    def fork_child(self) -> _Child:
        """Fork a child that prepares itself, then blocks until it is given a batch."""
        task_r, task_w = os.pipe()
        res_r, res_w = os.pipe()
        grow_pipe(task_w)
        shm = mmap.mmap(-1, SHM_BYTES)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; it only ever leaves through os._exit
            code = 70
            try:
                os.close(task_w)
                os.close(res_r)
                for other in self.live_shm:
                    other.close()  # other children's buffers are none of this child's business
                code = self.runner.child_main(task_r, res_w, shm, self.pid)
            finally:
                os._exit(code)
        os.close(task_r)
        os.close(res_w)
        os.set_blocking(res_r, False)
        self.live_shm.append(shm)
        return _Child(pid, task_w, res_r, shm)

    def release(self, child: _Child) -> None:
        """Drop the zygote's side of a finished child (pipe and buffer)."""
        with contextlib.suppress(OSError):
            os.close(child.res_r)
        with contextlib.suppress(ValueError):
            self.live_shm.remove(child.shm)
        child.shm.close()

    def ensure_spare(self) -> None:
        """Reap finished children and make sure a spare child is waiting."""
        self.reap()
        if self.spare is None:
            self.spare = self.fork_child()

    def reap(self) -> None:
        """Collect exit statuses of children that finished their batch."""
        still = []
        for pid in self.zombies:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if not done:
                still.append(pid)
        self.zombies = still

    def shutdown(self) -> None:
        """Kill the spare and any child still running."""
        for pid in [*self.zombies, *([self.spare.pid] if self.spare else [])]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.spare = None
        self.zombies = []

    # -- one batch -------------------------------------------------------------------------
    def run(self, head: dict[str, Any], payload: bytes) -> bytes:
        """Run one batch; return ``b"B"`` and the result stream (children's records, spliced).

        The items are split into up to ``max_children`` contiguous ranges, each run by its own
        child (in parallel); a range whose child is killed continues in a new child.
        """
        n = int(head["n"])
        runs = int(head["runs"])
        lim: dict[str, Any] = head["limits"]
        cap = min(int(lim["max_children"]), os.cpu_count() or 1)
        k = max(1, min(cap, n // max(1, int(lim["min_items_per_child"]))))
        bounds = [round(j * n / k) for j in range(k + 1)]
        jobs = [_Job(bounds[j], bounds[j + 1]) for j in range(k) if bounds[j] < bounds[j + 1]]
        for job in jobs:
            self._dispatch(job, payload)
        if n >= _EARLY_SPARE_ITEMS:
            # a long batch hides the cost of forking the next spare; short ones fork it after
            # the answer is sent, off their critical path
            self.ensure_spare()
        item_wall = float(lim["wall_s_per_item"]) * runs
        poller = select.poll()
        by_fd: dict[int, _Job] = {}
        for job in jobs:
            assert job.child is not None
            poller.register(job.child.res_r, select.POLLIN | select.POLLHUP | select.POLLERR)
            by_fd[job.child.res_r] = job
        while by_fd:
            now = time.monotonic()
            wait = item_wall
            for job in list(by_fd.values()):
                cur, started = job.progress(now)
                deadline = started + item_wall
                if deadline <= now:
                    self._end_child(job, runs, lim, poller, by_fd, payload, victim=cur)
                else:
                    wait = min(wait, deadline - now)
            if not by_fd:
                break
            for fd, _ev in poller.poll(max(1, int(wait * 1000) + 1)):
                jb = by_fd.get(fd)
                if jb is None:
                    continue
                try:
                    msg = os.read(fd, 64)
                except BlockingIOError:
                    continue
                self._end_child(jb, runs, lim, poller, by_fd, payload, msg=msg)
        return b"B" + b"".join(piece for job in jobs for piece in job.pieces)

    def _dispatch(self, job: _Job, payload: bytes) -> None:
        """Give items ``[job.nxt, job.hi)`` to a child (the spare when there is one)."""
        child = self.spare if self.spare is not None else self.fork_child()
        self.spare = None
        # a child that died before reading its task is reported as an early exit
        with contextlib.suppress(OSError):
            write_frame(child.task_w, RANGE.pack(job.nxt, job.hi) + payload)
        os.close(child.task_w)
        job.child = child
        job.t_dispatch = time.monotonic()
        job.seen = (-1, -1)

    def _end_child(
        self,
        job: _Job,
        runs: int,
        lim: dict[str, Any],
        poller: Any,
        by_fd: dict[int, _Job],
        payload: bytes,
        *,
        victim: int | None = None,
        msg: bytes = b"",
    ) -> None:
        """A child finished, filled its buffer, died or missed a deadline: collect, continue.

        Args:
            job: The range whose child ended.
            runs: Runs per item.
            lim: The batch's limits.
            poller: The zygote's poll object (the child's pipe is unregistered).
            by_fd: Running jobs by pipe (the job is removed, and added back with a new child).
            payload: The batch payload, for a new child.
            victim: Index of the item that missed its wall-clock deadline (the child is killed);
                None when the child's pipe became readable (done, full or dead).
            msg: What the child wrote to its pipe.
        """
        child = job.child
        assert child is not None
        poller.unregister(child.res_r)
        del by_fd[child.res_r]
        done, used = job.finished()
        if victim is None and msg[:1] in (DONE, FULL) and (msg[:1] == FULL or done == job.span):
            # the child wrote its last record and is exiting: take the records, do not wait
            job.take(done, used)
            self.zombies.append(child.pid)  # reaped later, off the critical path
            self.release(child)
            if msg[:1] == FULL and done == 0:
                too_big = f"the result is too large to report (over {SHM_BYTES - SHM_HEAD} bytes)"
                job.error({"killed": "contract", "m": too_big, "ms": 0.0}, count=False)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            _, status, ru = os.wait4(child.pid, 0)
            done, used = job.finished()  # final now that the child is gone
            started = job.progress(time.monotonic())[1]
            job.take(done, used)
            self.release(child)
            if job.nxt < job.hi and (victim is None or victim == job.nxt):
                kill = _classify(status, ru, victim is not None, lim, runs, job.hi - job.first)
                kill["ms"] = max(0.0, (time.monotonic() - started) * 1000.0)
                job.error(kill)
                max_kills = int(lim["max_consecutive_kills"])
                if max_kills and job.kills >= max_kills:
                    note = (
                        f"not run: the tool was killed on {job.kills} consecutive items "
                        f"(last: {kill['m']})"
                    )
                    while job.nxt < job.hi:
                        job.error({"killed": kill["killed"], "m": note, "ms": 0.0}, count=False)
            # else: the item judged late had finished just before the kill; the child was
            # killed on the next one, which simply runs again in a new child
        if job.nxt < job.hi:
            self._dispatch(job, payload)
            assert job.child is not None
            poller.register(job.child.res_r, select.POLLIN | select.POLLHUP | select.POLLERR)
            by_fd[job.child.res_r] = job


_EARLY_SPARE_ITEMS = 64


class _Job:
    """A contiguous range of a batch's items, the child running it and the records so far."""

    __slots__ = (
        "child",
        "first",
        "hi",
        "kills",
        "nxt",
        "pieces",
        "seen",
        "seen_at",
        "span",
        "t_dispatch",
    )

    def __init__(self, lo: int, hi: int) -> None:
        self.nxt = lo
        self.first = lo
        self.hi = hi
        self.child: _Child | None = None
        self.pieces: list[bytes] = []
        self.kills = 0
        self.t_dispatch = 0.0
        self.seen: tuple[int, int] = (-1, -1)
        self.seen_at = 0.0
        self.span = hi - lo

    def progress(self, now: float) -> tuple[int, float]:
        """``(index, start time)`` of the item the child is running, as far as can be trusted.

        The child's own start time is bounded by when the zygote first saw that state, so a
        child cannot postpone its deadline by writing a time in the future.
        """
        assert self.child is not None
        shm = self.child.shm
        cur = CUR.unpack_from(shm, 8)[0]
        started = T_START.unpack_from(shm, 0)[0]
        done = PROGRESS.unpack_from(shm, 16)[0]
        if not (self.nxt <= cur < self.hi and started >= self.t_dispatch):
            return self.nxt + min(done, self.hi - self.nxt), self.t_dispatch  # not started yet
        if (cur, done) != self.seen:
            self.seen = (cur, done)
            self.seen_at = now
        return cur, min(started, self.seen_at)

    def finished(self) -> tuple[int, int]:
        """(items finished, record bytes) the child has published, clamped to what is valid."""
        assert self.child is not None
        done, used = PROGRESS.unpack_from(self.child.shm, 16)
        return min(done, self.hi - self.nxt), min(used, SHM_BYTES - SHM_HEAD)

    def take(self, done: int, used: int) -> None:
        """Keep the records of the ``done`` items the current child finished."""
        assert self.child is not None
        if done:
            self.pieces.append(self.child.shm[SHM_HEAD : SHM_HEAD + used])
            self.nxt += done
            self.kills = 0
        self.span = self.hi - self.nxt

    def error(self, rec: dict[str, Any], *, count: bool = True) -> None:
        """Record the next item as errored (killed, or not run)."""
        data = json.dumps(rec, separators=(",", ":")).encode()
        self.pieces.append(REC_KILL.pack(TAG_KILL, self.nxt, len(data)) + data)
        self.nxt += 1
        self.span = self.hi - self.nxt
        if count:
            self.kills += 1


def _classify(
    status: int, ru: Any, timed_out: bool, lim: dict[str, Any], runs: int, n_items: int
) -> dict[str, Any]:
    """Error record for the item a dead child was running."""
    if timed_out:
        wall = float(lim["wall_s_per_item"]) * runs
        return {"killed": "timeout", "m": f"wall-clock limit of {wall:g} s exceeded"}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGPROF, signal.SIGXCPU):
            return {
                "killed": "cpu",
                "m": f"CPU limit of {lim['cpu_s_per_item']:g} s per run exceeded",
            }
        if sig == signal.SIGKILL:
            if ru.ru_utime + ru.ru_stime >= cpu_budget(lim, runs, n_items) - 1:
                return {"killed": "cpu", "m": "batch CPU budget exhausted"}
            return {"killed": "memory", "m": "killed by the kernel (likely out of memory)"}
        name = signal.Signals(sig).name
        return {"killed": "exception", "m": f"the tool crashed its process ({name})"}
    code = os.WEXITSTATUS(status)
    return {"killed": "exception", "m": f"the sandbox child exited early (code {code})"}


def _set_parent_death_signal() -> None:
    lib = libc()
    if lib is not None:
        lib.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def main() -> None:
    """Run the zygote: read requests on stdin, answer on the original stdout."""
    _set_parent_death_signal()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a notebook must not kill it
    req_fd = 0
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol stream
    grow_pipe(out_fd)
    frame = read_frame(req_fd)
    if frame is None:
        return
    init = pickle.loads(frame)
    try:
        zyg = _Zygote(init.get("preload", ()), init.get("inputs_fd"), init.get("os_layer", "off"))
    except BaseException as e:
        err = str(e) if isinstance(e, UnconfinedError) else exc_message(e)
        write_frame(out_fd, json.dumps({"op": "hello", "ok": False, "error": err}).encode())
        return
    hello = {
        "op": "hello",
        "ok": True,
        "pid": os.getpid(),
        "primitives": zyg.primitive_names,
        "numpy": np.__version__,
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        "vm_mb": vm_bytes() // (1 << 20),
        "inputs_window": zyg.runner.window is not None,
        "os_layer": zyg.runner.oslayer.report(),
    }
    write_frame(out_fd, json.dumps(hello).encode())
    try:
        while True:
            zyg.ensure_spare()
            frame = read_frame(req_fd)
            if frame is None:
                return
            req = pickle.loads(frame)
            op = req.get("op")
            if op == "shutdown":
                return
            if op == "ping":
                resp: dict[str, Any] = {"ok": True, "pid": os.getpid()}
            elif op == "run":
                payload = read_frame(req_fd)
                if payload is None:
                    return
                try:
                    write_frame(out_fd, zyg.run(req, payload))
                    continue
                except Exception as e:
                    resp = {"ok": False, "error": exc_message(e)}
            else:
                resp = {"ok": False, "error": f"unknown op {op!r}"}
            write_frame(out_fd, json.dumps(resp, separators=(",", ":")).encode())
    finally:
        zyg.shutdown()


if __name__ == "__main__":  # pragma: no cover
    main()
