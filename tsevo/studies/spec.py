"""Study specs: a notebook plus a grid of its parameters, expanded into cells.

A spec is a small JSON file in ``experiments/``::

    {"name": "base_vs_evolved_vs_expert",
     "notebook": "90_study_base_vs_evolved_vs_expert",
     "fixed": {"size": "default", "split": "test"},
     "grid": {"seed": [11, 12, 13], "reference_root": ["expert", "chronos"]}}

``notebook`` names a notebook of ``notebooks/`` (its parameters are validated against its config in
:mod:`tsevo.notebook`: unknown names raise), or is a path to an ``.ipynb`` file, relative to the
spec's folder (its parameters are validated against the names its ``parameters`` cell assigns).
Optional fields: ``description`` and ``kernel`` (the Jupyter kernel, default ``tsevo``).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsevo.notebook import CONFIGS
from tsevo.studies.cells import Cell
from tsevo.studies.notebooks import default_notebooks, notebook_parameters

__all__ = ["StudySpec", "expand_cells", "grid_points", "load_spec"]

_FIELDS = {"name", "notebook", "fixed", "grid", "description", "kernel"}


@dataclass(frozen=True)
class StudySpec:
    """A parsed study spec.

    Attributes:
        name: Study name (folder under the output directory).
        notebook: Notebook name in ``notebooks/`` (without ``.ipynb``), or a notebook path.
        fixed: Parameters shared by every point.
        grid: Parameter name -> values; the study runs their product.
        path: The notebook file (default: ``notebooks/<notebook>.ipynb``).
        kernel: The Jupyter kernel the cells run on.
        description: What the study shows.
    """

    name: str
    notebook: str
    fixed: Mapping[str, Any]
    grid: Mapping[str, Sequence[Any]]
    path: Path | None = None
    kernel: str = "tsevo"
    description: str = ""

    def notebook_file(self) -> Path:
        """The notebook this study executes.

        Raises:
            FileNotFoundError: it does not exist.
        """
        if self.path is not None:
            if not self.path.exists():
                raise FileNotFoundError(f"notebook {self.path} not found")
            return self.path
        nb = next((p for p in default_notebooks() if p.stem == self.notebook), None)
        if nb is None:
            raise FileNotFoundError(f"notebook {self.notebook}.ipynb not found in notebooks/")
        return nb


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate a spec (every parameter must be known to the notebook).

    Raises:
        ValueError: unknown spec fields or an unknown notebook.
        TypeError: a parameter the notebook does not take.
    """
    path = Path(path)
    d = json.loads(path.read_text(encoding="utf-8"))
    unknown_keys = set(d) - _FIELDS
    if unknown_keys:
        raise ValueError(f"{path}: unknown spec fields {sorted(unknown_keys)}")
    notebook = str(d.get("notebook"))
    nb_path: Path | None = None
    if notebook not in CONFIGS:
        if not notebook.endswith(".ipynb"):
            raise ValueError(f"{path}: unknown notebook {notebook!r}; known: {sorted(CONFIGS)}")
        nb_path = Path(notebook) if Path(notebook).is_absolute() else path.parent / notebook
        if not nb_path.exists():
            raise ValueError(f"{path}: unknown notebook {notebook!r} ({nb_path} not found)")
    spec = StudySpec(
        name=d["name"],
        notebook=notebook,
        fixed=dict(d.get("fixed", {})),
        grid={k: list(v) for k, v in d.get("grid", {}).items()},
        path=nb_path,
        kernel=str(d.get("kernel", "tsevo")),
        description=str(d.get("description", "")),
    )
    declared = notebook_parameters(nb_path) if nb_path is not None else None
    for point in grid_points(spec):
        if declared is None:
            CONFIGS[spec.notebook].from_params(point)
        else:
            unknown = sorted(set(point) - set(declared))
            if unknown:
                raise TypeError(f"{path}: {notebook} takes no parameters {unknown}")
    return spec


def grid_points(spec: StudySpec) -> list[dict[str, Any]]:
    """Every parameter combination of the spec (fixed parameters included), in a stable order."""
    names = sorted(spec.grid)
    out = []
    for values in itertools.product(*(spec.grid[n] for n in names)):
        point = dict(spec.fixed)
        point.update(dict(zip(names, values, strict=True)))
        out.append(point)
    return out or [dict(spec.fixed)]


def _slug(point: Mapping[str, Any], grid: Mapping[str, Sequence[Any]]) -> str:
    parts = [f"{k}={re.sub(r'[^A-Za-z0-9.,+-]', '-', str(point[k]))}" for k in sorted(grid)]
    return "_".join(parts) or "default"


def expand_cells(spec: StudySpec, out: str | Path) -> list[Cell]:
    """The study's cells, one per grid point, each in ``<out>/<name>/<key>/``."""
    nb = spec.notebook_file()
    inject = spec.path is None or "run_dir" in notebook_parameters(nb)
    cells: list[Cell] = []
    seen: set[str] = set()
    for point in grid_points(spec):
        key = _slug(point, spec.grid)
        cell = Cell(spec.name, key, nb, spec.kernel, point, Path(out) / spec.name / key, inject)
        if key in seen:  # values that print alike: keep the folders apart
            key = f"{key}_{cell.params_hash[:8]}"
            cell = Cell(spec.name, key, nb, spec.kernel, point, Path(out) / spec.name / key, inject)
        seen.add(key)
        cells.append(cell)
    return cells
