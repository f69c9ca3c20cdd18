"""Study specs in ``experiments/``: a notebook plus a grid of parameters, executed with papermill.

A spec is a small JSON file::

    {"name": "base_vs_evolved_vs_expert",
     "notebook": "90_study_base_vs_evolved_vs_expert",
     "fixed": {"size": "default", "split": "test"},
     "grid": {"seed": [11, 12, 13], "reference_root": ["expert", "chronos"]}}

Every grid point is validated against the notebook's config (unknown names raise, as in the
notebooks' ``parameters`` cells) and runs in its own folder ``<out>/<name>/<point>/``: the run folder
and the executed notebook with its recorded metrics. ``python -m tsevo.experiments SPEC [--out DIR]
[--dry-run]`` runs a spec; finished points are skipped, so a rerun resumes the grid.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["StudySpec", "grid_points", "load_spec", "main", "run_spec"]


@dataclass(frozen=True)
class StudySpec:
    """A parsed study spec.

    Attributes:
        name: Study name (folder under the output directory).
        notebook: Notebook name in ``notebooks/`` (without ``.ipynb``).
        fixed: Parameters shared by every point.
        grid: Parameter name -> values; the study runs their product.
    """

    name: str
    notebook: str
    fixed: Mapping[str, Any]
    grid: Mapping[str, Sequence[Any]]


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate a spec (every parameter must be known to the notebook's config)."""
    from tsevo.notebook import CONFIGS

    d = json.loads(Path(path).read_text(encoding="utf-8"))
    unknown_keys = set(d) - {"name", "notebook", "fixed", "grid", "description"}
    if unknown_keys:
        raise ValueError(f"{path}: unknown spec fields {sorted(unknown_keys)}")
    if d.get("notebook") not in CONFIGS:
        raise ValueError(
            f"{path}: unknown notebook {d.get('notebook')!r}; known: {sorted(CONFIGS)}"
        )
    spec = StudySpec(
        d["name"],
        d["notebook"],
        dict(d.get("fixed", {})),
        {k: list(v) for k, v in d.get("grid", {}).items()},
    )
    for point in grid_points(spec):
        CONFIGS[spec.notebook].from_params(point)
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
    parts = [f"{k}={point[k]}" for k in sorted(grid)]
    return "_".join(parts) or "default"


def run_spec(
    spec: StudySpec, out: str | Path = "runs/experiments", *, dry_run: bool = False
) -> list[Path]:
    """Execute every grid point (skipping finished ones); returns the executed notebooks' paths."""
    from tsevo.notebook import default_notebooks, execute_notebooks

    nb = next((p for p in default_notebooks() if p.stem == spec.notebook), None)
    if nb is None:
        raise FileNotFoundError(f"notebook {spec.notebook}.ipynb not found in notebooks/")
    done: list[Path] = []
    for point in grid_points(spec):
        folder = Path(out) / spec.name / _slug(point, spec.grid)
        target = folder / "notebooks" / nb.name
        if target.exists():
            done.append(target)
            continue
        if dry_run:
            print(f"would run {nb.name} with {point} -> {folder}")
            continue
        params = {k: v for k, v in point.items() if k != "run_dir"}
        done += execute_notebooks(
            folder / "run", notebooks=[nb], out_dir=folder / "notebooks", parameters=params
        )
    return done


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run one spec."""
    p = argparse.ArgumentParser(prog="python -m tsevo.experiments", description=__doc__)
    p.add_argument("spec", type=Path)
    p.add_argument("--out", type=Path, default=Path("runs/experiments"))
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    spec = load_spec(args.spec)
    for path in run_spec(spec, args.out, dry_run=args.dry_run):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
