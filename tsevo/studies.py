"""Running notebooks and study grids, and the study notebook's library comparison.

* :func:`execute_notebooks` executes notebooks with papermill against one run folder (``make
  notebooks``); :func:`default_notebooks` lists the repository's notebooks.
* Study specs in ``experiments/``: a notebook plus a grid of parameters. A spec is a small JSON
  file::

      {"name": "base_vs_evolved_vs_expert",
       "notebook": "90_study_base_vs_evolved_vs_expert",
       "fixed": {"size": "default", "split": "test"},
       "grid": {"seed": [11, 12, 13], "reference_root": ["expert", "chronos"]}}

  Every grid point is validated against the notebook's config (unknown names raise, as in the
  notebooks' ``parameters`` cells) and runs in its own folder ``<out>/<name>/<point>/``: the run
  folder and the executed notebook with its recorded metrics. ``python -m tsevo.studies SPEC
  [--out DIR] [--dry-run]`` runs a spec; finished points are skipped, so a rerun resumes the grid.
* :func:`compare_libraries` answers one split with the base agent, the evolved library and a
  hand-written root (through :func:`tsevo.evolve.answer_libraries`); report only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tsevo.analysis import run_suite
from tsevo.evolve import answer_libraries
from tsevo.library.library import Library
from tsevo.library.roots import make_root
from tsevo.notebook import CONFIGS
from tsevo.roles import RoleSet
from tsevo.store import RunLayout, RunLock

__all__ = [
    "COMPARISON_COLUMNS",
    "StudySpec",
    "compare_libraries",
    "comparison_pivot",
    "default_notebooks",
    "execute_notebooks",
    "grid_points",
    "load_spec",
    "main",
    "run_spec",
]

COMPARISON_COLUMNS = ["agent", "family", "n", "correct", "accuracy"]


# --------------------------------------------------------------------------------------- papermill
def default_notebooks() -> list[Path]:
    """The repository's notebooks, in order (``notebooks/*.ipynb`` next to the package)."""
    root = Path(__file__).resolve().parents[1] / "notebooks"
    return sorted(root.glob("[0-9]*.ipynb"))


def execute_notebooks(
    run_dir: str | Path,
    *,
    notebooks: Iterable[str | Path] | None = None,
    out_dir: str | Path | None = None,
    kernel_name: str = "tsevo",
    parameters: Mapping[str, Any] | None = None,
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Execute notebooks with papermill against one run folder (``make notebooks``).

    Args:
        run_dir: Run folder passed as every notebook's ``run_dir`` parameter.
        notebooks: Notebook files (default: ``notebooks/*.ipynb`` of the repository).
        out_dir: Where executed copies go (default: ``<run_dir>/notebooks``).
        kernel_name: Jupyter kernel (the ``tsevo`` kernel registered by setup).
        parameters: Extra parameters for every notebook (must be known to each config).
        log: Line logger.

    Returns:
        The executed notebooks' paths.
    """
    import papermill as pm

    run = Path(run_dir).resolve()
    nbs = [Path(p) for p in notebooks] if notebooks is not None else default_notebooks()
    out = Path(out_dir) if out_dir is not None else run / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for nb in nbs:
        params = {"run_dir": str(run), **dict(parameters or {})}
        cfg_cls = CONFIGS.get(nb.stem)
        if cfg_cls is not None:
            cfg_cls.from_params(params)  # fail before starting a kernel on a bad name
        t0 = time.perf_counter()
        target = out / nb.name
        pm.execute_notebook(
            str(nb),
            str(target),
            parameters=params,
            kernel_name=kernel_name,
            cwd=str(nb.parent),
            progress_bar=False,
        )
        log(f"{nb.name}: {time.perf_counter() - t0:.1f} s -> {target}")
        written.append(target)
    return written


# --------------------------------------------------------------------------------------- specs
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
        with RunLock(folder):  # one study process per grid point (its kernel locks the run)
            done += execute_notebooks(
                folder / "run", notebooks=[nb], out_dir=folder / "notebooks", parameters=params
            )
    return done


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run one spec."""
    p = argparse.ArgumentParser(prog="python -m tsevo.studies", description=__doc__)
    p.add_argument("spec", type=Path)
    p.add_argument("--out", type=Path, default=Path("runs/experiments"))
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    spec = load_spec(args.spec)
    for path in run_spec(spec, args.out, dry_run=args.dry_run):
        print(path)
    return 0


# --------------------------------------------------------------------------------------- comparison
def compare_libraries(
    run: str | Path,
    *,
    split: str = "test",
    reference_root: str = "expert",
    roles: RoleSet | None = None,
) -> pd.DataFrame:
    """Answer one split of the run's suite with three agents and tabulate accuracy per family.

    The agents are the base agent (empty library), the run's evolved library and the
    ``reference_root`` library (:func:`tsevo.library.roots.make_root`), all on the same answerer
    and reviewer (``roles``; default: the builtin ones). Reporting only: nothing here feeds a
    decision.

    Columns: ``agent (base | evolved | <reference_root>), family, n, correct, accuracy``
    (plus an ``ALL`` family per agent).
    """
    qs = list(run_suite(run).subset(split))
    libs = {
        "base": Library(),
        "evolved": Library.load(RunLayout(run).library),
        reference_root: make_root(reference_root),
    }
    records = answer_libraries(
        qs,
        libs,
        answerer=roles.answerer if roles is not None else None,
        reviewer=roles.reviewer if roles is not None else None,
        workers=roles.workers if roles is not None else 1,
    )
    fam = [str(q.metadata.get("family", q.task)) for q in qs]
    rows = []
    for name in libs:
        ok = [bool(records[name][q.id].correct) for q in qs]
        for f in [*sorted(set(fam)), "ALL"]:
            sel = [o for o, g in zip(ok, fam, strict=True) if f in ("ALL", g)]
            rows.append(
                {
                    "agent": name,
                    "family": f,
                    "n": len(sel),
                    "correct": sum(sel),
                    "accuracy": sum(sel) / len(sel) if sel else float("nan"),
                }
            )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def comparison_pivot(table: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per family (rows) and agent (columns) from :func:`compare_libraries`."""
    return table.pivot(index="family", columns="agent", values="accuracy")


if __name__ == "__main__":
    raise SystemExit(main())
