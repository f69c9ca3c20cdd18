"""Hooks into a run, and the signal that stops one cleanly.

The engine (:func:`tsevo.evolve.evolve`) calls every :class:`Callback` it is given at fixed points of
a run. A role set contributes the callbacks its backend needs (the LLM backend writes its accounting
per round, checks that a resumed run keeps the settings its stored answers came from, and names its
models in the manifest); a user passes more with ``evolve(..., callbacks=[...])``. The engine knows
no backend: everything backend-specific reaches the run through these hooks.

A role that cannot go on (a spent budget, a replay-cache miss, a dead endpoint) raises
:class:`RunStopped`. It derives from ``BaseException`` on purpose, like ``KeyboardInterrupt``: the
engine contains ``Exception`` from roles (a failed role must not void a round), but a stop must end
the whole run and leave the folder as a kill would (resumable).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tsevo.store import RunStore

__all__ = ["Callback", "RunStopped"]


class RunStopped(BaseException):
    """A role asks the run to stop; rerunning the same command resumes it.

    Attributes:
        reason: Short machine-readable reason (``budget``, ``replay_miss``, ``endpoint_down``, ...).
        cause: The underlying error, if any.
    """

    def __init__(self, reason: str, message: str, cause: BaseException | None = None) -> None:
        self.reason = reason
        self.cause = cause
        super().__init__(message)


class Callback:
    """A hook into a run. Subclass it and override what you need; every method is a no-op here.

    ``store`` is ``None`` for a run without a folder (in memory only).
    """

    def manifest(self) -> Mapping[str, Any]:
        """Fields this callback adds to ``manifest.json`` when the run folder is created."""
        return {}

    def on_run_start(self, store: RunStore | None, *, resumed: bool) -> None:
        """The run folder exists (``resumed``: it held this run already). Raise to refuse the run."""

    def on_round_end(self, r: int, result: Any, store: RunStore | None) -> None:
        """Round ``r`` finished, its report-only test and library write included."""

    def on_stop(self, stop: RunStopped, store: RunStore | None) -> None:
        """A role stopped the run; the engine re-raises ``stop`` after every callback saw it."""

    def on_run_end(self, status: str, store: RunStore | None) -> None:
        """The run ended: ``finished``, ``stopped:<reason>`` or ``error`` (always called)."""
