"""Same-seed digests of a run's library and tables: proof that a refactor changed no behaviour.

``python -m tests.bench.digests --out runs/bench/digests-<label>.json [--presets tiny,default]
[--seeds 6,11,23]`` runs one builtin round per (preset, seed) through the command line, then hashes
every file that a round writes and that is meant to be reproducible: the deployed library
(``library/``), and everything under ``rounds/`` except wall-clock timings. Parquet tables are
hashed by content (rows and columns as JSON), not by bytes, so a pyarrow footer cannot move a digest.
Event logs and answer-record logs are left out: they carry timestamps and elapsed times.

Compare two digest files with ``python -m tests.bench.digests --compare A.json B.json``: it prints
every file whose digest differs and exits 1 when any does.

``--source-ids`` runs the rounds with the roles seeing the questions' own ids instead of the run's
opaque ids, and the engine ordering by those ids instead of by content (a patch applied in the
subprocess, never available in the package): with it, a run is comparable with one recorded before
roles saw opaque ids, which isolates what the ids changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from tests.bench import git_commit

SKIP_NAMES = {"timings.json", "llm_accounting.json"}
_PLAIN = "import sys; from tsevo.cli import main; sys.exit(main("
_SOURCE_IDS = (
    "import sys; import tsevo.evolve.views as v\n"
    "def _init(self, questions, salt):\n"
    "    self.salt = salt; self._to = {q.id: q.id for q in questions}; self._from = dict(self._to)\n"
    "v.ViewIds.__init__ = _init\n"
    "v.ViewIds.key = lambda self, qid: qid\n"
    "from tsevo.cli import main; sys.exit(main("
)


def _table_digest(path: Path) -> str:
    import pandas as pd

    df = pd.read_parquet(path)
    text = df.to_json(orient="split", date_format="iso", double_precision=15, default_handler=str)
    return hashlib.sha256(text.encode()).hexdigest()


def run_digests(run: Path) -> dict[str, str]:
    """Digest of every reproducible file of a run folder, by path relative to the run."""
    out: dict[str, str] = {}
    for sub in ("library", "rounds"):
        base = run / sub
        if not base.exists():
            continue
        for p in sorted(base.rglob("*")):
            if not p.is_file() or p.name in SKIP_NAMES or p.name.startswith("."):
                continue
            rel = str(p.relative_to(run))
            if p.suffix == ".parquet":
                out[rel] = "table:" + _table_digest(p)
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/bench/digests.json")
    ap.add_argument("--presets", default="tiny,default")
    ap.add_argument("--seeds", default="6,11,23")
    ap.add_argument("--runs", default="runs/digests", help="folder for the run folders")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--source-ids", action="store_true", help="roles see source ids (see above)")
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (json.loads(Path(p).read_text())["runs"] for p in args.compare)
        bad = 0
        for key in sorted(set(a) | set(b)):
            fa, fb = a.get(key, {}), b.get(key, {})
            for f in sorted(set(fa) | set(fb)):
                if fa.get(f) != fb.get(f):
                    bad += 1
                    print(f"DIFF {key} {f}: {fa.get(f, '-')[:16]} vs {fb.get(f, '-')[:16]}")
            print(f"{key}: {len(fa)} files vs {len(fb)}")
        print("identical" if not bad else f"{bad} file(s) differ")
        return 1 if bad else 0
    result: dict[str, dict[str, str]] = {}
    times: dict[str, float] = {}
    for preset in args.presets.split(","):
        for seed in args.seeds.split(","):
            key = f"{preset}:{seed}"
            run = Path(args.runs) / f"{preset}-{seed}"
            if run.exists():
                subprocess.run(["rm", "-rf", str(run)], check=True)
            t0 = time.perf_counter()
            cli = ["evolve", "--suite", f"synthetic:{preset}", "--seed", seed, "--out", str(run)]
            cli += ["--quiet"]
            cmd = [
                sys.executable,
                "-c",
                (_SOURCE_IDS if args.source_ids else _PLAIN) + repr(cli) + "))",
            ]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            times[key] = round(time.perf_counter() - t0, 1)
            result[key] = run_digests(run)
            print(f"{key}: {len(result[key])} files, {times[key]} s", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    commit = git_commit()
    out.write_text(json.dumps({"commit": commit, "seconds": times, "runs": result}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
