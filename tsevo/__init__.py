"""tsevo: failure-driven self-evolution of a time-series question-answering agent.

The main verbs, loaded on first use (``import tsevo`` itself imports nothing heavy: no torch, no
chronos, no Jupyter)::

    import tsevo

    suite, report = tsevo.load_suite("questions.jsonl")            # or tsevo.data.synthetic
    suite = suite.split(seed=0)
    result = tsevo.evolve(suite, roles=tsevo.RoleSet.builtin(), config=tsevo.ProtocolConfig(),
                          out="runs/mine")
    agent = tsevo.Agent(result.library)

Names: :func:`evolve` (the engine; ``tsevo.evolve`` is also the engine's package), :func:`load_suite`
(read a suite file), :class:`Suite`, :class:`Question`, :class:`Library`, :class:`Agent`,
:class:`RoleSet`, :class:`ProtocolConfig`. Each subpackage lists its public names in ``__all__``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> (module, attribute); ``None`` as attribute: the module itself.
_LAZY: dict[str, tuple[str, str | None]] = {
    "evolve": ("tsevo.evolve", None),
    "load_suite": ("tsevo.data", "load_suite"),
    "Suite": ("tsevo.data", "Suite"),
    "Question": ("tsevo.data", "Question"),
    "Library": ("tsevo.library", "Library"),
    "Agent": ("tsevo.agent", "Agent"),
    "RoleSet": ("tsevo.roles", "RoleSet"),
    "ProtocolConfig": ("tsevo.evolve", "ProtocolConfig"),
}

__all__ = [
    "Agent",
    "Library",
    "ProtocolConfig",
    "Question",
    "RoleSet",
    "Suite",
    "__version__",
    "evolve",
    "load_suite",
]

if TYPE_CHECKING:
    from tsevo import evolve
    from tsevo.agent import Agent
    from tsevo.data import Question, Suite, load_suite
    from tsevo.evolve import ProtocolConfig
    from tsevo.library import Library
    from tsevo.roles import RoleSet


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tsevo' has no attribute {name!r}") from None
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
