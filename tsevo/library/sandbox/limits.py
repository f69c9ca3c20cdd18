"""Per-item limits of a sandboxed tool evaluation (shared by the parent and the worker)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

__all__ = ["ALLOW_ENV", "MODES", "SandboxLimits", "cpu_budget", "effective_mode"]

ALLOW_ENV = "TSEVO_ALLOW_UNCONFINED_SANDBOX"
"""Set to ``1`` to run without the OS layer where it cannot be installed (``"require"`` -> ``"best"``)."""

MODES = ("require", "best", "off")
"""Values of :attr:`SandboxLimits.os_layer`."""


def effective_mode(mode: str) -> str:
    """The OS-layer mode after the opt-out variable (``"require"`` may become ``"best"``)."""
    if mode not in MODES:
        raise ValueError(f"os_layer must be one of {MODES}, not {mode!r}")
    if mode == "require" and os.environ.get(ALLOW_ENV, "").strip() not in ("", "0"):
        return "best"
    return mode


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
        os_layer: The OS-level layer in every child (seccomp-bpf, and Landlock where the
            kernel has it; :mod:`.oslayer`): ``"require"`` refuses to start without seccomp
            (``TSEVO_ALLOW_UNCONFINED_SANDBOX=1`` turns it into ``"best"``), ``"best"`` uses
            what is available, ``"off"`` installs nothing.
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
    os_layer: str = "require"

    def __post_init__(self) -> None:
        if self.cpu_s_per_item <= 0 or self.wall_s_per_item <= 0:
            raise ValueError("time limits must be positive")
        if self.memory_mb < 0 or self.max_outputs < 1 or self.max_key_chars < 1:
            raise ValueError("memory_mb >= 0, max_outputs >= 1 and max_key_chars >= 1 required")
        if self.nofile < 8:
            raise ValueError("nofile must be at least 8")
        if self.max_children < 1 or self.min_items_per_child < 1:
            raise ValueError("max_children and min_items_per_child must be at least 1")
        if self.os_layer not in MODES:
            raise ValueError(f"os_layer must be one of {MODES}")


def cpu_budget(lim: dict[str, Any], runs: int, n_items: int) -> int:
    """The batch's RLIMIT_CPU backstop: per-item CPU times items (and runs), plus 2 s.

    Args:
        lim: The limits as sent to the worker (``dataclasses.asdict`` of :class:`SandboxLimits`).
        runs: Runs per item.
        n_items: Items in the batch.
    """
    return math.ceil(float(lim["cpu_s_per_item"]) * runs * n_items) + 2
