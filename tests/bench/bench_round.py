"""One evolution round with the builtin backend: wall time per step and the report-only test summary.

Run with ``python -m tests.bench round`` (or ``python -m tests.bench.bench_round [SIZE ...]``).

For each size (default: ``default`` and 4x the questions, i.e. ``800`` per family) it generates
``make_suite(size, seed=2027)``, runs ONE round into a temporary run folder and prints what
follows. The seed is fixed so numbers compare across commits; it has been looked at during
development, so claims about unseen data are measured on fresh seeds (``tsevo evolve --seed``):

* the wall time of every step of the round (from the run's ``timings.json``), the report-only test
  step, and the total;
* the funnel and the gate decision;
* the report-only test table per family: base, final and oracle accuracy, the paired gain, helped
  and harmed; the mean gain over families and the harmed share of all test questions.

The test numbers are report-only: nothing in the round reads them.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SEED = 2027
SIZES: tuple[str | int, ...] = ("default", 800)


def _oracle_by_task(suite: Any) -> dict[str, float]:
    from tsevo.data.synthetic import oracle_answer

    by: dict[str, list[bool]] = {}
    for q in suite.test:
        by.setdefault(q.task, []).append(oracle_answer(q) == q.gold)
    return {t: sum(v) / len(v) for t, v in by.items()}


def bench_size(size: str | int, seed: int = SEED, out: Path | None = None) -> dict[str, Any]:
    """Run one round on ``make_suite(size, seed)`` and print its timings and test summary.

    Args:
        size: Suite size (``"tiny"``, ``"default"``, ``"large"`` or questions per family).
        seed: Suite and protocol seed.
        out: Run folder (default: a temporary folder, removed afterwards).

    Returns:
        The numbers printed: ``questions``, ``timings``, ``total_s``, ``status``, ``mean_gain``,
        ``all_gain``, ``harmed_pct`` and ``families`` (per-family rows).
    """
    from tsevo.analysis import run_summary
    from tsevo.data.synthetic import make_suite
    from tsevo.evolve.config import ProtocolConfig
    from tsevo.evolve.run import evolve

    tmp = None
    if out is None:
        tmp = Path(tempfile.mkdtemp(prefix="tsevo-bench-round-"))
        out = tmp / "run"
    try:
        t0 = time.perf_counter()
        suite = make_suite(size, seed=seed)
        gen_s = time.perf_counter() - t0
        sp = {k: len(getattr(suite, k)) for k in ("train", "val", "test")}
        print(
            f"\n--- make_suite({size!r}, seed={seed}): {len(suite)} questions "
            f"(train {sp['train']}, val {sp['val']}, test {sp['test']}) in {gen_s:.1f} s"
        )
        t1 = time.perf_counter()
        res = evolve(
            suite,
            config=ProtocolConfig(rounds=1, seed=seed),
            out=out,
            suite_ref=f"synthetic:{size}:seed={seed}",
            log=lambda line: print(f"  {line}", flush=True),
        )
        total = time.perf_counter() - t1
        summary = run_summary(out)
        rd = summary["rounds"][0]
        timings: dict[str, float] = dict(rd["timings"])
        round_s = sum(timings.values())
        print(f"round status: {rd['status']} ({rd['reason']})")
        print("wall time per step (s):")
        for k, v in timings.items():
            print(f"  {k:<12s} {v:8.2f}")
        print(f"  {'round':<12s} {round_s:8.2f}")
        print(f"  {'test report':<12s} {total - round_s:8.2f}   (report-only, after the round)")
        print(f"  {'total':<12s} {total:8.2f}")
        f = rd["funnel"]
        print(
            "funnel: "
            + ", ".join(
                f"{k} {f[k]}"
                for k in ("errors", "buckets", "contracts", "attempts", "survivors", "deployed")
                if k in f
            )
        )
        g = rd["final_gate"] or {}
        if g:
            print(
                f"gate: {g['path']} (h={g['h']}, m={g['m']}, n={g['n']}, delta={g['delta']:+.4f}, "
                f"delta_lb={g['delta_lb']})"
            )
        for t in rd["deployed"]:
            cal = ", calibrated" if t["calibrated"] else ""
            print(f"  + {t['id']}: {t['measurement']} {t['tasks']}{cal}")
        oracle = _oracle_by_task(suite)
        rows = [r for r in rd["test"]["tasks"] if r["task"] != "ALL"]
        allrow = rd["test"]["tasks"][-1]
        print("report-only test (accuracy %):")
        print(
            f"  {'family':<26s} {'n':>5s} {'base':>6s} {'final':>6s} {'oracle':>6s} "
            f"{'gain':>6s} {'helped':>6s} {'harmed':>6s}"
        )
        fams = []
        for r in rows:
            fams.append({**r, "oracle": oracle[r["task"]]})
            print(
                f"  {r['task']:<26s} {r['n']:5d} {100 * r['before']:6.1f} {100 * r['after']:6.1f} "
                f"{100 * oracle[r['task']]:6.1f} {100 * r['delta']:+6.1f} {r['helped']:6d} "
                f"{r['harmed']:6d}"
            )
        mean_gain = sum(r["delta"] for r in rows) / len(rows)
        harmed_pct = allrow["harmed"] / allrow["n"]
        positive = sum(r["delta"] > 0 for r in rows)
        print(
            f"  {'ALL':<26s} {allrow['n']:5d} {100 * allrow['before']:6.1f} "
            f"{100 * allrow['after']:6.1f} {'':6s} {100 * allrow['delta']:+6.1f} "
            f"{allrow['helped']:6d} {allrow['harmed']:6d}"
        )
        print(
            f"mean gain over families: {100 * mean_gain:+.1f} points; families with a positive "
            f"gain: {positive}/{len(rows)}; harmed: {allrow['harmed']}/{allrow['n']} = "
            f"{100 * harmed_pct:.2f}% of test questions"
        )
        return {
            "questions": len(suite),
            "timings": timings,
            "total_s": total,
            "status": res.rounds[0].status,
            "mean_gain": mean_gain,
            "all_gain": allrow["delta"],
            "harmed_pct": harmed_pct,
            "families": fams,
        }
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def main(sizes: tuple[str | int, ...] = SIZES) -> None:
    """Benchmark one round at each size and print a closing line with the round times."""
    results = [(s, bench_size(s)) for s in sizes]
    print()
    for s, r in results:
        print(
            f"size {s!r}: {r['questions']} questions, round {r['status']} in {r['total_s']:.1f} s "
            f"(incl. test report); mean test gain {100 * r['mean_gain']:+.1f} points, "
            f"harmed {100 * r['harmed_pct']:.2f}%"
        )


if __name__ == "__main__":
    args = tuple(int(a) if a.isdigit() else a for a in sys.argv[1:])
    main(args or SIZES)
