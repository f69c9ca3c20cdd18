"""Layer 3: the pre-warmed worker ("zygote") and the forked children that run tools.

The zygote is a fresh interpreter started by :class:`~tsevo.library.sandbox.Sandbox` with
``OMP/OPENBLAS/MKL_NUM_THREADS=1`` and ``PYTHONHASHSEED=0`` in its environment. It imports numpy,
scipy and the primitives once, builds the facades, freezes the GC, and then serves requests read
from its stdin. It keeps one *spare* child forked in advance. The spare does everything that does
not depend on the batch before it blocks on its task pipe: it drops its file descriptors, sets the
request-independent limits and, unless a batch is already waiting, runs a small trusted warm-up
batch, so the copy-on-write page faults of a fresh fork are paid off the critical path. A batch goes to the spare, which applies the
remaining rlimits and runs the items one after the other.

Results travel through a shared memory buffer (an anonymous ``MAP_SHARED`` mapping made by the
zygote for each child) instead of one pipe write per item: before each item the child stores the
item's index and start time in the buffer's header; after it, it appends the item's record and
publishes the count of finished items and bytes used. The zygote sleeps until the running item's
wall-clock deadline (it is not woken per item), SIGKILLs a child that misses it, and reads back
every finished record even from a killed child, so a runaway item costs only itself; the remaining
items go to a new child. A child that completes its range writes one byte to its pipe.

Wire protocol (all frames are a 4-byte big-endian length then the payload):
parent -> zygote: pickle (the parent is trusted); zygote -> parent: JSON, or ``b"B"`` followed by
the binary result stream below; the parent never unpickles anything a tool could have influenced.
A ``run`` request is two frames: a small header (n, runs, limits) and the batch payload, which the
zygote forwards to the child unread.

Result stream (little-endian, parsed by the parent with bounds checks):
``S`` schema records (``<BHI`` tag, schema id, length, then JSON ``{"k": keys, "t": kinds}``),
``I`` item records (``<BIB`` tag, index, runs, then per run: ``<BHd`` kind 1, schema id, ms and one
float64 per key; ``<Bd`` kind 2 (None), ms; or ``<BI`` kind 3, length and the JSON record of
:func:`~tsevo.library.sandbox.contract.encode_value`) and ``K`` records for killed items
(``<BII`` tag, index, length, JSON), all in item order.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib
import json
import math
import mmap
import os
import pickle
import resource
import select
import signal
import struct
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "read_frame", "write_frame"]

_HDR = struct.Struct(">I")
MAX_FRAME = 1 << 31

# result stream records (see the module docstring)
TAG_SCHEMA = 0x53  # "S"
TAG_ITEM = 0x49  # "I"
TAG_KILL = 0x4B  # "K"
RUN_FAST = 1
RUN_NONE = 2
RUN_JSON = 3
REC_SCHEMA = struct.Struct("<BHI")
REC_ITEM = struct.Struct("<BIB")
REC_KILL = struct.Struct("<BII")
RUN_FAST_HEAD = struct.Struct("<BHd")
RUN_NONE_REC = struct.Struct("<Bd")
RUN_JSON_HEAD = struct.Struct("<BI")

# the shared result buffer of one child: a header, then the records
SHM_BYTES = 16 << 20
SHM_HEAD = 64
_T_START = struct.Struct("<d")  # offset 0: time.monotonic() when the running item started
_CUR = struct.Struct("<I")  # offset 8: index of the running item
_PROGRESS = struct.Struct("<IQ")  # offset 16: items finished, record bytes used
_DONE = b"D"  # the child finished its range
_FULL = b"O"  # the child's buffer is full; continue in a new child

# the inputs window: a memfd the parent writes each batch's samples into and the zygote maps
# read-only (from a read-only reopening, so a child cannot mprotect it writable); children inherit
# the mapping, so the samples cross no pipe and are not copied again
INPUT_WINDOW = 1 << 31

_F_SETPIPE_SZ = 1031
PIPE_BYTES = 1 << 20


def grow_pipe(fd: int, size: int = PIPE_BYTES) -> None:
    """Ask for a larger pipe buffer (fewer wake-ups for big frames); best effort."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETPIPE_SZ, size)


def write_frame(fd: int, payload: bytes) -> None:
    """Write one length-prefixed frame to a file descriptor (all of it)."""
    data = memoryview(_HDR.pack(len(payload)) + payload)
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def read_frame(fd: int) -> bytes | None:
    """Read one frame from a blocking descriptor; None at end of file."""
    hdr = _read_exact(fd, _HDR.size)
    if hdr is None:
        return None
    (n,) = _HDR.unpack(hdr)
    if n > MAX_FRAME:
        raise ValueError(f"frame of {n} bytes")
    return _read_exact(fd, n)


# ---------------------------------------------------------------------------------------------
# the child


def _libc() -> Any:
    try:
        lib = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - non-glibc platforms
        return None
    return lib if hasattr(lib, "prctl") else None


_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38


def _vm_bytes() -> int:
    """Current virtual address-space size of this process."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover - non-Linux
        return 0


def _truncate(s: str, n: int = 300) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _exc_message(e: BaseException) -> str:
    try:
        msg = str(e)
    except BaseException:
        msg = "<unprintable>"
    return _truncate(f"{type(e).__name__}: {msg}" if msg else type(e).__name__)


class _Child:
    """A forked child waiting for (or running) a batch: pid, pipe ends and its result buffer."""

    __slots__ = ("pid", "res_r", "shm", "task_w")

    def __init__(self, pid: int, task_w: int, res_r: int, shm: mmap.mmap) -> None:
        self.pid = pid
        self.task_w = task_w
        self.res_r = res_r
        self.shm = shm


_WARM_SOURCE = """
def warm():
    if not ctx.has("y"):
        return None
    y = ctx.primary()
    d = np.diff(y)
    return {"m": float(np.mean(y)), "s": float(np.std(y)), "a": float(np.mean(np.abs(d))),
            "n": len(y), "up": bool(y[-1] > y[0])}
"""


def _map_inputs(fd: int | None) -> mmap.mmap | None:
    """Map the parent's inputs memfd read-only (None when there is none or it fails)."""
    if fd is None:
        return None
    try:
        ro = os.open(f"/proc/self/fd/{int(fd)}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.close(int(fd))
    try:
        return mmap.mmap(ro, INPUT_WINDOW, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except (OSError, ValueError):
        return None
    finally:
        os.close(ro)


class _Zygote:
    def __init__(self, preload: Sequence[str], inputs_fd: int | None = None) -> None:
        import gc
        import warnings

        import numpy as np

        # Load what primitives commonly use, so children never import lazily under rlimits.
        for mod in ("scipy.signal", "scipy.stats", "scipy.linalg", "scipy.fft", "scipy.special"):
            with contextlib.suppress(ImportError):
                importlib.import_module(mod)
        from tsevo.library.context import ToolInput
        from tsevo.library.primitives import CATALOG

        for spec in preload:
            modname, _, func = spec.partition(":")
            pre = importlib.import_module(modname)
            if func:
                getattr(pre, func)()

        from . import contract, facades

        warnings.simplefilter("ignore")  # numpy RuntimeWarnings would only cost time
        np.seterr(all="ignore")
        self.np = np
        self.ToolInput = ToolInput
        self.contract = contract
        self.facades = facades
        self.base_ns = facades.build_base_namespace(CATALOG)
        self.primitive_names = sorted(
            n for n in type(self.base_ns["P"]).__dict__ if not n.startswith("_")
        )
        self.libc = _libc()
        self.pid = os.getpid()
        self.spare: _Child | None = None
        self.zombies: list[int] = []
        self.live_shm: list[mmap.mmap] = []
        self.window = _map_inputs(inputs_fd)
        self.warm_frame = self._warm_frame()
        self._warm_up()
        gc.collect()
        gc.freeze()  # keep the GC from touching (and copying) the inherited heap in children

    def _warm_frame(self) -> bytes:
        """A tiny batch request in the real wire format, run by every spare before it waits."""
        from .runner import SandboxLimits, wire_inputs

        inputs = [
            self.ToolInput(f"warm{i}", "warm", "warm", {"y": self.np.arange(8.0) * i}, ("y",))
            for i in range(2)
        ]
        limits = dict(SandboxLimits().__dict__)
        req = {
            "source": _WARM_SOURCE,
            "function": "warm",
            "inputs": wire_inputs(inputs),
            "runs": 1,
            "limits": limits,
        }
        return _RANGE.pack(0, len(inputs)) + pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)

    def _warm_up(self) -> None:
        """Run the warm-up batch through the real code path (into a scratch buffer)."""
        scratch = bytearray(1 << 16)
        job = self._prepare(self.warm_frame)
        self._loop(scratch, *job)

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
                code = self._child_main(task_r, res_w, shm)
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
            write_frame(child.task_w, _RANGE.pack(job.nxt, job.hi) + payload)
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
        if victim is None and msg[:1] in (_DONE, _FULL) and (msg[:1] == _FULL or done == job.span):
            # the child wrote its last record and is exiting: take the records, do not wait
            job.take(done, used)
            self.zombies.append(child.pid)  # reaped later, off the critical path
            self.release(child)
            if msg[:1] == _FULL and done == 0:
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

    # -- inside the child ------------------------------------------------------------------
    def _child_main(
        self, task_r: int, res_w: int, shm: mmap.mmap
    ) -> int:  # pragma: no cover - in the child
        libc = self.libc
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != self.pid:
            return 0  # the zygote is already gone
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        self._pre_confine(task_r, res_w)
        if not select.select([task_r], [], [], 0)[0]:
            self._warm_up()  # idle: take the first-touch page faults now, not in the batch
        frame = read_frame(task_r)
        os.close(task_r)
        if frame is None:
            return 0  # the zygote shut down without giving us work
        job = self._prepare(frame)
        del frame
        self._confine(job[-1], job[5], job[3] - job[2])
        if self._loop(shm, *job):
            os.write(res_w, _FULL)
        else:
            os.write(res_w, _DONE)
        return 0

    def _prepare(self, frame: bytes) -> tuple[Any, ...]:
        """Decode a task frame: ``(ns, fn, start, end, inputs, runs, lim)``."""
        start, end = _RANGE.unpack_from(frame)
        req = pickle.loads(memoryview(frame)[_RANGE.size :])
        code = compile(req["source"], "<tool>", "exec")
        lim: dict[str, Any] = req["limits"]
        flat = req["inputs"]["flat"]
        if flat is None:  # the samples are in the shared inputs window
            if self.window is None:
                raise RuntimeError("no inputs window")
            flat = self.np.frombuffer(
                self.window, dtype=self.np.float64, count=req["inputs"]["size"]
            )
        meta = req["inputs"]["meta"]
        make = self.ToolInput
        inputs = [
            make(
                qid,
                fp,
                text,
                {
                    name: flat[off : off + shape[0]]
                    if len(shape) == 1
                    else flat[off : off + math.prod(shape)].reshape(shape)
                    for name, off, shape in layout
                },
                tuple(pr),
                tuple(cv),
                tuple(cd),
            )
            for (qid, fp, text, layout, pr, cv, cd) in meta[start:end]
        ]
        # One globals dict per child: a tool cannot rebind globals (no `global`, no attribute
        # stores, no access to the dict), so only `ctx` changes between items.
        ns = dict(self.base_ns)
        exec(code, ns)
        return ns, ns[req["function"]], start, end, inputs, int(req["runs"]), lim

    def _pre_confine(self, task_r: int, res_w: int) -> None:  # pragma: no cover - in the child
        """The limits that do not depend on the batch, set before the child waits for one."""
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        keep = sorted({task_r, res_w})
        lo = 3
        for fd in keep:
            if fd > lo:
                os.closerange(lo, fd)
            lo = max(lo, fd + 1)
        os.closerange(lo, 1 << 16)
        if self.libc is not None:
            self.libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # file writes fail with EFBIG instead
        signal.signal(signal.SIGPROF, signal.SIG_DFL)
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)
        rl = resource
        rl.setrlimit(rl.RLIMIT_CORE, (0, 0))
        rl.setrlimit(rl.RLIMIT_FSIZE, (0, 0))
        if os.geteuid() != 0:
            with contextlib.suppress(ValueError, OSError):
                rl.setrlimit(rl.RLIMIT_NPROC, (0, 0))

    def _confine(
        self, lim: dict[str, Any], runs: int, n_items: int
    ) -> None:  # pragma: no cover - in the child
        """The limits that depend on the batch, set once it has been read."""
        rl = resource
        nofile = int(lim["nofile"])
        rl.setrlimit(rl.RLIMIT_NOFILE, (nofile, nofile))
        hard_cpu = _cpu_budget(lim, runs, n_items)
        rl.setrlimit(rl.RLIMIT_CPU, (hard_cpu, hard_cpu + 1))
        if lim["memory_mb"]:
            budget = _vm_bytes() + int(lim["memory_mb"]) * (1 << 20)
            rl.setrlimit(rl.RLIMIT_AS, (budget, budget))

    def _loop(
        self,
        out: Any,
        ns: dict[str, Any],
        fn: Any,
        start: int,
        end: int,
        inputs: list[Any],
        runs: int,
        lim: dict[str, Any],
    ) -> bool:
        """Run items ``[start, end)`` and append their records to ``out`` (the shared buffer).

        Returns:
            True when ``out`` filled up before the range was finished.
        """
        cpu_s = float(lim["cpu_s_per_item"])
        enc = self.contract.FastEncoder(int(lim["max_outputs"]))
        size = len(out)
        off = SHM_HEAD
        mono = time.monotonic
        run_once = self._run_once
        pending = enc.pending
        try:
            for i in range(start, end):
                _T_START.pack_into(out, 0, mono())
                _CUR.pack_into(out, 8, i)
                inp = inputs[i - start]
                body = [REC_ITEM.pack(TAG_ITEM, i, runs)]
                for _ in range(runs):
                    body.append(run_once(ns, fn, inp, cpu_s, enc))
                if pending:
                    body[:0] = [REC_SCHEMA.pack(TAG_SCHEMA, sid, len(d)) + d for sid, d in pending]
                    pending.clear()
                rec = b"".join(body)
                if off + len(rec) > size:
                    return True
                out[off : off + len(rec)] = rec
                off += len(rec)
                _PROGRESS.pack_into(out, 16, i + 1 - start, off - SHM_HEAD)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        return False

    def _run_once(
        self, ns: dict[str, Any], fn: Any, inp: Any, cpu_s: float, enc: Any
    ) -> bytes:  # pragma: no cover - runs in the forked child
        """Run the tool once on one input under the per-item CPU timer; one run record.

        The timer is armed afresh for every run (which resets it) and covers the encoding of
        the result too; :meth:`_loop` disarms it after the last item.
        """
        ctxf = self.facades.ToolContext(inp)
        ns["ctx"] = ctxf
        rec: dict[str, Any] | None = None
        piece = b""
        signal.setitimer(signal.ITIMER_PROF, cpu_s)
        t0 = time.perf_counter()
        try:
            value = fn()
            ms = (time.perf_counter() - t0) * 1000.0
            clean = not (ctxf._read or ctxf._violations)
            fast = enc.values(value) if clean and type(value) is dict else None
            if fast is not None:
                sid, packer, vals = fast
                piece = RUN_FAST_HEAD.pack(RUN_FAST, sid, ms) + packer.pack(*vals)
            elif value is None and clean:
                piece = RUN_NONE_REC.pack(RUN_NONE, ms)
            else:
                rec = {"s": "ret", "v": self.contract.encode_value(value, enc.max_items)}
            del value
        except MemoryError as e:
            ms = (time.perf_counter() - t0) * 1000.0
            rec = {"s": "exc", "k": "memory", "m": _exc_message(e)}
        except self.facades.CovariateAccessError as e:
            ms = (time.perf_counter() - t0) * 1000.0
            rec = {"s": "exc", "k": "covariate", "m": _exc_message(e)}
        except BaseException as e:
            ms = (time.perf_counter() - t0) * 1000.0
            rec = {"s": "exc", "k": "exception", "m": _exc_message(e)}
        ns["ctx"] = None
        if rec is None:
            return piece
        read, violations = ctxf._report()
        rec["ms"] = ms
        if read:
            rec["cov"] = list(read)
        if violations:
            rec["viol"] = _truncate(violations[0])
        data = _ENCODER.encode(rec).encode()
        return RUN_JSON_HEAD.pack(RUN_JSON, len(data)) + data


_RANGE = struct.Struct(">II")
_EARLY_SPARE_ITEMS = 64
_ENCODER = json.JSONEncoder(separators=(",", ":"))


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
        cur = _CUR.unpack_from(shm, 8)[0]
        started = _T_START.unpack_from(shm, 0)[0]
        done = _PROGRESS.unpack_from(shm, 16)[0]
        if not (self.nxt <= cur < self.hi and started >= self.t_dispatch):
            return self.nxt + min(done, self.hi - self.nxt), self.t_dispatch  # not started yet
        if (cur, done) != self.seen:
            self.seen = (cur, done)
            self.seen_at = now
        return cur, min(started, self.seen_at)

    def finished(self) -> tuple[int, int]:
        """(items finished, record bytes) the child has published, clamped to what is valid."""
        assert self.child is not None
        done, used = _PROGRESS.unpack_from(self.child.shm, 16)
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
            if ru.ru_utime + ru.ru_stime >= _cpu_budget(lim, runs, n_items) - 1:
                return {"killed": "cpu", "m": "batch CPU budget exhausted"}
            return {"killed": "memory", "m": "killed by the kernel (likely out of memory)"}
        name = signal.Signals(sig).name
        return {"killed": "exception", "m": f"the tool crashed its process ({name})"}
    code = os.WEXITSTATUS(status)
    return {"killed": "exception", "m": f"the sandbox child exited early (code {code})"}


def _cpu_budget(lim: dict[str, Any], runs: int, n_items: int) -> int:
    """The batch's RLIMIT_CPU backstop: per-item CPU times items (and runs), plus 2 s."""
    return math.ceil(float(lim["cpu_s_per_item"]) * runs * n_items) + 2


def _set_parent_death_signal() -> None:
    libc = _libc()
    if libc is not None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


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
        zyg = _Zygote(init.get("preload", ()), init.get("inputs_fd"))
    except BaseException as e:
        write_frame(
            out_fd, json.dumps({"op": "hello", "ok": False, "error": _exc_message(e)}).encode()
        )
        return
    import numpy as np

    hello = {
        "op": "hello",
        "ok": True,
        "pid": os.getpid(),
        "primitives": zyg.primitive_names,
        "numpy": np.__version__,
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        "vm_mb": _vm_bytes() // (1 << 20),
        "inputs_window": zyg.window is not None,
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
                    resp = {"ok": False, "error": _exc_message(e)}
            else:
                resp = {"ok": False, "error": f"unknown op {op!r}"}
            write_frame(out_fd, json.dumps(resp, separators=(",", ":")).encode())
    finally:
        zyg.shutdown()


if __name__ == "__main__":  # pragma: no cover
    main()
