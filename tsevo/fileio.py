"""Atomic file writes: the one implementation every layer uses (run store, suite files, caches).

A writer fills a temporary file beside the target, flushes and fsyncs it, and renames it over the
target, so a reader (or a process killed mid-write) sees the old file or the new one, never half.
The target keeps an existing file's permissions (else ``0644``); a failed write leaves no
temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_writer"]


@contextlib.contextmanager
def atomic_writer(path: str | Path) -> Iterator[BinaryIO]:
    """Open ``path`` for an atomic binary write; the file appears when the block ends without error.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.bin"
        >>> with atomic_writer(p) as fh:
        ...     _ = fh.write(b"hello")
        >>> p.read_bytes()
        b'hello'
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        # mkstemp makes the file private (0600); keep an existing file's mode, else 0644
        os.fchmod(fd, p.stat().st_mode & 0o777 if p.exists() else 0o644)
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_writer(path) as fh:
        fh.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write text atomically (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))
