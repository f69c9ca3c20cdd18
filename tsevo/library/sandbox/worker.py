"""Layer 3: the pre-warmed worker ("zygote") and the forked children that run tools.

The zygote is a fresh interpreter started by :class:`~tsevo.library.sandbox.Sandbox` with
``OMP/OPENBLAS/MKL_NUM_THREADS=1`` and ``PYTHONHASHSEED=0`` in its environment. It imports numpy,
scipy and the primitives once, builds the facades, freezes the GC, and then serves requests read
from its stdin. It keeps one *spare* child forked in advance (blocked on a pipe), so a batch does
not wait for ``fork``: the batch payload goes to the spare, which applies rlimits and runs the items
one after the other, writing one JSON line per finished item to a pipe; a new spare is forked
after the answer is sent. The zygote enforces a per-item wall-clock deadline on that stream and
SIGKILLs a child that misses it; a child that dies (killed, CPU timer, crash) costs only the item
it was running: the zygote hands the remaining items to a new child.

Wire protocol (all frames are a 4-byte big-endian length then the payload):
parent -> zygote: pickle (the parent is trusted); zygote -> parent: JSON only, so the parent
never unpickles anything a tool could have influenced. A ``run`` request is two frames: a small
header (n, runs, limits) and the batch payload, which the zygote forwards to the child unread.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import math
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
    """A forked child waiting for (or running) a batch: its pid and the zygote's pipe ends."""

    __slots__ = ("pid", "res_r", "task_w")

    def __init__(self, pid: int, task_w: int, res_r: int) -> None:
        self.pid = pid
        self.task_w = task_w
        self.res_r = res_r


class _Zygote:
    def __init__(self, preload: Sequence[str]) -> None:
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
        self._warm_up()
        gc.collect()
        gc.freeze()  # keep the GC from touching (and copying) the inherited heap in children

    def _warm_up(self) -> None:
        src = "def warm():\n    y = ctx.series('y')\n    return {'m': float(np.mean(y))}\n"
        inp = self.ToolInput("warm", "warm", "warm", {"y": self.np.arange(8.0)}, ("y",))
        ns = dict(self.base_ns)
        ns["ctx"] = self.facades.ToolContext(inp)
        exec(compile(src, "<warm>", "exec"), ns)
        ns["warm"]()

    # -- children --------------------------------------------------------------------------
    def fork_child(self) -> _Child:
        """Fork a child that blocks until it is given a batch."""
        task_r, task_w = os.pipe()
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; it only ever leaves through os._exit
            code = 70
            try:
                os.close(task_w)
                os.close(res_r)
                code = self._child_main(task_r, res_w)
            finally:
                os._exit(code)
        os.close(task_r)
        os.close(res_w)
        os.set_blocking(res_r, False)
        return _Child(pid, task_w, res_r)

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
        """Run one batch; return the JSON answer (raw child lines, spliced, not re-encoded).

        The items are split into up to ``max_children`` contiguous ranges, each run by its own
        child (in parallel); a range whose child is killed continues in a new child.
        """
        n = int(head["n"])
        runs = int(head["runs"])
        lim: dict[str, Any] = head["limits"]
        results: list[Any] = [None] * n
        cap = min(int(lim["max_children"]), os.cpu_count() or 1)
        k = max(1, min(cap, n // max(1, int(lim["min_items_per_child"]))))
        bounds = [round(j * n / k) for j in range(k + 1)]
        jobs = [_Job(bounds[j], bounds[j + 1]) for j in range(k) if bounds[j] < bounds[j + 1]]
        for job in jobs:
            self._dispatch(job, payload, runs, lim)
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
            for job in list(by_fd.values()):
                if job.t_item + item_wall <= now:
                    self._finish(job, results, runs, lim, poller, by_fd, payload, timed_out=True)
            if not by_fd:
                break
            wait = min(j.t_item for j in by_fd.values()) + item_wall - time.monotonic()
            for fd, _ev in poller.poll(max(1, int(wait * 1000) + 1)):
                jb = by_fd.get(fd)
                if jb is None:
                    continue
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._finish(jb, results, runs, lim, poller, by_fd, payload, timed_out=False)
                    continue
                jb.take(chunk, results)
                if jb.nxt >= jb.hi:
                    self._finish(jb, results, runs, lim, poller, by_fd, payload, timed_out=False)
        parts = [
            r if isinstance(r, bytes) else json.dumps(r, separators=(",", ":")).encode()
            for r in results
        ]
        return b'{"ok":true,"items":[' + b",".join(parts) + b"]}"

    def _dispatch(self, job: _Job, payload: bytes, runs: int, lim: dict[str, Any]) -> None:
        """Give items ``[job.nxt, job.hi)`` to a child (the spare when there is one)."""
        child = self.spare if self.spare is not None else self.fork_child()
        self.spare = None
        # a child that died before reading its task is reported as an early exit
        with contextlib.suppress(OSError):
            write_frame(child.task_w, _RANGE.pack(job.nxt, job.hi) + payload)
        os.close(child.task_w)
        job.child = child
        job.first = job.nxt
        job.buf = b""
        job.t_item = time.monotonic()

    def _finish(
        self,
        job: _Job,
        results: list[Any],
        runs: int,
        lim: dict[str, Any],
        poller: Any,
        by_fd: dict[int, _Job],
        payload: bytes,
        *,
        timed_out: bool,
    ) -> None:
        """A child finished, died or missed its deadline: record, then continue its range."""
        child = job.child
        assert child is not None
        poller.unregister(child.res_r)
        del by_fd[child.res_r]
        if job.nxt >= job.hi:
            os.close(child.res_r)
            self.zombies.append(child.pid)  # it is exiting; reaped later, off the critical path
            return
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
        os.close(child.res_r)
        _, status, ru = os.wait4(child.pid, 0)
        kill = _classify(status, ru, timed_out, lim, runs, job.hi - job.first)
        kill["ms"] = (time.monotonic() - job.t_item) * 1000.0
        results[job.nxt] = kill
        job.nxt += 1
        job.kills += 1
        max_kills = int(lim["max_consecutive_kills"])
        if max_kills and job.kills >= max_kills:
            for j in range(job.nxt, job.hi):
                results[j] = {
                    "killed": kill["killed"],
                    "m": (
                        f"not run: the tool was killed on {job.kills} consecutive items "
                        f"(last: {kill['m']})"
                    ),
                    "ms": 0.0,
                }
            job.nxt = job.hi
        if job.nxt < job.hi:
            self._dispatch(job, payload, runs, lim)
            assert job.child is not None
            poller.register(job.child.res_r, select.POLLIN | select.POLLHUP | select.POLLERR)
            by_fd[job.child.res_r] = job

    # -- inside the child ------------------------------------------------------------------
    def _child_main(self, task_r: int, res_w: int) -> int:  # pragma: no cover - in the child
        libc = self.libc
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != self.pid:
            return 0  # the zygote is already gone
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        frame = read_frame(task_r)
        if frame is None:
            return 0  # the zygote shut down without giving us work
        start, end = _RANGE.unpack_from(frame)
        req = pickle.loads(memoryview(frame)[_RANGE.size :])
        del frame
        code = compile(req["source"], "<tool>", "exec")
        fname: str = req["function"]
        lim: dict[str, Any] = req["limits"]
        runs = int(req["runs"])
        flat = req["inputs"]["flat"]
        inputs = [
            self.ToolInput(
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
            for (qid, fp, text, layout, pr, cv, cd) in req["inputs"]["meta"]
        ]
        del req
        self._confine(res_w, lim, runs, end - start)
        cpu_s = float(lim["cpu_s_per_item"])
        max_items = int(lim["max_outputs"])
        # One globals dict per child: a tool cannot rebind globals (no `global`, no attribute
        # stores, no access to the dict), so only `ctx` changes between items.
        ns = dict(self.base_ns)
        exec(code, ns)
        fn = ns[fname]
        for i in range(start, end):
            recs = [self._run_once(ns, fn, inputs[i], cpu_s, max_items) for _ in range(runs)]
            write_frame_line(res_w, _ENCODER.encode({"i": i, "runs": recs}).encode())
        return 0

    def _confine(
        self, res_w: int, lim: dict[str, Any], runs: int, n_items: int
    ) -> None:  # pragma: no cover - in the child
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        if res_w > 3:
            os.closerange(3, res_w)
        os.closerange(max(res_w + 1, 3), 1 << 16)
        if self.libc is not None:
            self.libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # file writes fail with EFBIG instead
        signal.signal(signal.SIGPROF, signal.SIG_DFL)
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)
        rl = resource
        rl.setrlimit(rl.RLIMIT_CORE, (0, 0))
        rl.setrlimit(rl.RLIMIT_FSIZE, (0, 0))
        nofile = int(lim["nofile"])
        rl.setrlimit(rl.RLIMIT_NOFILE, (nofile, nofile))
        hard_cpu = _cpu_budget(lim, runs, n_items)
        rl.setrlimit(rl.RLIMIT_CPU, (hard_cpu, hard_cpu + 1))
        if lim["memory_mb"]:
            budget = _vm_bytes() + int(lim["memory_mb"]) * (1 << 20)
            rl.setrlimit(rl.RLIMIT_AS, (budget, budget))
        if os.geteuid() != 0:
            with contextlib.suppress(ValueError, OSError):
                rl.setrlimit(rl.RLIMIT_NPROC, (0, 0))

    def _run_once(
        self, ns: dict[str, Any], fn: Any, inp: Any, cpu_s: float, max_items: int
    ) -> dict[str, Any]:  # pragma: no cover - runs in the forked child
        ctxf = self.facades.ToolContext(inp)
        ns["ctx"] = ctxf
        rec: dict[str, Any]
        signal.setitimer(signal.ITIMER_PROF, cpu_s)
        t0 = time.perf_counter()
        try:
            value = fn()
            ms = (time.perf_counter() - t0) * 1000.0
            rec = {"s": "ret", "v": self.contract.encode_value(value, max_items)}
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
        signal.setitimer(signal.ITIMER_PROF, 0)
        read, violations = ctxf._report()
        rec["ms"] = round(ms, 4)
        if read:
            rec["cov"] = list(read)
        if violations:
            rec["viol"] = _truncate(violations[0])
        ns["ctx"] = None
        return rec


_RANGE = struct.Struct(">II")
_EARLY_SPARE_ITEMS = 64
_ENCODER = json.JSONEncoder(separators=(",", ":"))


class _Job:
    """A contiguous range of a batch's items and the child currently running it."""

    __slots__ = ("buf", "child", "first", "hi", "kills", "nxt", "t_item")

    def __init__(self, lo: int, hi: int) -> None:
        self.nxt = lo
        self.first = lo
        self.hi = hi
        self.child: _Child | None = None
        self.buf = b""
        self.t_item = 0.0
        self.kills = 0

    def take(self, chunk: bytes, results: list[Any]) -> None:
        """Consume result lines (``b'{"i":<index>,...}'``), kept raw for the parent to parse."""
        self.buf += chunk
        if b"\n" not in self.buf:
            return
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            head = line[:24].split(b",", 1)[0]
            if not head.startswith(b'{"i":'):
                continue  # a garbled line leaves its item unreported (killed later)
            try:
                i = int(head[5:])
            except ValueError:
                continue
            if self.nxt <= i < self.hi:
                results[i] = line
                self.nxt = i + 1
                self.kills = 0
        self.t_item = time.monotonic()


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


def write_frame_line(fd: int, line: bytes) -> None:
    """Write one newline-terminated record to the child's result pipe."""
    data = memoryview(line + b"\n")
    while data:
        n = os.write(fd, data)
        data = data[n:]


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
    frame = read_frame(req_fd)
    if frame is None:
        return
    init = pickle.loads(frame)
    try:
        zyg = _Zygote(init.get("preload", ()))
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
