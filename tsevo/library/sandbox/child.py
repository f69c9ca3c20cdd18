"""Inside a forked child of the zygote: confine the process, then run a tool over a range of items.

A child is forked from the zygote (:mod:`.worker`) as a *spare*: it drops its file descriptors,
sets the request-independent limits and, unless a batch is already waiting, runs a small trusted
warm-up batch (so the copy-on-write page faults of a fresh fork are paid off the critical path)
before it blocks on its task pipe. Given a batch, it applies the remaining rlimits and runs the
items one after the other under a per-item CPU timer, appending one record per item to its shared
result buffer (formats in :mod:`.wire`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import mmap
import os
import pickle
import resource
import select
import signal
import time
from typing import Any

import numpy as np

from tsevo.library.context import ToolInput

from .contract import FastEncoder, encode_value
from .facades import CovariateAccessError, ToolContext
from .limits import SandboxLimits, cpu_budget
from .oslayer import OsLayer
from .wire import (
    CUR,
    DONE,
    FULL,
    PROGRESS,
    RANGE,
    REC_ITEM,
    REC_SCHEMA,
    RUN_FAST,
    RUN_FAST_HEAD,
    RUN_JSON,
    RUN_JSON_HEAD,
    RUN_NONE,
    RUN_NONE_REC,
    SHM_HEAD,
    T_START,
    TAG_ITEM,
    TAG_SCHEMA,
    read_frame,
    unwire_inputs,
    wire_inputs,
)

__all__ = ["ChildRunner", "exc_message", "libc", "vm_bytes"]

PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_ENCODER = json.JSONEncoder(separators=(",", ":"))

_WARM_SOURCE = """
def warm():
    if not ctx.has("y"):
        return None
    y = ctx.primary()
    d = np.diff(y)
    return {"m": float(np.mean(y)), "s": float(np.std(y)), "a": float(np.mean(np.abs(d))),
            "n": len(y), "up": bool(y[-1] > y[0])}
"""


def libc() -> Any:
    """The C library when it offers ``prctl`` (None elsewhere)."""
    try:
        lib = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - non-glibc platforms
        return None
    return lib if hasattr(lib, "prctl") else None


def vm_bytes() -> int:
    """Current virtual address-space size of this process."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover - non-Linux
        return 0


def truncate(s: str, n: int = 300) -> str:
    """``s`` cut to ``n`` characters (with an ellipsis)."""
    return s if len(s) <= n else s[: n - 3] + "..."


def exc_message(e: BaseException) -> str:
    """A short one-line description of an exception (never raises)."""
    try:
        msg = str(e)
    except BaseException:
        msg = "<unprintable>"
    return truncate(f"{type(e).__name__}: {msg}" if msg else type(e).__name__)


def _warm_frame() -> bytes:
    """A tiny batch request in the real wire format, run by every spare before it waits."""
    inputs = [
        ToolInput(f"warm{i}", "warm", "warm", {"y": np.arange(8.0) * i}, ("y",)) for i in range(2)
    ]
    req = {
        "source": _WARM_SOURCE,
        "function": "warm",
        "inputs": wire_inputs(inputs),
        "runs": 1,
        "limits": dict(SandboxLimits().__dict__),
    }
    return RANGE.pack(0, len(inputs)) + pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)


class ChildRunner:
    """What a child does with a task frame; built once in the zygote, inherited by every fork.

    Args:
        base_ns: The curated namespace (facades) every tool runs in.
        window: The inputs window the zygote mapped (None: samples come inline).
        lib: The C library (:func:`libc`) or None.
    """

    def __init__(self, base_ns: dict[str, Any], window: mmap.mmap | None, lib: Any) -> None:
        self.base_ns = base_ns
        self.window = window
        self.libc = lib
        self.warm_frame = _warm_frame()
        self.oslayer = OsLayer("off")  # the zygote replaces it once the layer is prepared

    def warm_up(self) -> None:
        """Run the warm-up batch through the real code path (into a scratch buffer)."""
        scratch = bytearray(1 << 16)
        job = self.prepare(self.warm_frame)
        self.loop(scratch, *job)

    def child_main(
        self, task_r: int, res_w: int, shm: mmap.mmap, zygote_pid: int
    ) -> int:  # pragma: no cover - in the child
        """The life of a forked child: confine, warm up while idle, run its range, report."""
        if self.libc is not None:
            self.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != zygote_pid:
            return 0  # the zygote is already gone
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        self.pre_confine(task_r, res_w)
        if not select.select([task_r], [], [], 0)[0]:
            self.warm_up()  # idle: take the first-touch page faults now, not in the batch
        frame = read_frame(task_r)
        os.close(task_r)
        if frame is None:
            return 0  # the zygote shut down without giving us work
        code, name, start, end, inputs, runs, lim = self.decode(frame)
        del frame
        self.confine(lim, runs, end - start)
        try:
            self.oslayer.install(self.libc)
        except OSError:
            return 71  # never run a tool unconfined when the layer was prepared
        ns, fn = self.bind(code, name)
        if self.loop(shm, ns, fn, start, end, inputs, runs, lim):
            os.write(res_w, FULL)
        else:
            os.write(res_w, DONE)
        return 0

    def prepare(self, frame: bytes) -> tuple[Any, ...]:
        """Decode a task frame and bind its tool: ``(ns, fn, start, end, inputs, runs, lim)``."""
        code, name, start, end, inputs, runs, lim = self.decode(frame)
        return (*self.bind(code, name), start, end, inputs, runs, lim)

    def decode(self, frame: bytes) -> tuple[Any, ...]:
        """Decode a task frame (no tool code runs): ``(code, name, start, end, inputs, runs, lim)``."""
        start, end = RANGE.unpack_from(frame)
        req = pickle.loads(memoryview(frame)[RANGE.size :])
        code = compile(req["source"], "<tool>", "exec")
        lim: dict[str, Any] = req["limits"]
        inputs = unwire_inputs(req["inputs"], start, end, self.window)
        return code, req["function"], start, end, inputs, int(req["runs"]), lim

    def bind(self, code: Any, name: str) -> tuple[dict[str, Any], Any]:
        """Run the tool's module code in a fresh globals dict: ``(ns, fn)``.

        One globals dict per child: a tool cannot rebind globals (no `global`, no attribute
        stores, no access to the dict), so only `ctx` changes between items.
        """
        ns = dict(self.base_ns)
        exec(code, ns)
        return ns, ns[name]

    def pre_confine(self, task_r: int, res_w: int) -> None:  # pragma: no cover - in the child
        """The limits that do not depend on the batch, set before the child waits for one."""
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        keep = sorted({task_r, res_w, *self.oslayer.keep_fds()})
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

    def confine(
        self, lim: dict[str, Any], runs: int, n_items: int
    ) -> None:  # pragma: no cover - in the child
        """The limits that depend on the batch, set once it has been read."""
        rl = resource
        nofile = int(lim["nofile"])
        rl.setrlimit(rl.RLIMIT_NOFILE, (nofile, nofile))
        hard_cpu = cpu_budget(lim, runs, n_items)
        rl.setrlimit(rl.RLIMIT_CPU, (hard_cpu, hard_cpu + 1))
        if lim["memory_mb"]:
            budget = vm_bytes() + int(lim["memory_mb"]) * (1 << 20)
            rl.setrlimit(rl.RLIMIT_AS, (budget, budget))

    def loop(
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
        enc = FastEncoder(int(lim["max_outputs"]))
        size = len(out)
        off = SHM_HEAD
        mono = time.monotonic
        run_once = self.run_once
        pending = enc.pending
        try:
            for i in range(start, end):
                T_START.pack_into(out, 0, mono())
                CUR.pack_into(out, 8, i)
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
                PROGRESS.pack_into(out, 16, i + 1 - start, off - SHM_HEAD)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        return False

    def run_once(
        self, ns: dict[str, Any], fn: Any, inp: Any, cpu_s: float, enc: Any
    ) -> bytes:  # pragma: no cover - runs in the forked child
        """Run the tool once on one input under the per-item CPU timer; one run record.

        The timer is armed afresh for every run (which resets it) and covers the encoding of
        the result too; :meth:`loop` disarms it after the last item.
        """
        ctxf = ToolContext(inp)
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
                rec = {"s": "ret", "v": encode_value(value, enc.max_items)}
            del value
        except MemoryError as e:
            ms = (time.perf_counter() - t0) * 1000.0
            rec = {"s": "exc", "k": "memory", "m": exc_message(e)}
        except CovariateAccessError as e:
            ms = (time.perf_counter() - t0) * 1000.0
            rec = {"s": "exc", "k": "covariate", "m": exc_message(e)}
        except BaseException as e:
            ms = (time.perf_counter() - t0) * 1000.0
            rec = {"s": "exc", "k": "exception", "m": exc_message(e)}
        ns["ctx"] = None
        if rec is None:
            return piece
        read, violations = ctxf._report()
        rec["ms"] = ms
        if read:
            rec["cov"] = list(read)
        if violations:
            rec["viol"] = truncate(violations[0])
        data = _ENCODER.encode(rec).encode()
        return RUN_JSON_HEAD.pack(RUN_JSON, len(data)) + data
