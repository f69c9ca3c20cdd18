"""Compiling an accepted tree into plain ``if/else`` tool code, and attaching it to a tool."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from ._result import CalibrationError, CalibrationResult, prune_tree, walk_tree

__all__ = [
    "FORECASTER_NAMES",
    "attach_tree",
    "compile_tree",
    "compile_tree_function",
    "tool_output_keys",
]

FORECASTER_NAMES = frozenset({"forecast", "forecast_many"})
"""Attribute or name uses that count as calling the forecaster (refused by :func:`attach_tree`)."""


def _default_vars(result: CalibrationResult) -> list[str]:
    return [f"calib_x{i}" for i in range(len(result.feature_names))]


def compile_tree(
    result: CalibrationResult,
    *,
    var_names: Sequence[str] | None = None,
    target: str = "calib_class",
) -> str:
    """Plain ``if/else`` source (no imports, no calls) assigning the class index to ``target``.

    The fragment reads one variable per feature (``var_names``, default ``calib_x0``,
    ``calib_x1``, … in ``feature_names`` order) and assigns an index into ``result.classes``, or
    ``-1`` when a feature the tree uses is NaN (``v == v`` is false only for NaN; infinities
    follow the comparisons). It is dedented (column 0); indent it to splice it into a function.

    Args:
        result: An accepted calibration.
        var_names: Variable holding each feature, aligned with ``result.feature_names``.
        target: Variable that receives the class index.

    Returns:
        Python source lines ending with a newline.

    Raises:
        CalibrationError: The result has no tree.
    """
    if not result.accepted or result.tree is None:
        raise CalibrationError(
            f"cannot compile a calibration that was not accepted ({result.reason})"
        )
    names = list(var_names) if var_names is not None else _default_vars(result)
    if len(names) != len(result.feature_names):
        raise ValueError("var_names must align with feature_names")
    for v in [*names, target]:
        if not v.isidentifier():
            raise ValueError(f"not an identifier: {v!r}")
    lines: list[str] = []

    def emit(node: Mapping[str, Any], depth: int) -> None:
        pad = "    " * depth
        if "class" in node:
            lines.append(f"{pad}{target} = {int(node['class'])}")
            return
        var = names[int(node["index"])]
        op = "<" if node["strict"] else "<="
        lines.append(f"{pad}if {var} {op} {float(node['cut'])!r}:")
        emit(node["left"], depth + 1)
        lines.append(f"{pad}else:")
        emit(node["right"], depth + 1)

    tree = prune_tree(result.tree)
    used = sorted({int(n["index"]) for n in walk_tree(tree) if "index" in n})
    if used:
        cond = " and ".join(f"{names[i]} == {names[i]}" for i in used)
        lines.append(f"if {cond}:")
        emit(tree, 1)
        lines.append("else:")
        lines.append(f"    {target} = -1")
    else:
        emit(tree, 0)
    return "\n".join(lines) + "\n"


def compile_tree_function(result: CalibrationResult, name: str = "calibrated_class") -> str:
    """A standalone function ``name(calib_x0, calib_x1, ...) -> int`` wrapping :func:`compile_tree`."""
    args = _default_vars(result)
    body = compile_tree(result, var_names=args, target="calib_class")
    indented = "".join(f"    {ln}\n" for ln in body.splitlines())
    return f"def {name}({', '.join(args)}):\n{indented}    return calib_class\n"


# --------------------------------------------------------------------------------------- attaching
def _single_function(tree: ast.Module) -> ast.FunctionDef:
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a module docstring is tolerated
    if len(body) != 1 or not isinstance(body[0], ast.FunctionDef):
        raise CalibrationError("tool source must define exactly one function")
    fn = body[0]
    a = fn.args
    if a.args or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
        raise CalibrationError("tool function must take no arguments")
    return fn


def _final_dict_return(fn: ast.FunctionDef) -> tuple[ast.Return, ast.Dict, list[str]]:
    last = fn.body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Dict)):
        raise CalibrationError(
            "attach_tree needs the tool function to end with `return {...}` (a dict literal)"
        )
    d = last.value
    keys: list[str] = []
    for k in d.keys:
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise CalibrationError("the final return dict must have string-literal keys only")
        keys.append(k.value)
    if len(set(keys)) != len(keys):
        raise CalibrationError("duplicate keys in the final return dict")
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and node is not last:
            v = node.value
            if v is not None and not (isinstance(v, ast.Constant) and v.value is None):
                raise CalibrationError(
                    "other returns must abstain (`return None`); only the final return may "
                    "return the measurement dict"
                )
    return last, d, keys


def _calls_forecaster(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FORECASTER_NAMES:
            return True
        if isinstance(node, ast.Name) and node.id in FORECASTER_NAMES:
            return True
    return False


def tool_output_keys(tool_source: str) -> tuple[str, ...]:
    """The keys of a tool's final ``return {...}`` dict literal (the calibratable outputs)."""
    fn = _single_function(ast.parse(tool_source))
    return tuple(_final_dict_return(fn)[2])


def attach_tree(
    tool_source: str, result: CalibrationResult, *, output_key: str = "class_id"
) -> str:
    """Insert the compiled tree into a tool just before its final return, adding ``output_key``.

    Assumed tool shape (checked; :class:`CalibrationError` otherwise): the source defines exactly
    one zero-argument function whose **last statement** is ``return {"k1": v1, "k2": v2, ...}``
    with string-literal keys (no ``**`` unpacking); any other ``return`` abstains with ``None``.
    The features are the dict's keys: every ``result.feature_names`` entry must be one of them.

    The final return is rewritten (by source position found with :mod:`ast`, so the rest of the
    text and its comments are kept) into: one assignment per dict value, evaluated once and in
    the original order (``calib_v0 = (v1)``, ...); the :func:`compile_tree` fragment over those
    variables; and ``return {"k1": calib_v0, ..., output_key: calib_class}``. ``output_key``
    holds an index into ``result.classes`` (``-1`` when a used feature is NaN). The generated
    names use a ``calib`` prefix made unique against the names already in the source, and contain
    no attribute access or call, so they pass the sandbox's AST gate.

    Args:
        tool_source: The tool's source.
        result: An accepted calibration over this tool's outputs.
        output_key: New key for the predicted class index.

    Returns:
        The new tool source (it parses; checked).

    Raises:
        CalibrationError: Not accepted, wrong tool shape, missing features, key clash, or the
            tool calls the forecaster (a calibrated tool may not).
    """
    if not result.accepted or result.tree is None:
        raise CalibrationError(
            f"cannot attach a calibration that was not accepted ({result.reason})"
        )
    mod = ast.parse(tool_source)
    fn = _single_function(mod)
    if _calls_forecaster(fn):
        raise CalibrationError("a calibrated tool may not call the forecaster (P.forecast)")
    ret, d, keys = _final_dict_return(fn)
    if output_key in keys:
        raise CalibrationError(f"the tool already returns {output_key!r}")
    missing = [f for f in result.feature_names if f not in keys]
    if missing:
        raise CalibrationError(f"calibration features not returned by the tool: {missing}")

    existing = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {fn.name}
    prefix = "calib"
    k = 0
    while any(e.startswith(prefix + "_") for e in existing):
        k += 1
        prefix = f"calib{k}"
    value_vars = [f"{prefix}_v{j}" for j in range(len(keys))]
    feat_vars = [value_vars[keys.index(f)] for f in result.feature_names]
    target = f"{prefix}_class"

    lines = tool_source.splitlines(keepends=True)
    start, end = ret.lineno - 1, (ret.end_lineno or ret.lineno) - 1
    first = lines[start]
    indent = first[: ret.col_offset]
    tail = lines[end][ret.end_col_offset or 0 :].strip()
    same_line = indent.strip() != "" or (tail != "" and not tail.startswith("#"))
    new_stmts: list[str] = []
    for var, val in zip(value_vars, d.values, strict=True):
        seg = ast.get_source_segment(tool_source, val)
        if seg is None:  # pragma: no cover - positions exist for parsed source
            seg = ast.unparse(val)
        new_stmts.append(f"{var} = ({seg})")
    new_stmts += compile_tree(result, var_names=feat_vars, target=target).splitlines()
    items = [f"{k_!r}: {v}" for k_, v in zip(keys, value_vars, strict=True)]
    items.append(f"{output_key!r}: {target}")
    new_stmts.append("return {" + ", ".join(items) + "}")

    if not same_line:
        block = "".join(f"{indent}{s}\n" for s in new_stmts)
        new_src = "".join(lines[:start]) + block + "".join(lines[end + 1 :])
    else:  # the return shares its line with other code: rebuild the function from the AST
        frag = ast.parse("\n".join(new_stmts)).body
        fn.body = fn.body[:-1] + frag
        new_src = ast.unparse(ast.fix_missing_locations(mod)) + "\n"
    check = ast.parse(new_src)
    _single_function(check)
    return new_src
