"""The run folder: its layout as a type, safe writes, the store, resume (DESIGN.md §3).

The store knows files, not what they mean: :class:`RunLayout` and :class:`RoundPaths` name every
path of a run, :class:`RunStore` reads and writes them atomically, and :class:`RecordLog` keeps the
append-only answer-record logs.
"""

from .files import (
    RecordLog,
    atomic_write_bytes,
    atomic_write_text,
    check_no_secrets,
    read_jsonl,
)
from .layout import CandidatePaths, RoundPaths, RunLayout
from .lock import RunFolderBusy, RunLock, run_lock
from .run import RunStore, default_manifest

__all__ = [
    "CandidatePaths",
    "RecordLog",
    "RoundPaths",
    "RunFolderBusy",
    "RunLayout",
    "RunLock",
    "RunStore",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_no_secrets",
    "default_manifest",
    "read_jsonl",
    "run_lock",
]
