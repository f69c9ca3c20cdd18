"""The parent side of the sandbox: :class:`Sandbox`, :class:`SandboxLimits`, :class:`ToolResult`."""

from __future__ import annotations

import contextlib
import functools
import json
import mmap
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any, Literal, cast

import numpy as np

from tsevo.library.context import ToolInput

from . import worker as _w
from .contract import (
    MAX_INT_OUTPUT,
    Outputs,
    canonical,
    check_encoded,
    check_fast_values,
    check_schema,
)
from .gate import GateReport, check_source

__all__ = ["ErrorKind", "Sandbox", "SandboxError", "SandboxLimits", "Status", "ToolResult"]

Status = Literal["ok", "abstain", "error"]
ErrorKind = Literal[
    "gate", "timeout", "cpu", "memory", "exception", "contract", "nondeterministic", "covariate", ""
]


class SandboxError(RuntimeError):
    """The worker process could not be started (not a tool failure)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Per-item limits of one sandboxed tool evaluation.

    Attributes:
        cpu_s_per_item: CPU seconds per item and run (``ITIMER_PROF`` in the child; the batch's
            ``RLIMIT_CPU`` backstop is this times the number of items, plus 2 s).
        wall_s_per_item: Wall-clock seconds per item and run; the zygote SIGKILLs the child after.
        memory_mb: Address space a child may add on top of the pre-warmed worker (``RLIMIT_AS``);
            0 disables the limit.
        max_outputs: Most keys in a result dict.
        max_key_chars: Longest key of a result dict.
        max_consecutive_kills: After this many consecutive items killed (timeout, CPU, crash),
            the rest of the batch is marked errored without being run; 0 never gives up.
        nofile: ``RLIMIT_NOFILE`` in the child.
        max_children: Most children one batch is split over (they run in parallel; also capped
            by the number of CPUs).
        min_items_per_child: A batch gets one more child per this many items (up to the max).
        startup_timeout_s: How long the worker may take to import numpy/scipy/primitives.
    """

    cpu_s_per_item: float = 2.0
    wall_s_per_item: float = 3.0
    memory_mb: int = 1024
    max_outputs: int = 32
    max_key_chars: int = 64
    max_consecutive_kills: int = 8
    nofile: int = 16
    max_children: int = 4
    min_items_per_child: int = 512
    startup_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if self.cpu_s_per_item <= 0 or self.wall_s_per_item <= 0:
            raise ValueError("time limits must be positive")
        if self.memory_mb < 0 or self.max_outputs < 1 or self.max_key_chars < 1:
            raise ValueError("memory_mb >= 0, max_outputs >= 1 and max_key_chars >= 1 required")
        if self.nofile < 8:
            raise ValueError("nofile must be at least 8")
        if self.max_children < 1 or self.min_items_per_child < 1:
            raise ValueError("max_children and min_items_per_child must be at least 1")


@dataclass(frozen=True)
class ToolResult:
    """What one tool produced on one question.

    Attributes:
        qid: Question id.
        status: ``"ok"`` (outputs hold evidence), ``"abstain"`` (the tool returned None) or
            ``"error"``.
        outputs: Flat dict of finite numbers/booleans when ``status == "ok"``, else None.
        error: Human-readable reason when ``status == "error"``.
        error_kind: ``"gate"``, ``"timeout"``, ``"cpu"``, ``"memory"``, ``"exception"``,
            ``"contract"``, ``"nondeterministic"``, ``"covariate"``, or ``""`` when no error.
        elapsed_ms: Time spent in the tool function (first run), as measured in the child.
        covariates_read: Covariates the tool read (each mentioned by the question).
    """

    qid: str
    status: Status
    outputs: Outputs | None
    error: str = ""
    error_kind: ErrorKind = ""
    elapsed_ms: float = 0.0
    covariates_read: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the tool returned evidence."""
        return self.status == "ok"


def _clean(msg: Any, limit: int = 400) -> str:
    """A printable, UTF-8-safe, bounded error message."""
    return str(msg)[:limit].encode("utf-8", "replace").decode("utf-8")


def _error(qid: str, kind: ErrorKind, msg: str, ms: float = 0.0) -> ToolResult:
    return ToolResult(qid, "error", None, _clean(msg), kind, ms)


_new_result = object.__new__


def _result(qid: str, status: Status, outputs: Outputs | None, ms: float) -> ToolResult:
    """A ToolResult without an error or covariates (the hot path of a batch).

    Equal to ``ToolResult(qid, status, outputs, "", "", ms)``, built without the per-field
    checks of a frozen dataclass.
    """
    r = _new_result(ToolResult)
    r.__dict__.update(
        qid=qid,
        status=status,
        outputs=outputs,
        error="",
        error_kind="",
        elapsed_ms=ms,
        covariates_read=(),
    )
    return r


_KILL_KINDS = {"timeout", "cpu", "memory", "exception", "contract"}
_RUN_KINDS = {"memory", "exception", "covariate"}


def _interpret_run(qid: str, rec: Any, lim: SandboxLimits) -> ToolResult:
    if not isinstance(rec, dict):
        return _error(qid, "exception", "malformed result from the sandbox")
    ms = float(rec.get("ms", 0.0)) if isinstance(rec.get("ms"), int | float) else 0.0
    cov = tuple(_clean(c, 200) for c in rec.get("cov", ()) if isinstance(c, str))
    viol = rec.get("viol")
    if isinstance(viol, str):
        return ToolResult(qid, "error", None, _clean(viol), "covariate", ms, cov)
    if rec.get("s") == "exc":
        k = rec.get("k")
        kind = cast(ErrorKind, k if k in _RUN_KINDS else "exception")
        return ToolResult(qid, "error", None, _clean(rec.get("m", "")), kind, ms, cov)
    if rec.get("s") != "ret":
        return _error(qid, "exception", "malformed result from the sandbox", ms)
    outputs, why = check_encoded(
        rec.get("v"), max_outputs=lim.max_outputs, max_key_chars=lim.max_key_chars
    )
    if why:
        return ToolResult(qid, "error", None, why, "contract", ms, cov)
    if outputs is None:
        return ToolResult(qid, "abstain", None, "", "", ms, cov)
    return ToolResult(qid, "ok", outputs, "", "", ms, cov)


def _same(a: ToolResult, b: ToolResult) -> bool:
    """Identical outcomes (cheap test before the rounding comparison of :func:`_signature`)."""
    return (a.status, a.error_kind, a.error, a.outputs) == (
        b.status,
        b.error_kind,
        b.error,
        b.outputs,
    )


def _signature(r: ToolResult) -> tuple[Any, ...]:
    return (r.status, r.error_kind, r.error, canonical(r.outputs))


def _interpret_item(qid: str, item: Any, lim: SandboxLimits, runs: int) -> ToolResult:
    if not isinstance(item, dict):
        return _error(qid, "exception", "no result from the sandbox")
    if "killed" in item:
        kind = cast(ErrorKind, item["killed"] if item["killed"] in _KILL_KINDS else "exception")
        ms = item.get("ms", 0.0)
        return _error(
            qid, kind, _clean(item.get("m", "")), float(ms) if isinstance(ms, int | float) else 0.0
        )
    recs = item.get("runs")
    if not isinstance(recs, list) or len(recs) != runs:
        return _error(qid, "exception", "malformed result from the sandbox")
    first = _interpret_run(qid, recs[0], lim)
    for rec in recs[1:]:
        again = _interpret_run(qid, rec, lim)
        if _signature(again) != _signature(first):
            return _disagree(qid, first, again)
    return first


def _disagree(qid: str, first: ToolResult, again: ToolResult) -> ToolResult:
    """The error for an item whose two runs (``check_determinism``) returned different results."""
    return ToolResult(
        qid,
        "error",
        None,
        f"two runs disagree: {_brief(first)} vs {_brief(again)}",
        "nondeterministic",
        first.elapsed_ms,
        first.covariates_read,
    )


class _Malformed(Exception):
    """The result stream broke its format (a bug, or a child that escaped the lower layers)."""


_Schema = tuple[list[str], str, struct.Struct, str]


class _StreamDecoder:
    """Parent side of the result stream (see :mod:`.worker`): bounds-checked, never unpickled.

    Schemas are checked against the contract once each; every value of every result is checked
    by :func:`~.contract.check_fast_values`.
    """

    def __init__(self, buf: bytes, lim: SandboxLimits, runs: int) -> None:
        self.buf = memoryview(buf)
        self.off = 0
        self.lim = lim
        self.runs = runs
        self.schemas: dict[int, _Schema] = {}

    def _json(self, n: int) -> Any:
        end = self.off + n
        if n > len(self.buf) - self.off:
            raise _Malformed("truncated record")
        data = bytes(self.buf[self.off : end])
        self.off = end
        try:
            return json.loads(data)
        except ValueError as e:
            raise _Malformed("bad JSON record") from e

    def item(self, idx: int, qid: str) -> ToolResult:
        """Decode the record of item ``idx`` (after any schema records before it)."""
        buf = self.buf
        try:
            while True:
                tag = buf[self.off]
                if tag != _w.TAG_SCHEMA:
                    break
                _, sid, n = _w.REC_SCHEMA.unpack_from(buf, self.off)
                self.off += _w.REC_SCHEMA.size
                desc = self._json(n)
                if not isinstance(desc, dict) or not isinstance(desc.get("k"), list):
                    raise _Malformed("bad schema")
                keys = desc["k"]
                why = check_schema(
                    desc, max_outputs=self.lim.max_outputs, max_key_chars=self.lim.max_key_chars
                )
                codes = desc["t"] if not why else ""
                self.schemas[sid] = (keys, codes, struct.Struct(f"<{len(keys)}d"), why)
            if tag == _w.TAG_KILL:
                _, i, n = _w.REC_KILL.unpack_from(buf, self.off)
                self.off += _w.REC_KILL.size
                if i != idx:
                    raise _Malformed("item out of order")
                return _interpret_item(qid, self._json(n), self.lim, self.runs)
            if tag != _w.TAG_ITEM:
                raise _Malformed("unknown record")
            _, i, nruns = _w.REC_ITEM.unpack_from(buf, self.off)
            self.off += _w.REC_ITEM.size
            if i != idx or nruns != self.runs:
                raise _Malformed("item out of order")
            first = self._run(qid)
            for _ in range(nruns - 1):
                again = self._run(qid)
                if _same(again, first):
                    continue
                if _signature(again) != _signature(first):
                    return _disagree(qid, first, again)
            return first
        except (IndexError, struct.error) as e:
            raise _Malformed("truncated record") from e

    def bulk(self, idx: int, qids: Sequence[str]) -> list[ToolResult]:
        """Decode a run of uniform records (one run each, the same schema) at once, or none.

        The common stream is thousands of records of one layout; numpy checks their headers
        and values column by column. The run stops before the first record that differs or
        breaks the contract, which the per-item path then decodes (with its exact message).
        """
        buf, off = self.buf, self.off
        if self.runs != 1 or len(buf) - off < _BULK_MIN * 17:
            return []
        if buf[off] != _w.TAG_ITEM or buf[off + 5] != 1 or buf[off + 6] != _w.RUN_FAST:
            return []
        sid = int.from_bytes(buf[off + 7 : off + 9], "little")
        sch = self.schemas.get(sid)
        if sch is None or sch[3]:
            return []
        keys, codes, _, _ = sch
        dt = _bulk_dtype(len(keys))
        m = min(len(qids) - idx, (len(buf) - off) // dt.itemsize)
        if m < _BULK_MIN:
            return []
        arr = np.frombuffer(buf, dtype=dt, count=m, offset=off)
        ok = (
            (arr["tag"] == _w.TAG_ITEM)
            & (arr["nr"] == 1)
            & (arr["kind"] == _w.RUN_FAST)
            & (arr["sid"] == sid)
            & (arr["i"] == np.arange(idx, idx + m, dtype=np.uint32))
        )
        vals = arr["v"]
        cols: list[np.ndarray] = []
        for j, code in enumerate(codes):
            col = vals[:, j]
            if code == "f":
                ok &= np.isfinite(col)
            elif code == "i":
                ok &= np.isfinite(col) & (np.abs(col) <= MAX_INT_OUTPUT)
                ok &= col == np.round(col)
            else:
                ok &= (col == 0.0) | (col == 1.0)
            cols.append(col)
        n = m if ok.all() else int(np.argmin(ok))
        if n < _BULK_MIN:
            return []
        lists: list[list[Any]] = []
        for code, col in zip(codes, cols, strict=True):
            col = col[:n]
            if code == "f":
                lists.append(col.tolist())
            elif code == "i":
                lists.append(col.astype(np.int64).tolist())
            else:
                lists.append((col == 1.0).tolist())
        ms = arr["ms"][:n].tolist()
        self.off = off + n * dt.itemsize
        return [
            _result(qid, "ok", dict(zip(keys, row, strict=True)), t)
            for qid, row, t in zip(qids[idx : idx + n], zip(*lists, strict=True), ms, strict=True)
        ]

    def _run(self, qid: str) -> ToolResult:
        buf = self.buf
        kind = buf[self.off]
        if kind == _w.RUN_FAST:
            _, sid, ms = _w.RUN_FAST_HEAD.unpack_from(buf, self.off)
            self.off += _w.RUN_FAST_HEAD.size
            sch = self.schemas.get(sid)
            if sch is None:
                raise _Malformed("unknown schema")
            keys, codes, packer, why = sch
            vals = packer.unpack_from(buf, self.off)
            self.off += packer.size
            if why:
                return ToolResult(qid, "error", None, why, "contract", ms)
            outputs, why = check_fast_values(keys, codes, vals)
            if why:
                return ToolResult(qid, "error", None, why, "contract", ms)
            return _result(qid, "ok", outputs, ms)
        if kind == _w.RUN_NONE:
            _, ms = _w.RUN_NONE_REC.unpack_from(buf, self.off)
            self.off += _w.RUN_NONE_REC.size
            return _result(qid, "abstain", None, ms)
        if kind == _w.RUN_JSON:
            _, n = _w.RUN_JSON_HEAD.unpack_from(buf, self.off)
            self.off += _w.RUN_JSON_HEAD.size
            return _interpret_run(qid, self._json(n), self.lim)
        raise _Malformed("unknown run record")


_BULK_MIN = 8
"""Shortest run of uniform records decoded with numpy (shorter runs go item by item)."""


@functools.lru_cache(maxsize=64)
def _bulk_dtype(k: int) -> np.dtype[Any]:
    """The packed layout of one single-run fast item record with ``k`` values."""
    return np.dtype(
        [
            ("tag", "u1"),
            ("i", "<u4"),
            ("nr", "u1"),
            ("kind", "u1"),
            ("sid", "<u2"),
            ("ms", "<f8"),
            ("v", "<f8", (k,)),
        ]
    )


def _brief(r: ToolResult) -> str:
    if r.status == "ok":
        return json.dumps(r.outputs, sort_keys=True)[:150]
    return r.status if r.status == "abstain" else f"{r.error_kind}: {r.error[:100]}"


class _Worker:
    """One zygote process and its pipes (no locking: the Sandbox serializes access)."""

    def __init__(self, preload: Sequence[str], startup_timeout_s: float) -> None:
        env = dict(os.environ)
        for var in (
            "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "MKL_NUM_THREADS",
            "NUMEXPR_NUM_THREADS",
            "VECLIB_MAXIMUM_THREADS",
        ):
            env[var] = "1"
        env["PYTHONHASHSEED"] = "0"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        paths = [p or os.getcwd() for p in sys.path if isinstance(p, str)]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        self.memfd, self.window = _inputs_window()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tsevo.library.sandbox.worker import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=env,
            start_new_session=True,
            close_fds=True,
            pass_fds=() if self.memfd is None else (self.memfd,),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        _w.grow_pipe(self.wfd)
        self._buf = b""
        self._finalizer = weakref.finalize(self, _kill_group, self.proc, self.memfd, self.window)
        self.window_used = 0
        try:
            self.send({"preload": list(preload), "inputs_fd": self.memfd})
            hello = json.loads(self.receive(time.monotonic() + startup_timeout_s))
        except (OSError, TimeoutError, EOFError) as e:
            self.kill()
            raise SandboxError(f"sandbox worker failed to start: {e}") from e
        if not isinstance(hello, dict) or not hello.get("ok"):
            self.kill()
            err = hello.get("error") if isinstance(hello, dict) else hello
            raise SandboxError(f"sandbox worker failed to start: {err}")
        self.info: dict[str, Any] = hello
        self.primitive_names: frozenset[str] = frozenset(hello.get("primitives", ()))
        if not hello.get("inputs_window"):
            self.window = None  # the worker could not map it: samples go inline

    def release_window(self) -> None:
        """Give back the memory of the inputs window after a large batch (between batches)."""
        if self.memfd is not None and self.window_used > _WINDOW_KEEP_BYTES:
            with contextlib.suppress(OSError):
                os.ftruncate(self.memfd, 0)
                os.ftruncate(self.memfd, _w.INPUT_WINDOW)
            self.window_used = 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, obj: Any, raw: bytes | None = None) -> None:
        """Send a pickled object, then (for ``run``) the raw batch payload as a second frame."""
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        out = len(payload).to_bytes(4, "big") + payload
        if raw is not None:
            out += len(raw).to_bytes(4, "big") + raw
        data = memoryview(out)
        while data:
            n = os.write(self.wfd, data)
            data = data[n:]

    def _fill(self, n: int, deadline: float) -> None:
        while len(self._buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("sandbox worker did not answer in time")
            ready, _, _ = select.select([self.rfd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                raise EOFError("sandbox worker exited")
            self._buf += chunk

    def receive(self, deadline: float) -> bytes:
        """The next frame from the worker (raw bytes)."""
        self._fill(4, deadline)
        n = int.from_bytes(self._buf[:4], "big")
        self._fill(4 + n, deadline)
        payload, self._buf = self._buf[4 : 4 + n], self._buf[4 + n :]
        return payload

    def kill(self) -> None:
        self._finalizer()

    def shutdown(self, timeout: float = 2.0) -> None:
        try:
            self.send({"op": "shutdown"})
            self.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


def _kill_group(
    proc: subprocess.Popen[bytes], memfd: int | None = None, window: mmap.mmap | None = None
) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()
    if window is not None:
        with contextlib.suppress(BufferError, ValueError):
            window.close()
    if memfd is not None:
        with contextlib.suppress(OSError):
            os.close(memfd)


_WINDOW_KEEP_BYTES = 64 << 20
"""Inputs-window memory kept between batches; a larger batch's pages are released after it."""


def _inputs_window() -> tuple[int | None, mmap.mmap | None]:
    """A memfd of :data:`~.worker.INPUT_WINDOW` bytes (sparse) and the parent's mapping of it."""
    try:
        fd = os.memfd_create("tsevo-sandbox-inputs", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return None, None
    try:
        os.ftruncate(fd, _w.INPUT_WINDOW)
        return fd, mmap.mmap(fd, _w.INPUT_WINDOW)
    except (OSError, ValueError):  # pragma: no cover - no room for the mapping
        os.close(fd)
        return None, None


def wire_inputs(inputs: Sequence[ToolInput], window: mmap.mmap | None = None) -> dict[str, Any]:
    """Pack inputs for the worker: metadata tuples plus all samples in one float64 buffer.

    One buffer instead of one pickled array per series keeps serialization cost per question low.

    Args:
        inputs: The questions' tool inputs.
        window: The shared inputs window; when given and large enough, the samples are written
            there (``"flat": None``, ``"size"``: sample count) instead of into the message.

    Returns:
        ``{"meta": [...], "flat": array | None, "size": int}``.
    """
    meta: list[tuple[Any, ...]] = []
    chunks: list[np.ndarray] = []
    off = 0
    for inp in inputs:
        layout = []
        for k, v in inp.series.items():
            a = np.asarray(v, dtype=np.float64)
            layout.append((str(k), off, a.shape))
            chunks.append(a.reshape(-1))
            off += a.size
        meta.append(
            (
                inp.qid,
                inp.fingerprint,
                inp.text,
                layout,
                tuple(inp.primary),
                tuple(inp.covariates),
                tuple(inp.candidates),
            )
        )
    if window is not None and off * 8 <= len(window):
        if chunks:
            dst = np.frombuffer(window, dtype=np.float64, count=off)
            np.concatenate(chunks, out=dst)
            del dst
        return {"meta": meta, "flat": None, "size": off}
    flat = np.concatenate(chunks) if chunks else np.zeros(0)
    return {"meta": meta, "flat": flat, "size": off}


class Sandbox:
    """Runs tool source over questions in a pre-warmed, forked, rlimited worker process.

    The worker starts on the first call (or :meth:`start`) and restarts by itself if it dies.
    Calls are serialized by a lock: one thread may share a Sandbox with others, but evaluations
    do not overlap; create one Sandbox per thread for parallelism (each costs one worker).

    Args:
        limits: Per-item limits (defaults: :class:`SandboxLimits`).
        preload: Extra modules the worker imports before building ``P``; ``"pkg.mod:fn"`` also
            calls ``fn()`` (e.g. to register more primitives). They are imported only in the
            worker, and the gate accepts exactly the ``P`` names the worker reports.
    """

    def __init__(self, limits: SandboxLimits | None = None, *, preload: Sequence[str] = ()) -> None:
        self.limits = limits or SandboxLimits()
        self.preload = tuple(preload)
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._gate_cache: OrderedDict[str, GateReport] = OrderedDict()
        self.restarts = 0

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """Start the worker now (pre-warm) and return what it reported (pid, numpy version...)."""
        with self._lock:
            return dict(self._ensure_worker().info)

    def _ensure_worker(self) -> _Worker:
        w = self._worker
        if w is not None and w.alive():
            return w
        if w is not None:
            w.kill()
            self.restarts += 1
        self._worker = _Worker(self.preload, self.limits.startup_timeout_s)
        self._gate_cache.clear()
        return self._worker

    def close(self) -> None:
        """Stop the worker. The Sandbox may be used again (a new worker starts)."""
        with self._lock:
            if self._worker is not None:
                self._worker.shutdown()
                self._worker = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def primitive_names(self) -> frozenset[str]:
        """Names under ``P`` in the worker (starts it)."""
        with self._lock:
            return self._ensure_worker().primitive_names

    # -- evaluation ------------------------------------------------------------------------
    def check(self, source: str) -> GateReport:
        """Run the AST gate against this sandbox's ``P`` (cached per source)."""
        with self._lock:
            return self._check(source)

    def _check(self, source: str) -> GateReport:
        w = self._ensure_worker()
        rep = self._gate_cache.get(source)
        if rep is None:
            rep = check_source(source, primitive_names=w.primitive_names)
            self._gate_cache[source] = rep
            if len(self._gate_cache) > 512:
                self._gate_cache.popitem(last=False)
        return rep

    def run_one(
        self, source: str, inp: ToolInput, *, check_determinism: bool = False
    ) -> ToolResult:
        """Run a tool on one question (see :meth:`run`)."""
        return self.run(source, [inp], check_determinism=check_determinism)[0]

    def run(
        self, source: str, inputs: Sequence[ToolInput], *, check_determinism: bool = False
    ) -> list[ToolResult]:
        """Run one tool over many questions in one worker call.

        Items run one after another in a forked child, each under its own CPU and wall-clock
        limit; an item that is killed is reported as an error and the others still run.

        Args:
            source: The tool's source (one zero-argument function).
            inputs: What the tool may see of each question.
            check_determinism: Run every item twice; disagreeing runs become errors of kind
                ``"nondeterministic"``.

        Returns:
            One :class:`ToolResult` per input, in order.
        """
        inputs = list(inputs)
        if not inputs:
            return []
        with self._lock:
            report = self._check(source)
            if not report.ok:
                msg = "; ".join(report.reasons)
                return [_error(inp.qid, "gate", msg) for inp in inputs]
            assert report.function_name is not None
            runs = 2 if check_determinism else 1
            lim = self.limits
            limits = asdict(lim)
            head = {"op": "run", "n": len(inputs), "runs": runs, "limits": limits}
            budget = 10.0 + len(inputs) * runs * (lim.wall_s_per_item + 0.05)
            resp = b""
            for attempt in range(2):
                w = self._ensure_worker()
                wired = wire_inputs(inputs, w.window)
                if wired["flat"] is None:
                    w.window_used = max(w.window_used, 8 * wired["size"])
                payload = pickle.dumps(
                    {
                        "source": source,
                        "function": report.function_name,
                        "inputs": wired,
                        "runs": runs,
                        "limits": limits,
                    },
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
                try:
                    w.send(head, payload)
                    resp = w.receive(time.monotonic() + budget)
                    w.release_window()
                    break
                except TimeoutError:
                    w.kill()
                    return [
                        _error(inp.qid, "timeout", "the sandbox worker stopped answering")
                        for inp in inputs
                    ]
                except (OSError, EOFError) as e:
                    w.kill()
                    if attempt == 1:
                        return [
                            _error(inp.qid, "exception", f"the sandbox worker died: {e}")
                            for inp in inputs
                        ]
            if resp[:1] != b"B":
                answer: Any = None
                with contextlib.suppress(ValueError):
                    answer = json.loads(resp)
                err = answer.get("error") if isinstance(answer, dict) else "malformed answer"
                return [_error(inp.qid, "exception", f"sandbox: {err}") for inp in inputs]
            return _decode(resp[1:], inputs, lim, runs)


def _decode(
    stream: bytes, inputs: Sequence[ToolInput], lim: SandboxLimits, runs: int
) -> list[ToolResult]:
    """One ToolResult per input from the worker's result stream.

    A stream that breaks its format marks the items from the first bad record on as errors.
    """
    dec = _StreamDecoder(stream, lim, runs)
    out: list[ToolResult] = []
    qids = [inp.qid for inp in inputs]
    n = len(qids)
    idx = 0
    skip_bulk = 0
    try:
        while idx < n:
            if skip_bulk <= 0:
                got = dec.bulk(idx, qids)
                if got:
                    out.extend(got)
                    idx += len(got)
                    continue
                skip_bulk = _BULK_MIN  # not uniform here: go item by item for a while
            out.append(dec.item(idx, qids[idx]))
            idx += 1
            skip_bulk -= 1
    except Exception as e:  # any failure to parse untrusted bytes means a malformed stream
        why = f"malformed result from the sandbox ({e if isinstance(e, _Malformed) else type(e).__name__})"
        out.extend(_error(inp.qid, "exception", why) for inp in inputs[len(out) :])
    return out
