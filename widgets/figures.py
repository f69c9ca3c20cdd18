"""Figures the notebooks show, each drawn from a tidy frame of :mod:`tsevo.analysis` (or a suite).

Every figure is a :class:`matplotlib.figure.Figure` not attached to pyplot (no global state);
:func:`show` displays one as a PNG in any kernel. :func:`show_sources` displays generated tool
source, highlighted.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pandas as pd

from tsevo.analysis import attempts_table, candidate_source
from tsevo.data import Question, Suite

from ._render import esc, highlight_source

__all__ = [
    "accuracy_figure",
    "comparison_figure",
    "deltas_figure",
    "example_questions",
    "examples_figure",
    "show",
    "show_sources",
]


def show(fig: Any) -> None:
    """Display a matplotlib figure as a PNG (works with any backend, no pyplot state)."""
    from IPython.display import Image, display

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    display(Image(buf.getvalue()))


def example_questions(suite: Suite, n: int = 4, split: str = "train") -> list[Question]:
    """Up to ``n`` questions of one split, one per task, in task order."""
    pool = list(suite.subset(split)) if suite.splits else list(suite)
    out: list[Question] = []
    seen: set[str] = set()
    for q in sorted(pool, key=lambda q: (q.task, q.id)):
        if q.task not in seen:
            seen.add(q.task)
            out.append(q)
        if len(out) >= n:
            break
    return out


def examples_figure(suite: Suite, n: int = 4, split: str = "train") -> Any:
    """Plot ``n`` example questions (one per task): their series, the question, the gold option.

    Returns:
        A matplotlib figure with one panel per question.
    """
    from matplotlib.figure import Figure

    qs = example_questions(suite, n, split)
    fig = Figure(figsize=(11.0, 2.6 * max(1, (len(qs) + 1) // 2)), layout="constrained")
    axes = fig.subplots(max(1, (len(qs) + 1) // 2), 2, squeeze=False).ravel()
    for ax, q in zip(axes, qs, strict=False):
        for i, (name, values) in enumerate(q.series.items()):
            ax.plot(values, lw=1.0, color=f"C{i}", label=f"{name} ({q.role_of(name)})")
        gold = q.gold_option or "?"
        ax.set_title(f"{q.task}: {_short(q.question, 70)}\ngold: {_short(gold, 60)}", fontsize=8)
        ax.legend(fontsize=6, frameon=False)
    for ax in axes[len(qs) :]:
        ax.set_axis_off()
    return fig


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def accuracy_figure(table: pd.DataFrame, *, value: str = "accuracy", title: str = "") -> Any:
    """A seaborn bar chart of one column of a per-task table (the ``ALL`` row excluded)."""
    import seaborn as sns
    from matplotlib.figure import Figure

    data = table[table["task"] != "ALL"]
    fig = Figure(figsize=(7.0, 0.3 * len(data) + 1.0), layout="constrained")
    ax = fig.subplots()
    sns.barplot(data=data, y="task", x=value, ax=ax, color="C0")
    ax.set_title(title, fontsize=9)
    return fig


def deltas_figure(table: pd.DataFrame) -> Any:
    """Bars of the per-task report-only test delta in percentage points (:func:`test_deltas`)."""
    data = table.assign(delta_pp=100 * table["delta"].astype(float))
    return accuracy_figure(data, value="delta_pp", title="report-only test delta (pp)")


def comparison_figure(table: pd.DataFrame) -> Any:
    """Seaborn grouped bars: accuracy per family for each agent (``tsevo.studies.compare_libraries``)."""
    import seaborn as sns
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0, 3.6), layout="constrained")
    ax = fig.subplots()
    sns.barplot(data=table, x="family", y="accuracy", hue="agent", ax=ax)
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_ylim(0, 1)
    ax.set_title("accuracy per family (report only)", fontsize=9)
    return fig


def show_sources(run: str | Path, round_: int = 1, n: int = 2) -> list[str]:
    """Display the generated source of the first ``n`` surviving candidates, highlighted.

    Returns:
        The candidate ids shown (all attempts when no candidate survived the prefilter).
    """
    from IPython.display import HTML, display

    att = attempts_table(run, round_)
    ids = [str(t) for t in att[att["survivor"].astype(bool)]["tool_id"]] or [
        str(t) for t in att["tool_id"]
    ]
    for tid in ids[:n]:
        body = highlight_source(candidate_source(run, tid, round_))
        display(HTML(f"<b>{esc(tid)}</b>{body}"))
    return ids[:n]
