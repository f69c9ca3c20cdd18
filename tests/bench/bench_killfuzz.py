"""kill -9 fuzz: random SIGKILLs across a two-round builtin run, each resumed run byte-identical.

Run with ``python -m tests.bench killfuzz`` (part of ``make bench``), or
``python -m tests.bench.bench_killfuzz [TRIALS] [KILLS_PER_TRIAL] [SEED]``.

An uninterrupted ``tsevo evolve --suite synthetic:tiny --rounds 2`` (seed 6) is the reference.
Each trial then runs the same command into a fresh folder and kills it ``KILLS_PER_TRIAL`` times
in a row, resuming in between, at points drawn from a seeded RNG: half from outside (SIGKILL from
this process) at a random moment of what is left of the run, a quarter by itself right after the
``step_done`` event of a random step, a quarter by itself on one of the next appends to an
evaluation log (usually leaving a torn half line). After the last kill the run completes. Kills
that came too late (the run finished first) are listed and not counted. A trial passes
when the library folder, every compared table of both rounds and the report (timings aside) equal
the reference byte for byte, and no evaluation was spent twice: every log's lines before a kill
are a prefix of its lines after, no question appears twice in an arm, and every arm holds exactly
the reference's questions. Trials run two at a time. Prints ``N of N identical`` and the time, and
writes every trial's kills and verdict to ``runs/bench/killfuzz.json``.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests import round_fixtures as rf
from tests.bench import git_commit

TRIALS = 10  # x KILLS = 30 drawn, so at least 20 land before the run finishes
KILLS = 3
SEED = 15
ROUNDS = 2
OUT = rf.REPO / "runs" / "bench" / "killfuzz.json"
TIMEOUT_S = 3600  # per command: a busy 2-core machine runs the two rounds in minutes, not seconds


def _tables(rounds: int) -> list[str]:
    return [
        t.replace("rounds/r1/", f"rounds/r{r}/")
        for r in range(1, rounds + 1)
        for t in rf.COMPARED_TABLES
    ]


def _external_kill(argv: list[str], delay: float) -> int:
    p = subprocess.Popen(
        [rf.PY, "-m", "tsevo", *argv],
        cwd=rf.REPO,
        env=rf.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        p.wait(delay)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
    return p.wait(60)


def _effective(kill: str) -> bool:
    """A kill that stopped the run (not one that came after it had finished)."""
    return "(" not in kill.split("}")[-1]


def _remaining(steps: list[str], run: Path) -> list[str]:
    """The reference's ``step_done`` steps (one per round) that ``run`` has not finished yet."""
    done: list[str] = []
    if (run / "events.jsonl").exists():
        events = map(json.loads, rf.jsonl_lines(run / "events.jsonl"))
        done = [e["step"] for e in events if e["kind"] == "step_done"]
    left = list(steps)
    for step in done:
        if step in left:
            left.remove(step)
    return left


def _prefix_ok(before: dict[str, list[str]], after: dict[str, list[str]]) -> bool:
    return not _broken(before, after)


def _broken(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    """Logs whose lines before a kill are not a prefix of their lines after (and where)."""
    out = []
    for arm, lines in before.items():
        now = after.get(arm, [])
        if now[: len(lines)] != lines:
            at = next(
                (k for k, (a, b) in enumerate(zip(lines, now, strict=False)) if a != b), len(now)
            )
            out.append(f"{arm}: {len(lines)} lines before, {len(now)} after, first change at {at}")
    return out


def trial(i: int, ref: Path, ref_s: float, rng: random.Random, root: Path) -> dict[str, Any]:
    """One trial: ``KILLS`` random kills, then completion; returns what it found."""
    run = root / f"trial{i}"
    argv = rf.tsevo_cmd(run, rounds=ROUNDS)
    kills: list[str] = []
    errors: list[str] = []
    broken: list[str] = []
    snap = rf.eval_logs(run) if run.exists() else {}
    respent = 0
    total = sum(len(v) for v in rf.eval_logs(ref).values())
    steps = [
        e["step"]
        for e in map(json.loads, rf.jsonl_lines(ref / "events.jsonl"))
        if e["kind"] == "step_done"
    ]
    for _ in range(KILLS):
        done = sum(len(v) for v in snap.values()) / max(1, total)  # share of the work stored
        u = rng.random()
        if u < 0.5:  # from outside, at a random moment of what is left
            delay = rng.uniform(0.5, max(1.0, 0.9 * ref_s * (1.0 - done)))
            rc = _external_kill(argv, delay)
            kills.append(f"after {delay:.1f}s" + ("" if rc == -9 else f" (finished first: {rc})"))
        else:
            if u < 0.75:  # right after a step's artifacts are marked done (one still to come)
                spec: dict[str, Any] = {"event": rng.choice(_remaining(steps, run) or steps)}
            else:  # on an append to any evaluation log, usually leaving a torn line
                spec = {"append": "", "nth": rng.randint(1, 3), "torn": rng.random() < 0.7}
            p = rf.run_cli(argv, kill=spec, timeout=TIMEOUT_S)
            kills.append(json.dumps(spec) + ("" if p.returncode == -9 else f" (rc {p.returncode})"))
            if p.returncode not in (0, -9):
                errors.append(f"after {kills[-1]}: {p.stderr[-1500:]}")
        after = rf.eval_logs(run) if (run / "evals").exists() else {}
        broken += [f"kill {len(kills)}: {b}" for b in _broken(snap, after)]
        respent += 0 if _prefix_ok(snap, after) else 1
        snap = after
    p = rf.run_cli(argv, timeout=TIMEOUT_S)
    ok = p.returncode == 0
    if not ok:
        errors.append(f"final resume (rc {p.returncode}): {p.stderr[-1500:]}")
    final = rf.eval_logs(run) if ok else {}
    expected = rf.eval_logs(ref)
    broken += [f"final: {b}" for b in _broken(snap, final)]
    respent += 0 if _prefix_ok(snap, final) else 1
    same_evals = sorted(final) == sorted(expected)
    for arm, lines in final.items():
        ids = rf.qids(lines)
        respent += len(ids) - len(set(ids))
        same_evals &= sorted(ids) == sorted(rf.qids(expected.get(arm, [])))
    diffs = []
    if ok:
        if rf.tree_bytes(run / "library") != rf.tree_bytes(ref / "library"):
            diffs.append("library")
        for rel in _tables(ROUNDS):
            a, b = run / rel, ref / rel
            if a.exists() != b.exists() or (a.exists() and a.read_bytes() != b.read_bytes()):
                diffs.append(rel)
        if rf.summary_without_timings(run) != rf.summary_without_timings(ref):
            diffs.append("report")
    identical = ok and same_evals and not diffs and respent == 0
    return {
        "trial": i,
        "kills": kills,
        "identical": identical,
        "diffs": diffs,
        "respent": respent,
        "broken_prefixes": broken,
        "errors": errors,
    }


def main(trials: int = TRIALS, kills: int = KILLS, seed: int = SEED) -> list[dict[str, Any]]:
    """Run the fuzz and print the figure."""
    global KILLS
    KILLS = kills
    root = Path(tempfile.mkdtemp(prefix="tsevo-killfuzz-"))
    t0 = time.perf_counter()
    try:
        ref = root / "ref"
        p = rf.run_cli(rf.tsevo_cmd(ref, rounds=ROUNDS), timeout=TIMEOUT_S)
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-2000:])
        ref_s = time.perf_counter() - t0
        print(f"reference: {ROUNDS}-round tiny run in {ref_s:.1f} s", flush=True)
        rngs = [random.Random(seed * 1000 + i) for i in range(trials)]
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda i: trial(i, ref, ref_s, rngs[i], root), range(trials)))
        for r in results:
            mark = "identical" if r["identical"] else f"DIFFERS {r['diffs']} respent={r['respent']}"
            print(f"  trial {r['trial']}: {mark}; kills: {'; '.join(r['kills'])}", flush=True)
        n_ok = sum(r["identical"] for r in results)
        n_kills = sum(1 for r in results for k in r["kills"] if _effective(k))
        respent = sum(r["respent"] for r in results)
        seconds = time.perf_counter() - t0
        print(
            f"kill -9 fuzz: {n_kills} effective kill points (of {trials * KILLS} drawn) over {trials} "
            f"resumed runs: {n_ok} of {trials} identical, {respent} evaluations re-spent, "
            f"{seconds:.0f} s",
            flush=True,
        )
        _write_json(
            {
                "bench": "killfuzz",
                "commit": git_commit(short=False),
                "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
                "rounds": ROUNDS,
                "trials": trials,
                "kills_per_trial": KILLS,
                "seed": seed,
                "reference_s": round(ref_s, 1),
                "effective_kills": n_kills,
                "drawn_kills": trials * KILLS,
                "identical": n_ok,
                "evaluations_respent": respent,
                "seconds": round(seconds, 1),
                "results": results,
            }
        )
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write_json(doc: dict[str, Any]) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}", flush=True)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*args)
