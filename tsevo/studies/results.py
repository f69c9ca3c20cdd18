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
from tsevo.studies.paper import ablation_directions, calibration_counts
from tsevo.studies.spec import StudySpec, expand_cells
from tsevo.widgets import STUDY_FIGURES, study_figure

__all__ = ["GROUP_BY", "cell_rows", "frame_rows", "study_frame", "study_summary", "write_results"]

GROUP_BY: dict[str, list[str]] = {
    "91_study_main_table": ["method", "task"],
    "92_study_transfer": ["task"],
    "93_study_ablations": ["ablation"],
    "94_study_gate_calibration": [],
    "95_study_multi_round": ["round"],
    "96_study_funnel": ["step"],
}
"""Study notebook -> the row columns its summary groups by (besides the grid's, seed excepted)."""


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


def study_summary(spec: StudySpec, frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Mean, sd and count of every numeric column per group, over the cells (seeds) of a study.

    Groups: the notebook's own keys (:data:`GROUP_BY`) and every grid parameter except ``seed``,
    so the spread is the spread over seeds. ``sd`` is the sample standard deviation (``None``
    with one cell).
    """
    if frame.empty:
        return []
    keys = [k for k in sorted(spec.grid) if k != "seed" and k in frame]
    keys += [k for k in GROUP_BY.get(spec.notebook, []) if k in frame and k not in keys]
    skip = {"cell", "seed", *keys}
    numeric = [
        c
        for c in frame.columns
        if c not in skip
        and pd.api.types.is_numeric_dtype(frame[c])
        and not pd.api.types.is_bool_dtype(frame[c])
    ]
    out = []
    groups = frame.groupby(keys, sort=True, dropna=False) if keys else [((), frame)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(keys, key, strict=True))
        row["cells"] = int(part["cell"].nunique())
        for c in numeric:
            vals = part[c].dropna().astype(float)
            row[c] = {
                "mean": round(float(vals.mean()), 6) if len(vals) else None,
                "sd": round(float(vals.std(ddof=1)), 6) if len(vals) > 1 else None,
                "n": len(vals),
            }
        out.append(json.loads(json.dumps(row, default=str)))
    return out


def write_results(spec: StudySpec, out: str | Path = "runs/experiments") -> Path:
    """Write the study's results into ``<out>/<study>/``.

    * ``results.csv``: :func:`study_frame`;
    * ``results.json``: the rows, the cells held and the cells missing, and the mean ± sd over
      seeds of every numeric column per group (:func:`study_summary`);
    * ``results.png``: the study's figure (:func:`tsevo.widgets.study_figure`), when its notebook
      has one and a cell finished;
    * the paper's checks: ``directions.csv`` for the ablation study
      (:func:`~tsevo.studies.paper.ablation_directions`, per value of the other grid parameters)
      and ``calibration.json`` for the gate-calibration study
      (:func:`~tsevo.studies.paper.calibration_counts`).

    Returns:
        The CSV's path.
    """
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
        "summary": study_summary(spec, frame),
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
