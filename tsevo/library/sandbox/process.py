"""The worker process as the parent sees it: start it, talk to it, give its memory back, kill it."""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import pickle
import select
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from . import wire as _w
from .results import SandboxError

__all__ = ["WorkerProcess", "worker_env"]

WORKER_COMMAND = "from tsevo.library.sandbox.worker import main; main()"
"""What the worker's fresh interpreter runs (``python -c``)."""


class WorkerProcess:
    """One zygote process and its pipes (no locking: the Sandbox serializes access)."""

    def __init__(
        self, preload: Sequence[str], startup_timeout_s: float, os_layer: str = "require"
    ) -> None:
        env = worker_env(os.environ)
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
            [sys.executable, "-c", WORKER_COMMAND],
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
            self.send({"preload": list(preload), "inputs_fd": self.memfd, "os_layer": os_layer})
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
        """True while the worker process runs."""
        return self.proc.poll() is None

    def send(self, obj: Any, raw: bytes | None = None) -> None:
        """Send a pickled object, then (for ``run``) the raw batch payload as a second frame."""
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        _w.write_all(self.wfd, _w.frames(payload) if raw is None else _w.frames(payload, raw))

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
        head = _w.FRAME_HEAD.size
        self._fill(head, deadline)
        (n,) = _w.FRAME_HEAD.unpack_from(self._buf)
        self._fill(head + n, deadline)
        payload, self._buf = self._buf[head : head + n], self._buf[head + n :]
        return payload

    def kill(self) -> None:
        """Kill the worker's process group and close its pipes and inputs window (idempotent)."""
        self._finalizer()

    def shutdown(self, timeout: float = 2.0) -> None:
        """Ask the worker to stop, wait up to ``timeout`` seconds, then kill what is left."""
        try:
            self.send({"op": "shutdown"})
            self.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


#: Environment variables never passed to the worker (credentials a tool could read and encode).
_SECRET_ENV = frozenset(
    {"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIALS", "AUTH"}
)


def worker_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment less what names a credential (``OPENAI_API_KEY``, ``HF_TOKEN``)."""
    return {k: v for k, v in environ.items() if not _SECRET_ENV & set(k.upper().split("_"))}


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
    """A memfd of :data:`~.wire.INPUT_WINDOW` bytes (sparse) and the parent's mapping of it."""
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
