"""The study notebook's library comparison: base agent, evolved library and a hand-written root."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tsevo.analysis import run_suite
from tsevo.evolve import answer_libraries
from tsevo.library.library import Library
from tsevo.library.roots import make_root
from tsevo.roles import RoleSet
from tsevo.store import RunLayout

__all__ = ["COMPARISON_COLUMNS", "compare_libraries", "comparison_pivot"]

COMPARISON_COLUMNS = ["agent", "family", "n", "correct", "accuracy"]


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
