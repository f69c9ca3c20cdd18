"""Tools, stages, the library chain, the primitives catalog, the sandbox and calibration trees.

The data model and the roots are importable from here; the subpackages keep their own public names:
:mod:`tsevo.library.sandbox` (running tool source), :mod:`tsevo.library.primitives` (the ``P``
catalog), :mod:`tsevo.library.forecasting` and :mod:`tsevo.library.calibration`.
"""

from .context import ToolInput
from .library import Library, ScopedTool, Stage, scope_matches
from .roots import ROOT_NAMES, make_root
from .tool import Contract, Guidance, Matcher, Provenance, ReadingRule, Scope, Tool

__all__ = [
    "ROOT_NAMES",
    "Contract",
    "Guidance",
    "Library",
    "Matcher",
    "Provenance",
    "ReadingRule",
    "Scope",
    "ScopedTool",
    "Stage",
    "Tool",
    "ToolInput",
    "make_root",
    "scope_matches",
]
