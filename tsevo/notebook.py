"""What the notebooks in ``notebooks/`` call: one config per notebook and one function per step.

Every notebook has a cell tagged ``parameters`` whose names map one-to-one onto the fields of its
config class here (``XConfig.from_params(dict(...))`` raises :class:`TypeError` on an unknown
name). The notebooks narrate and show; the computing happens in these functions, which the tests
reach without a kernel.

Run folders: a notebook reads the previous stage's artifacts from a run folder (DESIGN.md §3), so
any stage can be rerun alone. ``run_dir=""`` means ``$TSEVO_RUN_DIR`` when set (how the tests
share one prepared run) and otherwise ``runs/notebooks`` below the working directory;
:func:`ensure_run` creates the run there with the configured preset and seed when it holds no
finished round yet, and otherwise reuses it as it is.

Metrics: the last cell of every notebook calls :func:`record_metrics`, which writes
``notebook_metrics/<name>.json`` in the run folder (read back with :func:`read_metrics`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from tsevo.analysis import failures_df, rounds_in
from tsevo.store import RunStore

if TYPE_CHECKING:
    from tsevo.data import Question, Suite

__all__ = [
    "CONFIGS",
    "PRUNE_COLUMNS",
    "RUN_DIR_ENV",
    "BasePassConfig",
    "DataConfig",
    "DeploymentConfig",
    "GateConfig",
    "PlanningConfig",
    "QuickstartConfig",
    "StudyConfig",
    "accuracy_figure",
    "attempts_table",
    "base_pass_table",
    "buckets_table",
    "calibration_table",
    "candidate_source",
    "chain_table",
    "changed_flips",
    "compare_libraries",
    "comparison_figure",
    "comparison_pivot",
    "contracts_table",
    "deltas_figure",
    "ensure_run",
    "examples_figure",
    "execute_notebooks",
    "load_suite",
    "make_synthetic_suite",
    "paired_rows",
    "paired_table",
    "prune_df",
    "read_metrics",
    "record_metrics",
    "repairs_table",
    "resolve_run_dir",
    "run_metrics",
    "run_text",
    "show",
    "show_sources",
    "solver_table",
    "suite_metrics",
    "test_deltas",
]

RUN_DIR_ENV = "TSEVO_RUN_DIR"
"""Environment variable naming a prepared run folder (the default of every ``run_dir``)."""
DEFAULT_RUN_DIR = "runs/notebooks"

C = TypeVar("C", bound="_NotebookConfig")


# --------------------------------------------------------------------------------------- configs
@dataclass(frozen=True, kw_only=True)
class _NotebookConfig:
    """Shared behaviour: strict construction from a parameters mapping, JSON form, run folder."""

    notebook: ClassVar[str] = ""

    @classmethod
    def from_params(cls: type[C], params: Mapping[str, Any]) -> C:
        """Build the config from a notebook's parameters.

        Raises:
            TypeError: A name that is not a field of the config (a typo fails loudly), or a value
                of the wrong type.
        """
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - names)
        if unknown:
            raise TypeError(f"{cls.__name__}: unknown parameters {unknown}; known: {sorted(names)}")
        cfg = cls(**dict(params))
        for f in fields(cls):
            v = getattr(cfg, f.name)
            want = type(getattr(cls(), f.name))
            if not isinstance(v, want) or (want is int and isinstance(v, bool)):
                raise TypeError(
                    f"{cls.__name__}.{f.name} must be {want.__name__}, got {type(v).__name__}"
                )
        return cfg

    def to_dict(self) -> dict[str, Any]:
        """The parameters as a JSON-friendly dict."""
        return asdict(self)

    def run_path(self) -> Path:
        """The run folder this notebook reads (see :func:`resolve_run_dir`)."""
        return resolve_run_dir(str(getattr(self, "run_dir", "")))


@dataclass(frozen=True, kw_only=True)
class QuickstartConfig(_NotebookConfig):
    """``00_quickstart``: synthetic suite → one builtin round → summary → flips → library."""

    notebook: ClassVar[str] = "00_quickstart"
    run_dir: str = ""
    """Run folder ("" = $TSEVO_RUN_DIR or runs/notebooks); reused when it holds a finished run."""
    size: str = "tiny"
    """Synthetic suite preset (tiny | default | large) or a count per family."""
    seed: int = 5
    """Suite, split and protocol seed (5 gives a tiny round that the gate accepts)."""
    rounds: int = 1
    """Evolution rounds."""
    split: str = "test"
    """Flips shown: test (report-only, before vs after) or val (the gate's arms)."""


@dataclass(frozen=True, kw_only=True)
class DataConfig(_NotebookConfig):
    """``10_data``: the suite, its splits and a few example questions drawn."""

    notebook: ClassVar[str] = "10_data"
    run_dir: str = ""
    """Run folder whose suite.parquet is read ("" = $TSEVO_RUN_DIR or runs/notebooks)."""
    size: str = "tiny"
    """Preset used only when the run folder does not exist yet."""
    seed: int = 5
    """Seed used only when the run folder does not exist yet."""
    n_examples: int = 4
    """Example questions drawn (one per task, in task order)."""
    example_split: str = "train"
    """Split the examples come from."""


@dataclass(frozen=True, kw_only=True)
class BasePassConfig(_NotebookConfig):
    """``20_base_pass_and_failures``: accuracy per task, error partition, buckets."""

    notebook: ClassVar[str] = "20_base_pass_and_failures"
    run_dir: str = ""
    """Run folder ("" = $TSEVO_RUN_DIR or runs/notebooks)."""
    size: str = "tiny"
    """Preset used only when the run has to be created."""
    seed: int = 5
    """Seed used only when the run has to be created."""
    round: int = 1
    """Round to inspect."""
    max_members: int = 6
    """Bucket members listed per bucket."""


@dataclass(frozen=True, kw_only=True)
class PlanningConfig(_NotebookConfig):
    """``30_planning_and_synthesis``: contracts, attempts, generated source, calibration trees."""

    notebook: ClassVar[str] = "30_planning_and_synthesis"
    run_dir: str = ""
    """Run folder ("" = $TSEVO_RUN_DIR or runs/notebooks)."""
    size: str = "tiny"
    """Preset used only when the run has to be created."""
    seed: int = 5
    """Seed used only when the run has to be created."""
    round: int = 1
    """Round to inspect."""
    show_sources: int = 2
    """Generated sources printed (the first surviving candidates)."""


@dataclass(frozen=True, kw_only=True)
class GateConfig(_NotebookConfig):
    """``40_prefilter_and_gate``: attributable repairs, the paired table, δ and δ_lb, prune."""

    notebook: ClassVar[str] = "40_prefilter_and_gate"
    run_dir: str = ""
    """Run folder ("" = $TSEVO_RUN_DIR or runs/notebooks)."""
    size: str = "tiny"
    """Preset used only when the run has to be created."""
    seed: int = 5
    """Seed used only when the run has to be created."""
    round: int = 1
    """Round to inspect."""


@dataclass(frozen=True, kw_only=True)
class DeploymentConfig(_NotebookConfig):
    """``50_deployment_and_test``: the chain, report-only deltas per task, flips."""

    notebook: ClassVar[str] = "50_deployment_and_test"
    run_dir: str = ""
    """Run folder ("" = $TSEVO_RUN_DIR or runs/notebooks)."""
    size: str = "tiny"
    """Preset used only when the run has to be created."""
    seed: int = 5
    """Seed used only when the run has to be created."""
    round: int = 1
    """Round whose report-only test is shown."""


@dataclass(frozen=True, kw_only=True)
class StudyConfig(_NotebookConfig):
    """``90_study_base_vs_evolved_vs_expert``: three agents on one split, per family."""

    notebook: ClassVar[str] = "90_study_base_vs_evolved_vs_expert"
    run_dir: str = ""
    """Run folder with the evolved library ("" = $TSEVO_RUN_DIR or runs/notebooks)."""
    size: str = "tiny"
    """Preset used only when the run has to be created."""
    seed: int = 5
    """Seed used only when the run has to be created."""
    split: str = "test"
    """Split answered (test: report only, used in no decision)."""
    reference_root: str = "expert"
    """The hand-written library compared against (a root name: expert | chronos)."""


CONFIGS: dict[str, type[_NotebookConfig]] = {
    c.notebook: c
    for c in (
        QuickstartConfig,
        DataConfig,
        BasePassConfig,
        PlanningConfig,
        GateConfig,
        DeploymentConfig,
        StudyConfig,
    )
}
"""Notebook stem -> its config class."""


# --------------------------------------------------------------------------------------- runs
def resolve_run_dir(run_dir: str = "", default: str = DEFAULT_RUN_DIR) -> Path:
    """``run_dir`` if given, else ``$TSEVO_RUN_DIR`` if set, else ``default`` (relative to cwd)."""
    if run_dir:
        return Path(run_dir)
    env = os.environ.get(RUN_DIR_ENV, "")
    return Path(env) if env else Path(default)


def make_synthetic_suite(size: str = "tiny", seed: int = 5) -> Suite:
    """The synthetic suite preset, split train/val/test by ``seed``."""
    from tsevo.data.synthetic import make_suite

    return make_suite(size=size, seed=seed)


def ensure_run(
    cfg: _NotebookConfig,
    suite: Suite | None = None,
    *,
    log: Callable[[str], None] = print,
) -> Path:
    """The notebook's run folder, evolved first when it holds no finished round yet.

    A folder with finished rounds is reused as it is (its own config decides; ``size`` and
    ``seed`` are then ignored). Otherwise the builtin backend runs ``cfg.rounds`` rounds (1 when
    the config has no ``rounds``) on ``suite`` (default: the synthetic preset of ``cfg``).

    Returns:
        The run folder.
    """
    import fcntl

    from tsevo.evolve.config import ProtocolConfig
    from tsevo.evolve.run import evolve

    path = cfg.run_path()
    rounds = int(getattr(cfg, "rounds", 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    # One writer at a time: notebooks executed in parallel may all ask for the same run folder.
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (path / "config.json").exists() and len(rounds_in(path)) >= rounds:
            log(f"reusing the finished run in {path}")
            return path
        size, seed = str(getattr(cfg, "size", "tiny")), int(getattr(cfg, "seed", 5))
        suite = suite if suite is not None else make_synthetic_suite(size, seed)
        evolve(
            suite,
            ProtocolConfig(rounds=rounds, seed=seed),
            out=path,
            suite_ref=f"synthetic:{size}:seed={seed}",
            log=log,
        )
    return path


def run_text(run: str | Path) -> str:
    """The printable end-of-run summary (funnel, gate, deployed artifacts, test deltas)."""
    from tsevo.evolve.report import run_summary, summary_text

    return summary_text(run_summary(run))


def load_suite(run: str | Path) -> Suite:
    """The suite a run answered (``suite.parquet``)."""
    from tsevo.data import Suite

    return Suite.load(Path(run) / "suite.parquet")


def solver_table(suite: Suite) -> Any:
    """Oracle, naive and chance accuracy per synthetic family and difficulty (the suite's ceiling).

    Columns: ``family, task, difficulty, n, oracle, naive, chance``.
    """
    from tsevo.data.synthetic.suite import solver_report

    return solver_report(suite)


def suite_metrics(suite: Suite) -> dict[str, Any]:
    """Questions, tasks and split sizes of a suite (for :func:`record_metrics`)."""
    splits = dict(suite.splits)
    return {
        "questions": len(suite),
        "tasks": len(suite.tasks),
        **{sp: sum(v == sp for v in splits.values()) for sp in ("train", "val", "test")},
    }


def run_metrics(run: str | Path) -> dict[str, Any]:
    """Headline numbers of a run's last round: status, gate, deployed artifacts, test accuracy."""
    from tsevo.analysis import gate_df

    store = RunStore.open(run)
    rounds = rounds_in(store)
    if not rounds:
        return {"rounds": 0}
    r = rounds[-1]
    d = store.read_json(f"rounds/r{r}/round.json")
    gates = gate_df(store)
    out: dict[str, Any] = {"rounds": len(rounds), "status": d["status"]}
    if len(gates):
        g = gates.to_dict("records")[-1]
        out.update(
            gate_path=g["path"],
            h=int(g["h"]),
            m=int(g["m"]),
            n=int(g["n"]),
            delta=round(float(g["delta"]), 6),
            delta_lb=round(float(g["delta_lb"]), 6),
        )
    out["deployed"] = len(d.get("deployed") or [])
    if store.exists(f"rounds/r{r}/test.json"):
        allrow = store.read_json(f"rounds/r{r}/test.json")["tasks"][-1]
        out.update(test_before=allrow["before"], test_after=allrow["after"])
    return out


def show(fig: Any) -> None:
    """Display a matplotlib figure as a PNG (works with any backend, no pyplot state)."""
    import io

    from IPython.display import Image, display

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    display(Image(buf.getvalue()))


# --------------------------------------------------------------------------------------- data
def _examples(suite: Suite, n: int, split: str) -> list[Question]:
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

    qs = _examples(suite, n, split)
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


# --------------------------------------------------------------------------------------- base pass
def base_pass_table(run: str | Path, round_: int = 1) -> Any:
    """Per task: train questions, accuracy of the base pass, and the error partition.

    Columns: ``task, n, correct, accuracy, errors, errors_tool_fired, errors_no_tool``
    (plus an ``ALL`` row).
    """
    import pandas as pd

    df = RunStore.open(run).read_parquet(f"rounds/r{round_}/base_pass.parquet")
    rows = []
    for task, g in [*sorted(df.groupby("task")), ("ALL", df)]:
        wrong = g[~g["correct"].astype(bool)]
        rows.append(
            {
                "task": task,
                "n": len(g),
                "correct": int(g["correct"].sum()),
                "accuracy": float(g["correct"].mean()) if len(g) else float("nan"),
                "errors": len(wrong),
                "errors_tool_fired": int(wrong["tool_fired"].sum()),
                "errors_no_tool": int((~wrong["tool_fired"].astype(bool)).sum()),
            }
        )
    return pd.DataFrame(rows)


def accuracy_figure(table: Any, *, value: str = "accuracy", title: str = "") -> Any:
    """A seaborn bar chart of one column of a per-task table (the ``ALL`` row excluded)."""
    import seaborn as sns
    from matplotlib.figure import Figure

    data = table[table["task"] != "ALL"]
    fig = Figure(figsize=(7.0, 0.3 * len(data) + 1.0), layout="constrained")
    ax = fig.subplots()
    sns.barplot(data=data, y="task", x=value, ax=ax, color="C0")
    ax.set_title(title, fontsize=9)
    return fig


def buckets_table(run: str | Path, round_: int = 1, max_members: int = 6) -> Any:
    """The round's failure buckets: side, label, criteria, size, support/held-out split, members.

    Columns: ``bucket, side, label, criteria, members, support, held_out, planned, tasks,
    first_members``.
    """
    import pandas as pd

    store = RunStore.open(run)
    b = store.read_json(f"rounds/r{round_}/buckets.json")
    fails = failures_df(store, round_=round_)
    rows = []
    for bk in b["buckets"]:
        mine = fails[fails["bucket"] == bk["id"]]
        rows.append(
            {
                "bucket": bk["id"],
                "side": bk["side"],
                "label": bk["category"]["label"],
                "criteria": bk["category"].get("criteria", ""),
                "members": len(bk["members"]),
                "support": int((mine["role"] == "support").sum()),
                "held_out": int((mine["role"] == "held_out").sum()),
                "planned": bool(mine["planned"].any()) if len(mine) else False,
                "tasks": ", ".join(
                    f"{t} ({n})" for t, n in mine["task"].value_counts().sort_index().items()
                ),
                "first_members": ", ".join(bk["members"][:max_members]),
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------- planning
def contracts_table(run: str | Path, round_: int = 1) -> Any:
    """The planner's contract cards, one row per bucket.

    Columns: ``bucket, action, kind, failure_type, measurement, signature, rule, focus,
    success_criterion, calibration``.
    """
    import pandas as pd

    store = RunStore.open(run)
    rel = f"rounds/r{round_}/contracts.json"
    cards = store.read_json(rel)["cards"] if store.exists(rel) else []
    rows = []
    for c in cards:
        ranked = (c.get("plan") or {}).get("ranked") or []
        rows.append(
            {
                "bucket": c["bucket_id"],
                "action": c.get("action", ""),
                "kind": c.get("artifact_kind", ""),
                "failure_type": c.get("failure_type", ""),
                "measurement": c["contract"].get("measurement", ""),
                "signature": ", ".join(c["contract"].get("signature", [])),
                "rule": ranked[0]["rule"]["kind"] if ranked else "",
                "focus": c.get("focus", ""),
                "success_criterion": c["contract"].get("success_criterion", ""),
                "calibration": c["contract"].get("calibration") is not None,
            }
        )
    return pd.DataFrame(rows)


def attempts_table(run: str | Path, round_: int = 1) -> Any:
    """Every synthesis attempt with its checks and prefilter outcome (``prefilter.parquet``).

    Columns: ``group, attempt, tool_id, measurement, checked, violations, n_held_out, n_probe,
    repairs, harms, repair_rate, exec_errors, tool_runs, outcome, passed, survivor``.
    """
    return RunStore.open(run).read_parquet(f"rounds/r{round_}/prefilter.parquet")


def candidate_source(run: str | Path, tool_id: str, round_: int = 1) -> str:
    """The generated source of one candidate (``candidates/<id>/tool.py``)."""
    return RunStore.open(run).read_text(f"rounds/r{round_}/candidates/{tool_id}/tool.py")


def show_sources(run: str | Path, round_: int = 1, n: int = 2) -> list[str]:
    """Display the generated source of the first ``n`` surviving candidates, highlighted.

    Returns:
        The candidate ids shown (all attempts when no candidate survived the prefilter).
    """
    from IPython.display import HTML, display
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    att = attempts_table(run, round_)
    ids = [str(t) for t in att[att["survivor"].astype(bool)]["tool_id"]] or [
        str(t) for t in att["tool_id"]
    ]
    for tid in ids[:n]:
        src = candidate_source(run, tid, round_)
        body = highlight(src, PythonLexer(), HtmlFormatter(noclasses=True))
        display(HTML(f"<b>{tid}</b>{body}"))
    return ids[:n]


def calibration_table(run: str | Path, round_: int = 1) -> Any:
    """Candidates whose synthesis asked for a calibration tree, with the stored record.

    Columns: ``tool_id, accepted, balanced_accuracy, n_rows, classes, reason, calibration_json``
    (empty when no candidate was calibrated, e.g. on the tiny preset where no class reaches the
    16 train rows a tree needs).
    """
    import pandas as pd

    store = RunStore.open(run)
    root = store.path(f"rounds/r{round_}/candidates")
    rows = []
    for meta in sorted(root.glob("*/meta.json")) if root.is_dir() else []:
        d = json.loads(meta.read_text(encoding="utf-8"))
        cal = d["tool"].get("calibration") or d["attempt"].get("calibration")
        if not cal:
            continue
        rows.append(
            {
                "tool_id": d["tool"]["id"],
                "accepted": bool(cal.get("accepted")),
                "balanced_accuracy": cal.get("balanced_accuracy"),
                "n_rows": cal.get("n_rows"),
                "classes": list(cal.get("classes", [])),
                "reason": cal.get("reason", ""),
                "calibration_json": json.dumps(cal, sort_keys=True),
            }
        )
    cols = [
        "tool_id",
        "accepted",
        "balanced_accuracy",
        "n_rows",
        "classes",
        "reason",
        "calibration_json",
    ]
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------------------- gate
def repairs_table(run: str | Path, round_: int = 1) -> Any:
    """Attributable repairs found by the prefilter: one row per (held-out error, candidate).

    Columns: ``qid, task, bucket, label, candidate``.
    """
    import pandas as pd

    f = failures_df(run, round_=round_)
    rows = [
        {
            "qid": r.qid,
            "task": r.task,
            "bucket": r.bucket,
            "label": r.label,
            "candidate": cand,
        }
        for r in f.itertuples(index=False)
        for cand in r.repaired_by
    ]
    return pd.DataFrame(rows, columns=["qid", "task", "bucket", "label", "candidate"])


def paired_rows(run: str | Path, round_: int = 1, *, changed_only: bool = True) -> Any:
    """The gate's paired validation rows (``val_paired.parquet``), by default only the flips.

    Columns: ``qid, task, base_answer, cand_answer, base_correct, cand_correct, flip, tools_ok,
    replaced_by, tool_errors``.
    """
    df = RunStore.open(run).read_parquet(f"rounds/r{round_}/val_paired.parquet")
    if changed_only:
        df = df[df["flip"].isin(["helped", "harmed"])]
    return df.reset_index(drop=True)


def paired_table(run: str | Path, round_: int = 1) -> Any:
    """The gate's paired validation run summarized: flip counts per task (plus ``ALL``).

    Columns: ``task, n, helped, harmed, unchanged-right, unchanged-wrong``.
    """
    import pandas as pd

    df = RunStore.open(run).read_parquet(f"rounds/r{round_}/val_paired.parquet")
    classes = ["helped", "harmed", "unchanged-right", "unchanged-wrong"]
    rows = []
    for task, g in [*sorted(df.groupby("task")), ("ALL", df)]:
        row: dict[str, Any] = {"task": task, "n": len(g)}
        for c in classes:
            row[c] = int((g["flip"] == c).sum())
        rows.append(row)
    return pd.DataFrame(rows, columns=["task", "n", *classes])


PRUNE_COLUMNS = [
    "round",
    "update",
    "helped",
    "harmed",
    "harmful",
    "removed",
    "reason",
    "outcome",
    "accepted",
]


def prune_df(run: str | Path | RunStore) -> Any:
    """The one-shot attribution prune of every round that ran one, one row per update.

    Columns: ``round, update, helped (h_u), harmed (m_u), harmful (clearly harmful), removed
    (harmful or a dependent), reason, outcome (the prune's outcome line), accepted (the pruned
    library deployed)``. Empty when no gate failed.
    """
    import pandas as pd

    store = run if isinstance(run, RunStore) else RunStore.open(run)
    rows = []
    for r in rounds_in(store):
        d = store.read_json(f"rounds/r{r}/round.json").get("pruned")
        if not d:
            continue
        plan = d["plan"]
        by_update = d["attribution"]["by_update"]
        for u in sorted(set(by_update) | set(plan.get("reasons", {}))):
            c = by_update.get(u, {"helped": 0, "harmed": 0})
            rows.append(
                {
                    "round": r,
                    "update": u,
                    "helped": int(c["helped"]),
                    "harmed": int(c["harmed"]),
                    "harmful": u in plan.get("harmful", []),
                    "removed": u in plan.get("removed", []),
                    "reason": plan.get("reasons", {}).get(u, ""),
                    "outcome": d.get("outcome", ""),
                    "accepted": bool(d.get("accepted")),
                }
            )
    return pd.DataFrame(rows, columns=PRUNE_COLUMNS)


# --------------------------------------------------------------------------------------- deploy
def chain_table(run: str | Path) -> Any:
    """The deployed chain: one row per artifact of every stage (root stage 0 first).

    Columns: ``stage, id, kind, description, measurement, target``.
    """
    import pandas as pd

    from tsevo.library.library import Library

    cols = ["stage", "id", "kind", "description", "measurement", "target"]
    lib_dir = Path(run) / "library"
    if not (lib_dir / "library.json").exists():
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(Library.load(lib_dir).summary(), columns=cols)


def test_deltas(run: str | Path, round_: int = 1) -> Any:
    """The round's report-only test table (``test.json``): accuracy before/after per task.

    Columns: ``task, n, before, after, delta, helped, harmed`` (plus an ``ALL`` row).
    """
    import pandas as pd

    t = RunStore.open(run).read_json(f"rounds/r{round_}/test.json")
    return pd.DataFrame(
        t["tasks"], columns=["task", "n", "before", "after", "delta", "helped", "harmed"]
    )


def changed_flips(run: str | Path, round_: int = 1, split: str = "test") -> Any:
    """Rows of :func:`tsevo.analysis.flips_df` whose correctness changed (helped or harmed)."""
    from tsevo.analysis import flips_df

    f = flips_df(run, split=split, round_=round_)
    cols = ["qid", "task", "flip", "gold", "base_answer", "final_answer", "replaced_by", "reason"]
    return f[f["flip"].isin(["helped", "harmed"])][cols].reset_index(drop=True)


def deltas_figure(table: Any) -> Any:
    """Seaborn bars of the per-task report-only test delta (percentage points)."""
    data = table.assign(delta_pp=100 * table["delta"].astype(float))
    return accuracy_figure(data, value="delta_pp", title="report-only test delta (pp)")


# --------------------------------------------------------------------------------------- study
def compare_libraries(
    run: str | Path, *, split: str = "test", reference_root: str = "expert"
) -> Any:
    """Answer one split of the run's suite with three agents and tabulate accuracy per family.

    The agents are the base agent (empty library), the run's evolved library and the
    ``reference_root`` library (:func:`tsevo.library.roots.make_root`). Reporting only: nothing here
    feeds a decision.

    Columns: ``agent (base | evolved | <reference_root>), family, n, correct, accuracy``
    (plus an ``ALL`` family per agent).
    """
    import pandas as pd

    from tsevo.agent import Agent
    from tsevo.library.library import Library
    from tsevo.library.roots import make_root
    from tsevo.library.sandbox import Sandbox

    suite = load_suite(run)
    qs = list(suite.subset(split))
    libs = {
        "base": Library(),
        "evolved": Library.load(Path(run) / "library"),
        reference_root: make_root(reference_root),
    }
    rows = []
    sandbox = Sandbox()
    try:
        for name, lib in libs.items():
            records = Agent(lib, executor=sandbox).answer_many(qs)
            fam = [str(q.metadata.get("family", q.task)) for q in qs]
            ok = [bool(r.correct) for r in records]
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
    finally:
        sandbox.close()
    return pd.DataFrame(rows, columns=["agent", "family", "n", "correct", "accuracy"])


def comparison_pivot(table: Any) -> Any:
    """Accuracy per family (rows) and agent (columns) from :func:`compare_libraries`."""
    return table.pivot(index="family", columns="agent", values="accuracy")


def comparison_figure(table: Any) -> Any:
    """Seaborn grouped bars: accuracy per family for each agent of :func:`compare_libraries`."""
    import seaborn as sns
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0, 3.6), layout="constrained")
    ax = fig.subplots()
    sns.barplot(data=table, x="family", y="accuracy", hue="agent", ax=ax)
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_ylim(0, 1)
    ax.set_title("accuracy per family (report only)", fontsize=9)
    return fig


# --------------------------------------------------------------------------------------- metrics
def record_metrics(run: str | Path, name: str, metrics: Mapping[str, Any]) -> Path:
    """Write a notebook's metrics as small JSON in the run folder.

    Args:
        run: Run folder.
        name: Notebook stem (file ``notebook_metrics/<name>.json``).
        metrics: JSON-friendly numbers and short strings.

    Returns:
        The written file.
    """
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"bad metrics name {name!r}")
    return RunStore.open(run).write_json(f"notebook_metrics/{name}.json", dict(metrics))


def read_metrics(run: str | Path, name: str) -> dict[str, Any]:
    """Metrics written by :func:`record_metrics`."""
    out: dict[str, Any] = RunStore.open(run).read_json(f"notebook_metrics/{name}.json")
    return out


# --------------------------------------------------------------------------------------- papermill
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
    import time

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


def default_notebooks() -> list[Path]:
    """The repository's notebooks, in order (``notebooks/*.ipynb`` next to the package)."""
    root = Path(__file__).resolve().parents[1] / "notebooks"
    return sorted(root.glob("[0-9]*.ipynb"))
