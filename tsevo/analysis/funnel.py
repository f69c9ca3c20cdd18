"""The attrition funnel of every round, long format."""

from __future__ import annotations

import pandas as pd

from ._runs import Run, open_run, rounds_in
from .marachain import CHAIN_FUNNEL_ORDER, chain_funnel_counts

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
    prefilter_passed | survivors | deployed), order (position in the funnel), count``. Rounds
    where Mara chains ran add ``chain_groups | chain_nodes | chain_survivors`` after the funnel
    (orders from ``len(FUNNEL_ORDER)``); chain-off rounds have no such rows.
    """
    store = open_run(run)
    rows = []
    chains = chain_funnel_counts(store)
    for r in rounds_in(store):
        f = store.read_json(store.layout.round(r).summary).get("funnel", {})
        for i, step in enumerate(FUNNEL_ORDER):
            if step in f:
                rows.append({"round": r, "step": step, "order": i, "count": int(f[step])})
        for i, step in enumerate(CHAIN_FUNNEL_ORDER, len(FUNNEL_ORDER)):
            if r in chains:
                rows.append({"round": r, "step": step, "order": i, "count": chains[r][step]})
    return pd.DataFrame(rows, columns=FUNNEL_COLUMNS)
