"""A run's summary: everything the end-of-run text shows, as data and as text; headline metrics."""

from __future__ import annotations

from typing import Any

from tsevo.data import Suite
from tsevo.roles.builtin.composite import composite_branches
from tsevo.roles.llm.accounting import Accounting

from ._runs import Run, library_or_none, open_run, rounds_in
from .gate import gate_df
from .kinds import kinds_table

__all__ = [
    "brief_measurement",
    "run_metrics",
    "run_summary",
    "run_text",
    "suite_metrics",
    "summary_text",
]

_FUNNEL = [
    ("errors", "train errors"),
    ("buckets", "buckets"),
    ("contracts", "contracts"),
    ("groups", "work groups"),
    ("attempts", "synthesis attempts"),
    ("checked", "passed checks"),
    ("prefilter_passed", "passed prefilter"),
    ("survivors", "candidates to gate"),
    ("deployed", "deployed artifacts"),
    ("gate_path", "gate path"),
]
_GATE_KEYS = (
    "path",
    "passed",
    "invalid",
    "n",
    "n_attempted",
    "h",
    "m",
    "delta",
    "delta_lb",
    "error_rate",
    "reasons",
)


def run_summary(run: Run) -> dict[str, Any]:
    """Everything the end-of-run summary shows, as JSON-friendly data.

    Keys: ``run``, ``config``, ``manifest``, ``rounds`` (per round: status, reason, funnel, gate,
    final gate, prune outcome, deployed artifacts, the question kinds of its composite plans,
    per-task report-only test table, diagnostic test, timings, LLM accounting), ``library`` (the
    deployed chain's artifacts) and ``llm`` (the whole run's LLM accounting, or None).
    """
    store = open_run(run)
    layout = store.layout
    rounds = []
    for r in rounds_in(store):
        paths = layout.round(r)
        d = store.read_json(paths.summary)
        deployed = []
        lib = library_or_none(paths.library) if d["status"] == "accepted" else None
        if lib is not None:
            for t in lib.stages[-1].tools:
                deployed.append(
                    {
                        "id": t.id,
                        "kind": t.kind,
                        "measurement": t.contract.measurement,
                        "calibrated": t.calibration is not None,
                        "tasks": list(t.scope.tasks),
                    }
                )
        gate = d.get("final_gate") or d.get("gate")
        llm = store.read_json_or(paths.llm_accounting)
        kinds = kinds_table(store, r)
        rounds.append(
            {
                "round": r,
                "status": d["status"],
                "reason": d["reason"],
                "funnel": d.get("funnel", {}),
                "gate": _gate_brief(d.get("gate")),
                "final_gate": _gate_brief(gate),
                "prune": (d.get("pruned") or {}).get("outcome"),
                "deployed": deployed,
                # question kinds recovered from wording in composite plans (their templates), and
                # how many of them a planned branch serves (analysis.kinds_table has each)
                "kinds": {
                    "recovered": int(kinds["template"].nunique()),
                    "served": int(kinds.loc[kinds["served"], "template"].nunique()),
                },
                "test": store.read_json_or(paths.test),
                "timings": store.read_json_or(paths.timings, {}),
                "llm": llm["accounting"] if llm is not None else None,
            }
        )
    lib = library_or_none(layout.library)
    acc = store.read_json_or(layout.llm_accounting)
    llm_total = (
        None
        if acc is None
        else {"total": acc.get("total", {}), "sessions": len(acc.get("sessions", []))}
    )
    return {
        "run": str(store.root),
        "config": store.config,
        "manifest": store.manifest,
        "rounds": rounds,
        "library": lib.summary() if lib is not None else [],
        "llm": llm_total,
    }


def _gate_brief(g: dict[str, Any] | None) -> dict[str, Any] | None:
    if not g:
        return None
    return {k: g.get(k) for k in _GATE_KEYS}


def brief_measurement(measurement: str, branches: int = 3) -> str:
    """A contract measurement short enough for one line of a report.

    A composite tool's measurement is its whole branch list, each branch its vote's members joined
    by ``~`` (:func:`~tsevo.roles.builtin.composite.composite_measurement`), which is its identity
    but runs to thousands of characters. Shown here: the number of branches, the first
    ``branches`` branches' own measurements with a count of their peers, and how many more there
    are. Any other measurement is returned as it is.
    """
    parts = composite_branches(measurement)
    if parts is None:
        return measurement
    shown = []
    for members in parts[:branches]:
        n = len(members) - 1
        shown.append(members[0] + (f" (+{n} peer{'s' * (n > 1)})" if n else ""))
    more = f"; … {len(parts) - branches} more" if len(parts) > branches else ""
    noun = "branch" if len(parts) == 1 else "branches"
    return f"composite of {len(parts)} {noun}: " + "; ".join(shown) + more


def _pct(x: float | None) -> str:
    return "   -  " if x is None else f"{100 * x:6.1f}"


def summary_text(summary: dict[str, Any]) -> str:
    """Printable summary: funnel, gate decision and report-only test deltas per task, per round."""
    lines = [f"tsevo run {summary['run']}"]
    abl = (summary.get("manifest") or {}).get("ablation") or {}
    if abl.get("name", "full") != "full":  # the protocol itself prints nothing here
        lines.append(f"ablation: {abl.get('label', abl['name'])}")
    base = (summary.get("manifest") or {}).get("baseline") or {}
    if base:  # an answering baseline (the protocol's answerer prints nothing)
        lines.append(f"baseline: {base['name']} (answer: {base['answer']})")
    for rd in summary["rounds"]:
        lines.append("")
        lines.append(f"== round {rd['round']}: {rd['status'].upper()} — {rd['reason']}")
        f = rd["funnel"]
        lines.append("funnel: " + " → ".join(f"{label} {f[k]}" for k, label in _FUNNEL if k in f))
        g = rd["final_gate"]
        if g:
            lb = "-" if g["delta_lb"] is None else f"{g['delta_lb']:+.4f}"
            lines.append(
                f"gate ({g['path']}): helped {g['h']}, harmed {g['m']}, n {g['n']} of {g['n_attempted']}, "
                f"delta {g['delta']:+.4f}, delta_lb {lb}, error rate {g['error_rate']:.3f}"
            )
        if rd["prune"]:
            lines.append(f"prune: {rd['prune']}")
        kinds = rd.get("kinds") or {}
        if kinds.get("recovered"):
            lines.append(
                f"question kinds in composite plans: {kinds['recovered']} recovered from wording, "
                f"{kinds['served']} given a branch by the planner (analysis.kinds_table)"
            )
        for t in rd["deployed"]:
            cal = " (calibrated)" if t["calibrated"] else ""
            lines.append(f"  + {t['id']} [{t['kind']}] {brief_measurement(t['measurement'])}{cal}")
        lines += _test_lines(rd["test"])
        if rd.get("llm"):
            lines.append(
                "LLM accounting (per role: calls, cache hits, tokens, retries, invalid replies):"
            )
            lines += ["  " + x for x in _llm_lines(rd["llm"])]
        if rd["timings"]:
            lines.append(
                "timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in rd["timings"].items())
            )
    llm = summary.get("llm")
    if llm and llm.get("total"):
        lines.append("")
        lines.append(f"LLM accounting, whole run ({llm['sessions']} session(s)):")
        lines += ["  " + x for x in _llm_lines(llm["total"])]
    return "\n".join(lines)


def _test_lines(test: dict[str, Any] | None) -> list[str]:
    """The report-only test table of one round (and its diagnostic line), as text."""
    if not test:
        return []
    lines = ["report-only test (accuracy %, before → after):"]
    lines.append(
        f"  {'task':28s} {'n':>5s} {'before':>7s} {'after':>7s} {'delta':>7s} {'helped':>7s} {'harmed':>7s}"
    )
    for row in test["tasks"]:
        d = "   -  " if row["delta"] is None else f"{100 * row['delta']:+6.1f}"
        lines.append(
            f"  {row['task']:28s} {row['n']:5d} {_pct(row['before'])}  {_pct(row['after'])}  {d}  "
            f"{row['helped']:6d}  {row['harmed']:6d}"
        )
    diag = test.get("diagnostic")
    if diag:
        allrow = diag["tasks"][-1]
        lines.append(
            f"  diagnostic (rejected candidate, used in no decision): delta {100 * allrow['delta']:+.1f} "
            f"(helped {allrow['helped']}, harmed {allrow['harmed']})"
        )
    return lines


def _llm_lines(acc: dict[str, Any]) -> list[str]:
    """One line per role of an LLM accounting dict (``{role: {stage: counters}}``)."""
    return Accounting.from_dict(acc).summary().splitlines()


def run_text(run: Run) -> str:
    """The printable end-of-run summary (funnel, gate, deployed artifacts, test deltas)."""
    return summary_text(run_summary(run))


def run_metrics(run: Run) -> dict[str, Any]:
    """Headline numbers of a run's last round: status, gate, deployed artifacts, test accuracy."""
    store = open_run(run)
    rounds = rounds_in(store)
    if not rounds:
        return {"rounds": 0}
    paths = store.layout.round(rounds[-1])
    d = store.read_json(paths.summary)
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
    test = store.read_json_or(paths.test)
    if test is not None:
        allrow = test["tasks"][-1]
        out.update(test_before=allrow["before"], test_after=allrow["after"])
    return out


def suite_metrics(suite: Suite) -> dict[str, Any]:
    """Questions, tasks and split sizes of a suite (a notebook's metrics)."""
    splits = dict(suite.splits)
    return {
        "questions": len(suite),
        "tasks": len(suite.tasks),
        **{sp: sum(v == sp for v in splits.values()) for sp in ("train", "val", "test")},
    }
