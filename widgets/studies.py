"""Figures of the paper's studies, each drawn from a study's tidy frame (:mod:`tsevo.studies`).

A frame is one cell's rows (what a study notebook shows) or every cell's rows
(:func:`tsevo.studies.study_frame`, what ``tsevo study report`` draws); extra grid columns such
as ``seed`` become the spread of a mean. Every figure is a :class:`matplotlib.figure.Figure` not
attached to pyplot. :func:`study_figure` picks the figure for a study notebook by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

__all__ = [
    "STUDY_FIGURES",
    "ablation_figure",
    "chain_arms_figure",
    "funnel_figure",
    "gate_calibration_figure",
    "main_table_figure",
    "rounds_figure",
    "study_figure",
    "taxonomy_arms_figure",
    "transfer_figure",
]


def _figure(w: float, h: float, ncols: int = 1) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    return fig, fig.subplots(1, ncols)


def main_table_figure(frame: pd.DataFrame) -> Any:
    """The paper's Table 1 as a heatmap: gain over the base agent (pp) per task and method.

    ``frame``: :func:`tsevo.studies.main_table` rows (one or many cells; a cell's gain is taken
    against the base agent of the same cell, then averaged).
    """
    import seaborn as sns

    keys = [c for c in frame.columns if c not in ("method", "kind", "n", "correct", "accuracy")]
    base = frame[frame["method"] == "base"].set_index(keys)["accuracy"]
    rest = frame[frame["method"] != "base"].copy()
    rest["gain_pp"] = 100 * (
        rest["accuracy"].to_numpy() - base.reindex(rest.set_index(keys).index).to_numpy()
    )
    table = rest.pivot_table(index="task", columns="method", values="gain_pp", aggfunc="mean")
    table = table.reindex([t for t in table.index if t != "ALL"] + ["ALL"])
    fig, ax = _figure(1.4 * max(2, table.shape[1]) + 3.0, 0.32 * len(table) + 1.4)
    sns.heatmap(table, annot=True, fmt="+.1f", center=0.0, cmap="RdBu", cbar=False, ax=ax)
    ax.set_title("gain over the base agent, pp (report-only test)", fontsize=9)
    ax.set_xlabel("")
    ax.set_ylabel("")
    return fig


def transfer_figure(frame: pd.DataFrame) -> Any:
    """The paper's Fig. 3b: each target's base agent and with the installed library, per task.

    ``frame``: :func:`tsevo.studies.transfer_table` rows; a ``target_model`` or ``target_backend``
    column (from the grid) names the targets.
    """
    import seaborn as sns

    data = frame[frame["task"] != "ALL"].copy()
    hue = next((c for c in ("target_model", "target_backend") if c in data), None)
    long = data.melt(
        id_vars=["task", *([hue] if hue else [])],
        value_vars=["base", "transferred"],
        var_name="library",
        value_name="accuracy",
    )
    long["arm"] = (
        long["library"] if hue is None else long[hue].astype(str) + " · " + long["library"]
    )
    fig, ax = _figure(10.0, 3.6)
    sns.barplot(data=long, x="task", y="accuracy", hue="arm", ax=ax)
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_ylim(0, 1)
    ax.set_title("installed library vs the target's own base agent (report only)", fontsize=9)
    return fig


def ablation_figure(frame: pd.DataFrame) -> Any:
    """The paper's Fig. 4a and 4b: final test accuracy per ablation; fixes and breaks.

    ``frame``: one row per (cell, ablation) with ``ablation``, ``final``, ``helped``, ``harmed``
    (the ablation study's rows). Left: the test gain over the run's own base in pp (``gain``; the
    final accuracy when the frame has no ``gain``), mean with the spread over cells as bars, the
    full method's mean as a dashed line. Right: answers fixed and broken on test against the
    base agent, full method vs every ablation.
    """
    import seaborn as sns

    order = ["full", *sorted(a for a in frame["ablation"].unique() if a != "full")]
    fig, (ax1, ax2) = _figure(11.0, 3.8, 2)
    # The gain over each run's own base reads better than accuracies that differ by points.
    value = "gain_pp" if "gain" in frame else "final"
    data = frame.assign(gain_pp=100 * frame["gain"].astype(float)) if "gain" in frame else frame
    sns.barplot(data=data, y="ablation", x=value, order=order, ax=ax1, color="C0")
    full = data.loc[data["ablation"] == "full", value]
    if len(full):
        ax1.axvline(float(full.mean()), color="k", linestyle="--", linewidth=1)
    what = "test gain over its own base, pp" if value == "gain_pp" else "final test accuracy"
    ax1.set_title(f"{what} (dashed: full)", fontsize=9)
    long = frame.melt(
        id_vars=["ablation"], value_vars=["helped", "harmed"], var_name="flip", value_name="count"
    )
    sns.barplot(data=long, y="ablation", x="count", hue="flip", order=order, ax=ax2)
    ax2.set_title("test answers fixed / broken vs the base agent", fontsize=9)
    ax2.set_ylabel("")
    return fig


def gate_calibration_figure(rounds: pd.DataFrame) -> Any:
    """The paper's Fig. 5b: the gate's δ_lb on validation against the report-only test delta.

    ``rounds``: :func:`tsevo.studies.rounds_table` rows of many runs. Accepted rounds are plotted
    at their test delta, rejected ones at the diagnostic delta of the best rejected candidate
    (hollow; omitted when it was not measured).
    """
    fig, ax = _figure(5.5, 4.2)
    acc = rounds[rounds["status"] == "accepted"]
    rej = rounds[(rounds["status"] != "accepted") & rounds["diagnostic_delta"].notna()]
    for path, part in acc.groupby("gate_path"):
        ax.scatter(
            100 * part["delta_lb"].astype(float),
            100 * part["test_delta"].astype(float),
            label=f"accepted ({path})",
            s=28,
        )
    if len(rej):
        ax.scatter(
            100 * rej["delta_lb"].astype(float),
            100 * rej["diagnostic_delta"].astype(float),
            facecolors="none",
            edgecolors="C3",
            label="rejected (diagnostic)",
            s=28,
        )
    ax.axhline(0, color="k", linewidth=0.8)
    ax.axvline(0, color="k", linewidth=0.8, linestyle="--")
    ax.set_xlabel("validation δ_lb (pp)")
    ax.set_ylabel("report-only test delta (pp)")
    ax.legend(fontsize=7)
    ax.set_title(f"gate calibration over {len(rounds)} rounds", fontsize=9)
    return fig


def rounds_figure(rounds: pd.DataFrame) -> Any:
    """The paper's Fig. 5c: validation gain and library size per round.

    ``rounds``: :func:`tsevo.studies.rounds_table` rows (one or many runs). Bars: the final gate's
    validation δ (pp; a rejected round counts as zero, as it rolls back); line: tools in the
    library after the round.
    """
    import seaborn as sns

    data = rounds.copy()
    data["val_gain_pp"] = [
        100 * float(d) if s == "accepted" and d is not None and d == d else 0.0
        for s, d in zip(data["status"], data["delta"], strict=True)
    ]
    fig, (ax1, ax2) = _figure(9.0, 3.4, 2)
    sns.barplot(data=data, x="round", y="val_gain_pp", ax=ax1, color="C0")
    for i, (_, row) in enumerate(
        data.groupby("round")["status"].agg(lambda s: ", ".join(sorted(set(s)))).items()
    ):
        ax1.annotate(
            row, (i, 0), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7
        )
    ax1.set_title("validation gain admitted per round (pp; rejected = 0)", fontsize=9)
    sns.lineplot(data=data, x="round", y="tools", marker="o", ax=ax2)
    ax2.set_xticks(sorted(data["round"].unique()))
    ax2.set_title("tools in the library after the round", fontsize=9)
    return fig


def funnel_figure(funnel: pd.DataFrame) -> Any:
    """The attrition funnel: count per step, widest first (:func:`tsevo.analysis.funnel_df` rows).

    Many runs or rounds: the bar is the mean, the line the spread; a ``size`` column with several
    presets (a study grid over presets) gets one bar per preset.
    """
    import seaborn as sns

    order = list(funnel.sort_values("order")["step"].drop_duplicates())
    fig, ax = _figure(6.5, 0.35 * len(order) + 1.2)
    hue = "size" if "size" in funnel and funnel["size"].nunique() > 1 else None
    if hue is None:
        sns.barplot(data=funnel, y="step", x="count", order=order, ax=ax, color="C2")
    else:
        sns.barplot(data=funnel, y="step", x="count", order=order, ax=ax, hue=hue)
    ax.set_xscale("symlog")
    ax.set_title("funnel: train errors to deployed tools", fontsize=9)
    ax.set_ylabel("")
    return fig


def chain_arms_figure(rows: pd.DataFrame) -> Any:
    """Issue 13's paired chain study: groups the gate admitted per seed and arm.

    ``rows``: :func:`tsevo.analysis.chain_arm_row` rows with ``seed`` and ``arm`` (one cell's arms or
    every cell's); bars in the order of :data:`tsevo.analysis.CHAIN_ARMS`.
    """
    import seaborn as sns

    order = [a for a in ("discard", "chain", "discard_k_plus_d") if a in set(rows["arm"])]
    fig, ax = _figure(6.5, 3.2)
    sns.barplot(data=rows, x="seed", y="n_admitted", hue="arm", hue_order=order, ax=ax)
    ax.set_title("work groups the gate admitted, per seed and arm", fontsize=9)
    ax.set_ylabel("groups admitted")
    return fig


def taxonomy_arms_figure(rows: pd.DataFrame) -> Any:
    """Issue 12's paired taxonomy study: report-only test accuracy per seed and arm.

    ``rows``: :func:`tsevo.analysis.taxonomy_answer_rows` rows (``seed``, ``arm``, ``label``,
    ``final_correct`` per test question; one cell's arms or every cell's). The bars are each arm's
    accuracy after the round; the pairing itself is :func:`tsevo.analysis.taxonomy_arms_df`.
    """
    import seaborn as sns

    acc = rows.groupby(["seed", "arm"], as_index=False)["final_correct"].mean()
    acc["accuracy"] = 100 * acc["final_correct"]
    order = [a for a in ("none", "coded", "beside", "coded_triage") if a in set(acc["arm"])]
    fig, ax = _figure(6.5, 3.2)
    sns.barplot(data=acc, x="seed", y="accuracy", hue="arm", hue_order=order, ax=ax)
    labels = ", ".join(sorted(set(rows["label"]))) if "label" in rows else ""
    ax.set_title(f"test accuracy after the round, per seed and arm ({labels})", fontsize=9)
    ax.set_ylabel("test accuracy (%, report only)")
    return fig


STUDY_FIGURES: dict[str, Callable[[pd.DataFrame], Any]] = {
    "91_study_main_table": main_table_figure,
    "92_study_transfer": transfer_figure,
    "93_study_ablations": ablation_figure,
    "94_study_gate_calibration": gate_calibration_figure,
    "95_study_multi_round": rounds_figure,
    "96_study_funnel": funnel_figure,
    "97_study_marachain": chain_arms_figure,
    "98_study_taxonomy_coded": taxonomy_arms_figure,
}
"""Study notebook -> the figure of its rows."""


def study_figure(notebook: str, frame: pd.DataFrame) -> Any:
    """The figure of a study's rows (by its notebook's name).

    Raises:
        KeyError: A notebook without a study figure.
    """
    try:
        fn = STUDY_FIGURES[notebook]
    except KeyError:
        raise KeyError(
            f"no study figure for notebook {notebook!r}; one of {sorted(STUDY_FIGURES)}"
        ) from None
    return fn(frame)
