"""The sandbox attack corpus: every escape/abuse class of research note §6.2, 0 escapes allowed.

Each case is tool source plus the expected outcome: ``"gate"`` (the AST gate rejects it, and the
sandbox refuses to run it), a set of runtime ``error_kind`` values, or ``"ok"`` for the cases that
are harmless by construction (the result is then checked). Every source may contain ``SENTINEL``,
replaced by a fresh path: after each case that path must not exist (or hold no bytes), so an
escape that reached the file system would fail the test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.test_sandbox import LIMITS, PRELOAD, make_input
from tsevo.library.sandbox import Sandbox, ToolResult, build_base_namespace, check_source

GATE = "gate"
RUNAWAY = {"cpu", "timeout", "memory"}


def t(body: str, name: str = "tool") -> str:
    """Wrap an indented body into a tool function."""
    lines = body.strip("\n").splitlines()
    return f"def {name}():\n" + "\n".join("    " + ln for ln in lines) + "\n"


# (id, source, expected) -- expected: GATE, "ok", or a set of error kinds
CASES: list[tuple[str, str, Any]] = [
    # 1. dunder traversal
    ("dunder_subclasses", t("return ().__class__.__bases__[0].__subclasses__()"), GATE),
    ("dunder_ctx_class", t("c = ctx.__class__\nreturn None"), GATE),
    ("dunder_np_dict", t("d = np.__dict__\nreturn None"), GATE),
    ("dunder_func_globals", t("g = P.sbt_counter.__globals__\nreturn None"), GATE),
    ("dunder_mro", t("m = [].__class__.__mro__\nreturn None"), GATE),
    ("dunder_builtins_name", t("f = __builtins__['open']\nreturn None"), GATE),
    ("dunder_import", t("os = __import__('os')\nreturn None"), GATE),
    ("dunder_method_self", t("o = ctx.series.__self__\nreturn None"), GATE),
    # 2. dunder via format strings
    ("format_attr_walk", t("s = '{0.__class__.__bases__}'.format(ctx)\nreturn None"), GATE),
    ("format_map", t("s = '{x.__class__}'.format_map({'x': ctx})\nreturn None"), GATE),
    ("str_format_unbound", t("s = str.format('{0.__class__}', 1)\nreturn None"), GATE),
    ("format_builtin", t("s = format(ctx, '')\nreturn None"), GATE),
    ("fstring_dunder", t("s = f'{ctx.__class__}'\nreturn None"), GATE),
    ("percent_format_no_walk", t("s = '%s' % (ctx,)\nreturn {'s': s}"), {"contract"}),
    # 3. frame objects
    ("gen_gi_frame", t("g = (x for x in [1])\nf = g.gi_frame.f_globals\nreturn None"), GATE),
    ("gen_close", t("g = (x for x in [1])\ng.close()\nreturn None"), GATE),
    (
        "traceback_tb_frame",
        t(
            "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    f = e.__traceback__.tb_frame\nreturn None"
        ),
        GATE,
    ),
    (
        "with_traceback",
        t(
            "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    e.with_traceback(None)\nreturn None"
        ),
        GATE,
    ),
    (
        "exception_args",
        t("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    a = e.args\nreturn None"),
        GATE,
    ),
    ("f_back", t("x = ctx.f_back\nreturn None"), GATE),
    ("async_def", "async def tool():\n    return None\n", GATE),
    ("yield_generator", t("yield 1"), GATE),
    # 4. reflective builtins (and no injected builtins)
    ("getattr_private", t("return getattr(ctx, '_inp')"), GATE),
    ("eval", t("return eval('1')"), GATE),
    ("exec", t("exec('x = 1')\nreturn None"), GATE),
    ("compile", t("c = compile('1', 'f', 'eval')\nreturn None"), GATE),
    ("open_write", t("open(SENTINEL, 'w').write('x')\nreturn None"), GATE),
    ("globals", t("g = globals()\nreturn None"), GATE),
    ("vars", t("v = vars(ctx)\nreturn None"), GATE),
    ("type_of_ctx", t("k = type(ctx)\nreturn None"), GATE),
    ("breakpoint", t("breakpoint()\nreturn None"), GATE),
    ("object_subclasses", t("s = object.__subclasses__()\nreturn None"), GATE),
    ("dir", t("d = dir(ctx)\nreturn None"), GATE),
    ("private_ctx_attr", t("i = ctx._inp\nreturn None"), GATE),
    ("ctx_violations_clear", t("ctx._violations.clear()\nreturn None"), GATE),
    ("no_full_builtins", t("license()\nreturn None"), {"exception"}),
    ("no_site_builtins", t("x = copyright\nreturn None"), {"exception"}),
    # 5. numpy I/O and pickle sinks
    ("np_load_pickle", t("a = np.load(SENTINEL, allow_pickle=True)\nreturn None"), GATE),
    ("np_save", t("np.save(SENTINEL, ctx.primary())\nreturn None"), GATE),
    ("ndarray_tofile", t("ctx.primary().tofile(SENTINEL)\nreturn None"), GATE),
    ("ndarray_dump", t("ctx.primary().dump(SENTINEL)\nreturn None"), GATE),
    ("np_memmap", t("m = np.memmap(SENTINEL, mode='w+', shape=(4,))\nreturn None"), GATE),
    ("np_ctypeslib", t("c = np.ctypeslib\nreturn None"), GATE),
    ("np_lib_npyio", t("l = np.lib.npyio\nreturn None"), GATE),
    ("np_fromfile", t("a = np.fromfile(SENTINEL)\nreturn None"), GATE),
    ("np_savetxt", t("np.savetxt(SENTINEL, ctx.primary())\nreturn None"), GATE),
    ("ndarray_ctypes", t("p = ctx.primary().ctypes.data\nreturn None"), GATE),
    ("ndarray_view_base", t("b = ctx.primary().view().base\nreturn None"), GATE),
    ("linalg_dict", t("d = np.linalg.__dict__\nreturn None"), GATE),
    ("linalg_unknown", t("d = np.linalg.lapack_lite\nreturn None"), GATE),
    ("float64_fromhex", t("x = np.float64.fromhex('0x1p1')\nreturn None"), GATE),
    ("ufunc_at", t("y = ctx.primary()\nnp.add.at(y, [0], 1)\nreturn None"), GATE),
    # 7. ctypes / mmap / cffi
    ("import_ctypes", "import ctypes\ndef tool():\n    return None\n", GATE),
    ("import_inside", t("import ctypes\nreturn None"), GATE),
    ("from_import", t("from ctypes import CDLL\nreturn None"), GATE),
    ("ctypes_name", t("c = ctypes.CDLL(None)\nreturn None"), GATE),
    ("import_mmap", t("import mmap\nreturn None"), GATE),
    # 6. guard / facade shadowing
    ("rebind_np", t("np = ctx\nreturn None"), GATE),
    ("rebind_in_for", t("for P in range(3):\n    pass\nreturn None"), GATE),
    (
        "rebind_except_as",
        t("try:\n    x = 1\nexcept ValueError as np:\n    pass\nreturn None"),
        GATE,
    ),
    ("rebind_comprehension", t("a = [ctx for ctx in range(3)]\nreturn None"), GATE),
    ("rebind_tuple", t("(a, math) = (1, 2)\nreturn None"), GATE),
    ("default_arg", "def tool(np=None):\n    return None\n", GATE),
    ("posonly_arg", "def tool(x, /):\n    return None\n", GATE),
    ("function_named_np", "def np():\n    return None\n", GATE),
    ("decorator", "@staticmethod\ndef tool():\n    return None\n", GATE),
    ("set_facade_attr", t("np.mean = len\nreturn None"), GATE),
    ("global_stmt", t("global np\nreturn None"), GATE),
    ("two_functions", "def a():\n    return None\ndef b():\n    return None\n", GATE),
    ("module_code", "x = 1\ndef tool():\n    return None\n", GATE),
    ("bare_except", t("try:\n    x = 1\nexcept:\n    pass\nreturn None"), GATE),
    ("try_finally", t("try:\n    x = 1\nfinally:\n    return {'x': 1}"), GATE),
    ("walrus", t("if (n := 3):\n    pass\nreturn None"), GATE),
    ("with_stmt", t("with ctx:\n    pass\nreturn None"), GATE),
    ("delete", t("x = 1\ndel x\nreturn None"), GATE),
    # 8. resource exhaustion: loops, big ints, allocations, recursion
    ("while_true", t("while True:\n    pass"), GATE),
    ("long_for_loop", t("x = 0\nfor i in range(10**12):\n    x += i\nreturn {'x': x}"), RUNAWAY),
    ("bigint_literal_pow", t("x = 10**10**10\nreturn None"), GATE),
    ("bigint_pow", t("x = 2**100000\nreturn None"), GATE),
    ("bigint_shift", t("x = 1 << 10**9\nreturn None"), GATE),
    ("bigint_augpow", t("x = 7\nx **= 10**6\nreturn None"), GATE),
    ("bigint_literal", t("x = 10000000000000\nreturn None"), GATE),
    ("bigint_runtime", t("k = 10**9\nx = 10**k\nreturn {'b': x > 0}"), RUNAWAY),
    ("list_bomb", t("x = [0.0] * 10**10\nreturn None"), {"memory"}),
    ("str_bomb", t("x = 'a' * 10**12\nreturn None"), {"memory"}),
    ("numpy_bomb", t("x = np.ones(10**8)\nreturn {'s': float(x.sum())}"), {"memory"}),
    ("numpy_2d_bomb", t("x = np.zeros((10**6, 10**6))\nreturn None"), {"memory"}),
    ("self_recursion", t("return tool()"), GATE),
    ("nested_def", t("def inner():\n    return 1\nreturn None"), GATE),
    ("lambda", t("f = lambda: 1\nreturn None"), GATE),
    ("class_def", t("class K:\n    pass\nreturn None"), GATE),
    (
        "deep_nesting_repr",
        t("x = []\nfor i in range(200000):\n    x = [x]\ns = str(x)\nreturn None"),
        {"exception"},
    ),
    ("source_too_long", "def tool():\n" + "    x = 1\n" * 4000 + "    return None\n", GATE),
    ("parser_bomb", "def tool():\n    return " + "(" * 300 + "1" + ")" * 300 + "\n", GATE),
    # 9. non-determinism
    ("import_random", t("import random\nreturn None"), GATE),
    ("np_random", t("x = np.random.rand()\nreturn None"), GATE),
    ("hash_str", t("return {'h': hash('a')}"), GATE),
    ("id_obj", t("return {'i': id(ctx)}"), GATE),
    ("time_name", t("return {'t': time.time()}"), GATE),
    ("np_empty", t("x = np.empty(10)\nreturn None"), GATE),
    # 10. output smuggling
    ("out_array", t("return ctx.primary()"), {"contract"}),
    ("out_dict_array", t("return {'a': ctx.primary()}"), {"contract"}),
    ("out_nan", t("return {'a': float('nan')}"), {"contract"}),
    ("out_inf", t("return {'a': float('inf')}"), {"contract"}),
    ("out_np_nan", t("return {'a': np.nan}"), {"contract"}),
    ("out_33_keys", t("return {'k' + str(i): i for i in range(33)}"), {"contract"}),
    ("out_huge_dict", t("return {'k' + str(i): i for i in range(10**5)}"), {"contract"}),
    ("out_string", t("return {'answer': 'rising'}"), {"contract"}),
    ("out_bare_string", t("return 'Option A'"), {"contract"}),
    ("out_object", t("return {'a': ctx}"), {"contract"}),
    ("out_exception", t("return {'a': ValueError('x')}"), {"contract"}),
    ("out_list", t("return {'a': [1.0, 2.0]}"), {"contract"}),
    ("out_nested", t("return {'a': {'b': 1.0}}"), {"contract"}),
    ("out_int_key", t("return {1: 2.0}"), {"contract"}),
    ("out_long_key", t("return {'k' * 65: 1.0}"), {"contract"}),
    ("out_option_key", t("return {'Option A: rising': 1.0}"), {"contract"}),
    ("out_big_int", t("return {'a': 2**60}"), {"contract"}),
    ("out_generator", t("return (x for x in [1])"), {"contract"}),
    ("out_primitive_dict", t("return {'a': P.sbt_shared()}"), {"contract"}),
    # evidence-only: covariates
    (
        "covariate_unmentioned",
        t("return {'m': float(np.mean(ctx.series('humidity')))}"),
        {"covariate"},
    ),
    (
        "covariate_swallowed",
        t(
            "try:\n    h = ctx.series('humidity')\nexcept Exception:\n    h = None\nreturn {'x': 1.0}"
        ),
        {"covariate"},
    ),
    # what the process limits add when trusted code misbehaves (a primitive writes / opens files)
    ("rlimit_fsize", t("return P.sbt_write(SENTINEL)"), {"exception"}),
    ("rlimit_nofile", t("return P.sbt_open_many('/dev/null')"), {"exception"}),
]


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    box = Sandbox(LIMITS, preload=PRELOAD)
    yield box
    box.close()


def test_corpus_size_and_coverage() -> None:
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)
    prefixes = {
        "dunder",
        "format",
        "gen",
        "traceback",
        "getattr",
        "np_load",
        "import_ctypes",
        "rebind",
        "while",
        "bigint",
        "numpy_bomb",
        "self_recursion",
        "np_random",
        "out_",
    }
    for p in prefixes:
        assert any(c[0].startswith(p) for c in CASES), p


@pytest.mark.parametrize(("name", "source", "expected"), CASES, ids=[c[0] for c in CASES])
def test_attack(sb: Sandbox, tmp_path: Path, name: str, source: str, expected: Any) -> None:
    sentinel = tmp_path / "escaped.txt"
    src = source.replace("SENTINEL", repr(str(sentinel)))
    inp = make_input(text="Is the series rising? Consider the temperature.", humidity=np.ones(64))
    rep = check_source(src, primitive_names=sb.primitive_names)
    res: ToolResult = sb.run_one(src, inp)
    if expected == GATE:
        assert not rep.ok and rep.reasons
        assert res.status == "error" and res.error_kind == "gate"
    else:
        assert rep.ok, rep.reasons
        assert res.status == "error", res
        assert res.error_kind in expected, res
        assert res.outputs is None
    # no escape: nothing was written where the tool pointed
    assert not sentinel.exists() or sentinel.stat().st_size == 0
    # and the sandbox still works after the attack
    ok = sb.run_one("def fine():\n    return {'n': len(ctx.primary())}\n", inp)
    assert ok.outputs == {"n": 64}


def test_numpy_facade_has_no_sinks() -> None:
    ns = build_base_namespace({})
    npf = ns["np"]
    for name in (
        "load",
        "save",
        "memmap",
        "ctypeslib",
        "lib",
        "random",
        "fromfile",
        "frombuffer",
        "loadtxt",
        "savetxt",
        "empty",
        "seterr",
        "set_printoptions",
        "vectorize",
        "testing",
    ):
        assert not hasattr(npf, name), name
    assert not hasattr(ns["math"], "factorial")
    assert "__import__" not in ns["__builtins__"]


def test_set_iteration_is_deterministic(sb: Sandbox) -> None:
    src = t(
        "s = list({'alpha', 'beta', 'gamma', 'delta'})\nreturn {'first_is_alpha': s[0] == 'alpha', 'n': len(s)}"
    )
    inp = make_input()
    a = sb.run_one(src, inp, check_determinism=True)
    sb.close()  # a fresh worker: same hash seed, same order
    b = sb.run_one(src, inp, check_determinism=True)
    assert a.status == b.status == "ok" and a.outputs == b.outputs


def test_state_poisoning_within_a_batch_is_blocked(sb: Sandbox) -> None:
    src = """
def poison():
    y = ctx.series("y")
    first = float(y[0])
    y[0] = 1e9
    shared = P.sbt_shared()
    shared["arr"][0] = 99.0
    shared["lst"].append(5.0)
    shared["new"] = 1.0
    return {"first": first, "arr0": float(P.sbt_shared()["arr"][0]),
            "lst_len": len(P.sbt_shared()["lst"]), "has_new": "new" in P.sbt_shared()}
"""
    inputs = [make_input("a"), make_input("b")]
    res = sb.run(src, inputs)
    y0 = float(inputs[0].series["y"][0])
    for r in res:
        assert r.status == "ok", r.error
        assert r.outputs == {"first": y0, "arr0": 0.0, "lst_len": 2, "has_new": False}


def test_state_poisoning_across_calls_is_blocked(sb: Sandbox) -> None:
    bump = "def bump():\n    return {'n': P.sbt_counter()['n']}\n"
    assert [r.outputs for r in sb.run(bump, [make_input("a")] * 3)] == [
        {"n": 1},
        {"n": 2},
        {"n": 3},
    ]
    assert sb.run_one(bump, make_input("b")).outputs == {"n": 1}
    # the facades of the next call are intact after a call that raised mid-way
    sb.run_one(t("x = np.mean(ctx.primary())\nraise ValueError('boom')"), make_input())
    again = sb.run_one(
        t("return {'m': float(np.mean(np.arange(5.0))), 'r': math.sqrt(9.0)}"), make_input()
    )
    assert again.outputs == {"m": 2.0, "r": 3.0}


def test_results_are_json_safe(sb: Sandbox) -> None:
    res = sb.run_one(t("return {'a': 1.5, 'b': True, 'c': 3}"), make_input())
    assert json.loads(json.dumps(res.outputs)) == {"a": 1.5, "b": True, "c": 3}
