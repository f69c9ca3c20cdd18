"""Scale: peak memory and time per stage (make + save, load, one round, report) for large suites.

Run with ``python -m tests.bench scale`` (part of ``make bench``), or
``python -m tests.bench.bench_scale CASE ...`` with cases ``1x``, ``4x``, ``16x`` (multiples of
the default synthetic suite, 200 questions per family), ``q20000`` (20,000 questions of at most
512 points) and ``long`` (100 questions whose every series is stretched to 100,000 points by
linear interpolation of a synthetic series: a size test, the gold labels stay those of the
original shapes). Default: ``1x 4x 16x q20000 long``.

Each case runs in its own process. A sampler thread sums the resident memory of that process and
every process below it (the sandbox worker and its children, worker pools) every 0.2 s; the
table shows, per stage, the wall time and the peak of that sum. Stages: ``make`` (generate the
suite and save it as parquet), ``load`` (read it back with ``tsevo.load_suite``), ``round`` (one
builtin round with the report-only test, into a run folder) and ``report`` (``run_summary`` and
the tidy frames the notebooks read). The budget is 24 GB for every case. Each finished case is
also written to ``runs/bench/scale.json`` (keyed by case; a later run of some cases keeps the
others).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from tests.bench import git_commit

SEED = 2027
CASES = ("1x", "4x", "16x", "q20000", "long")
BUDGET_GB = 24.0
OUT = Path(__file__).resolve().parents[2] / "runs" / "bench" / "scale.json"


class _Peak(threading.Thread):
    """Samples the resident memory of this process tree; keeps the peak per stage."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stage = "start"
        self.peaks: dict[str, float] = {}
        self.stop = threading.Event()
        self.me = psutil.Process()

    def rss(self) -> float:
        total = 0
        for p in [self.me, *self.me.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                continue
        return total / 2**30

    def run(self) -> None:
        while not self.stop.is_set():
            gb = self.rss()
            self.peaks[self.stage] = max(self.peaks.get(self.stage, 0.0), gb)
            self.stop.wait(0.2)


def _stretch(suite: Any, points: int) -> Any:
    import numpy as np

    from tsevo.data import Suite

    qs = []
    for q in suite:
        series = {}
        for k, y in q.series.items():
            x = np.linspace(0, len(y) - 1, points)
            series[k] = np.interp(x, np.arange(len(y)), y)
        qs.append(dataclasses.replace(q, series=series))
    return Suite(suite.name + f"-x{points}", qs, suite.splits)


def _suite(case: str) -> Any:
    from tsevo.data.synthetic import make_suite

    if case.endswith("x"):
        return make_suite(200 * int(case[:-1]), seed=SEED)
    if case == "q20000":
        return make_suite(1667, seed=SEED)  # 12 families x 1667 = 20,004 questions
    if case == "long":
        return _stretch(make_suite(9, seed=SEED), 100_000)  # 12 x 9 = 108 questions
    raise ValueError(f"unknown case {case!r}")


def run_case(case: str) -> dict[str, Any]:
    """One case in this process; returns stage times, peaks and facts."""
    from tsevo.analysis import flips_df, run_summary, summary_text, tools_df
    from tsevo.data import load_suite
    from tsevo.evolve import ProtocolConfig, evolve

    sampler = _Peak()
    sampler.start()
    times: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix=f"tsevo-scale-{case}-"))
    try:
        t = time.perf_counter()
        sampler.stage = "make"
        suite = _suite(case)
        path = suite.save(work / "suite.parquet")
        n_q = len(suite)
        max_len = max(len(y) for q in suite for y in q.series.values())
        del suite
        times["make"] = time.perf_counter() - t

        t = time.perf_counter()
        sampler.stage = "load"
        suite, _report = load_suite(path)
        times["load"] = time.perf_counter() - t

        t = time.perf_counter()
        sampler.stage = "round"
        res = evolve(
            suite, config=ProtocolConfig(rounds=1, seed=SEED), out=work / "run", log=lambda s: None
        )
        status = res.rounds[0].status
        times["round"] = time.perf_counter() - t

        t = time.perf_counter()
        sampler.stage = "report"
        text = summary_text(run_summary(work / "run"))
        frames = (len(flips_df(work / "run")), len(tools_df(work / "run")))
        times["report"] = time.perf_counter() - t
        sampler.stage = "end"
        time.sleep(0.3)
        return {
            "case": case,
            "questions": n_q,
            "max_points": max_len,
            "status": status,
            "times": times,
            "peaks_gb": {k: round(v, 2) for k, v in sampler.peaks.items() if k in times},
            "report_lines": len(text.splitlines()),
            "frames": frames,
        }
    finally:
        sampler.stop.set()
        shutil.rmtree(work, ignore_errors=True)


def main(cases: tuple[str, ...] = CASES) -> list[dict[str, Any]]:
    """Run each case in a fresh process and print one row per case."""
    rows = []
    print(
        f"{'case':>7} {'questions':>9} {'points':>7}  "
        + "  ".join(f"{s:>16}" for s in ("make", "load", "round", "report"))
        + "   peak GB  status",
        flush=True,
    )
    for case in cases:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        p = subprocess.run(
            [sys.executable, "-m", "tests.bench.bench_scale", "--one", case],
            capture_output=True,
            text=True,
            env=env,
            cwd=root,
            check=False,
        )
        line = next((ln for ln in p.stdout.splitlines()[::-1] if ln.startswith("{")), None)
        if p.returncode != 0 or line is None:
            print(f"{case:>7} FAILED ({p.returncode}): {p.stderr[-1500:]}", flush=True)
            continue
        r = json.loads(line)
        r["peak_gb"] = max(r["peaks_gb"].values())
        r["within_budget"] = r["peak_gb"] < BUDGET_GB
        rows.append(r)
        _write_json(r, root)
        cells = [
            f"{r['times'][s]:7.1f}s {r['peaks_gb'].get(s, 0):5.2f}GB"
            for s in ("make", "load", "round", "report")
        ]
        peak = r["peak_gb"]
        flag = "ok" if r["within_budget"] else "OVER BUDGET"
        print(
            f"{case:>7} {r['questions']:>9} {r['max_points']:>7}  {'  '.join(f'{c:>16}' for c in cells)}"
            f"   {peak:6.2f} {flag} ({r['status']})",
            flush=True,
        )
    return rows


def _write_json(row: dict[str, Any], root: str) -> None:
    """Merge one case into ``runs/bench/scale.json`` (with the commit and the machine)."""
    doc: dict[str, Any] = {}
    if OUT.exists():
        try:
            doc = json.loads(OUT.read_text(encoding="utf-8"))
        except ValueError:
            doc = {}
    commit = git_commit(short=False)
    cases = doc.get("cases", {})
    cases[row["case"]] = {**row, "commit": commit, "cpus": os.cpu_count()}
    doc = {"bench": "scale", "budget_gb": BUDGET_GB, "cases": cases}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(run_case(sys.argv[2])), flush=True)
    else:
        main(tuple(sys.argv[1:]) or CASES)
