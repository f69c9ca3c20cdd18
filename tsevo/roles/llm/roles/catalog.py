"""Text renderings of the primitives catalog and the sandbox rules, for planner and synthesizer prompts.

Both are generated from the live objects (:data:`tsevo.library.primitives.CATALOG`, the sandbox's
allowlists and ``ctx``'s docstrings), so a prompt never describes an API that does not exist.
"""

from __future__ import annotations

import functools
import inspect
import re

from tsevo.library.primitives import CATALOG
from tsevo.library.sandbox import facades

from ..prompts import load_prompt

__all__ = ["render_primitives", "render_sandbox_rules"]

_ARITY = {
    "single": "y",
    "pair": "a, b",
    "reference_candidates": "reference, candidate",
}


def _signature(name: str) -> str:

    spec = CATALOG[name]
    try:
        sig = inspect.signature(spec.fn)
    except (TypeError, ValueError):
        return f"P.{name}({_ARITY.get(spec.arity, 'y')})"
    parts = []
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY or p.default is not p.empty:
            d = p.default
            parts.append(f"{p.name}={d!r}" if d is not p.empty else f"{p.name}=...")
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            parts.append(p.name)
    return f"P.{name}({', '.join(parts)})"


@functools.lru_cache(maxsize=4)
def render_primitives(compact: bool = False) -> str:
    """The primitives catalog as text.

    Args:
        compact: One short line per primitive (name, inputs, outputs) instead of the full
            signature, output keys and one-line summary.

    Returns:
        One line per primitive, grouped by catalog group.
    """
    lines = []
    for group in sorted({s.group for s in CATALOG.values()}):
        lines.append(f"[{group}]")
        for name in sorted(n for n, s in CATALOG.items() if s.group == group):
            spec = CATALOG[name]
            outs = ", ".join(spec.outputs)
            if compact:
                lines.append(f"{name}({_ARITY.get(spec.arity, 'y')}) -> {outs}")
            else:
                summary = re.sub(r"\s+", " ", spec.summary).strip()
                lines.append(f"{_signature(name)} -> {{{outs}}}: {summary}")
    lines.append(
        "Each P.<name>(...) returns a dict with these keys (or None when it cannot measure); "
        "read a value as r['key'] after checking r is not None."
    )
    return "\n".join(lines)


@functools.lru_cache(maxsize=1)
def render_sandbox_rules() -> str:
    """The sandbox rules a tool must follow, with the allowlists spelled out."""
    api = []
    for m in facades.CTX_MEMBERS:
        fn = getattr(facades.ToolContext, m, None)
        if fn is None:
            continue
        try:
            sig = str(inspect.signature(fn)).replace("(self, ", "(").replace("(self)", "()")
        except (TypeError, ValueError):
            sig = "(...)"
        sig = re.sub(r"'|_np\.", "", sig)
        doc = (inspect.getdoc(fn) or "").splitlines()
        api.append(f"    ctx.{m}{sig}: {doc[0] if doc else ''}".rstrip())
    subs = facades.NUMPY_SUBMODULES
    return load_prompt("sandbox_rules").render(
        builtins=", ".join(sorted(facades.BUILTINS)),
        ctx_api="\n".join(api),
        np_members=", ".join(facades.NUMPY_MEMBERS),
        linalg=", ".join(subs.get("linalg", ())),
        fft=", ".join(subs.get("fft", ())),
        math_members=", ".join(facades.MATH_MEMBERS),
    )
