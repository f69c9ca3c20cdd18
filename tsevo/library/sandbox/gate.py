"""Layer 1: the static AST gate, run in the parent before any process is forked.

The gate accepts only a small, data-only subset of Python: one zero-argument function built from
assignments, ``for``/``if``, ``try``/``except``, arithmetic, comparisons, containers, comprehensions
and calls to allowlisted names and attributes. Everything else is rejected with a reason that names
the line, so a synthesizer can repair its source.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from tsevo.library.primitives import CATALOG

from .facades import (
    BUILTINS,
    CTX_MEMBERS,
    DATA_METHODS,
    MATH_MEMBERS,
    NUMPY_MEMBERS,
    NUMPY_SUBMODULES,
    RESERVED_NAMES,
    _words,
)

__all__ = [
    "FORBIDDEN_NAMES",
    "MAX_AST_NODES",
    "MAX_EXPONENT",
    "MAX_INT_CONSTANT",
    "MAX_SOURCE_CHARS",
    "GateReport",
    "check_source",
]

MAX_SOURCE_CHARS = 16_000
"""Longest accepted source (a compiled depth-4 calibration tree fits comfortably)."""
MAX_AST_NODES = 6_000
"""Most AST nodes in one tool."""
MAX_INT_CONSTANT = 10**12
"""Largest absolute integer literal."""
MAX_EXPONENT = 64
"""Largest constant exponent of ``**`` and constant shift of ``<<``."""

FORBIDDEN_NAMES: frozenset[str] = frozenset(
    _words(
        """
    eval exec compile open getattr setattr delattr hasattr globals locals vars type object super
    format iter next aiter anext id dir breakpoint memoryview bytearray bytes input print help
    exit quit hash callable classmethod staticmethod property repr ascii chr ord pow complex
    slice issubclass
    os sys subprocess builtins importlib ctypes mmap cffi pickle marshal shelve random time
    datetime threading multiprocessing socket signal resource gc inspect io pathlib shutil
    numpy scipy pandas re code codeop types weakref traceback functools operator
    """
    )
)
"""Names a tool may neither read nor bind: reflection, I/O, code execution, modules."""

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    # statements
    ast.Return,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.For,
    ast.If,
    ast.Try,
    ast.ExceptHandler,
    ast.Raise,
    ast.Assert,
    ast.Expr,
    ast.Pass,
    ast.Break,
    ast.Continue,
    # expressions
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.IfExp,
    ast.Compare,
    ast.Call,
    ast.keyword,
    ast.Constant,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Starred,
    ast.Name,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.comprehension,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.Load,
    ast.Store,
    # operators
    ast.operator,
    ast.unaryop,
    ast.cmpop,
    ast.boolop,
)

_FACADE_ATTRS: dict[str, frozenset[str]] = {
    "ctx": frozenset(CTX_MEMBERS),
    "math": frozenset(MATH_MEMBERS),
    "np": frozenset(NUMPY_MEMBERS) | frozenset(NUMPY_SUBMODULES),
}


@dataclass(frozen=True)
class GateReport:
    """Outcome of :func:`check_source`.

    Attributes:
        ok: True when the source passed every rule.
        reasons: One line per violation (``"line 3: ..."``), empty when ``ok``.
        function_name: Name of the single top-level function, when one was found.
    """

    ok: bool
    reasons: tuple[str, ...]
    function_name: str | None


def _fold(node: ast.AST) -> float | int | None:
    """Value of a constant numeric expression, or None when it is not one (or too big to fold)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return cast(float | int, node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _fold(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
        a, b = _fold(node.left), _fold(node.right)
        if a is None or b is None:
            return None
        try:
            if isinstance(node.op, ast.Pow):
                if abs(b) > MAX_EXPONENT or abs(a) > MAX_INT_CONSTANT:
                    return float("inf")
                return cast(float | int, a**b)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
        except (OverflowError, ZeroDivisionError, ValueError, TypeError):
            return None
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self, fname: str, primitive_names: frozenset[str]) -> None:
        self.fname = fname
        self.reasons: list[str] = []
        self.attrs = dict(_FACADE_ATTRS)
        self.attrs["P"] = primitive_names

    def fail(self, node: ast.AST, msg: str) -> None:
        self.reasons.append(f"line {getattr(node, 'lineno', '?')}: {msg}")

    def generic_visit(self, node: ast.AST) -> None:
        if not isinstance(node, _ALLOWED_NODES):
            self.fail(node, f"{type(node).__name__} is not allowed")
            return  # do not descend: one reason per forbidden construct
        super().generic_visit(node)

    # names -------------------------------------------------------------------------------
    def _check_binding(self, node: ast.AST, name: str) -> None:
        if name.startswith("_"):
            self.fail(node, f"names starting with '_' are not allowed ({name!r})")
        elif name in FORBIDDEN_NAMES:
            self.fail(node, f"name {name!r} is forbidden")
        elif name in RESERVED_NAMES:
            self.fail(node, f"cannot rebind the facade {name!r}")
        elif name == self.fname:
            self.fail(node, f"cannot rebind the tool's own name {name!r}")

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if isinstance(node.ctx, ast.Store):
            self._check_binding(node, name)
        elif isinstance(node.ctx, ast.Load):
            if name.startswith("_"):
                self.fail(node, f"names starting with '_' are not allowed ({name!r})")
            elif name in FORBIDDEN_NAMES:
                self.fail(node, f"name {name!r} is forbidden")
            elif name == self.fname:
                self.fail(node, f"the tool may not refer to itself ({name!r}): no recursion")
        else:
            self.fail(node, f"{type(node.ctx).__name__} context is not allowed")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if not isinstance(node.ctx, ast.Load):
            self.fail(node, f"assigning or deleting attributes is not allowed (.{attr})")
        elif attr.startswith("_"):
            self.fail(node, f"attributes starting with '_' are not allowed (.{attr})")
        else:
            base = node.value
            if isinstance(base, ast.Name) and base.id in self.attrs:
                if attr not in self.attrs[base.id]:
                    self.fail(node, f"{base.id}.{attr} does not exist in the sandbox")
            elif (
                isinstance(base, ast.Attribute)
                and isinstance(base.value, ast.Name)
                and base.value.id == "np"
                and base.attr in NUMPY_SUBMODULES
            ):
                if attr not in NUMPY_SUBMODULES[base.attr]:
                    self.fail(node, f"np.{base.attr}.{attr} does not exist in the sandbox")
            elif attr not in DATA_METHODS:
                self.fail(node, f"attribute .{attr} is not in the allowlist")
        self.visit(node.value)

    # constants and operators -------------------------------------------------------------
    def visit_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, bytes):
            self.fail(node, "bytes literals are not allowed")
        elif type(v) is int and abs(v) > MAX_INT_CONSTANT:
            self.fail(node, f"integer literal larger than {MAX_INT_CONSTANT:.0e}")
        elif v is Ellipsis:
            self.fail(node, "Ellipsis is not allowed")

    def _check_exponent(self, node: ast.AST, right: ast.AST, what: str) -> None:
        v = _fold(right)
        if v is not None and abs(v) > MAX_EXPONENT:
            self.fail(node, f"constant {what} larger than {MAX_EXPONENT}")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Pow):
            self._check_exponent(node, node.right, "exponent")
        elif isinstance(node.op, ast.LShift):
            self._check_exponent(node, node.right, "shift")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.Pow):
            self._check_exponent(node, node.value, "exponent")
        elif isinstance(node.op, ast.LShift):
            self._check_exponent(node, node.value, "shift")
        self.generic_visit(node)

    # statements --------------------------------------------------------------------------
    def visit_Try(self, node: ast.Try) -> None:
        if node.finalbody:
            self.fail(node, "try/finally is not allowed (it can swallow sandbox signals)")
        for h in node.handlers:
            if h.type is None:
                self.fail(h, "a bare 'except:' is not allowed; name the exception types")
            if h.name is not None:
                self._check_binding(h, h.name)
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        if node.is_async:
            self.fail(node.target, "async comprehensions are not allowed")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        for kw in node.keywords:
            if kw.arg is not None and kw.arg.startswith("_"):
                self.fail(kw, f"keyword names starting with '_' are not allowed ({kw.arg!r})")
        self.generic_visit(node)


def check_source(source: str, *, primitive_names: Iterable[str] | None = None) -> GateReport:
    """Statically check a tool's source against the sandbox rules.

    Args:
        source: Python source holding exactly one zero-argument function.
        primitive_names: Names allowed under ``P``; defaults to the keys of
            :data:`tsevo.library.primitives.CATALOG` (the sandbox passes its worker's names).

    Returns:
        A :class:`GateReport`; ``ok`` is False with one reason per violation otherwise.
    """
    if not isinstance(source, str):
        return GateReport(False, ("source must be a str",), None)
    if len(source) > MAX_SOURCE_CHARS:
        return GateReport(
            False, (f"source is {len(source)} characters (max {MAX_SOURCE_CHARS})",), None
        )
    try:
        tree = ast.parse(source, mode="exec")
    except SyntaxError as e:
        return GateReport(False, (f"line {e.lineno}: syntax error: {e.msg}",), None)
    except (ValueError, RecursionError, MemoryError) as e:
        return GateReport(False, (f"unparsable source: {type(e).__name__}: {e}"[:300],), None)

    body = list(tree.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]  # a module docstring is harmless
    funcs = [s for s in body if isinstance(s, ast.FunctionDef)]
    fname = funcs[0].name if len(funcs) == 1 else None
    reasons: list[str] = []
    if len(body) != 1 or not isinstance(body[0], ast.FunctionDef):
        kinds = ", ".join(type(s).__name__ for s in body) or "nothing"
        reasons.append(f"the module must hold exactly one top-level function (found: {kinds})")
        return GateReport(False, tuple(reasons), fname)
    fn = body[0]
    assert fname is not None
    n_nodes = sum(1 for _ in ast.walk(tree))
    if n_nodes > MAX_AST_NODES:
        return GateReport(False, (f"{n_nodes} AST nodes (max {MAX_AST_NODES})",), fname)

    a = fn.args
    if a.posonlyargs or a.args or a.vararg or a.kwonlyargs or a.kwarg or a.defaults:
        reasons.append(f"line {fn.lineno}: the tool function must take no arguments")
    if fn.decorator_list:
        reasons.append(f"line {fn.lineno}: decorators are not allowed")
    if fname.startswith("_") or fname in FORBIDDEN_NAMES or fname in RESERVED_NAMES:
        reasons.append(f"line {fn.lineno}: {fname!r} cannot be the tool's name")
    if fname in BUILTINS:
        reasons.append(f"line {fn.lineno}: {fname!r} shadows a builtin; pick another name")

    names = (
        frozenset(primitive_names) if primitive_names is not None else _catalog_primitive_names()
    )
    checker = _Checker(fname, frozenset(n for n in names if not n.startswith("_")))
    if fn.returns is not None:
        checker.visit(fn.returns)
    for stmt in fn.body:
        checker.visit(stmt)
    reasons.extend(checker.reasons)
    if not reasons:
        try:
            compile(tree, "<tool>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            reasons.append(f"does not compile: {type(e).__name__}: {e}"[:300])
    return GateReport(not reasons, tuple(reasons), fname)


def _catalog_primitive_names() -> frozenset[str]:
    return frozenset(CATALOG)
