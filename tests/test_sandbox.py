"""Functional tests of the sandbox: gate, ctx/P/np facades, contract, batches, limits, restarts.

The attack corpus lives in ``test_sandbox_attacks.py``. Both files share one worker per module and
low limits (1 s CPU, 2 s wall per item) so the whole sandbox suite stays well under 40 s.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tsevo.library.context import ToolInput
from tsevo.library.sandbox import (
    MissingSeriesError,
    Sandbox,
    SandboxLimits,
    ToolContext,
    ToolResult,
    build_base_namespace,
    check_source,
)
from tsevo.library.sandbox.contract import canonical, check_encoded, encode_value
from tsevo.library.sandbox.facades import Facade

PRELOAD = ("tests.test_sandbox:register_test_primitives",)
LIMITS = SandboxLimits(cpu_s_per_item=1.0, wall_s_per_item=2.0, memory_mb=256)

_COUNTER = [0]
_SHARED = {"arr": np.arange(4.0), "lst": [1.0, 2.0]}


def register_test_primitives() -> None:
    """Register primitives used only by the sandbox tests (called inside the worker)."""
    from tsevo.library.primitives import primitive

    @primitive(group="sandbox_test", outputs=("n",))
    def sbt_counter(*args: Any) -> dict[str, Any]:
        """Stateful on purpose: counts its calls in this process."""
        _COUNTER[0] += 1
        return {"n": _COUNTER[0]}

    @primitive(group="sandbox_test", outputs=())
    def sbt_shared() -> dict[str, Any]:
        """Returns module-level (shared) containers."""
        return _SHARED

    @primitive(group="sandbox_test", outputs=("ok",))
    def sbt_write(path: str) -> dict[str, Any]:
        """Trusted code that writes a file (the child's RLIMIT_FSIZE=0 must stop the bytes)."""
        with open(path, "w") as f:
            f.write("escaped")
            f.flush()
        return {"ok": True}

    @primitive(group="sandbox_test", outputs=("n",))
    def sbt_open_many(path: str) -> dict[str, Any]:
        """Trusted code that opens many files (RLIMIT_NOFILE must stop it)."""
        fs = [open(path) for _ in range(64)]  # noqa: SIM115
        n = len(fs)
        for f in fs:
            f.close()
        return {"n": n}


def make_input(
    qid: str = "q1",
    text: str = "Is the series rising? Consider the temperature too.",
    n: int = 64,
    seed: int = 0,
    **extra: np.ndarray,
) -> ToolInput:
    rng = np.random.default_rng(seed)
    series = {"y": np.cumsum(rng.normal(size=n)) + 0.1 * np.arange(n)}
    series.update(extra)
    covs = tuple(k for k in extra if k not in ("A", "B"))
    cands = tuple(k for k in extra if k in ("A", "B"))
    return ToolInput(qid, f"fp-{qid}", text, series, ("y",), covs, cands)


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    box = Sandbox(LIMITS, preload=PRELOAD)
    yield box
    box.close()


SIMPLE = """
def level():
    if not ctx.has("y"):
        return None
    y = ctx.series("y")
    return {"mean": float(np.mean(y)), "n": len(y), "up": bool(y[-1] > y[0])}
"""


# ------------------------------------------------------------------------------------------
# gate


def test_gate_accepts_a_plain_tool() -> None:
    rep = check_source(SIMPLE)
    assert rep.ok and rep.reasons == () and rep.function_name == "level"


def test_gate_reports_every_violation_with_line_numbers() -> None:
    src = "def t():\n    import os\n    while True:\n        pass\n    return y.tofile('x')\n"
    rep = check_source(src)
    assert not rep.ok and rep.function_name == "t"
    text = " | ".join(rep.reasons)
    assert "line 2: Import" in text and "line 3: While" in text and "line 5" in text
    assert "tofile" in text


def test_gate_accepts_the_constructs_tools_need() -> None:
    src = '''
"""module docstring"""
def rich() -> dict:
    """Docstring."""
    y = ctx.primary()
    out = {}
    vals = [float(v) for v in y[:10] if v > 0]
    d = {f"lag_{k}": k * 2 for k in range(3)}
    total: float = 0.0
    for i, v in enumerate(sorted(vals)):
        if i % 2 == 0 and v >= 0:
            total += v ** 2
        elif v < -1:
            continue
        else:
            break
    try:
        r = P.sbt_counter(y)
    except (ValueError, KeyError) as err:
        r = None
    spec = np.abs(np.fft.rfft(y - y.mean()))
    out["peak"] = int(np.argmax(spec[1:])) + 1
    out["norm"] = float(np.linalg.norm(y))
    out["t"] = total + math.sqrt(4.0) + len(d) + (1 if r else 0)
    assert out["t"] >= 0
    return out
'''
    rep = check_source(src, primitive_names={"sbt_counter"})
    assert rep.ok, rep.reasons


def test_gate_uses_the_given_primitive_names() -> None:
    src = "def t():\n    return P.not_a_primitive(ctx.primary())\n"
    assert not check_source(src, primitive_names={"trend"}).ok
    assert check_source(src, primitive_names={"not_a_primitive"}).ok


def test_gate_limits_source_size_and_nodes() -> None:
    big = "def t():\n" + "    x = 1\n" * 3000 + "    return None\n"
    rep = check_source(big)
    assert not rep.ok and "characters" in rep.reasons[0]
    assert not check_source("def t(:\n  pass").ok
    assert not check_source("def t():\n    return 'a\x00'\n").ok  # NUL bytes
    assert not check_source(b"def t(): pass").ok  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# facades in-process


def test_facades_are_read_only_and_never_modules() -> None:
    import types

    ns = build_base_namespace({})
    for name in ("P", "np", "math"):
        fac = ns[name]
        assert isinstance(fac, Facade)
        with pytest.raises(AttributeError):
            fac.mean = len
        with pytest.raises(AttributeError):
            delattr(fac, "pi" if name != "P" else "x")
    for member in vars(type(ns["np"])).values():
        obj = member.__func__ if isinstance(member, staticmethod) else member
        assert not isinstance(obj, types.ModuleType)
    assert isinstance(ns["np"].linalg, Facade) and not isinstance(ns["np"].fft, types.ModuleType)
    assert set(ns["__builtins__"]) >= {"len", "range", "ValueError"}
    assert "open" not in ns["__builtins__"] and "__import__" not in ns["__builtins__"]
    ctx = ToolContext(make_input())
    with pytest.raises(AttributeError):
        ctx.series = None  # type: ignore[method-assign]


def test_ctx_in_process_contract() -> None:
    inp = make_input(temp=np.ones(64), humidity=np.zeros(64), A=np.ones(8))
    ctx = ToolContext(inp)
    assert ctx.names() == ("y", "temp", "humidity", "A")
    assert ctx.primary_names() == ("y",) and ctx.n_primary() == 1
    assert ctx.covariate_names() == ("temp", "humidity") and ctx.candidate_names() == ("A",)
    y = ctx.series("y")
    y[:] = 0
    assert ctx.series("y")[5] != 0  # a copy each time
    assert ctx.length("A") == 8 and ctx.has("A") and not ctx.has("zzz") and not ctx.has(3)
    with pytest.raises(MissingSeriesError, match="no series named 'zzz'"):
        ctx.series("zzz")
    with pytest.raises(MissingSeriesError):
        ctx.primary(1)
    assert ctx.question_mentions("temperature") and not ctx.question_mentions("humidity")
    assert ctx.series("A").shape == (8,)  # candidates are always readable


# ------------------------------------------------------------------------------------------
# contract (parent side, no worker)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (None, True),
        ({}, True),
        ({"a": 1.5, "b": 2, "c": True}, True),
        ({"a": np.float64(1.5), "b": np.int64(3), "c": np.bool_(False)}, True),
        ({"a": float("nan")}, False),
        ({"a": -float("inf")}, False),
        ({"a": "up"}, False),
        ({"a": np.arange(3)}, False),
        ({"a": [1.0]}, False),
        ({"a": {"b": 1.0}}, False),
        ({1: 1.0}, False),
        ({"": 1.0}, False),
        ({"1abc": 1.0}, False),
        ({"k" * 65: 1.0}, False),
        ({f"k{i}": i for i in range(33)}, False),
        ({f"k{i}": i for i in range(32)}, True),
        ({"a": 2**53}, True),
        ({"a": 2**53 + 1}, False),
        ({"a": 10**400}, False),
        ([("a", 1.0)], False),
        (np.arange(3), False),
        ("answer: rising", False),
        (object(), False),
    ],
)
def test_contract(value: Any, ok: bool) -> None:
    import json

    enc = json.loads(json.dumps(encode_value(value, 32)))
    out, why = check_encoded(enc, max_outputs=32, max_key_chars=64)
    assert (why == "") is ok, why
    if ok and value is not None:
        assert out is not None and set(out) == set(value)
        assert all(type(v) in (bool, int, float) for v in out.values())


def test_contract_canonical_rounds_floats() -> None:
    assert canonical({"a": 1.00000000001}) == canonical({"a": 1.0})
    assert canonical({"a": 1.0001}) != canonical({"a": 1.0})
    assert canonical(None) is None


# ------------------------------------------------------------------------------------------
# running tools


def test_run_returns_results_in_order(sb: Sandbox) -> None:
    inputs = [make_input(f"q{i}", seed=i) for i in range(5)]
    res = sb.run(SIMPLE, inputs)
    assert [r.qid for r in res] == [f"q{i}" for i in range(5)]
    for r, inp in zip(res, inputs, strict=True):
        assert r.status == "ok" and r.error_kind == "" and r.ok
        assert r.outputs is not None
        assert r.outputs["mean"] == pytest.approx(float(np.mean(inp.series["y"])))
        assert r.outputs["n"] == 64 and type(r.outputs["up"]) is bool
        assert r.elapsed_ms >= 0
    assert sb.run(SIMPLE, []) == []


def test_abstain_and_missing_series(sb: Sandbox) -> None:
    src = "def t():\n    if not ctx.has('zzz'):\n        return None\n    return {'a': 1}\n"
    r = sb.run_one(src, make_input())
    assert r.status == "abstain" and r.outputs is None and r.error == ""
    r = sb.run_one("def t():\n    return {'a': float(ctx.series('zzz')[0])}\n", make_input())
    assert r.status == "error" and r.error_kind == "exception"
    assert "MissingSeriesError" in r.error and "no series named 'zzz'" in r.error


def test_ctx_api_inside_the_sandbox(sb: Sandbox) -> None:
    src = """
def probe():
    y = ctx.series("y")
    y[0] = 1e9
    again = ctx.series("y")
    nums = ctx.question_numbers()
    return {
        "n_names": len(ctx.names()),
        "n_primary": ctx.n_primary(),
        "n_cov": len(ctx.covariate_names()),
        "n_cand": len(ctx.candidate_names()),
        "len_y": ctx.length("y"),
        "copy_ok": bool(again[0] != 1e9),
        "mentions_window": ctx.question_mentions("window"),
        "mentions_zebra": ctx.question_mentions("zebra"),
        "first_number": nums[0],
        "n_numbers": len(nums),
        "prim_same": bool(np.array_equal(ctx.primary(), again)),
    }
"""
    inp = make_input(text="Between t=10 and t=20.5, in this window?", A=np.ones(3), B=np.ones(3))
    r = sb.run_one(src, inp)
    assert r.status == "ok", r.error
    assert r.outputs == {
        "n_names": 3,
        "n_primary": 1,
        "n_cov": 0,
        "n_cand": 2,
        "len_y": 64,
        "copy_ok": True,
        "mentions_window": True,
        "mentions_zebra": False,
        "first_number": 10.0,
        "n_numbers": 2,
        "prim_same": True,
    }


COV_TOOL = """
def with_cov():
    y = ctx.series("y")
    out = {"m": float(np.mean(y))}
    for c in ctx.covariate_names():
        if ctx.question_mentions(c):
            out["corr_" + c] = float(np.corrcoef(y, ctx.series(c))[0, 1])
    return out
"""


def test_covariates_read_only_when_mentioned(sb: Sandbox) -> None:
    rng = np.random.default_rng(1)
    inp = make_input(temperature=rng.normal(size=64), humidity=rng.normal(size=64))
    r = sb.run_one(COV_TOOL, inp)
    assert r.status == "ok", r.error
    assert r.outputs is not None and set(r.outputs) == {"m", "corr_temperature"}
    assert r.covariates_read == ("temperature",)

    greedy = "def g():\n    return {'m': float(np.mean(ctx.series('humidity')))}\n"
    r = sb.run_one(greedy, inp)
    assert r.status == "error" and r.error_kind == "covariate" and "humidity" in r.error


def test_covariate_violation_is_sticky_even_when_caught(sb: Sandbox) -> None:
    src = """
def sly():
    try:
        h = ctx.series("humidity")
    except Exception:
        h = None
    return {"x": 1.0}
"""
    inp = make_input(humidity=np.ones(64))
    r = sb.run_one(src, inp)
    assert r.status == "error" and r.error_kind == "covariate"


def test_numpy_scalars_become_plain_python(sb: Sandbox) -> None:
    src = "def t():\n    y = ctx.primary()\n    return {'a': np.mean(y), 'b': np.argmax(y), 'c': y[0] < y[1]}\n"
    r = sb.run_one(src, make_input())
    assert r.status == "ok", r.error
    assert r.outputs is not None
    assert [type(r.outputs[k]) for k in "abc"] == [float, int, bool]


def test_primitives_reach_the_worker_catalog(sb: Sandbox) -> None:
    names = sb.primitive_names
    assert {"sbt_counter", "sbt_shared"} <= names
    from tsevo.library.primitives import CATALOG

    assert "sbt_counter" not in CATALOG  # preload ran in the worker only
    assert set(CATALOG) <= names


def test_batch_survives_a_runaway_item(sb: Sandbox) -> None:
    src = """
def spin():
    y = ctx.series("y")
    if ctx.question_mentions("spin"):
        x = 0
        for i in range(10**12):
            x += i
    return {"m": float(np.mean(y))}
"""
    texts = ["calm", "calm", "please spin", "calm", "calm"]
    inputs = [make_input(f"q{i}", text=t, seed=i) for i, t in enumerate(texts)]
    t0 = time.monotonic()
    res = sb.run(src, inputs)
    assert time.monotonic() - t0 < 8
    assert [r.status for r in res] == ["ok", "ok", "error", "ok", "ok"]
    assert res[2].error_kind in {"cpu", "timeout"}
    for r, inp in zip(res, inputs, strict=True):
        if r.ok:
            assert r.outputs == {"m": pytest.approx(float(np.mean(inp.series["y"])))}


def test_memory_error_costs_only_its_item(sb: Sandbox) -> None:
    src = """
def hog():
    if ctx.question_mentions("hog"):
        z = np.ones(10**8)
        return {"s": float(z.sum())}
    return {"s": 1.0}
"""
    inputs = [make_input("a", text="calm"), make_input("b", text="hog"), make_input("c", text="x")]
    res = sb.run(src, inputs)
    assert [r.status for r in res] == ["ok", "error", "ok"]
    assert res[1].error_kind == "memory"


def test_consecutive_kills_and_parallel_children() -> None:
    spin_all = (
        "def spin():\n    x = 0\n    for i in range(10**12):\n        x += i\n    return {'x': 1}\n"
    )
    lim = SandboxLimits(
        cpu_s_per_item=0.3,
        wall_s_per_item=1.0,
        max_consecutive_kills=2,
        max_children=2,
        min_items_per_child=2,
    )
    with Sandbox(lim) as box:
        # one child per half of the batch; each half gives up after two consecutive kills
        t0 = time.monotonic()
        res = box.run(spin_all, [make_input(f"q{i}") for i in range(8)])
        assert time.monotonic() - t0 < 6
        assert all(r.status == "error" and r.error_kind in {"cpu", "timeout"} for r in res)
        assert ["not run" in r.error for r in res] == [False, False, True, True] * 2
        # a runaway item in each half costs only itself
        src = """
def spin():
    y = ctx.series("y")
    if ctx.question_mentions("spin"):
        x = 0
        for i in range(10**12):
            x += i
    return {"m": float(np.mean(y))}
"""
        texts = ["calm", "spin", "calm", "calm", "spin", "calm"]
        res = box.run(src, [make_input(f"p{i}", text=t, seed=i) for i, t in enumerate(texts)])
    assert [r.status for r in res] == ["ok", "error", "ok", "ok", "error", "ok"]
    assert [r.qid for r in res] == [f"p{i}" for i in range(6)]


def test_determinism_check(sb: Sandbox) -> None:
    r = sb.run_one(SIMPLE, make_input(), check_determinism=True)
    assert r.status == "ok"
    flaky = "def f():\n    return {'n': P.sbt_counter()['n']}\n"
    r = sb.run_one(flaky, make_input(), check_determinism=True)
    assert r.status == "error" and r.error_kind == "nondeterministic"
    assert "two runs disagree" in r.error


def test_each_batch_starts_from_a_fresh_fork(sb: Sandbox) -> None:
    flaky = "def f():\n    return {'n': P.sbt_counter()['n']}\n"
    first = sb.run(flaky, [make_input("a"), make_input("b")])
    second = sb.run_one(flaky, make_input("c"))
    # state carries within a batch (same child) but never into the next call
    assert [r.outputs for r in first] == [{"n": 1}, {"n": 2}]
    assert second.outputs == {"n": 1}


def test_gate_failures_do_not_run(sb: Sandbox) -> None:
    res = sb.run("def t():\n    import os\n    return None\n", [make_input("a"), make_input("b")])
    assert [r.error_kind for r in res] == ["gate", "gate"]
    assert all(isinstance(r, ToolResult) and r.outputs is None for r in res)
    assert "Import" in res[0].error


def test_worker_restarts_after_dying() -> None:
    with Sandbox(LIMITS) as box:
        info = box.start()
        assert info["blas_threads"] == "1"
        os.kill(info["pid"], signal.SIGKILL)
        time.sleep(0.1)
        r = box.run_one(SIMPLE, make_input())
        assert r.status == "ok" and box.restarts == 1
        assert box.start()["pid"] != info["pid"]
    # close() then reuse starts a fresh worker
    r = box.run_one(SIMPLE, make_input())
    assert r.status == "ok"
    box.close()


def test_threads_share_a_sandbox(sb: Sandbox) -> None:
    out: dict[int, list[ToolResult]] = {}

    def work(k: int) -> None:
        out[k] = sb.run(SIMPLE, [make_input(f"t{k}-{i}", seed=k * 10 + i) for i in range(4)])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(len(v) == 4 and all(r.ok for r in v) for v in out.values())
    assert [r.qid for r in out[2]] == [f"t2-{i}" for i in range(4)]


def test_limits_validate() -> None:
    with pytest.raises(ValueError):
        SandboxLimits(cpu_s_per_item=0)
    with pytest.raises(ValueError):
        SandboxLimits(max_outputs=0)
    with pytest.raises(ValueError):
        SandboxLimits(nofile=2)
    with pytest.raises(ValueError):
        SandboxLimits(max_children=0)
