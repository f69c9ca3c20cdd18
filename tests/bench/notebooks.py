"""Workshop timings: how long each notebook takes on its default parameters, as JSON.

``python -m tests.bench.notebooks [--size tiny] [--out runs/bench/notebooks.json]``

1. **Preparing a room** (``make notebooks``' code, in a subprocess, into a fresh run folder under
   ``runs/bench/notebooks/``): the evolution round (``ensure_run``), then every notebook executed
   with papermill on the ``tsevo`` kernel against that run folder. Its wall time is what preparing
   the run folders in advance costs; the per-notebook times are what each notebook takes in a room
   where the run folder is already there (every stage reads it; none recomputes).
2. **Without preparation**: the quickstart executed alone into a fresh run folder, so it runs the
   round itself (measured); the stage notebooks then reuse that run, so they take what they take in
   a prepared room.
3. **The LLM path without a key**: the quickstart with ``backend="llm"`` against the scripted
   server (:func:`tsevo.testing.scripted_server`, what ``tsevo serve-scripted`` serves: replies
   computed by the builtin roles) into a fresh run folder: the round through real HTTP, prompts,
   cache and accounting.

The JSON records the parameters (``size``, ``seed``) and whether they are the notebooks' defaults,
the commit and the machine's load. The README's "Teach it" timings come from this file; rerun it
after changes that move them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench import git_commit
from tsevo import notebook as nb
from tsevo.studies import default_notebooks, execute_notebooks
from tsevo.testing import SCRIPTED_MODEL, scripted_server

REPO = Path(__file__).resolve().parents[2]
#: What the notebooks' kernels and the round need to run offline and reproducibly (as in make).
ENV = {"HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg"}

#: ``make notebooks``' code (ensure_run, then every notebook), timing the round on its own.
PREPARE = """
import sys, time
t0 = time.perf_counter()
from tsevo.notebook import QuickstartConfig, ensure_run
from tsevo.studies import execute_notebooks
run = ensure_run(QuickstartConfig(run_dir=sys.argv[1], size=sys.argv[2]), log=lambda s: None)
print(f"ROUND {time.perf_counter() - t0:.2f}", flush=True)
execute_notebooks(run, parameters={"size": sys.argv[2]})
"""
#: The line :func:`tsevo.studies.execute_notebooks` logs per notebook.
LINE = re.compile(r"^(\S+)\.ipynb: ([\d.]+) s -> ")


def prepare_room(work: Path, size: str) -> dict[str, Any]:
    """``make notebooks``' code in a subprocess into ``work/room``; wall time and per notebook."""
    env = {**os.environ, **ENV}
    env.pop(nb.RUN_DIR_ENV, None)
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", PREPARE, str(work / "room"), size],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"preparing the room failed:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    lines = res.stdout.splitlines()
    per = {m.group(1): float(m.group(2)) for m in map(LINE.match, lines) if m}
    expected = [p.stem for p in default_notebooks()]
    if sorted(per) != sorted(expected):
        raise RuntimeError(f"notebooks timed {sorted(per)}, expected {expected}:\n{res.stdout}")
    round_s = float(next(ln for ln in lines if ln.startswith("ROUND ")).split()[1])
    return {"wall_s": round(wall, 1), "round_s": round(round_s, 1), "notebooks": per}


def quickstart(work: Path, name: str, **params: Any) -> float:
    """Seconds to execute the quickstart alone into a fresh run folder ``work/name``."""
    (path,) = [p for p in default_notebooks() if p.stem == nb.QuickstartConfig.notebook]
    t0 = time.perf_counter()
    execute_notebooks(work / name, notebooks=[path], parameters=params, log=lambda s: None)
    return round(time.perf_counter() - t0, 1)


def llm_quickstart(work: Path, size: str) -> dict[str, Any]:
    """The quickstart on the llm backend against the scripted server, creating its run."""
    cfg = nb.QuickstartConfig(size=size)
    srv, service = scripted_server(
        list(cfg.suite()), seed=cfg.protocol().seed, suite_ref=cfg.suite_ref
    )
    with srv:
        seconds = quickstart(
            work, "llm", size=size, backend="llm", base_url=srv.base_url, model=SCRIPTED_MODEL
        )
    return {
        "seconds": seconds,
        "replies": sum(service.counts.values()),
        "replies_by_kind": dict(sorted(service.counts.items())),
    }


def run(size: str, out: Path, work: Path) -> dict[str, Any]:
    """All three measurements; writes and returns the JSON."""
    os.environ.update(ENV)  # the in-process papermill kernels inherit it
    os.environ.pop(nb.RUN_DIR_ENV, None)
    commit = git_commit()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    load_before = os.getloadavg()[0]
    room = prepare_room(work, size)
    print(f"prepared the room in {room['wall_s']} s (round {room['round_s']} s)", flush=True)
    fresh = quickstart(work, "fresh", size=size)
    print(f"quickstart without a prepared run: {fresh} s", flush=True)
    rows = [
        {
            "notebook": stem,
            "prepared_s": secs,
            "unprepared_s": fresh if stem == nb.QuickstartConfig.notebook else secs,
        }
        for stem, secs in room["notebooks"].items()
    ]
    llm = llm_quickstart(work, size)
    print(f"quickstart, backend=llm on the scripted server: {llm['seconds']} s", flush=True)
    defaults = nb.QuickstartConfig()
    result = {
        "command": f"python -m tests.bench.notebooks --size {size}",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "commit": commit,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            # other work on the machine slows every figure: the 1-minute load average
            "load_1m_before": round(load_before, 1),
            "load_1m_after": round(os.getloadavg()[0], 1),
        },
        "size": size,
        "seed": defaults.seed,
        "notebook_defaults": size == defaults.size,
        "prepare": {
            "what": "make notebooks' code: ensure_run, then every notebook with papermill",
            "wall_s": room["wall_s"],
            "round_s": room["round_s"],
        },
        "notebooks": rows,
        "unprepared": "the quickstart alone into a fresh run folder (it runs the round); "
        "the stage notebooks then reuse that run",
        "llm_scripted_quickstart": llm,
        "bench_s": round(time.perf_counter() - t0, 1),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def table(result: dict[str, Any]) -> str:
    """The timings as the README shows them."""
    lines = [f"{'notebook':40s} {'prepared run':>13s} {'no preparation':>15s}"]
    for r in result["notebooks"]:
        lines.append(f"{r['notebook']:40s} {r['prepared_s']:12.1f}s {r['unprepared_s']:14.1f}s")
    p, llm = result["prepare"], result["llm_scripted_quickstart"]
    lines.append(f"prepare all run folders: {p['wall_s']} s (of which the round {p['round_s']} s)")
    lines.append(
        f"quickstart, backend=llm on the scripted server: {llm['seconds']} s, "
        f"{llm['replies']} replies computed"
    )
    m = result["machine"]
    lines.append(
        f"size {result['size']}, seed {result['seed']} (notebook defaults: "
        f"{result['notebook_defaults']}); {m['cpus']} CPUs, 1-minute load "
        f"{m['load_1m_before']} before, {m['load_1m_after']} after"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    p = argparse.ArgumentParser(prog="python -m tests.bench.notebooks", description=__doc__)
    p.add_argument("--size", default="tiny", help="synthetic preset (the notebooks' default: tiny)")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bench" / "notebooks.json")
    p.add_argument("--work", type=Path, default=REPO / "runs" / "bench" / "notebooks")
    args = p.parse_args(argv)
    result = run(args.size, args.out, args.work)
    print(table(result))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
