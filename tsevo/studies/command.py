"""The study command: ``tsevo study run SPEC`` (also ``python -m tsevo.studies SPEC``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tsevo.studies.grid import run_study
from tsevo.studies.results import write_results
from tsevo.studies.spec import StudySpec, load_spec

__all__ = [
    "add_report_arguments",
    "add_run_arguments",
    "main",
    "report_command",
    "run_command",
    "run_spec",
]


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``tsevo study run``."""
    p.add_argument("spec", type=Path, help="a study spec (experiments/*.json)")
    p.add_argument("--out", type=Path, default=Path("runs/experiments"), help="output folder")
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="an existing Dask scheduler (tcp://host:8786); default: a LocalCluster on this machine",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="LocalCluster worker processes (default: the CPUs); with --scheduler: wait for N workers",
    )
    p.add_argument(
        "--retries", type=int, default=2, help="resubmissions of a crashed cell (default 2)"
    )
    p.add_argument(
        "--cell-timeout", type=float, default=None, metavar="S", help="kill an attempt after S s"
    )
    p.add_argument("--dry-run", action="store_true", help="list the cells that would run")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_command(args: argparse.Namespace) -> int:
    """Run a study from parsed arguments; print the table. Exit 1 when a cell failed."""
    spec = load_spec(args.spec)
    table = run_study(
        spec,
        args.out,
        scheduler=args.scheduler,
        workers=args.workers,
        retries=args.retries,
        cell_timeout_s=args.cell_timeout,
        dry_run=args.dry_run,
        progress=not args.no_progress,
    )
    with pd.option_context("display.max_colwidth", 60, "display.width", 200):
        print(table.drop(columns=["output"]).to_string(index=False))
    counts = table["status"].value_counts().to_dict()
    print(f"{spec.name}: {len(table)} cells, " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 1 if set(counts) & {"failed", "busy"} else 0


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``tsevo study report``."""
    p.add_argument("spec", type=Path, help="a study spec (experiments/*.json)")
    p.add_argument("--out", type=Path, default=Path("runs/experiments"), help="output folder")


def report_command(args: argparse.Namespace) -> int:
    """Collect the rows of a study's finished cells into ``results.csv``; print a summary.

    Exit 1 when no cell has finished yet.
    """
    spec = load_spec(args.spec)
    csv = write_results(spec, args.out)
    meta = json.loads((csv.parent / "results.json").read_text(encoding="utf-8"))
    print(f"{spec.name}: {meta['rows']} rows from {len(meta['cells'])} cells -> {csv}")
    if meta["missing"]:
        print(f"  not finished ({len(meta['missing'])}): " + ", ".join(meta["missing"]))
    return 0 if meta["cells"] else 1


def run_spec(
    spec: StudySpec, out: str | Path = "runs/experiments", *, dry_run: bool = False, **kw: Any
) -> list[Path]:
    """Run a study (see :func:`tsevo.studies.run_study`); the executed notebooks of finished cells."""
    table = run_study(spec, out, dry_run=dry_run, **kw)
    return [Path(p) for p in table["output"] if p]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tsevo.studies SPEC [--scheduler ADDRESS] [--workers N] ...``."""
    p = argparse.ArgumentParser(prog="python -m tsevo.studies", description=__doc__)
    add_run_arguments(p)
    return run_command(p.parse_args(argv))
