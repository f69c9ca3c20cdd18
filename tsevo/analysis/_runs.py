"""Reading a run folder: the store, its finished rounds, answer records, the suite and libraries.

Every frame builder of :mod:`tsevo.analysis` opens runs through these helpers, which name files
only through :class:`~tsevo.store.RunLayout` (no run-relative path is spelled here).
"""

from __future__ import annotations

from pathlib import Path

from tsevo.agent import AnswerRecord
from tsevo.data import Suite
from tsevo.evolve import flip_class
from tsevo.library.library import Library
from tsevo.store import RunStore

__all__ = [
    "Run",
    "flip_of",
    "library_or_none",
    "load_records",
    "open_run",
    "rounds_in",
    "run_suite",
]

Run = str | Path | RunStore
"""A run folder, or a store opened on one."""


def open_run(run: Run) -> RunStore:
    """The store of a run folder (an open store is returned as it is)."""
    return run if isinstance(run, RunStore) else RunStore.open(run)


def rounds_in(run: Run) -> list[int]:
    """Round numbers that finished in the run."""
    return open_run(run).layout.rounds()


def load_records(run: Run, arm: str) -> dict[str, AnswerRecord]:
    """Answer records of one stored arm by question id."""
    store = open_run(run)
    return {qid: AnswerRecord.from_dict(d) for qid, d in store.records(arm).load().items()}


def run_suite(run: Run) -> Suite:
    """The suite a run answered (with its train/val/test assignment)."""
    return Suite.load(open_run(run).layout.suite)


def library_or_none(path: Path) -> Library | None:
    """The library saved in ``path``, or None when the folder holds none."""
    try:
        return Library.load(path)
    except FileNotFoundError:
        return None


def flip_of(before: AnswerRecord, after: AnswerRecord) -> str | None:
    """The flip class of one question between two arms (None when either answer is incomplete)."""
    if not (before.completed and after.completed):
        return None
    return flip_class(bool(before.correct), bool(after.correct))
