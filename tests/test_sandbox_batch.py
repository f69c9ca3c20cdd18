"""Batched sandbox execution: large batches, per-item limits, the shared result buffer, the
binary result stream and its decoder, and the shared inputs window.

The functional suite is ``test_sandbox.py`` and the attack corpus ``test_sandbox_attacks.py``.
One worker per fixture and low limits keep this file to a few seconds.
"""

from __future__ import annotations

import json
import math
import mmap
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsevo.library.context import ToolInput
from tsevo.library.sandbox import Sandbox, SandboxLimits, ToolResult, decode, wire, worker
from tsevo.library.sandbox.contract import FastEncoder, check_fast_values, check_schema

PRELOAD = ("tests.test_sandbox_batch:register_batch_primitives",)
LIMITS = SandboxLimits(cpu_s_per_item=0.5, wall_s_per_item=1.0, memory_mb=256)
SMALL_BUFFER = 4096


def register_batch_primitives() -> None:
    """Primitives used only by these tests (called inside the worker)."""
    from tsevo.library.primitives import primitive

    @primitive(group="sandbox_batch_test", outputs=("slept",))
    def sbb_sleep(seconds: float) -> dict[str, Any]:
        """Sleeps without using CPU (only the wall-clock deadline can stop it)."""
        time.sleep(float(seconds))
        return {"slept": float(seconds)}


def shrink_result_buffer() -> None:
    """Give every child a tiny result buffer (called inside the worker, which reads its own name)."""
    worker.SHM_BYTES = SMALL_BUFFER


def make_input(qid: str, text: str = "calm", n: int = 32, seed: int = 0, **extra: Any) -> ToolInput:
    rng = np.random.default_rng(seed)
    series = {"y": np.cumsum(rng.normal(size=n))}
    series.update(extra)
    covs = tuple(k for k in extra)
    return ToolInput(qid, f"fp-{qid}", text, series, ("y",), covs)


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    box = Sandbox(LIMITS, preload=PRELOAD)
    yield box
    box.close()


MEAN = """
def mean_tool():
    y = ctx.primary()
    return {"m": float(np.mean(y)), "n": len(y), "up": bool(y[-1] > y[0])}
"""


def _expected_mean(inp: ToolInput) -> dict[str, Any]:
    y = np.asarray(inp.series["y"], dtype=np.float64)
    return {"m": float(np.mean(y)), "n": len(y), "up": bool(y[-1] > y[0])}


# ------------------------------------------------------------------------------------------
# per-item limits inside large batches


def test_runaway_item_mid_batch_keeps_every_other_result(sb: Sandbox) -> None:
    src = """
def spin():
    y = ctx.primary()
    if ctx.question_mentions("spin"):
        x = 0
        for i in range(10**12):
            x += i
    return {"m": float(np.mean(y)), "n": len(y), "up": bool(y[-1] > y[0])}
"""
    n = 300
    inputs = [make_input(f"q{i}", "please spin" if i == 150 else "calm", seed=i) for i in range(n)]
    res = sb.run(src, inputs)
    assert [r.qid for r in res] == [inp.qid for inp in inputs]
    assert res[150].status == "error" and res[150].error_kind in {"cpu", "timeout"}
    for i, (r, inp) in enumerate(zip(res, inputs, strict=True)):
        if i != 150:
            assert r.status == "ok", (i, r)
            assert r.outputs == _expected_mean(inp)
            assert [type(v) for v in r.outputs.values()] == [float, int, bool]


def test_wall_clock_deadline_kills_a_sleeping_item(sb: Sandbox) -> None:
    src = """
def nap():
    if ctx.question_mentions("nap"):
        P.sbb_sleep(30.0)
    return {"m": float(np.mean(ctx.primary()))}
"""
    texts = ["calm"] * 40
    texts[7] = "take a nap"
    inputs = [make_input(f"w{i}", t, seed=i) for i, t in enumerate(texts)]
    t0 = time.monotonic()
    res = sb.run(src, inputs)
    assert time.monotonic() - t0 < 6
    assert res[7].status == "error" and res[7].error_kind == "timeout"
    assert "wall-clock" in res[7].error
    assert res[7].elapsed_ms >= 900
    assert all(r.ok for i, r in enumerate(res) if i != 7)


def test_runaway_items_in_parallel_children() -> None:
    lim = SandboxLimits(
        cpu_s_per_item=0.3, wall_s_per_item=1.0, max_children=2, min_items_per_child=16
    )
    src = """
def spin():
    y = ctx.primary()
    if ctx.question_mentions("spin"):
        x = 0
        for i in range(10**12):
            x += i
    return {"m": float(np.mean(y))}
"""
    bad = {5, 40, 41}
    inputs = [make_input(f"p{i}", "spin" if i in bad else "calm", seed=i) for i in range(64)]
    with Sandbox(lim) as box:
        res = box.run(src, inputs)
    assert [r.qid for r in res] == [inp.qid for inp in inputs]
    assert {i for i, r in enumerate(res) if not r.ok} == bad
    assert all(res[i].error_kind in {"cpu", "timeout"} for i in bad)
    for r, inp in zip(res, inputs, strict=True):
        if r.ok:
            assert r.outputs == {"m": float(np.mean(inp.series["y"]))}


# ------------------------------------------------------------------------------------------
# result kinds and the contract on both routes


MIXED = """
def mixed():
    y = ctx.primary()
    k = int(ctx.question_numbers()[0]) if ctx.question_numbers() else 0
    if k == 1:
        return None
    if k == 2:
        raise ValueError("boom")
    if k == 3:
        return {"a": float("nan")}
    if k == 4:
        return {"a": 2**53 + 1}
    if k == 5:
        return {"1abc": 1.0}
    if k == 6:
        return {"s": "rising"}
    if k == 7:
        return {"f32": np.float32(1.5), "i32": np.int32(3)}
    if k == 8:
        return {"a": 2**53, "neg": -(2**53), "z": False}
    if k == 9:
        return {f"k{i}": float(i) for i in range(33)}
    if k == 10:
        return {"k" * 65: 1.0}
    if k == 11:
        return {"t": float(np.corrcoef(y, ctx.series("temp"))[0, 1])}
    if k == 12:
        return {"a": float("inf"), "b": 1.0}
    return {"m": float(np.mean(y)), "n": len(y)}
"""


def test_every_result_kind_in_one_batch(sb: Sandbox) -> None:
    temp = np.linspace(0.0, 1.0, 32)
    inputs = []
    for i in range(60):
        k = i % 13
        text = f"case {k} with temp" if k else "plain"
        inputs.append(make_input(f"m{i}", text, seed=i, temp=temp))
    res = sb.run(MIXED, inputs)
    for i, (r, inp) in enumerate(zip(res, inputs, strict=True)):
        k = i % 13
        y = inp.series["y"]
        if k == 0:
            assert r.ok and r.outputs == {"m": float(np.mean(y)), "n": 32}
        elif k == 1:
            assert r.status == "abstain" and r.outputs is None and r.error == ""
        elif k == 2:
            assert r.error_kind == "exception" and "ValueError: boom" in r.error
        elif k in (3, 12):
            assert r.error_kind == "contract" and "not finite" in r.error
        elif k == 4:
            assert r.error_kind == "contract" and "2**53" in r.error
        elif k == 5:
            assert r.error_kind == "contract" and "identifier-like" in r.error
        elif k == 6:
            assert r.error_kind == "contract" and "string" in r.error
        elif k == 7:
            assert r.ok and r.outputs == {"f32": 1.5, "i32": 3}
            assert [type(v) for v in r.outputs.values()] == [float, int]
        elif k == 8:
            assert r.ok and r.outputs == {"a": 2**53, "neg": -(2**53), "z": False}
            assert [type(v) for v in r.outputs.values()] == [int, int, bool]
        elif k == 9:
            assert r.error_kind == "contract" and "33 outputs" in r.error
        elif k == 10:
            assert r.error_kind == "contract" and "longer than 64" in r.error
        elif k == 11:
            assert r.ok and r.covariates_read == ("temp",)
            assert r.outputs == {"t": float(np.corrcoef(y, temp)[0, 1])}
        assert r.elapsed_ms >= 0.0


def test_determinism_check_on_a_large_batch(sb: Sandbox) -> None:
    inputs = [make_input(f"d{i}", seed=i) for i in range(200)]
    res = sb.run(MEAN, inputs, check_determinism=True)
    assert all(r.ok for r in res)
    assert [r.outputs for r in res] == [_expected_mean(inp) for inp in inputs]


def test_inline_inputs_match_the_shared_window(sb: Sandbox) -> None:
    inputs = [make_input(f"i{i}", seed=i, n=16 + i) for i in range(50)]
    inputs.append(ToolInput("two-d", "fp", "x", {"y": np.arange(12.0).reshape(3, 4)}, ("y",)))
    src = "def s():\n    y = ctx.primary()\n    return {'s': float(np.sum(y)), 'n': int(y.size)}\n"
    via_window = sb.run(src, inputs)
    assert sb._worker is not None and sb._worker.window is not None
    window, sb._worker.window = sb._worker.window, None
    try:
        inline = sb.run(src, inputs)
    finally:
        sb._worker.window = window
    assert [r.outputs for r in via_window] == [r.outputs for r in inline]
    assert inline[-1].outputs == {"s": 66.0, "n": 12}


def test_wire_inputs_window_and_inline_agree() -> None:
    inputs = [make_input(f"x{i}", seed=i, n=5 + i) for i in range(4)]
    inline = wire.wire_inputs(inputs)
    m = mmap.mmap(-1, 4096)
    shared = wire.wire_inputs(inputs, m)
    assert shared["flat"] is None and shared["size"] == inline["size"] == sum(
        5 + i for i in range(4)
    )
    assert shared["meta"] == inline["meta"]
    got = np.frombuffer(m, dtype=np.float64, count=shared["size"]).copy()
    np.testing.assert_array_equal(got, inline["flat"])
    small = mmap.mmap(-1, 8)  # too small: falls back to inline samples
    assert wire.wire_inputs(inputs, small)["flat"] is not None


# ------------------------------------------------------------------------------------------
# the shared result buffer filling up


@pytest.fixture(scope="module")
def small_sb() -> Iterator[Sandbox]:
    box = Sandbox(LIMITS, preload=(*PRELOAD, "tests.test_sandbox_batch:shrink_result_buffer"))
    yield box
    box.close()


def test_full_result_buffer_continues_in_a_new_child(small_sb: Sandbox) -> None:
    inputs = [make_input(f"b{i}", seed=i) for i in range(400)]
    res = small_sb.run(MEAN, inputs)
    assert [r.outputs for r in res] == [_expected_mean(inp) for inp in inputs]


def test_result_too_large_for_the_buffer_is_an_error(small_sb: Sandbox) -> None:
    src = """
def wordy():
    if ctx.question_mentions("wordy"):
        return {"key_" + "k" * 70 + str(i): "x" * 80 for i in range(40)}
    return {"m": float(np.mean(ctx.primary()))}
"""
    texts = ["calm", "wordy", "wordy", "calm", "wordy", "calm"]
    res = small_sb.run(src, [make_input(f"t{i}", t, seed=i) for i, t in enumerate(texts)])
    assert [r.status for r in res] == ["ok", "error", "error", "ok", "error", "ok"]
    assert all(res[i].error_kind == "contract" and "too large" in res[i].error for i in (1, 2, 4))


# ------------------------------------------------------------------------------------------
# the stream decoder (parent side), without a worker


def _stream(values: list[Any], runs: int = 1, max_items: int = 32) -> bytes:
    """Encode results as a child would (fast route where possible, JSON otherwise)."""
    enc = FastEncoder(max_items)
    out = []
    for i, value in enumerate(values):
        body = [wire.REC_ITEM.pack(wire.TAG_ITEM, i, runs)]
        for _ in range(runs):
            fast = enc.values(value) if type(value) is dict else None
            if fast is not None:
                sid, packer, vals = fast
                body.append(wire.RUN_FAST_HEAD.pack(wire.RUN_FAST, sid, 0.5) + packer.pack(*vals))
            elif value is None:
                body.append(wire.RUN_NONE_REC.pack(wire.RUN_NONE, 0.5))
            else:
                from tsevo.library.sandbox.contract import encode_value

                rec = json.dumps({"s": "ret", "v": encode_value(value, max_items), "ms": 0.5})
                body.append(wire.RUN_JSON_HEAD.pack(wire.RUN_JSON, len(rec)) + rec.encode())
        for sid, desc in enc.pending:
            out.append(wire.REC_SCHEMA.pack(wire.TAG_SCHEMA, sid, len(desc)) + desc)
        enc.pending.clear()
        out.append(b"".join(body))
    return b"".join(out)


def _inputs(n: int) -> list[ToolInput]:
    return [ToolInput(f"s{i}", "fp", "x", {}, ()) for i in range(n)]


def _item_by_item(stream: bytes, n: int, runs: int = 1) -> list[ToolResult]:
    dec = decode.StreamDecoder(stream, LIMITS, runs)
    return [dec.item(i, f"s{i}") for i in range(n)]


def test_bulk_decoding_equals_item_by_item() -> None:
    values: list[Any] = []
    for i in range(300):
        if i in (100, 101):
            values.append({"m": float("nan"), "n": i, "up": True})  # breaks a uniform run
        elif i == 200:
            values.append(None)
        elif i == 250:
            values.append({"other": 1.0})
        else:
            values.append({"m": i / 7, "n": i, "up": i % 2 == 0})
    stream = _stream(values)
    bulk = decode.decode_stream(stream, _inputs(300), LIMITS, 1)
    assert bulk == _item_by_item(stream, 300)
    assert bulk[5].outputs == {"m": 5 / 7, "n": 5, "up": False}
    assert [type(v) for v in bulk[5].outputs.values()] == [float, int, bool]
    assert bulk[100].error_kind == "contract" and bulk[200].status == "abstain"
    # the same with two runs per item
    two = _stream(values, runs=2)
    assert decode.decode_stream(two, _inputs(300), LIMITS, 2) == _item_by_item(two, 300, runs=2)


def test_decoder_rejects_forged_values_and_schemas() -> None:
    # an "int" column holding a fraction, a "bool" holding 0.5: only a forged stream does that
    schema = json.dumps({"k": ["a", "b"], "t": "ib"}).encode()
    head = wire.REC_SCHEMA.pack(wire.TAG_SCHEMA, 0, len(schema)) + schema
    packer = wire.RUN_FAST_HEAD
    rec0 = wire.REC_ITEM.pack(wire.TAG_ITEM, 0, 1) + packer.pack(wire.RUN_FAST, 0, 0.1)
    rec0 += np.array([1.5, 1.0]).tobytes()
    rec1 = wire.REC_ITEM.pack(wire.TAG_ITEM, 1, 1) + packer.pack(wire.RUN_FAST, 0, 0.1)
    rec1 += np.array([2.0, 0.5]).tobytes()
    res = decode.decode_stream(head + rec0 + rec1, _inputs(2), LIMITS, 1)
    assert [r.error_kind for r in res] == ["contract", "contract"]
    assert all("malformed" in r.error for r in res)
    # a schema with a duplicate key is refused once, and every result using it is an error
    dup = json.dumps({"k": ["a", "a"], "t": "ff"}).encode()
    stream = wire.REC_SCHEMA.pack(wire.TAG_SCHEMA, 3, len(dup)) + dup
    for i in range(3):
        stream += wire.REC_ITEM.pack(wire.TAG_ITEM, i, 1) + packer.pack(wire.RUN_FAST, 3, 0.1)
        stream += np.array([1.0, 2.0]).tobytes()
    res = decode.decode_stream(stream, _inputs(3), LIMITS, 1)
    assert all(r.error_kind == "contract" and "duplicate" in r.error for r in res)


def test_decoder_marks_out_of_order_and_truncated_streams() -> None:
    good = _stream([{"a": 1.0}] * 4)
    res = decode.decode_stream(good[:-3], _inputs(4), LIMITS, 1)
    assert [r.ok for r in res] == [True, True, True, False]
    assert "malformed" in res[3].error
    short = _stream([{"a": 1.0}] * 2)
    res = decode.decode_stream(short, _inputs(3), LIMITS, 1)  # one item missing
    assert [r.ok for r in res] == [True, True, False]
    one = _stream([{"a": 1.0}])
    skipped = (
        one + wire.REC_ITEM.pack(wire.TAG_ITEM, 2, 1) + wire.RUN_NONE_REC.pack(wire.RUN_NONE, 0.1)
    )
    res = decode.decode_stream(skipped, _inputs(3), LIMITS, 1)  # index 1 missing: out of order
    assert [r.status for r in res] == ["ok", "error", "error"]
    assert "out of order" in res[1].error


@given(st.binary(max_size=400), st.integers(min_value=1, max_value=5))
def test_decoder_never_raises_on_garbage(data: bytes, n: int) -> None:
    prefix = _stream([{"a": 1.0, "b": True}])
    for stream in (data, prefix + data):
        res = decode.decode_stream(stream, _inputs(n), LIMITS, 1)
        assert len(res) == n and all(isinstance(r, ToolResult) for r in res)
        for r in res:
            if r.ok:
                assert r.outputs is not None
                assert all(
                    type(v) in (bool, int, float) and math.isfinite(v) for v in r.outputs.values()
                )


def test_schema_and_value_checks() -> None:
    assert check_schema({"k": ["a", "b_2"], "t": "fb"}) == ""
    assert "identifier-like" in check_schema({"k": ["a b"], "t": "f"})
    assert "outputs" in check_schema({"k": [f"k{i}" for i in range(33)], "t": "f" * 33})
    assert "malformed" in check_schema({"k": ["a"], "t": "s"})
    assert "malformed" in check_schema({"k": ["a"], "t": "ff"})
    assert check_fast_values(["a", "b"], "ff", [1.0, 2.0]) == ({"a": 1.0, "b": 2.0}, "")
    assert "not finite" in check_fast_values(["a", "b"], "ff", [1.0, math.inf])[1]
    assert "not finite" in check_fast_values(["a"], "f", [math.nan])[1]
    # finite values whose sum overflows are still accepted
    out, why = check_fast_values(["a", "b"], "ff", [1e308, 1e308])
    assert why == "" and out == {"a": 1e308, "b": 1e308}
    out, why = check_fast_values(["n", "b"], "ib", [3.0, 1.0])
    assert why == "" and out == {"n": 3, "b": True} and type(out["n"]) is int


def test_fast_encoder_routes() -> None:
    enc = FastEncoder(4)
    assert enc.values({"a": 1.0, "b": np.float64(2.0), "c": np.bool_(True), "d": 3}) is not None
    assert len(enc.pending) == 1
    assert enc.values({"a": 2.0, "b": np.float64(3.0), "c": np.bool_(False), "d": 4}) is not None
    assert len(enc.pending) == 1  # same schema, described once
    assert enc.values({"a": "text"}) is None
    assert enc.values({"a": np.float32(1.0)}) is None  # goes through encode_value
    assert enc.values({"a": 2**53 + 1}) is None  # exact message from the JSON route
    assert enc.values({1: 1.0}) is None
    assert enc.values({f"k{i}": 1.0 for i in range(5)}) is None  # over max_items


def test_inputs_window_cannot_be_made_writable_in_the_worker() -> None:
    import ctypes
    import os

    fd = os.memfd_create("test-window", os.MFD_CLOEXEC)
    os.ftruncate(fd, wire.INPUT_WINDOW)
    parent_view = mmap.mmap(fd, wire.INPUT_WINDOW)
    parent_view[:8] = np.float64(2.5).tobytes()
    window = wire.map_inputs(os.dup(fd))  # what the zygote maps (and its children inherit)
    assert window is not None
    assert np.frombuffer(window, dtype=np.float64, count=1)[0] == 2.5
    with pytest.raises(TypeError):
        window[:1] = b"x"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    addr = np.frombuffer(window, dtype=np.uint8, count=1).ctypes.data
    # the mapping comes from a read-only reopening: not even mprotect makes it writable
    assert libc.mprotect(addr, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE) == -1
    window.close()
    parent_view.close()
    os.close(fd)
