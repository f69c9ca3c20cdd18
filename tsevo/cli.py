"""The ``tsevo`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _cmd_data_synth(args: argparse.Namespace) -> int:
    from tsevo.data.synthetic import make_suite

    suite = make_suite(size=args.size, seed=args.seed)
    out = suite.save(args.out)
    print(f"wrote {len(suite)} questions to {out}")
    print(suite.summary().to_string(index=False))
    return 0


def _cmd_data_load(args: argparse.Namespace) -> int:
    from tsevo.data.sources import load_source

    suite, report = load_source(args.source, args.path, lenient=args.lenient)
    if args.split:
        suite = suite.split(seed=args.seed)
    out = suite.save(args.out)
    print(f"wrote {len(suite)} questions to {out}")
    print(str(report))
    return 0 if report.ok or args.lenient else 1


def _load_suite_arg(spec: str, seed: int) -> tuple[object, str]:
    """A suite from ``synthetic[:size]`` or a suite file (split when it has no assignment)."""
    from tsevo.data import Suite

    if spec.startswith("synthetic"):
        from tsevo.data.synthetic import make_suite

        size = spec.split(":", 1)[1] if ":" in spec else "default"
        return make_suite(size=size, seed=seed), f"synthetic:{size}:seed={seed}"
    suite = Suite.load(spec)
    if not suite.splits:
        suite = suite.split(seed=seed)
    return suite, spec


def _cmd_evolve(args: argparse.Namespace) -> int:
    from tsevo.evolve.config import ProtocolConfig
    from tsevo.evolve.report import run_summary, summary_text
    from tsevo.evolve.run import evolve

    suite, ref = _load_suite_arg(args.suite, args.seed)
    params = {"rounds": args.rounds, "seed": args.seed, "root": args.root}
    cfg = (
        ProtocolConfig.load(args.config).replace(**params)
        if args.config
        else ProtocolConfig(**params)
    )
    evolve(suite, cfg, out=args.out, suite_ref=ref, progress=not args.quiet)  # type: ignore[arg-type]
    print()
    print(summary_text(run_summary(args.out)))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    import json

    from tsevo.evolve.report import run_summary, summary_text

    summary = run_summary(args.run)
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
    else:
        print(summary_text(summary))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from tsevo.demo import run_demo

    return run_demo(out=args.out, size=args.size, seed=args.seed)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``tsevo`` command."""
    p = argparse.ArgumentParser(prog="tsevo", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    demo = sub.add_parser("demo", help="run the main job offline on the embedded synthetic suite")
    demo.add_argument("--out", type=Path, default=Path("runs/demo"))
    demo.add_argument("--size", default="default", help="tiny | default | large | N per family")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_cmd_demo)

    ev = sub.add_parser("evolve", help="run evolution rounds and store everything in a run folder")
    ev.add_argument(
        "--suite",
        default="synthetic:default",
        help="synthetic[:tiny|default|large|N] or a suite file",
    )
    ev.add_argument("--rounds", type=int, default=1)
    ev.add_argument("--backend", choices=["builtin"], default="builtin")
    ev.add_argument("--root", default="empty", help="root library: empty | chronos | expert")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--config", type=Path, help="a saved protocol config (JSON) to start from")
    ev.add_argument(
        "--out", type=Path, required=True, help="run folder (rerun the same command to resume)"
    )
    ev.add_argument("--quiet", action="store_true", help="no progress bars")
    ev.set_defaults(func=_cmd_evolve)

    rep = sub.add_parser("report", help="reprint a run's summary from its store")
    rep.add_argument("run", type=Path)
    rep.add_argument("--json", action="store_true", help="print the summary as JSON")
    rep.set_defaults(func=_cmd_report)

    data = sub.add_parser("data", help="make or convert question suites")
    dsub = data.add_subparsers(dest="data_cmd", required=True)
    synth = dsub.add_parser("synth", help="generate the synthetic suite")
    synth.add_argument("--size", default="default", help="tiny | default | large | N per family")
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--out", type=Path, required=True, help="output .parquet or .jsonl")
    synth.set_defaults(func=_cmd_data_synth)

    load = dsub.add_parser("load", help="convert a downloaded public source to the suite format")
    load.add_argument(
        "source", help="timeseriesexam | merrill | temporalbench | timemqa | mmts | tsaqa"
    )
    load.add_argument("path", type=Path)
    load.add_argument("--out", type=Path, required=True)
    load.add_argument(
        "--lenient", action="store_true", help="report bad records instead of failing"
    )
    load.add_argument("--split", action="store_true", help="assign train/val/test by group")
    load.add_argument("--seed", type=int, default=0)
    load.set_defaults(func=_cmd_data_load)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        rc: int = args.func(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"tsevo: error: {exc}", file=sys.stderr)
        return 2
    return rc
