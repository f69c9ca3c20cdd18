"""Round summaries read back from the run store: a printable text and the same as JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tsevo.store import RunStore

__all__ = ["run_summary", "summary_text"]

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


def run_summary(run: str | Path | RunStore) -> dict[str, Any]:
    """Everything the end-of-run summary shows, as JSON-friendly data.

    Keys: ``run``, ``config``, ``manifest``, ``rounds`` (per round: status, reason, funnel, gate,
    final gate, prune outcome, deployed artifacts, per-task report-only test table, diagnostic test,
    timings) and ``library`` (the deployed chain's artifacts).
    """
    store = run if isinstance(run, RunStore) else RunStore.open(run)
    rounds = []
    r = 1
    while store.exists(f"rounds/r{r}/round.json"):
        d = store.read_json(f"rounds/r{r}/round.json")
        test = (
            store.read_json(f"rounds/r{r}/test.json")
            if store.exists(f"rounds/r{r}/test.json")
            else None
        )
        timings = (
            store.read_json(f"rounds/r{r}/timings.json")
            if store.exists(f"rounds/r{r}/timings.json")
            else {}
        )
        deployed = []
        if d["status"] == "accepted" and store.exists(f"rounds/r{r}/library"):
            from tsevo.library.library import Library

            lib = Library.load(store.path(f"rounds/r{r}/library"))
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
        llm_rel = f"rounds/r{r}/llm_accounting.json"
        llm = store.read_json(llm_rel)["accounting"] if store.exists(llm_rel) else None
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
                "test": test,
                "timings": timings,
                "llm": llm,
            }
        )
        r += 1
    library = []
    if store.exists("library/library.json"):
        from tsevo.library.library import Library

        lib = Library.load(store.path("library"))
        library = lib.summary()
    llm_total = None
    if store.exists("llm/accounting.json"):
        acc = store.read_json("llm/accounting.json")
        llm_total = {"total": acc.get("total", {}), "sessions": len(acc.get("sessions", []))}
    return {
        "run": str(store.root),
        "config": store.config,
        "manifest": store.manifest,
        "rounds": rounds,
        "library": library,
        "llm": llm_total,
    }


def _gate_brief(g: dict[str, Any] | None) -> dict[str, Any] | None:
    if not g:
        return None
    keys = (
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
    return {k: g.get(k) for k in keys}


def _pct(x: float | None) -> str:
    return "   -  " if x is None else f"{100 * x:6.1f}"


def summary_text(summary: dict[str, Any]) -> str:
    """Printable summary: funnel, gate decision and report-only test deltas per task, per round."""
    lines = [f"tsevo run {summary['run']}"]
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
        for t in rd["deployed"]:
            cal = " (calibrated)" if t["calibrated"] else ""
            lines.append(f"  + {t['id']} [{t['kind']}] {t['measurement']}{cal}")
        test = rd["test"]
        if test:
            lines.append("report-only test (accuracy %, before → after):")
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


def _llm_lines(acc: dict[str, Any]) -> list[str]:
    """One line per role of an LLM accounting dict (``{role: {stage: counters}}``)."""
    from tsevo.roles.llm.accounting import Accounting

    return Accounting.from_dict(acc).summary().splitlines()
