"""The taxonomy's LLM prompt assets (``<name>.txt``), loaded like the roles' prompts.

Each asset is a :class:`~tsevo.roles.llm.prompts.PromptTemplate` (``${slot}`` placeholders that
must all be filled). The first line of every induction and gate prompt is fixed and names its
step, so logs, cassettes and a scripted server can tell the requests apart.
"""

from __future__ import annotations

import functools
from importlib import resources

from tsevo.roles.llm.prompts import PromptError, PromptTemplate

__all__ = ["available", "load"]


def available() -> list[str]:
    """Names of the shipped taxonomy prompt assets."""
    root = resources.files(__name__)
    return sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".txt"))


@functools.lru_cache(maxsize=64)
def load(name: str) -> PromptTemplate:
    """One taxonomy prompt asset by name (trailing newlines stripped).

    Raises:
        PromptError: No asset of that name.
    """
    p = resources.files(__name__).joinpath(name + ".txt")
    if not p.is_file():
        raise PromptError(f"no taxonomy prompt asset {name!r}; available: {available()}")
    return PromptTemplate(name, p.read_text(encoding="utf-8").rstrip("\n"))
