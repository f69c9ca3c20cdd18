"""The attrition funnel of every round, long format."""

from __future__ import annotations

import pandas as pd

from ._runs import Run, open_run, rounds_in

__all__ = ["FUNNEL_COLUMNS", "FUNNEL_ORDER", "funnel_df"]

FUNNEL_COLUMNS = ["round", "step", "order", "count"]
FUNNEL_ORDER = (
    "errors",
    "buckets",
    "contracts",
    "groups",
    "attempts",
    "checked",
    "prefilter_passed",
    "survivors",
    "deployed",
)
"""The funnel's steps, widest first (the ``order`` column is the position here)."""


def funnel_df(run: Run) -> pd.DataFrame:
    """The attrition funnel per round, long format.

    Columns: ``round, step (errors | buckets | contracts | groups | attempts | checked |
    prefilter_passed | survivors | deployed), order (position in the funnel), count``.
    """
    store = open_run(run)
    rows = []
    for r in rounds_in(store):
        f = store.read_json(store.layout.round(r).summary).get("funnel", {})
        for i, step in enumerate(FUNNEL_ORDER):
            if step in f:
                rows.append({"round": r, "step": step, "order": i, "count": int(f[step])})
    return pd.DataFrame(rows, columns=FUNNEL_COLUMNS)
