"""The paper's studies as benchmark figures: run a study spec's grid, then its report, into JSON.

``python -m tests.bench.studies SPEC [SPEC ...] [--out runs/experiments] [--workers N] [--report-only]``

For each spec (``experiments/<name>.json``) this runs ``tsevo study run`` (finished cells are
skipped, so a rerun resumes) unless ``--report-only``, then ``tsevo study report``, and copies the
report (cells held and missing, mean ± sd over seeds per group, the paper's checks) with the
commit into ``runs/bench/study-<name>.json``. Not part of ``make bench``: the studies take from
minutes (tiny) to hours (the default preset); every figure quoted from them names its JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tests.bench import git_commit
from tsevo.fileio import atomic_write_text
from tsevo.studies import load_spec, run_study, write_results

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.studies", description=__doc__)
    p.add_argument("specs", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "experiments")
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    for path in args.specs:
        spec = load_spec(path)
        if not args.report_only:
            run_study(spec, args.out, workers=args.workers, progress=False)
        csv = write_results(spec, args.out)
        meta = json.loads((csv.parent / "results.json").read_text(encoding="utf-8"))
        meta.update(commit=git_commit(), spec=str(path), results_csv=str(csv))
        dest = ROOT / "runs" / "bench" / f"study-{spec.name}.json"
        atomic_write_text(dest, json.dumps(meta, indent=1, default=str) + "\n")
        print(f"{spec.name}: {len(meta['cells'])} cells, {len(meta['missing'])} missing -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
