"""Compare or pool stored :mod:`tests.bench.seeds` JSONs, without rerunning a round.

``python -m tests.bench.compare paired BEFORE.json[,MORE.json] AFTER.json[,MORE.json] --out X.json``
pairs two arms seed by seed (the seeds both hold): per seed the difference in test gain and in
harm, and their mean ± the standard error over the seeds (what the log calls "paired"). The arms must
be of one preset; a variant of it (``mixed:one-wording``, the same seeds' questions worded otherwise)
pairs with it.

``python -m tests.bench.compare pool A.json,B.json[,...] --out X.json`` summarizes the rows of
several JSONs of one preset as one set (mean ± sd over every seed, as :mod:`tests.bench.seeds`
does), e.g. three fresh sets run with the same package. A seed held twice is refused, as is a mix of
presets or of commits, unless ``--mixed-commits`` says the package answers the same on them.

Both read JSONs only, so their run folders may be gone. Gains and harm are in points of the seeds'
test questions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.bench import git_commit
from tests.bench.seeds import aggregate

#: What ``paired`` differences: test gain and harmed share, both in points.
PAIRED_KEYS = ("gain", "harmed_pct")


def load_rows(paths: Sequence[str | Path]) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """Rows by seed from one or more seeds JSONs, and what they share (preset, commits, labels).

    Raises:
        ValueError: On a seed held twice or a mix of presets, naming the files.
    """
    rows: dict[int, dict[str, Any]] = {}
    where: dict[int, str] = {}
    presets, commits, labels = set(), [], []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        presets.add(doc.get("preset", ""))
        commits.append(doc.get("commit", ""))
        labels.append(doc.get("label", ""))
        for r in doc["rows"]:
            s = int(r["seed"])
            if s in rows:
                raise ValueError(f"seed {s} is in both {where[s]} and {p}")
            rows[s], where[s] = r, str(p)
    if len(presets) > 1:
        raise ValueError(f"{', '.join(map(str, paths))} mix presets: {sorted(presets)}")
    return rows, {
        "preset": presets.pop() if presets else "",
        "commits": commits,
        "labels": labels,
    }


def paired(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per-seed differences (after minus before) of :data:`PAIRED_KEYS`, in points, with mean ± SE.

    Raises:
        ValueError: When the two arms share no seed.
    """
    seeds = sorted(set(before) & set(after))
    if not seeds:
        raise ValueError("the two arms share no seed")
    out: dict[str, Any] = {"seeds": seeds}
    for k in PAIRED_KEYS:
        d = [100.0 * (float(after[s][k]) - float(before[s][k])) for s in seeds]
        se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else 0.0
        out[k] = {
            "before": round(100.0 * statistics.fmean(float(before[s][k]) for s in seeds), 3),
            "after": round(100.0 * statistics.fmean(float(after[s][k]) for s in seeds), 3),
            "diff_mean": round(statistics.fmean(d), 3),
            "diff_se": round(se, 3),
            "per_seed": [round(x, 3) for x in d],
            "up": sum(x > 1e-9 for x in d),
            "down": sum(x < -1e-9 for x in d),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("paired", help="two arms seed by seed")
    p.add_argument("before", help="comma-separated seeds JSONs")
    p.add_argument("after", help="comma-separated seeds JSONs")
    p.add_argument("--out", required=True)
    q = sub.add_parser("pool", help="several JSONs of one preset as one set")
    q.add_argument("jsons", help="comma-separated seeds JSONs")
    q.add_argument("--out", required=True)
    q.add_argument(
        "--mixed-commits",
        action="store_true",
        help="allow JSONs written at different commits (say why in your note)",
    )
    args = ap.parse_args(argv)
    if args.cmd == "paired":
        b_paths, a_paths = args.before.split(","), args.after.split(",")
        before, b_meta = load_rows(b_paths)
        after, a_meta = load_rows(a_paths)
        # variants of one preset pair (``mixed`` and ``mixed:one-wording``: the same seeds' series)
        if b_meta["preset"].split(":")[0] != a_meta["preset"].split(":")[0]:
            ap.error(f"the arms are of different presets: {b_meta['preset']}, {a_meta['preset']}")
        doc: dict[str, Any] = {
            "bench": "compare.paired",
            "preset": b_meta["preset"],
            "before": {"jsons": b_paths, **b_meta},
            "after": {"jsons": a_paths, **a_meta},
            "commit": git_commit(),
            **paired(before, after),
        }
        g, h = doc["gain"], doc["harmed_pct"]
        line = (
            f"{len(doc['seeds'])} seeds: gain {g['before']:+.2f} -> {g['after']:+.2f} pp, paired "
            f"{g['diff_mean']:+.2f} ± {g['diff_se']:.2f} ({g['up']} up, {g['down']} down); harm "
            f"{h['before']:.2f} -> {h['after']:.2f}%, paired {h['diff_mean']:+.2f} ± {h['diff_se']:.2f}"
        )
    else:
        paths = args.jsons.split(",")
        rows, meta = load_rows(paths)
        if len(set(meta["commits"])) > 1 and not args.mixed_commits:
            ap.error(
                f"the JSONs were written at different commits {meta['commits']}: --mixed-commits"
            )
        ordered = [rows[s] for s in sorted(rows)]
        doc = {
            "bench": "compare.pool",
            "preset": meta["preset"],
            "jsons": paths,
            "commits": meta["commits"],
            "labels": meta["labels"],
            "commit": git_commit(),
            "seeds": sorted(rows),
            "aggregate": aggregate(ordered),
            "above_2pct_harm": sum(float(r["harmed_pct"]) > 0.02 for r in ordered),
            "rows": ordered,
        }
        g, h = doc["aggregate"]["gain"], doc["aggregate"]["harmed_pct"]
        line = (
            f"{len(rows)} seeds: gain {100 * g['mean']:+.1f} ± {100 * g['sd']:.1f} pp, harmed "
            f"{100 * h['mean']:.2f} ± {100 * h['sd']:.2f}% ({doc['above_2pct_harm']} above 2%)"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True))
    print(f"{line} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
