"""Per task: what the deployed tools measure next to what the synthetic oracle measures."""

from __future__ import annotations

import inspect
import re

import pandas as pd

from tsevo.data.synthetic import FAMILIES
from tsevo.library.primitives import CATALOG

from ._runs import Run
from .tools import tools_df

__all__ = ["MEASUREMENTS_COLUMNS", "measurements_df"]

MEASUREMENTS_COLUMNS = [
    "task",
    "oracle_measurement",
    "planner_measurements",
    "tools",
    "beyond_default",
]


def measurements_df(run: Run) -> pd.DataFrame:
    """Per task: what the deployed tools measure next to what the synthetic oracle measures.

    ``beyond_default`` is true when a tool for the task needs more than one catalog call at default
    parameters: two measurements (a calibrated combination), windows read from the question, a
    non-default parameter, or a two-series feeding mode.

    Columns: ``task, oracle_measurement ("" for non-synthetic tasks), planner_measurements (list),
    tools (list of ids), beyond_default (bool)``.
    """
    oracle = {f.task: f.oracle_measurement for f in FAMILIES.values()}
    tools = tools_df(run)
    rows = []
    tasks = sorted({t for ts in tools["tasks"] for t in ts}) if len(tools) else []
    for task in tasks:
        sel = tools[[task in ts for ts in tools["tasks"]]]
        meas = list(sel["measurement"])
        beyond = any(_beyond_default(m) for m in meas) or bool(sel["calibrated"].any())
        rows.append(
            {
                "task": task,
                "oracle_measurement": oracle.get(task, ""),
                "planner_measurements": meas,
                "tools": list(sel["id"]),
                "beyond_default": beyond,
            }
        )
    return pd.DataFrame(rows, columns=MEASUREMENTS_COLUMNS)


def _beyond_default(measurement: str) -> bool:
    """True for two measurements, windows read from the question, or a parameter off its default."""
    if " + " in measurement:
        return True
    m = re.fullmatch(r"([a-z_0-9]+)\.[A-Za-z_0-9]+(?:\[(.*)\])?", measurement.strip())
    if m is None:
        return False
    name, inner = m.group(1), m.group(2) or ""
    spec = CATALOG.get(name)
    if spec is None:
        return False
    defaults = {k: v.default for k, v in inspect.signature(spec.fn).parameters.items()}
    for part in (p.strip() for p in inner.split(";") if p.strip()):
        if part in ("window2", "window4"):
            return True
        if "=" in part:
            k, v = part.split("=", 1)
            if k in defaults and str(defaults[k]) != v:
                return True
    return False
