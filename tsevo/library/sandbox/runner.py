"""The parent side of the sandbox: :class:`Sandbox`, :class:`SandboxLimits`, :class:`ToolResult`."""

from __future__ import annotations

import contextlib
import json
import pickle
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict
from types import TracebackType
from typing import Any

from tsevo.library.context import ToolInput

from .decode import decode_stream
from .gate import GateReport, check_source
from .limits import SandboxLimits, effective_mode
from .process import WorkerProcess
from .results import ErrorKind, SandboxError, Status, ToolResult, error_result
from .wire import wire_inputs

__all__ = ["ErrorKind", "Sandbox", "SandboxError", "SandboxLimits", "Status", "ToolResult"]


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
        self._worker: WorkerProcess | None = None
        self._gate_cache: OrderedDict[str, GateReport] = OrderedDict()
        self.restarts = 0

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """Start the worker now (pre-warm) and return what it reported (pid, numpy version...)."""
        with self._lock:
            return dict(self._ensure_worker().info)

    def _ensure_worker(self) -> WorkerProcess:
        w = self._worker
        if w is not None and w.alive():
            return w
        if w is not None:
            w.kill()
            self.restarts += 1
        mode = effective_mode(self.limits.os_layer)
        self._worker = WorkerProcess(self.preload, self.limits.startup_timeout_s, mode)
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

    def os_layers(self) -> dict[str, Any]:
        """Which OS-level layers the children run under (starts the worker; see :mod:`.oslayer`).

        Raises:
            SandboxError: ``os_layer="require"`` and seccomp cannot be installed here.
        """
        with self._lock:
            return dict(self._ensure_worker().info.get("os_layer") or {})

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
                return [error_result(inp.qid, "gate", msg) for inp in inputs]
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
                        error_result(inp.qid, "timeout", "the sandbox worker stopped answering")
                        for inp in inputs
                    ]
                except (OSError, EOFError) as e:
                    w.kill()
                    if attempt == 1:
                        return [
                            error_result(inp.qid, "exception", f"the sandbox worker died: {e}")
                            for inp in inputs
                        ]
            if resp[:1] != b"B":
                answer: Any = None
                with contextlib.suppress(ValueError):
                    answer = json.loads(resp)
                err = answer.get("error") if isinstance(answer, dict) else "malformed answer"
                return [error_result(inp.qid, "exception", f"sandbox: {err}") for inp in inputs]
            return decode_stream(resp[1:], inputs, lim, runs)
