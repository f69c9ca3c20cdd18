"""Executing notebooks with papermill, and reading a notebook's ``parameters`` cell."""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tsevo.notebook import CONFIGS

__all__ = ["default_notebooks", "execute_notebooks", "notebook_parameters"]


def default_notebooks() -> list[Path]:
    """The repository's notebooks, in order (``notebooks/*.ipynb`` next to the package)."""
    root = Path(__file__).resolve().parents[2] / "notebooks"
    return sorted(root.glob("[0-9]*.ipynb"))


def notebook_parameters(path: str | Path) -> dict[str, Any]:
    """The names assigned in a notebook's cell tagged ``parameters``, with their default values.

    A default that is not a literal maps to ``None``. Reads the file as JSON (no Jupyter import).

    Raises:
        ValueError: the notebook has no cell tagged ``parameters``.
    """
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        src = cell.get("source", "")
        tree = ast.parse("".join(src) if isinstance(src, list) else src)
        out: dict[str, Any] = {}
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            value = getattr(node, "value", None)
            for t in targets:
                if isinstance(t, ast.Name):
                    try:
                        out[t.id] = ast.literal_eval(value) if value is not None else None
                    except ValueError:
                        out[t.id] = None
        return out
    raise ValueError(f"{path}: no cell tagged 'parameters'")


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

    Runs in this process; a study grid runs each cell's papermill in its own subprocess instead
    (:func:`tsevo.studies.run_study`).

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
            variant = cfg_cls.from_params(params).variant()  # a bad name fails before a kernel
            if variant:  # a study on another protocol keeps its run beside this one (variant())
                params["run_dir"] = str(run.with_name(f"{run.name}-{variant}"))
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
