"""Planning time against train errors at 1x, 4x and 16x the default questions, and its log-log slope.

``python -m tests.bench planning`` (or ``python -m tests.bench.bench_planning [MULT ...]
[--out runs/bench/planning.json]``).

For each multiple ``m`` of the default suite (200 questions per family) it runs one builtin round
on ``make_suite(200 * m, seed=2027)`` up to the end of planning, and the synthesizer stops the run
cleanly (:class:`~tsevo.roles.RunStopped`) when synthesis would begin. Planning time is the round's
``plan`` step, from the end of clustering to the end of planning in its event log: the dossiers,
the planner's ``prepare`` (the parallel measurement warm-up, also timed on its own) and its
``plan`` calls (in forked workers, where the parent cannot time them one by one), and the work
groups. It prints the train errors the round clustered, the buckets planned and the planning time,
then the least-squares slope of log(planning time) on log(train errors) over the sizes. The target
(issue 11) is a slope of at most 1.1: planning grows no faster than linearly in the errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SEED = 2027
PER_FAMILY = 200
MULTS: tuple[int, ...] = (1, 4, 16)


class _TimedPlanner:
    """The builtin planner with its ``prepare`` calls timed (``seconds``; they run in this process)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0

    def prepare(self, *a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.prepare(*a, **k)
        finally:
            self.seconds += time.perf_counter() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _StopAtSynthesis:
    name = "stop-at-synthesis"

    def synthesize(self, *a: Any, **k: Any) -> Any:
        from tsevo.roles import RunStopped

        raise RunStopped("bench", "planning timed; the bench stops before synthesis")


def plan_time(mult: int, seed: int = SEED) -> dict[str, Any]:
    """One round up to the end of planning on ``mult`` times the default questions."""
    from tsevo.data.synthetic import make_suite
    from tsevo.evolve import ProtocolConfig, evolve
    from tsevo.roles import RoleSet, RunStopped
    from tsevo.roles.builtin import MeasurementPlanner

    suite = make_suite(PER_FAMILY * mult, seed=seed)
    planner = _TimedPlanner(MeasurementPlanner())
    roles = RoleSet.builtin(local_planner=planner, synthesizer=_StopAtSynthesis())
    tmp = Path(tempfile.mkdtemp(prefix="tsevo-bench-plan-"))
    t0 = time.perf_counter()
    try:
        with contextlib.suppress(RunStopped):
            evolve(suite, roles=roles, config=ProtocolConfig(seed=seed), out=tmp / "run")
        wall = time.perf_counter() - t0
        errors = buckets = 0
        done: dict[str, float] = {}
        for line in (tmp / "run" / "events.jsonl").read_text().splitlines():
            ev = json.loads(line)
            if ev.get("kind") == "step_done":
                done[ev.get("step", "")] = float(ev["t"])
                if ev.get("step") == "base_pass":
                    errors = int(ev.get("errors", 0))
                if ev.get("step") == "cluster":
                    buckets = int(ev.get("buckets", 0))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    planning = done["plan"] - done["cluster"]
    row = {
        "mult": mult,
        "questions": len(suite),
        "train_errors": errors,
        "buckets": buckets,
        "planning_s": round(planning, 2),
        "prepare_s": round(planner.seconds, 2),
        "until_synthesis_s": round(wall, 2),
    }
    print(
        f"{mult:>3}x: {len(suite)} questions, {errors} train errors, {buckets} buckets, "
        f"planning {planning:.1f} s (measurement warm-up {planner.seconds:.1f} s) "
        f"(round until synthesis {wall:.1f} s)",
        flush=True,
    )
    return row


def loglog_slope(rows: Sequence[dict[str, Any]]) -> float:
    """Least-squares slope of log(planning seconds) on log(train errors)."""
    xs = [math.log(r["train_errors"]) for r in rows]
    ys = [math.log(max(r["planning_s"], 1e-3)) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mults", nargs="*", type=int, default=list(MULTS))
    ap.add_argument("--out", default="runs/bench/planning.json")
    # called by ``python -m tests.bench`` with its own argv: take the defaults then
    args = ap.parse_args(argv if argv is not None or __name__ == "__main__" else [])
    rows = [plan_time(m) for m in args.mults]
    slope = loglog_slope(rows) if len(rows) > 1 else float("nan")
    print(f"planning time vs train errors: log-log slope {slope:.2f} (target <= 1.1)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"seed": SEED, "rows": rows, "loglog_slope": round(slope, 3)}, indent=1) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
