"""Builtin taxonomy induce + gate on one-round synthetic runs (issue 12's must-show), into JSON.

``python -m tests.bench.taxonomy [--presets default mixed] [--unit event|trace] [--seeds S ...] [--out DIR]``

Per preset and seed: one builtin round (evolved into ``--out``, reused when finished), then
``induce_run`` + ``gate_run`` for each trace source (``base``: the base pass; ``all``: the base
pass and the round's train-side evolution arms), each twice on a fresh copy of the run to check
that the artifacts are byte-identical. Records the codes per axis, the recorded gaps, both κ
(the gating mean pairwise Cohen κ at area level and the macro per-code Fleiss κ), coverage,
status and the wall time of induce + gate. Writes ``runs/bench/taxonomy.json``.

The seeds below were fixed in this file before they were run: :data:`SEEDS` for the trace-level
gate (``--unit trace``), :data:`SEEDS_EVENT` for the event-level gate (the default since the five
phases of design §4.2 landed), fresh when it was first measured.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.bench import git_commit
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.fileio import atomic_write_text
from tsevo.notebook import make_synthetic_suite
from tsevo.taxonomy.gate import GateConfig
from tsevo.taxonomy.runs import gate_run, induce_run

ROOT = Path(__file__).resolve().parents[2]
#: Held-out seeds, fixed before the bench ran.
SEEDS: tuple[int, ...] = (10601, 10613, 10627)
#: Held-out seeds of the event-level gate, fixed before its first bench run.
SEEDS_EVENT: tuple[int, ...] = (12601, 12613, 12629)
SOURCES = ("base", "all")


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _once(run: Path, source: str, work: Path, unit: str) -> tuple[dict[str, Any], str]:
    copy = work / "run"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("taxonomy"))
    t = time.perf_counter()
    induce_run(copy, source=source)
    res = gate_run(copy, config=GateConfig(unit=unit))
    wall = time.perf_counter() - t
    tax = res.taxonomy
    agr = (tax.generation or {}).get("agreement", {})
    row = {
        "codes": dict(sorted(Counter(c.category for c in tax.codes).items())),
        "gaps": [
            f"{g.get('axis')}:{g.get('role') or g.get('area') or '-'}" for g in tax.coverage_gaps
        ],
        "status": tax.status,
        "cohen_area": agr.get("cohen_area"),
        "fleiss_code_macro": agr.get("fleiss_code_macro"),
        "coverage": agr.get("final_coverage"),
        "gate_rounds": len(res.rounds),
        "errors": sum(len(r["errors"]) for r in res.rounds),
        "traces": sum(len(r["traces"]) for r in res.rounds),
        "error_traces": sum(len({e.split("#")[0] for e in r["errors"]}) for r in res.rounds),
        "seconds": round(wall, 1),
    }
    return row, _digest(copy / "taxonomy")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.taxonomy", description=__doc__)
    p.add_argument("--presets", nargs="+", default=["default", "mixed"])
    p.add_argument("--unit", choices=("event", "trace"), default="event")
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "bench" / "taxonomy")
    p.add_argument("--json", type=Path, default=ROOT / "runs" / "bench" / "taxonomy.json")
    args = p.parse_args(argv)
    args.seeds = args.seeds or list(SEEDS_EVENT if args.unit == "event" else SEEDS)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tsevo-taxbench-") as tmp:
        for preset in args.presets:
            for seed in args.seeds:
                run = args.out / preset / str(seed)
                evolve(
                    make_synthetic_suite(preset, seed),
                    config=ProtocolConfig(rounds=1, seed=seed),
                    out=run,
                    log=lambda _: None,
                )
                for source in SOURCES:
                    row, d1 = _once(run, source, Path(tmp), args.unit)
                    _, d2 = _once(run, source, Path(tmp), args.unit)
                    row.update(preset=preset, seed=seed, source=source, identical=d1 == d2)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    summary: dict[str, Any] = {}
    for preset in args.presets:
        for source in SOURCES:
            rs = [r for r in rows if r["preset"] == preset and r["source"] == source]
            secs = [r["seconds"] for r in rs]
            summary[f"{preset}/{source}"] = {
                "runs": len(rs),
                "with_A": sum("A" in r["codes"] for r in rs),
                "with_B": sum("B" in r["codes"] for r in rs),
                "with_C_or_gap": sum(
                    "C" in r["codes"] or any(g.startswith("C:") for g in r["gaps"]) for r in rs
                ),
                "accepted": sum(r["status"] == "accepted" for r in rs),
                "identical_reruns": sum(r["identical"] for r in rs),
                "seconds_mean": round(statistics.mean(secs), 1) if secs else None,
                "seconds_sd": round(statistics.stdev(secs), 1) if len(secs) > 1 else None,
            }
    doc = {
        "bench": "taxonomy",
        "commit": git_commit(),
        "unit": args.unit,
        "seeds": args.seeds,
        "rows": rows,
        "summary": summary,
    }
    atomic_write_text(args.json, json.dumps(doc, indent=1, default=str) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"-> {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
