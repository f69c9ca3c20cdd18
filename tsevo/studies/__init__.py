"""Studies: notebooks executed over parameter grids, on Dask, resumable.

* :func:`execute_notebooks` executes notebooks with papermill against one run folder (``make
  notebooks``); :func:`default_notebooks` lists the repository's notebooks.
* Study specs in ``experiments/`` (:func:`load_spec`, :mod:`tsevo.studies.spec`): a notebook plus
  a grid of parameters, validated against the notebook before anything runs, expanded into cells
  (:func:`expand_cells`, :class:`Cell`), one folder each.
* :func:`run_study` (``tsevo study run SPEC [--scheduler ADDRESS] [--workers N]``) runs the
  unfinished cells on a Dask cluster, each papermill execution in its own subprocess, retries a
  crashed cell a bounded number of times and records every attempt (:mod:`tsevo.studies.grid`).
* The paper's studies on one run (:mod:`tsevo.studies.paper`): :func:`rounds_table`,
  :func:`main_table`, :func:`transfer_table`, and the Obs. 5/6 and Obs. 9 checks over a study
  (:func:`ablation_directions`, :func:`calibration_counts`); :func:`study_frame` collects the
  rows of a study's finished cells (``tsevo study report SPEC``).
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
    "LIBRARY_METHODS": "tsevo.studies.paper",
    "MAIN_COLUMNS": "tsevo.studies.paper",
    "ROUND_COLUMNS": "tsevo.studies.paper",
    "TRANSFER_COLUMNS": "tsevo.studies.paper",
    "ablation_directions": "tsevo.studies.paper",
    "calibration_counts": "tsevo.studies.paper",
    "main_table": "tsevo.studies.paper",
    "rounds_table": "tsevo.studies.paper",
    "run_outcome": "tsevo.studies.paper",
    "transfer_table": "tsevo.studies.paper",
    "cell_rows": "tsevo.studies.results",
    "frame_rows": "tsevo.studies.results",
    "study_summary": "tsevo.studies.results",
    "study_frame": "tsevo.studies.results",
    "write_results": "tsevo.studies.results",
    "run_spec": "tsevo.studies.command",
}

__all__ = [
    "COMPARISON_COLUMNS",
    "LIBRARY_METHODS",
    "MAIN_COLUMNS",
    "ROUND_COLUMNS",
    "STATUSES",
    "STUDY_COLUMNS",
    "TRANSFER_COLUMNS",
    "Cell",
    "StudySpec",
    "ablation_directions",
    "calibration_counts",
    "cell_rows",
    "compare_libraries",
    "comparison_pivot",
    "default_notebooks",
    "execute_notebooks",
    "expand_cells",
    "frame_rows",
    "grid_points",
    "load_spec",
    "main",
    "main_table",
    "notebook_parameters",
    "rounds_table",
    "run_outcome",
    "run_spec",
    "run_study",
    "study_frame",
    "study_summary",
    "transfer_table",
    "write_results",
]

if TYPE_CHECKING:
    from tsevo.studies.cells import Cell
    from tsevo.studies.command import main, run_spec
    from tsevo.studies.compare import COMPARISON_COLUMNS, compare_libraries, comparison_pivot
    from tsevo.studies.grid import STATUSES, STUDY_COLUMNS, run_study
    from tsevo.studies.notebooks import default_notebooks, execute_notebooks, notebook_parameters
    from tsevo.studies.paper import (
        LIBRARY_METHODS,
        MAIN_COLUMNS,
        ROUND_COLUMNS,
        TRANSFER_COLUMNS,
        ablation_directions,
        calibration_counts,
        main_table,
        rounds_table,
        run_outcome,
        transfer_table,
    )
    from tsevo.studies.results import (
        cell_rows,
        frame_rows,
        study_frame,
        study_summary,
        write_results,
    )
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
