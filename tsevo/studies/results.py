"""A study's results: the rows every finished cell recorded, as one tidy frame.

Each study notebook ends with :func:`tsevo.notebook.record_metrics`, whose JSON holds a ``rows``
list (the notebook's tidy frame, e.g. :func:`tsevo.studies.paper.rounds_table`) besides its
headline numbers. :func:`study_frame` reads those rows from every finished cell of a spec, adds
the cell's grid parameters as columns, and :func:`write_results` saves the frame as
``<out>/<study>/results.csv`` with a ``results.json`` that says which cells it holds and which are
missing (``tsevo study report SPEC``). Unfinished cells are listed, never silently dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from tsevo.fileio import atomic_write_text
from tsevo.store import RunLayout
from tsevo.studies.spec import StudySpec, expand_cells

__all__ = ["cell_rows", "frame_rows", "study_frame", "write_results"]


def frame_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame as JSON-friendly records (numpy scalars to Python, NaN to ``None``)."""
    rows: list[dict[str, Any]] = json.loads(frame.to_json(orient="records", double_precision=10))
    return rows


def cell_rows(run: str | Path, notebook: str) -> list[dict[str, Any]]:
    """The ``rows`` a study notebook recorded in its run folder (``[]`` when it recorded none).

    Raises:
        ValueError: The metrics file exists but is not a JSON object with a list of rows.
    """
    path = RunLayout(run).notebook_metrics(notebook)
    if not path.exists():
        return []
    d = json.loads(path.read_text(encoding="utf-8"))
    rows = d.get("rows", []) if isinstance(d, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: 'rows' must be a list of objects")
    return rows


def study_frame(spec: StudySpec, out: str | Path = "runs/experiments") -> pd.DataFrame:
    """Every row recorded by the study's finished cells, with the cell's key and grid parameters.

    Returns:
        A frame whose first columns are ``cell`` and the grid's parameter names, then the rows'
        own columns. ``attrs["missing"]`` lists the cells that are not finished (or recorded no
        rows).
    """
    frames, missing = [], []
    grid = sorted(spec.grid)
    for cell in expand_cells(spec, out):
        rows = cell_rows(cell.run_dir, cell.notebook.stem) if cell.finished() else []
        if not rows:
            missing.append(cell.key)
            continue
        f = pd.DataFrame(rows)
        for name in reversed(grid):
            if name not in f:
                f.insert(0, name, [cell.parameters[name]] * len(f))
        f.insert(0, "cell", cell.key)
        frames.append(f)
    frame = (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["cell", *grid])
    )
    frame.attrs["missing"] = missing
    return frame


def write_results(spec: StudySpec, out: str | Path = "runs/experiments") -> Path:
    """Write the study's results into ``<out>/<study>/``.

    * ``results.csv``: :func:`study_frame`;
    * ``results.json``: the rows, the cells held and the cells missing;
    * ``results.png``: the study's figure (:func:`tsevo.widgets.study_figure`), when its notebook
      has one and a cell finished;
    * the paper's checks: ``directions.csv`` for the ablation study
      (:func:`~tsevo.studies.paper.ablation_directions`, per value of the other grid parameters)
      and ``calibration.json`` for the gate-calibration study
      (:func:`~tsevo.studies.paper.calibration_counts`).

    Returns:
        The CSV's path.
    """
    from tsevo.studies.paper import ablation_directions, calibration_counts
    from tsevo.widgets import STUDY_FIGURES, study_figure

    frame = study_frame(spec, out)
    folder = Path(out) / spec.name
    folder.mkdir(parents=True, exist_ok=True)
    csv = folder / "results.csv"
    atomic_write_text(csv, frame.to_csv(index=False))
    meta: dict[str, Any] = {
        "study": spec.name,
        "notebook": spec.notebook,
        "rows": len(frame),
        "cells": sorted(set(frame["cell"])) if len(frame) else [],
        "missing": frame.attrs["missing"],
    }
    if len(frame) and spec.notebook in STUDY_FIGURES:
        fig = study_figure(spec.notebook, frame)
        fig.savefig(folder / "results.png", dpi=90, bbox_inches="tight")
        meta["figure"] = "results.png"
    if len(frame) and spec.notebook == "93_study_ablations":
        by = [k for k in sorted(spec.grid) if k != "ablation"] or ["cell"]
        d = ablation_directions(frame, by=by)
        atomic_write_text(folder / "directions.csv", d.to_csv(index=False))
        meta["directions"] = {
            "below_full": f"{int(d['below_full'].sum())}/{len(d)}",
            "fixes_more": _count(d["fixes_more"]),
            "breaks_more": _count(d["breaks_more"]),
        }
    if len(frame) and spec.notebook == "94_study_gate_calibration":
        counts = calibration_counts(frame)
        atomic_write_text(folder / "calibration.json", json.dumps(counts, indent=1) + "\n")
        meta["calibration"] = counts
    atomic_write_text(folder / "results.json", json.dumps(meta, indent=1) + "\n")
    return csv


def _count(col: pd.Series) -> str:
    vals = [bool(v) for v in col if v is not None and v == v]
    return f"{sum(vals)}/{len(vals)}"
