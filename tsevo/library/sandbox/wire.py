"""What crosses a process boundary of the sandbox: frames, the result stream and the inputs window.

Both sides import this module: the parent (:mod:`.runner`, :mod:`.process`, :mod:`.decode`) and the
worker (:mod:`.worker`, :mod:`.child`); neither imports the other.

Frames (parent <-> zygote, zygote -> child): a 4-byte big-endian length, then the payload.
parent -> zygote: pickle (the parent is trusted); zygote -> parent: JSON, or ``b"B"`` followed by
the binary result stream below; the parent never unpickles anything a tool could have influenced.
A ``run`` request is two frames: a small header (n, runs, limits) and the batch payload, which the
zygote forwards to the child unread, prefixed with the item range (:data:`RANGE`).

Result stream (little-endian, parsed by the parent with bounds checks):
``S`` schema records (``<BHI`` tag, schema id, length, then JSON ``{"k": keys, "t": kinds}``),
``I`` item records (``<BIB`` tag, index, runs, then per run: ``<BHd`` kind 1, schema id, ms and one
float64 per key; ``<Bd`` kind 2 (None), ms; or ``<BI`` kind 3, length and the JSON record of
:func:`~tsevo.library.sandbox.contract.encode_value`) and ``K`` records for killed items
(``<BII`` tag, index, length, JSON), all in item order.

A child's shared result buffer (:data:`SHM_BYTES`): a :data:`SHM_HEAD` header (the running item's
start time and index, then the count of finished items and record bytes used), then the records.

The inputs window: a memfd of :data:`INPUT_WINDOW` bytes the parent writes each batch's samples
into and the zygote maps read-only (from a read-only reopening, so a child cannot mprotect it
writable); children inherit the mapping, so the samples cross no pipe and are not copied again.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import mmap
import os
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from tsevo.library.context import ToolInput

__all__ = [
    "frames",
    "map_inputs",
    "read_frame",
    "unwire_inputs",
    "wire_inputs",
    "write_all",
    "write_frame",
]

FRAME_HEAD = struct.Struct(">I")
"""A frame's length prefix."""
MAX_FRAME = 1 << 31

# result stream records (see the module docstring)
TAG_SCHEMA = 0x53  # "S"
TAG_ITEM = 0x49  # "I"
TAG_KILL = 0x4B  # "K"
RUN_FAST = 1
RUN_NONE = 2
RUN_JSON = 3
REC_SCHEMA = struct.Struct("<BHI")
REC_ITEM = struct.Struct("<BIB")
REC_KILL = struct.Struct("<BII")
RUN_FAST_HEAD = struct.Struct("<BHd")
RUN_NONE_REC = struct.Struct("<Bd")
RUN_JSON_HEAD = struct.Struct("<BI")

# the shared result buffer of one child: a header, then the records
SHM_BYTES = 16 << 20
SHM_HEAD = 64
T_START = struct.Struct("<d")  # offset 0: time.monotonic() when the running item started
CUR = struct.Struct("<I")  # offset 8: index of the running item
PROGRESS = struct.Struct("<IQ")  # offset 16: items finished, record bytes used
DONE = b"D"  # the child finished its range
FULL = b"O"  # the child's buffer is full; continue in a new child

RANGE = struct.Struct(">II")
"""Prefix of a child's task frame: the batch's item range ``[start, end)`` it runs."""

INPUT_WINDOW = 1 << 31
"""Size of the inputs window (a sparse memfd; only the pages a batch writes cost memory)."""

_F_SETPIPE_SZ = 1031
PIPE_BYTES = 1 << 20


def grow_pipe(fd: int, size: int = PIPE_BYTES) -> None:
    """Ask for a larger pipe buffer (fewer wake-ups for big frames); best effort."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETPIPE_SZ, size)


def frames(*payloads: bytes) -> bytes:
    """The payloads as consecutive length-prefixed frames, in one buffer."""
    parts: list[bytes] = []
    for p in payloads:
        parts += (FRAME_HEAD.pack(len(p)), p)
    return b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a blocking file descriptor."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def write_frame(fd: int, payload: bytes) -> None:
    """Write one length-prefixed frame to a file descriptor (all of it)."""
    write_all(fd, frames(payload))


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def read_frame(fd: int) -> bytes | None:
    """Read one frame from a blocking descriptor; None at end of file."""
    hdr = _read_exact(fd, FRAME_HEAD.size)
    if hdr is None:
        return None
    (n,) = FRAME_HEAD.unpack(hdr)
    if n > MAX_FRAME:
        raise ValueError(f"frame of {n} bytes")
    return _read_exact(fd, n)


def map_inputs(fd: int | None) -> mmap.mmap | None:
    """Map the parent's inputs memfd read-only (None when there is none or it fails)."""
    if fd is None:
        return None
    try:
        ro = os.open(f"/proc/self/fd/{int(fd)}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.close(int(fd))
    try:
        return mmap.mmap(ro, INPUT_WINDOW, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except (OSError, ValueError):
        return None
    finally:
        os.close(ro)


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


def unwire_inputs(
    wired: dict[str, Any], start: int, end: int, window: mmap.mmap | None
) -> list[ToolInput]:
    """The inputs ``[start, end)`` of a batch packed by :func:`wire_inputs` (series are views).

    Args:
        wired: What :func:`wire_inputs` returned.
        start: First item.
        end: One past the last item.
        window: The inputs window, where ``wired`` says the samples are.

    Raises:
        RuntimeError: The samples are in the window but there is none.
    """
    flat = wired["flat"]
    if flat is None:  # the samples are in the shared inputs window
        if window is None:
            raise RuntimeError("no inputs window")
        flat = np.frombuffer(window, dtype=np.float64, count=wired["size"])
    return [
        ToolInput(
            qid,
            fp,
            text,
            {
                name: flat[off : off + shape[0]]
                if len(shape) == 1
                else flat[off : off + math.prod(shape)].reshape(shape)
                for name, off, shape in layout
            },
            tuple(pr),
            tuple(cv),
            tuple(cd),
        )
        for (qid, fp, text, layout, pr, cv, cd) in wired["meta"][start:end]
    ]
