"""The ``tree`` reading rule's node form: ``(key, cut, low, high)``, a leaf being a class label.

Helpers :class:`~.tool.ReadingRule` uses to check, serialize and describe a two-feature rule.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "TREE_DEPTH",
    "TREE_FEATURES",
    "check_tree",
    "tree_json",
    "tree_keys",
    "tree_text",
    "tree_tuple",
]

#: Most levels of a ``tree`` rule and most distinct outputs it may read (a two-feature rule).
TREE_DEPTH = 2
TREE_FEATURES = 2


def check_tree(node: Any, depth: int) -> None:
    if isinstance(node, str):
        if not node.strip():
            raise ValueError("a tree leaf needs a class label")
        return
    if depth <= 0:
        raise ValueError(f"a tree rule is at most {TREE_DEPTH} levels deep")
    if not (isinstance(node, tuple) and len(node) == 4 and isinstance(node[0], str) and node[0]):
        raise ValueError("a tree node is (key, cut, low, high)")
    if not math.isfinite(float(node[1])):
        raise ValueError("tree cuts must be finite")
    check_tree(node[2], depth - 1)
    check_tree(node[3], depth - 1)


def tree_keys(node: Any) -> tuple[str, ...]:
    if isinstance(node, str) or not node:
        return ()
    out = [node[0]]
    for k in (*tree_keys(node[2]), *tree_keys(node[3])):
        if k not in out:
            out.append(k)
    return tuple(out)


def tree_json(node: Any) -> Any:
    if isinstance(node, str):
        return node
    return [node[0], float(node[1]), tree_json(node[2]), tree_json(node[3])]


def tree_tuple(node: Any) -> Any:
    if isinstance(node, str):
        return node
    return (str(node[0]), float(node[1]), tree_tuple(node[2]), tree_tuple(node[3]))


def tree_text(node: Any) -> str:
    if isinstance(node, str):
        return f"'{node}'"
    return f"if {node[0]} < {node[1]:.4g} then {tree_text(node[2])} else {tree_text(node[3])}"
