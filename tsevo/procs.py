"""Forked worker pools whose workers do not outlive the process that forked them.

A ``ProcessPoolExecutor`` on the ``fork`` context leaves its workers behind when its process is
killed with SIGKILL: they wait forever on a queue whose other end is gone, each holding a copy of
the parent's memory. :func:`forked_pool` builds the engine's planning pools with
:func:`die_with_parent` as the workers' initializer: on Linux each worker asks the kernel to
SIGKILL it when the thread that forked it ends (``PR_SET_PDEATHSIG``; the pool forks its workers
from the thread that first submits to it, which outlives the pool's ``with`` block), and exits
at once when that parent is already gone. Elsewhere the initializer does nothing.
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import multiprocessing as mp
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["die_with_parent", "forked_map", "forked_pool"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Have this (forked) process killed when ``parent`` dies; exit now if it already has."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no C library with prctl
        return
    if os.getppid() != parent:  # the parent died between the fork and the call above
        os._exit(1)


def forked_pool(workers: int) -> cf.ProcessPoolExecutor:
    """A process pool on the ``fork`` context whose workers die with this process.

    Raises:
        RuntimeError: In a daemonic process (a ``multiprocessing`` pool's or a Dask worker's),
            which may not have children; callers fall back to working in this process.
    """
    if mp.current_process().daemon:
        raise RuntimeError("a daemonic process cannot start a process pool")
    return cf.ProcessPoolExecutor(
        workers,
        mp_context=mp.get_context("fork"),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    )


#: The job forked workers inherit (set only while :func:`forked_map` runs; saved and restored, so a
#: worker may map a job of its own).
_JOB: Callable[[int], Any] | None = None


def _run_job(i: int) -> Any:
    assert _JOB is not None
    return _JOB(i)


def forked_map(
    fn: Callable[[int], T], n: int, workers: int, order: Sequence[int] | None = None
) -> list[T]:
    """``[fn(0), ..., fn(n - 1)]``, computed in forked workers that inherit ``fn``.

    Nothing but an index goes to a worker and a result comes back, so ``fn`` may close over large
    or unpicklable state (a warm cache, a lock). ``order`` is the order the jobs are handed out in
    (the longest first keeps the pool's tail short); the results are in index order either way.
    Where a pool cannot start (one job or worker, a daemonic process, no ``fork``), the jobs run
    here, in index order; an exception from ``fn`` is raised as it would be here.
    """
    global _JOB
    if workers <= 1 or n <= 1:
        return [fn(i) for i in range(n)]
    prev, _JOB = _JOB, fn
    try:
        pool = forked_pool(workers)
    except (OSError, RuntimeError):
        _JOB = prev
        return [fn(i) for i in range(n)]
    try:
        with pool:
            futures = {i: pool.submit(_run_job, i) for i in (order or range(n))}
            return [futures[i].result() for i in range(n)]
    finally:
        _JOB = prev
