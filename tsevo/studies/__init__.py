"""Studies: notebooks executed over parameter grids, on Dask, resumable.

* :func:`execute_notebooks` executes notebooks with papermill against one run folder (``make
  notebooks``); :func:`default_notebooks` lists the repository's notebooks.
* Study specs in ``experiments/`` (:func:`load_spec`, :mod:`tsevo.studies.spec`): a notebook plus
  a grid of parameters, validated against the notebook before anything runs, expanded into cells
  (:func:`expand_cells`, :class:`Cell`), one folder each.
* :func:`run_study` (``tsevo study run SPEC [--scheduler ADDRESS] [--workers N]``) runs the
  unfinished cells on a Dask cluster, each papermill execution in its own subprocess, retries a
  crashed cell a bounded number of times and records every attempt (:mod:`tsevo.studies.grid`).
* :func:`compare_libraries` answers one split with the base agent, the evolved library and a
  hand-written root; report only.

Names load on first use, so the cell subprocess (``python -m tsevo.studies.cell``) imports
papermill and nothing of the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> module defining it.
_LAZY: dict[str, str] = {
    "COMPARISON_COLUMNS": "tsevo.studies.compare",
    "compare_libraries": "tsevo.studies.compare",
    "comparison_pivot": "tsevo.studies.compare",
    "default_notebooks": "tsevo.studies.notebooks",
    "execute_notebooks": "tsevo.studies.notebooks",
    "notebook_parameters": "tsevo.studies.notebooks",
    "Cell": "tsevo.studies.cells",
    "StudySpec": "tsevo.studies.spec",
    "expand_cells": "tsevo.studies.spec",
    "grid_points": "tsevo.studies.spec",
    "load_spec": "tsevo.studies.spec",
    "STATUSES": "tsevo.studies.grid",
    "STUDY_COLUMNS": "tsevo.studies.grid",
    "run_study": "tsevo.studies.grid",
    "main": "tsevo.studies.command",
    "run_spec": "tsevo.studies.command",
}

__all__ = [
    "COMPARISON_COLUMNS",
    "STATUSES",
    "STUDY_COLUMNS",
    "Cell",
    "StudySpec",
    "compare_libraries",
    "comparison_pivot",
    "default_notebooks",
    "execute_notebooks",
    "expand_cells",
    "grid_points",
    "load_spec",
    "main",
    "notebook_parameters",
    "run_spec",
    "run_study",
]

if TYPE_CHECKING:
    from tsevo.studies.cells import Cell
    from tsevo.studies.command import main, run_spec
    from tsevo.studies.compare import COMPARISON_COLUMNS, compare_libraries, comparison_pivot
    from tsevo.studies.grid import STATUSES, STUDY_COLUMNS, run_study
    from tsevo.studies.notebooks import default_notebooks, execute_notebooks, notebook_parameters
    from tsevo.studies.spec import StudySpec, expand_cells, grid_points, load_spec


def __getattr__(name: str) -> Any:
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tsevo.studies' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
