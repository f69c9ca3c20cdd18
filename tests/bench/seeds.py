"""Report-only test gains of one builtin round over several seeds, as JSON (mean ± sd).

``python -m tests.bench.seeds --preset default --seeds 52817,60443 --out runs/bench/NAME.json``
generates ``make_suite(preset, seed)`` for each seed, runs one builtin round into
``runs/bench/NAME/<seed>`` (rerunning resumes), and writes per seed and in aggregate (mean and
sample standard deviation over seeds):

* ``base`` / ``final``: test accuracy before and after the round; ``gain``: their paired difference;
* ``family_gain_mean`` / ``family_gain_min`` / ``families_positive``: the gain per task (family);
* ``harmed_pct``: harmed test questions over all test questions;
* ``status`` and ``gate_path`` of the round, and ``round_s`` (wall time of the round's steps).

``--rounds N`` (N > 1) runs N rounds per seed instead (the protocol is one; multi-round runs admit
through the strict path alone): ``base`` is then round 1's, ``final`` / ``gain`` / ``harmed_pct`` and
the family gains are the library the run ends with against it, question by question, and each row
adds ``round_status``, ``round_gains`` and ``rounds_s`` per round (``status``, ``gate_path`` and
``round_s`` stay round 1's).

``--one-wording`` (``mixed`` only) words every question as its kind's first phrasing before the round
(:func:`one_wording`; the preset is recorded as ``mixed:one-wording``): the same series, options, gold
and splits, standing for a benchmark whose templates each have one wording.

This is how README and closing-note figures are produced: name development seeds as such, and report
on seeds that were never run before the code was final. Test answers are report-only: nothing in a
round reads them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from tests.bench import git_commit
from tsevo.analysis import run_summary
from tsevo.data import Suite
from tsevo.data.synthetic import make_suite
from tsevo.data.synthetic.mixed.kinds import KINDS
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.knobs import settings_from_pairs
from tsevo.roles import RoleSet
from tsevo.roles.builtin import MeasurementPlanner
from tsevo.roles.builtin.kindplan import KindPlanSettings
from tsevo.store import RunLayout

#: The preset suffix (and suite-reference suffix) of a one-wording run (:func:`one_wording`).
ONE_WORDING = ":one-wording"

KEYS = ("base", "final", "gain", "family_gain_mean", "family_gain_min", "harmed_pct", "round_s")


def _finished(out: Path) -> bool:
    ev = out / "events.jsonl"
    return ev.is_file() and any(
        json.loads(line).get("kind") == "finished" for line in ev.read_text().splitlines() if line
    )


def _ref(out: Path) -> str:
    """The suite reference a finished run recorded (``""`` where it has none)."""
    try:
        return str(json.loads(RunLayout(out).config.read_text())["suite"]["ref"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def one_wording(suite: Suite) -> Suite:
    """A ``mixed`` suite with every question worded as its kind's first phrasing.

    The generator words most kinds two or three ways; here each question is written as the kind's
    phrasing 0 with its own slots (the stated numbers), so a kind's questions share one wording.
    Series, options, gold, ids and splits are the suite's own. A diagnostic variant that stands for
    a benchmark whose templates each have one wording; ``mixed`` itself is unchanged.
    """
    qs = []
    for q in suite:
        slots = dict(q.metadata.get("latent", {}).get("slots", {}))
        text = KINDS[str(q.metadata["kind"])].phrasings[0].format(**slots)
        qs.append(dataclasses.replace(q, question=text, metadata={**q.metadata, "template": 0}))
    return Suite(f"{suite.name}-one-wording", qs, suite.splits, dedup=False)


def one_seed(
    preset: str,
    seed: int,
    out: Path,
    roles: RoleSet | None = None,
    reuse: bool = False,
    params: dict[str, Any] | None = None,
    rounds: int = 1,
    wording: bool = False,
) -> dict[str, Any]:
    """One round on ``make_suite(preset, seed)``; the numbers of its report-only test.

    ``wording``: the suite worded one way per kind first (:func:`one_wording`, ``mixed`` only).

    ``reuse``: a run folder this bench finished before is summarized as it is (not rerun).
    ``params``: protocol knobs on top of the defaults (``ProtocolConfig.from_params`` keys).
    ``rounds``: more than one runs that many rounds (multi-round runs admit through the strict
    path alone); the numbers are then the first round's base against the last round's library,
    question by question (:func:`_chain`), with each round's own gain and time beside them.
    """
    if wording and preset != "mixed":
        raise ValueError(f"one wording per kind is a variant of mixed, not of {preset!r}")
    ref = f"synthetic:{preset}:seed={seed}" + (ONE_WORDING if wording else "")
    t0 = time.perf_counter()
    if not (reuse and _finished(out) and _ref(out) == ref):  # another suite's run is rerun
        suite = make_suite(preset, seed=seed)
        if wording:
            suite = one_wording(suite)
        shutil.rmtree(out, ignore_errors=True)  # a leftover folder would resume to its old result
        evolve(
            suite,
            roles=roles if roles is not None else RoleSet.builtin(),
            config=ProtocolConfig.from_params({**(params or {}), "rounds": rounds, "seed": seed}),
            out=out,
            suite_ref=ref,
            log=lambda s: None,
        )
    wall = time.perf_counter() - t0
    summary = run_summary(out)["rounds"]
    if len(summary) != rounds:
        raise ValueError(f"{out}: the run holds {len(summary)} round(s), not {rounds}")
    rd = summary[0]
    tasks = rd["test"]["tasks"]
    fam = [r for r in tasks if r["task"] != "ALL"]
    allrow = tasks[-1]
    return {
        "seed": seed,
        "status": rd["status"],
        "gate_path": (rd.get("final_gate") or rd.get("gate") or {}).get("path"),
        "base": allrow["before"],
        "final": allrow["after"],
        "gain": allrow["delta"],
        "family_gain_mean": statistics.fmean(r["delta"] for r in fam),
        "family_gain_min": min(r["delta"] for r in fam),
        "families_positive": sum(r["delta"] > 0 for r in fam),
        "families": len(fam),
        "harmed_pct": allrow["harmed"] / allrow["n"],
        "round_s": round(sum(rd["timings"].values()), 1),
        "wall_s": round(wall, 1),
        "per_family": {r["task"]: r["delta"] for r in fam},
        **(_chain(out, summary) if rounds > 1 else {}),
    }


def _chain(out: Path, summary: list[dict[str, Any]]) -> dict[str, Any]:
    """The numbers of a multi-round run: round 1's base against the last round's library.

    Per test question: right before round 1 (its ``before`` arm) against right under the library
    the run ends with (the last round's ``after`` arm when it was accepted, else its ``before``
    arm: a rejected round changes nothing). Beside them, each round's own status, gain and time.
    """
    layout = RunLayout(out)
    first = pd.read_parquet(layout.round(1).test_table).set_index("qid")
    last = pd.read_parquet(layout.round(len(summary)).test_table).set_index("qid")
    arm = "after_correct" if summary[-1]["status"] == "accepted" else "before_correct"
    qids = first.index.intersection(last.index)
    before = first.loc[qids, "before_correct"].astype(bool)
    after = last.loc[qids, arm].astype(bool)
    task = first.loc[qids, "task"].astype(str)
    fam = {t: float(after[task == t].mean() - before[task == t].mean()) for t in sorted(set(task))}
    return {
        "rounds": len(summary),
        "base": float(before.mean()),
        "final": float(after.mean()),
        "gain": float(after.mean() - before.mean()),
        "family_gain_mean": statistics.fmean(fam.values()),
        "family_gain_min": min(fam.values()),
        "families_positive": sum(d > 0 for d in fam.values()),
        "families": len(fam),
        "harmed_pct": float((before & ~after).sum() / len(qids)),
        "per_family": fam,
        "round_status": [rd["status"] for rd in summary],
        "round_gains": [rd["test"]["tasks"][-1]["delta"] for rd in summary],
        "rounds_s": [round(sum(rd["timings"].values()), 1) for rd in summary],
    }


def aggregate(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean and sample sd over seeds of every number in :data:`KEYS`."""
    out = {}
    for k in KEYS:
        xs = [float(r[k]) for r in rows]
        out[k] = {
            "mean": round(statistics.fmean(xs), 6),
            "sd": round(statistics.stdev(xs), 6) if len(xs) > 1 else 0.0,
        }
    return out


def kind_settings(pairs: dict[str, str]) -> KindPlanSettings:
    """``KindPlanSettings`` with ``pairs`` (field name -> text) over its defaults, typed as they are.

    Raises:
        ValueError: On a name that is no field, or a value of the wrong type, naming it.
    """
    base = KindPlanSettings()
    kw: dict[str, Any] = {}
    for key, text in pairs.items():
        if key not in {f.name for f in dataclasses.fields(base)}:
            raise ValueError(f"no planner setting {key!r}")
        old = getattr(base, key)
        try:
            if isinstance(old, bool):
                if text.lower() not in ("true", "false"):
                    raise ValueError(text)
                kw[key] = text.lower() == "true"
            else:
                kw[key] = type(old)(text)
        except ValueError:
            raise ValueError(
                f"planner setting {key}: {text!r} is no {type(old).__name__}"
            ) from None
    return dataclasses.replace(base, **kw)


def _roles(kinds: str, pairs: dict[str, str] | None = None) -> RoleSet:
    if kinds == "default" and not pairs:
        return RoleSet.builtin()
    settings = kind_settings(pairs or {}) if kinds != "off" else None
    return RoleSet.builtin(local_planner=MeasurementPlanner(kinds=settings))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="default")
    ap.add_argument("--seeds", required=True, help="comma-separated")
    ap.add_argument("--out", required=True, help="JSON file (runs go to a folder beside it)")
    ap.add_argument("--label", default="", help="e.g. 'fresh' or 'development'")
    ap.add_argument(
        "--kinds",
        choices=["default", "on", "off"],
        default="default",
        help="the builtin planner's composite (per question kind) planning: as shipped, on or off",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="a protocol knob on top of the defaults, e.g. support.planner_requests=true",
    )
    ap.add_argument(
        "--kind-set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a composite planning setting (KindPlanSettings field), e.g. stability_copies=0",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds per run (default 1, the protocol); more: the last round's library against "
        "round 1's base",
    )
    ap.add_argument(
        "--one-wording",
        action="store_true",
        help="mixed only: every question worded as its kind's first phrasing (one_wording)",
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="summarize seeds whose run folder (beside --out) already holds a finished run",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    runs = out.with_suffix("")
    params = settings_from_pairs(args.set)
    kind_pairs = settings_from_pairs(args.kind_set)
    if kind_pairs and args.kinds == "off":
        ap.error("--kind-set needs composite planning (--kinds default or on)")
    kind_settings(kind_pairs)  # a bad setting stops before any round
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.one_wording and args.preset != "mixed":
        ap.error("--one-wording needs --preset mixed")
    rows = []
    for s in (int(x) for x in args.seeds.split(",")):
        r = one_seed(
            args.preset,
            s,
            runs / str(s),
            _roles(args.kinds, kind_pairs),
            reuse=args.reuse,
            params=params,
            rounds=args.rounds,
            wording=args.one_wording,
        )
        rows.append(r)
        print(
            f"seed {s}: {r['status']} ({r['gate_path']}), test {100 * r['base']:.1f} -> "
            f"{100 * r['final']:.1f} ({100 * r['gain']:+.1f}), families positive "
            f"{r['families_positive']}/{r['families']}, harmed {100 * r['harmed_pct']:.2f}%, "
            f"round {r['round_s']} s",
            flush=True,
        )
    agg = aggregate(rows)
    commit = git_commit()
    doc = {
        "preset": args.preset + (ONE_WORDING if args.one_wording else ""),
        "label": args.label,
        "kinds": args.kinds,
        "params": params,
        **({"kind_settings": kind_pairs} if kind_pairs else {}),
        "reused": bool(args.reuse),
        **({"rounds": args.rounds} if args.rounds != 1 else {}),
        "commit": commit,
        "seeds": [r["seed"] for r in rows],
        "aggregate": agg,
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True))
    g, h = agg["gain"], agg["harmed_pct"]
    print(
        f"{args.preset} over {len(rows)} seeds: gain {100 * g['mean']:+.1f} ± {100 * g['sd']:.1f} "
        f"points, harmed {100 * h['mean']:.2f} ± {100 * h['sd']:.2f}% -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
