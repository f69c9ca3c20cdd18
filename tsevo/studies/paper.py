"""The paper's studies measured on one run: the tidy rows each study notebook records.

Every study cell is one run folder (``tsevo study run`` gives each cell its own); these functions
turn a run into the rows its study aggregates across cells (:mod:`tsevo.studies.results`):

* :func:`rounds_table`: one row per round (gate decision on validation, deployed tools, the
  report-only test before and after, its flips, and for a rejected round the diagnostic delta of
  the best rejected candidate). The ablation, gate-calibration and multi-round studies read it.
* :func:`run_outcome`: where the run ends on test against its own base (the ablation study's
  row).
* :func:`main_table`: accuracy per task of several *methods* on one split: the base agent, the
  evolved library, the hand-written roots (``expert``, ``chronos``) and, on an LLM answerer, the
  answering baselines (``self-consistency``, ``self-refine``, ``4-shot ICL``).
* :func:`transfer_table`: the run's evolved library installed into another role set (another
  backbone, or the builtin library into an LLM), against that role set's own base agent.
* :func:`ablation_directions` and :func:`calibration_counts`: the paper's Obs. 5/6 and Obs. 9
  checks over a study frame, reported as they come out.

Everything here answers the test split for reporting only; nothing feeds a decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tsevo.analysis import rounds_in, run_suite
from tsevo.data import Question, Suite
from tsevo.evolve import answer_libraries
from tsevo.evolve.baseline import PAPER_BASELINES, paper_baseline
from tsevo.evolve.baseline_eval import eval_baseline
from tsevo.library.library import Library
from tsevo.library.roots import make_root
from tsevo.roles import RoleSet
from tsevo.store import RunLayout, RunStore

__all__ = [
    "LIBRARY_METHODS",
    "MAIN_COLUMNS",
    "ROUND_COLUMNS",
    "TRANSFER_COLUMNS",
    "ablation_directions",
    "calibration_counts",
    "main_table",
    "rounds_table",
    "run_outcome",
    "transfer_table",
]

ROUND_COLUMNS = [
    "round", "status", "gate_path", "passed", "h", "m", "n", "delta", "delta_lb", "deployed",
    "tools", "test_n", "test_before", "test_after", "test_delta", "test_helped", "test_harmed",
    "diagnostic_delta",
]  # fmt: skip
MAIN_COLUMNS = ["method", "kind", "task", "n", "correct", "accuracy"]
TRANSFER_COLUMNS = ["task", "n", "base", "transferred", "delta", "helped", "harmed"]
LIBRARY_METHODS = ("base", "evolved", "expert", "chronos")
"""Methods answered by one agent with different libraries (every backend)."""


def _all_row(test: dict[str, Any] | None) -> dict[str, Any] | None:
    if not test or not test.get("tasks"):
        return None
    row: dict[str, Any] = test["tasks"][-1]
    return row


def rounds_table(run: str | Path) -> pd.DataFrame:
    """One row per round of the run (columns :data:`ROUND_COLUMNS`).

    ``delta``/``delta_lb``/``h``/``m``/``n`` are the final gate's validation evidence; ``tools`` is
    the number of tools in the library after the round (every stage); the ``test_*`` columns are
    the round's report-only test (before: the incoming library, after: the library the round
    left); ``diagnostic_delta`` is what the best rejected candidate scored on test, for rejected
    rounds only (used in no decision).
    """
    store = RunStore.open(run)
    rows = []
    for r in rounds_in(store):
        paths = store.layout.round(r)
        d = store.read_json(paths.summary)
        g = d.get("final_gate") or d.get("gate") or {}
        test = store.read_json_or(paths.test)
        allrow = _all_row(test) or {}
        diag = _all_row((test or {}).get("diagnostic"))
        lib_path = paths.library if d["status"] == "accepted" else None
        tools = None
        if lib_path is not None and (lib_path / "library.json").exists():
            tools = sum(len(s.tools) for s in Library.load(lib_path).stages)
        rows.append(
            {
                "round": r,
                "status": d["status"],
                "gate_path": g.get("path"),
                "passed": g.get("passed"),
                "h": g.get("h"),
                "m": g.get("m"),
                "n": g.get("n"),
                "delta": g.get("delta"),
                "delta_lb": g.get("delta_lb"),
                "deployed": len(d.get("deployed") or []),
                "tools": tools,
                "test_n": allrow.get("n"),
                "test_before": allrow.get("before"),
                "test_after": allrow.get("after"),
                "test_delta": allrow.get("delta"),
                "test_helped": allrow.get("helped"),
                "test_harmed": allrow.get("harmed"),
                "diagnostic_delta": diag.get("delta") if diag else None,
            }
        )
    frame = pd.DataFrame(rows, columns=ROUND_COLUMNS)
    # The library a rejected round leaves is the incoming one: carry the count forward.
    frame["tools"] = frame["tools"].ffill().fillna(0).astype(int)
    return frame


def run_outcome(run: str | Path) -> dict[str, Any]:
    """Where the run ends on the report-only test, against its own base agent.

    ``base``: the first round's incoming accuracy; ``final``: the accuracy of the library the run
    ends with (a rejected round leaves the incoming one); ``gain``: ``final - base``; ``helped`` /
    ``harmed``: test answers the accepted rounds fixed / broke (summed over rounds: exact for one
    round); ``label``: the run's ablation as its manifest names it (it says when the Chronos root
    ran on the statistical fallback); ``status``, the gate's ``delta``/``delta_lb`` and ``tools`` of the last round.
    """
    t = rounds_table(run)
    if t.empty:
        raise ValueError(f"{run}: the run has no finished round")
    t = t.astype(object).where(t.notna(), None)
    last = t.iloc[-1]
    accepted = t[t["status"] == "accepted"]
    final = last["test_after"] if last["status"] == "accepted" else last["test_before"]
    base = t.iloc[0]["test_before"]
    ablation = RunStore.open(run).manifest.get("ablation") or {}
    return {
        "label": ablation.get("label", "full"),
        "rounds": len(t),
        "status": last["status"],
        "gate_path": last["gate_path"],
        "delta": last["delta"],
        "delta_lb": last["delta_lb"],
        "tools": int(last["tools"]),
        "base": base,
        "final": final,
        "gain": None if base is None or final is None else final - base,
        "helped": int(sum(v or 0 for v in accepted["test_helped"])),
        "harmed": int(sum(v or 0 for v in accepted["test_harmed"])),
    }


def _split_suite(run: str | Path, split: str) -> tuple[Suite, list[Question]]:
    """The run's suite and the questions of ``split`` (val or test only)."""
    if split not in ("val", "test"):
        raise ValueError(
            f"a study answers val or test, not {split!r} (train is what evolution read)"
        )
    suite = run_suite(run)
    return suite, list(suite.subset(split))


def main_table(
    run: str | Path,
    *,
    roles: RoleSet | None = None,
    methods: Sequence[str] = LIBRARY_METHODS,
    split: str = "test",
    seed: int | None = None,
) -> pd.DataFrame:
    """Accuracy per task (and ``ALL``) of each method on one split of the run's suite.

    Library methods (:data:`LIBRARY_METHODS`) answer with one agent (``roles``' answerer and
    reviewer, default builtin) and different libraries: ``base`` (empty), ``evolved`` (the run's
    library), ``expert`` and ``chronos`` (the hand-written roots). Answering baselines (names of
    :data:`~tsevo.evolve.baseline.PAPER_BASELINES` other than ``base``) change the base answerer
    of the empty-library agent (:func:`~tsevo.evolve.baseline_eval.eval_baseline`); they need an
    LLM answerer and raise on the builtin one.

    Args:
        run: A finished run folder.
        roles: The role set that answers (default: builtin).
        methods: Method names, in column order.
        split: ``val`` or ``test`` (test: report only).
        seed: Seed of the question views and the few-shot draw (default: the run's protocol seed).

    Returns:
        Columns :data:`MAIN_COLUMNS`; ``kind`` is ``library`` or ``baseline``.

    Raises:
        ValueError: An unknown method, a baseline on the builtin backend, or a train split.
    """
    suite, qs = _split_suite(run, split)
    unknown = [m for m in methods if m not in LIBRARY_METHODS and m not in PAPER_BASELINES]
    if unknown:
        raise ValueError(
            f"unknown method(s) {unknown}; one of {[*LIBRARY_METHODS, *PAPER_BASELINES]}"
        )
    baselines = [m for m in methods if m not in LIBRARY_METHODS]
    if baselines and (roles is None or roles.backend == "builtin"):
        raise ValueError(
            f"{baselines} change an LLM answerer; the builtin answerer is deterministic and reads "
            "no examples, so they have no builtin analogue (drop them or use backend='llm')"
        )
    store = RunStore.open(run)
    if seed is None:
        seed = int(store.config.get("protocol", {}).get("seed", 0))
    libs: dict[str, Library] = {}
    for m in methods:
        if m == "base":
            libs[m] = Library()
        elif m == "evolved":
            libs[m] = Library.load(RunLayout(run).library)
        elif m in ("expert", "chronos"):
            libs[m] = make_root(m)
    records = answer_libraries(
        qs,
        libs,
        answerer=roles.answerer if roles is not None else None,
        reviewer=roles.reviewer if roles is not None else None,
        workers=roles.workers if roles is not None else 1,
    )
    tasks = [q.task for q in qs]
    rows: list[dict[str, Any]] = []
    for m in methods:
        if m in libs:
            ok = [bool(records[m][q.id].correct) for q in qs]
            for t in [*sorted(set(tasks)), "ALL"]:
                sel = [o for o, g in zip(ok, tasks, strict=True) if t in ("ALL", g)]
                rows.append(_main_row(m, "library", t, len(sel), sum(sel)))
            continue
        assert roles is not None
        rep = eval_baseline(
            suite, roles, paper_baseline(m), library=Library(), split=split, seed=seed
        )
        for row in rep["tasks"]:
            n = int(row["n"])
            rows.append(_main_row(m, "baseline", row["task"], n, round(row["baseline"] * n)))
    return pd.DataFrame(rows, columns=MAIN_COLUMNS)


def _main_row(method: str, kind: str, task: str, n: int, correct: int) -> dict[str, Any]:
    return {
        "method": method,
        "kind": kind,
        "task": task,
        "n": n,
        "correct": int(correct),
        "accuracy": correct / n if n else float("nan"),
    }


def transfer_table(
    run: str | Path,
    target: RoleSet,
    *,
    split: str = "test",
) -> pd.DataFrame:
    """The run's evolved library installed into another role set, against its own base agent.

    Both arms answer with ``target``'s answerer and reviewer on the same questions: ``base`` with
    the empty library, ``transferred`` with the run's library (no test data picks anything: the
    library is the one the run's gate admitted).

    Returns:
        Columns :data:`TRANSFER_COLUMNS`, one row per task and ``ALL``; ``helped``/``harmed``
        count the questions the library flipped to right / to wrong.
    """
    _suite, qs = _split_suite(run, split)
    libs = {"base": Library(), "transferred": Library.load(RunLayout(run).library)}
    rec = answer_libraries(
        qs, libs, answerer=target.answerer, reviewer=target.reviewer, workers=target.workers
    )
    rows = []
    tasks = [q.task for q in qs]
    for t in [*sorted(set(tasks)), "ALL"]:
        sel = [q for q, g in zip(qs, tasks, strict=True) if t in ("ALL", g)]
        b = [bool(rec["base"][q.id].correct) for q in sel]
        a = [bool(rec["transferred"][q.id].correct) for q in sel]
        n = len(sel)
        rows.append(
            {
                "task": t,
                "n": n,
                "base": sum(b) / n if n else float("nan"),
                "transferred": sum(a) / n if n else float("nan"),
                "delta": (sum(a) - sum(b)) / n if n else float("nan"),
                "helped": sum(x and not y for x, y in zip(a, b, strict=True)),
                "harmed": sum(y and not x for x, y in zip(a, b, strict=True)),
            }
        )
    return pd.DataFrame(rows, columns=TRANSFER_COLUMNS)


# ------------------------------------------------------------------------------ study checks
def ablation_directions(frame: pd.DataFrame, *, by: Sequence[str] = ("seed",)) -> pd.DataFrame:
    """The paper's Obs. 5 and 6 checked per cell of an ablation study frame.

    ``frame`` has one row per (cell, ablation) with ``ablation``, ``final`` (test accuracy the run
    ends at), ``gain`` (final minus the run's own base), ``helped`` and ``harmed`` (test flips
    against the base agent) and the ``by`` columns naming the cell. Per cell and ablation:

    * ``below_full``: the ablation ends below the full method (Obs. 5 for the switches, Obs. 6 for
      the two roots, which the paper reports below the empty root in every cell);
    * for ``w/o residual chain``, ``fixes_more`` and ``breaks_more``: overwriting fixes more and
      breaks more answers than reviewing does (Obs. 5, Fig. 4b).

    Returns:
        Columns ``*by, ablation, final, full, gap, below_full, fixes_more, breaks_more`` (the last
        two only meaningful for ``w/o residual chain``; ``None`` elsewhere).
    """
    by = list(by)
    rows = []
    for key, cell in frame.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        full = cell[cell["ablation"] == "full"]
        if full.empty:
            continue
        f = full.iloc[0]
        for _, r in cell[cell["ablation"] != "full"].iterrows():
            overwrite = r["ablation"] == "w/o residual chain"
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "ablation": r["ablation"],
                    "final": r["final"],
                    "full": f["final"],
                    "gap": r["final"] - f["final"],
                    "below_full": bool(r["final"] < f["final"]),
                    "fixes_more": bool(r["helped"] > f["helped"]) if overwrite else None,
                    "breaks_more": bool(r["harmed"] > f["harmed"]) if overwrite else None,
                }
            )
    cols = [*by, "ablation", "final", "full", "gap", "below_full", "fixes_more", "breaks_more"]
    return pd.DataFrame(rows, columns=cols)


def calibration_counts(rounds: pd.DataFrame) -> dict[str, Any]:
    """The gate's calibration over many rounds (the paper's Fig. 5b and Obs. 9), as counts.

    ``rounds`` is a frame of :func:`rounds_table` rows (any number of runs). Accepted rounds are
    judged by their report-only test delta, rejected ones by the diagnostic delta of the best
    rejected candidate (when it was measured).

    Returns:
        ``strict`` accepted with δ_lb > 0 and how many of them were test-positive (``> 0``),
        test-negative (``< 0``) and flat; the same for the other acceptance paths
        (``borderline``); rejected rounds and how many of them had a positive diagnostic (the
        gate's conservative misses); and the rounds counted.
    """
    acc = rounds[rounds["status"] == "accepted"]
    strict = acc[acc["gate_path"] == "strict"]
    other = acc[acc["gate_path"] != "strict"]
    rej = rounds[rounds["status"] != "accepted"]
    diag = rej["diagnostic_delta"].dropna()

    def signs(s: pd.Series) -> dict[str, int]:
        s = s.dropna().astype(float)
        return {
            "n": len(s),
            "positive": int((s > 0).sum()),
            "negative": int((s < 0).sum()),
            "flat": int((s == 0).sum()),
        }

    return {
        "rounds": len(rounds),
        "strict": signs(strict["test_delta"]),
        "borderline": signs(other["test_delta"]),
        "rejected": len(rej),
        "rejected_with_diagnostic": len(diag),
        "rejected_diagnostic_positive": int((diag > 0).sum()),
        "every_strict_test_positive": bool(len(strict) and (strict["test_delta"] > 0).all()),
    }
