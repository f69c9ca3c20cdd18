"""The parent's reading of the worker's result stream (see :mod:`.wire`): one ToolResult per item.

The stream is untrusted (a tool could have influenced it): it is parsed with bounds checks and never
unpickled; outputs are checked against the output contract (:mod:`.contract`).
"""

from __future__ import annotations

import functools
import json
import struct
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from tsevo.library.context import ToolInput

from . import wire as _w
from .contract import MAX_INT_OUTPUT, canonical, check_encoded, check_fast_values, check_schema
from .limits import SandboxLimits
from .results import ErrorKind, ToolResult, brief, clean, error_result, fast_result

__all__ = ["StreamDecoder", "decode_stream"]

_KILL_KINDS = {"timeout", "cpu", "memory", "exception", "contract"}
_RUN_KINDS = {"memory", "exception", "covariate"}


def _interpret_run(qid: str, rec: Any, lim: SandboxLimits) -> ToolResult:
    if not isinstance(rec, dict):
        return error_result(qid, "exception", "malformed result from the sandbox")
    ms = float(rec.get("ms", 0.0)) if isinstance(rec.get("ms"), int | float) else 0.0
    cov = tuple(clean(c, 200) for c in rec.get("cov", ()) if isinstance(c, str))
    viol = rec.get("viol")
    if isinstance(viol, str):
        return ToolResult(qid, "error", None, clean(viol), "covariate", ms, cov)
    if rec.get("s") == "exc":
        k = rec.get("k")
        kind = cast(ErrorKind, k if k in _RUN_KINDS else "exception")
        return ToolResult(qid, "error", None, clean(rec.get("m", "")), kind, ms, cov)
    if rec.get("s") != "ret":
        return error_result(qid, "exception", "malformed result from the sandbox", ms)
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
        return error_result(qid, "exception", "no result from the sandbox")
    if "killed" in item:
        kind = cast(ErrorKind, item["killed"] if item["killed"] in _KILL_KINDS else "exception")
        ms = item.get("ms", 0.0)
        return error_result(
            qid, kind, clean(item.get("m", "")), float(ms) if isinstance(ms, int | float) else 0.0
        )
    recs = item.get("runs")
    if not isinstance(recs, list) or len(recs) != runs:
        return error_result(qid, "exception", "malformed result from the sandbox")
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
        f"two runs disagree: {brief(first)} vs {brief(again)}",
        "nondeterministic",
        first.elapsed_ms,
        first.covariates_read,
    )


class _Malformed(Exception):
    """The result stream broke its format (a bug, or a child that escaped the lower layers)."""


_Schema = tuple[list[str], str, struct.Struct, str]


class StreamDecoder:
    """Parent side of the result stream (see :mod:`.wire`): bounds-checked, never unpickled.

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
            fast_result(qid, "ok", dict(zip(keys, row, strict=True)), t)
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
            return fast_result(qid, "ok", outputs, ms)
        if kind == _w.RUN_NONE:
            _, ms = _w.RUN_NONE_REC.unpack_from(buf, self.off)
            self.off += _w.RUN_NONE_REC.size
            return fast_result(qid, "abstain", None, ms)
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


def decode_stream(
    stream: bytes, inputs: Sequence[ToolInput], lim: SandboxLimits, runs: int
) -> list[ToolResult]:
    """One ToolResult per input from the worker's result stream.

    A stream that breaks its format marks the items from the first bad record on as errors.
    """
    dec = StreamDecoder(stream, lim, runs)
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
        out.extend(error_result(inp.qid, "exception", why) for inp in inputs[len(out) :])
    return out
