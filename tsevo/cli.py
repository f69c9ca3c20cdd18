"""The ``tsevo`` command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tsevo.analysis import run_summary, suite_kinds, suite_kinds_summary, summary_text
from tsevo.data import Suite, load_suite
from tsevo.data.sources import load_source
from tsevo.data.synthetic import make_suite
from tsevo.demo import run_demo
from tsevo.evolve import ProtocolConfig, eval_library, evolve, paper_baseline
from tsevo.knobs import settings_from_pairs
from tsevo.library.library import Library
from tsevo.library.sandbox import SandboxError
from tsevo.library.sandbox.limits import ALLOW_ENV
from tsevo.roles import RoleSet, RunStopped
from tsevo.roles.builtin.concepts import load_concepts
from tsevo.roles.llm.cliargs import add_llm_arguments, role_configs_from_args
from tsevo.roles.llm.config import RoleConfigs
from tsevo.store import RunFolderBusy, RunLayout
from tsevo.studies.command import (
    add_report_arguments,
    add_run_arguments,
    report_command,
    run_command,
)
from tsevo.taxonomy.command import add_taxonomy_parser
from tsevo.testing import scripted
from tsevo.widgets.export import export_html

__all__ = ["build_parser", "eval_text", "main"]


def _cmd_data_synth(args: argparse.Namespace) -> int:
    suite = make_suite(size=args.size, seed=args.seed)
    out = suite.save(args.out)
    print(f"wrote {len(suite)} questions to {out}")
    print(suite.summary().to_string(index=False))
    return 0


def _cmd_data_load(args: argparse.Namespace) -> int:
    suite, report = load_source(args.source, args.path, lenient=args.lenient)
    if args.split:
        suite = suite.split(seed=args.seed)
    out = suite.save(args.out)
    print(f"wrote {len(suite)} questions to {out}")
    print(str(report))
    return 0 if report.ok or args.lenient else 1


def _cmd_data_check(args: argparse.Namespace) -> int:
    """Validate a suite file: every rejected record (id, field, reason) and a summary; no writes."""
    suite, report = load_suite(args.path, lenient=True)
    qs = list(suite)
    lengths = sorted(v.size for q in qs for v in q.series.values())
    roles = Counter(q.role_of(name) for q in qs for name in q.series)

    def counts(values: Any) -> dict[str, int]:
        return {str(k): v for k, v in sorted(Counter(values).items())}

    assigned = counts(suite.splits.values())
    if suite.splits and len(suite.splits) < len(qs):
        assigned["unassigned"] = len(qs) - len(suite.splits)
    summary: dict[str, Any] = {
        "questions": len(qs),
        "labeled": sum(q.gold is not None for q in qs),
        "groups": len({q.group for q in qs}),
        "tasks": counts(q.task for q in qs),
        "splits": assigned,
        "options_per_question": counts(q.n_options for q in qs),
        "series_per_question": counts(len(q.series) for q in qs),
        "series_roles": {r: roles[r] for r in ("primary", "covariate", "candidate")},
        "series_length": (
            {"min": lengths[0], "median": lengths[len(lengths) // 2], "max": lengths[-1]}
            if lengths
            else {}
        ),
    }
    out = {
        "path": str(args.path),
        "ok": report.ok,
        "read": report.n_read,
        "kept": report.n_kept,
        "rejected": [e.to_dict() for e in report.errors],
        "duplicates": list(report.duplicates),
        "summary": summary,
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0 if report.ok else 1

    def line(d: Mapping[str, int]) -> str:
        return ", ".join(f"{k}: {v}" for k, v in d.items()) or "none"

    print(
        f"{args.path}: {report.n_read} records read, {report.n_kept} questions kept, "
        f"{len(report.errors)} rejected"
    )
    if report.errors:
        w = max(len(e.record_id) for e in report.errors)
        f = max(len(e.field) for e in report.errors)
        for e in report.errors:
            print(f"  {e.record_id:<{w}}  {e.field:<{f}}  {e.reason}")
    if report.duplicates:
        print(f"dropped as duplicates of an earlier record: {', '.join(report.duplicates)}")
    print(f"questions  {len(qs)} ({summary['labeled']} labeled, {summary['groups']} groups)")
    print(f"tasks      {line(summary['tasks'])}")
    splits = line(summary["splits"]) if suite.splits else "none (tsevo evolve splits by group)"
    print(f"splits     {splits}")
    print(f"options    {line(summary['options_per_question'])} (options: questions)")
    print(
        f"series     {line(summary['series_per_question'])} (series: questions); roles "
        f"{line(summary['series_roles'])}"
    )
    if lengths:
        sl = summary["series_length"]
        print(f"lengths    {sl['min']}-{sl['max']} points (median {sl['median']})")
    return 0 if report.ok else 1


def _cmd_data_kinds(args: argparse.Namespace) -> int:
    """The suite's question kinds and the concept stems they hit (writes nothing)."""
    suite, _ = _load_suite_arg(args.suite, args.seed)
    frame = suite_kinds(suite, load_concepts(args.concepts) if args.concepts else ())
    summary = suite_kinds_summary(frame)
    if args.json:
        print(json.dumps({"summary": summary, "kinds": frame.to_dict("records")}, indent=2))
        return 0
    print(f"{'train':>5} {'pooled':>6} {'val':>4} {'test':>4}  {'concepts':<24} kind")
    for r in frame.itertuples():
        stems = ",".join(r.concepts) or "-"
        print(
            f"{r.train:>5} {r.pooled_train:>6} {r.val:>4} {r.test:>4}  {stems[:24]:<24} "
            f"{r.template} [{r.shape}]"
        )
    print(
        f"{summary['kinds']} kinds over {summary['questions']} questions "
        f"(median {summary['median_questions_per_kind']:g} per kind); "
        f"{summary['learnable_kinds']} with {summary['min_rows']}+ train questions, "
        f"{summary['learnable_pooled']} with their pooling partners'; "
        f"{summary['without_concepts']} hit no lexicon stem "
        f"({summary['without_concepts_learnable']} of them with {summary['min_rows']}+ train "
        "questions)"
    )
    return 0


def _load_suite_arg(spec: str, seed: int) -> tuple[Suite, str]:
    """A suite from ``synthetic[:size]`` or a suite file (split when it has no assignment)."""
    if spec.startswith("synthetic"):
        size = spec.split(":", 1)[1] if ":" in spec else "default"
        return make_suite(size=size, seed=seed), f"synthetic:{size}:seed={seed}"
    suite = Suite.load(spec)
    if not suite.splits:
        suite = suite.split(seed=seed)
    return suite, spec


def evolve_config(args: argparse.Namespace) -> ProtocolConfig:
    """``tsevo evolve``'s protocol config: ``--config`` (or the defaults), its flags, ``--set``."""
    params = {"rounds": args.rounds, "seed": args.seed, "root": args.root}
    cfg = (
        ProtocolConfig.load(args.config).replace(**params)
        if args.config
        else ProtocolConfig(**params)
    )
    try:
        sets = settings_from_pairs(args.set or ())
        return ProtocolConfig.from_params(sets, base=cfg) if sets else cfg
    except (TypeError, ValueError) as err:
        raise SystemExit(f"tsevo evolve: --set: {err}") from None


def _cmd_evolve(args: argparse.Namespace) -> int:
    suite, ref = _load_suite_arg(args.suite, args.seed)
    cfg = evolve_config(args)
    if args.ablation:
        if args.root != "empty":
            raise SystemExit("tsevo evolve: --ablation sets the root library; leave out --root")
        cfg = cfg.ablated(args.ablation)
    if args.baseline:
        if args.backend != "llm":
            raise SystemExit(
                "tsevo evolve: the answering baselines run on an LLM answerer (--backend llm; "
                "tsevo serve-scripted for a scripted server): the builtin one has no analogue"
            )
        cfg = cfg.replace(answer=paper_baseline(args.baseline))
    if args.backend == "llm":
        if args.concepts:
            raise SystemExit("tsevo evolve: --concepts extends the builtin planner's lexicon")
        roles = RoleSet.llm(
            role_configs_from_args(args), run_dir=args.out, max_attempts=cfg.max_synthesis_attempts
        )
    else:
        roles = RoleSet.builtin(concepts=load_concepts(args.concepts) if args.concepts else ())
    try:
        with roles:
            evolve(
                suite, roles=roles, config=cfg, out=args.out, suite_ref=ref, progress=not args.quiet
            )
    except RunStopped as exc:
        print(f"tsevo: run stopped ({exc.reason}): {exc}", file=sys.stderr)
        print(f"tsevo: rerun the same command to resume {args.out}", file=sys.stderr)
        return 3
    print()
    print(summary_text(run_summary(args.out)))
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    suite, _ref = _load_suite_arg(args.suite, args.seed)
    library = Library.load(args.library)
    split = None if args.split == "all" else args.split
    if args.backend == "llm":
        configs = role_configs_from_args(args)
        if args.cache_path is None and args.cache_mode != "off":
            # the cache of the run the library came from (replay works offline)
            d = configs.default.replace(cache_path=str(_sibling_cache(args.library)))
            configs = RoleConfigs(d, {r: dict(v) for r, v in configs.overrides.items()})
        roles = RoleSet.llm(configs)
    else:
        roles = RoleSet.builtin()
    try:
        with roles:
            res = eval_library(
                suite, library, answerer=roles.answerer, reviewer=roles.reviewer, split=split
            )
            acc = roles.backend_handle.accounting.summary() if roles.backend_handle else None
    except RunStopped as exc:
        print(f"tsevo: LLM eval stopped: {exc}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(res, indent=2, sort_keys=True))
    else:
        print(eval_text(res))
        if acc is not None:
            print("LLM accounting:")
            print(acc)
    return 0


def _sibling_cache(library: Path) -> Path:
    """The response cache of the run folder a library folder sits in."""
    return RunLayout(Path(library).resolve().parent).llm_cache


def eval_text(res: Mapping[str, Any]) -> str:
    """Printable table of :func:`tsevo.evolve.eval_library`'s result."""
    lines = [
        f"transfer eval on {res['split']} ({res['n']} questions), library {res['library']}:",
        f"  {'task':28s} {'n':>5s} {'bare':>7s} {'w/ lib':>7s} {'delta':>7s} {'helped':>7s} {'harmed':>7s}",
    ]

    def pct(x: float | None) -> str:
        return "   -  " if x is None else f"{100 * x:6.1f}"

    for row in res["tasks"]:
        d = "   -  " if row["delta"] is None else f"{100 * row['delta']:+6.1f}"
        lines.append(
            f"  {row['task']:28s} {row['n']:5d} {pct(row['bare'])}  {pct(row['with_library'])}  "
            f"{d}  {row['helped']:6d}  {row['harmed']:6d}"
        )
    c = res["counts"]
    lb = "-" if res["delta_lb"] is None else f"{res['delta_lb']:+.4f}"
    dl = "-" if res["delta"] is None else f"{res['delta']:+.4f}"
    lines.append(
        f"paired: helped {c['helped']}, harmed {c['harmed']}, n {c['n']} of {c['n_attempted']}, "
        f"delta {dl}, delta_lb {lb}; tools fired on {res['tools_fired']}, "
        f"answers replaced on {res['replaced']}"
    )
    return "\n".join(lines)


def _cmd_report(args: argparse.Namespace) -> int:
    summary = run_summary(args.run)
    if args.html:
        print(f"wrote {export_html(args.run, args.html)}")
        return 0
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
    else:
        print(summary_text(summary))
    return 0


def _cmd_serve_scripted(args: argparse.Namespace) -> int:
    suite, ref = _load_suite_arg(args.suite, args.seed)
    srv, service = scripted.scripted_server(
        list(suite), seed=args.seed, suite_ref=ref, port=args.port
    )
    return scripted.serve(srv, service, every_s=args.status_every)


def _cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(out=args.out, size=args.size, seed=args.seed)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``tsevo`` command."""
    p = argparse.ArgumentParser(prog="tsevo", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    unconfined = argparse.ArgumentParser(add_help=False)
    unconfined.add_argument(
        "--allow-unconfined-sandbox",
        action="store_true",
        help="run tools even where the sandbox's seccomp layer cannot be installed",
    )

    demo = sub.add_parser(
        "demo",
        parents=[unconfined],
        help="run the main job offline on the embedded synthetic suite",
    )
    demo.add_argument("--out", type=Path, default=Path("runs/demo"))
    demo.add_argument("--size", default="default", help="tiny | default | large | N per family")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_cmd_demo)

    ev = sub.add_parser(
        "evolve",
        parents=[unconfined],
        help="run evolution rounds and store everything in a run folder",
    )
    ev.add_argument(
        "--suite",
        default="synthetic:default",
        help="synthetic[:tiny|default|large|N] or a suite file",
    )
    ev.add_argument("--rounds", type=int, default=1)
    ev.add_argument("--backend", choices=["builtin", "llm"], default="builtin")
    ev.add_argument("--root", default="empty", help="root library: empty | chronos | expert")
    ev.add_argument(
        "--ablation",
        default="",
        help="one of the paper's ablations: 'w/o cali.', 'w/o gate', 'w/o scope', 'w/ chronos', "
        "'w/ expert', 'w/o residual chain' (sets the root for the root ablations)",
    )
    ev.add_argument(
        "--baseline",
        default="",
        help="one of the paper's answering baselines (LLM backend): 'self-consistency' (majority "
        "of 5 sampled answers), 'self-refine' (one reflection pass), '4-shot ICL' (four train "
        "questions with their gold in the prompt)",
    )
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--config", type=Path, help="a saved protocol config (JSON) to start from")
    ev.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="a protocol knob on top (repeatable), e.g. support.planner_requests=true for a "
        "benchmark of many question kinds with a few training questions each",
    )
    ev.add_argument(
        "--out", type=Path, required=True, help="run folder (rerun the same command to resume)"
    )
    ev.add_argument(
        "--concepts",
        type=Path,
        help="a JSON object of concept-lexicon entries for the builtin planner (stem -> list of "
        "catalog groups; tsevo data kinds shows which question kinds need one)",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress bars")
    add_llm_arguments(ev)
    ev.set_defaults(func=_cmd_evolve)

    evl = sub.add_parser(
        "eval",
        parents=[unconfined],
        help="answer a suite with a library on any backend; paired deltas against the bare agent",
    )
    evl.add_argument("--library", type=Path, required=True, help="a library folder")
    evl.add_argument(
        "--suite",
        default="synthetic:default",
        help="synthetic[:tiny|default|large|N] or a suite file",
    )
    evl.add_argument("--split", default="test", choices=["train", "val", "test", "all"])
    evl.add_argument("--backend", choices=["builtin", "llm"], default="builtin")
    evl.add_argument("--seed", type=int, default=0)
    evl.add_argument("--json", action="store_true", help="print the result as JSON")
    add_llm_arguments(evl)
    evl.set_defaults(func=_cmd_eval)

    rep = sub.add_parser("report", help="reprint a run's summary from its store")
    rep.add_argument("run", type=Path)
    rep.add_argument("--json", action="store_true", help="print the summary as JSON")
    rep.add_argument("--html", type=Path, help="write an offline HTML page with the run's widgets")
    rep.set_defaults(func=_cmd_report)

    ss = sub.add_parser(
        "serve-scripted",
        help="serve an OpenAI-compatible endpoint on 127.0.0.1 whose replies the builtin roles "
        "compute (no model, no key): the LLM path for a room without an API key",
    )
    ss.add_argument("--port", type=int, default=scripted.DEFAULT_PORT, help="port (0: a free one)")
    ss.add_argument(
        "--suite",
        default="synthetic:tiny",
        help="the suite the served runs answer: synthetic[:tiny|default|large|N] or a suite file "
        "(default: the notebooks' tiny preset)",
    )
    ss.add_argument(
        "--seed", type=int, default=5, help="the runs' seed (a notebook's seed; default 5)"
    )
    ss.add_argument("--status-every", type=float, default=5.0, help="seconds between status lines")
    ss.set_defaults(func=_cmd_serve_scripted)

    study = sub.add_parser("study", help="study grids: notebooks over parameter grids on Dask")
    stsub = study.add_subparsers(dest="study_cmd", required=True)
    srun = stsub.add_parser(
        "run",
        parents=[unconfined],
        help="run a study spec's cells (notebook x parameters) on Dask; finished cells are skipped",
    )
    add_run_arguments(srun)
    srun.set_defaults(func=run_command)
    srep = stsub.add_parser(
        "report",
        help="collect the rows of a study's finished cells into <out>/<study>/results.csv",
    )
    add_report_arguments(srep)
    srep.set_defaults(func=report_command)

    add_taxonomy_parser(sub)

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

    chk = dsub.add_parser(
        "check",
        help="validate a suite file (.jsonl or .parquet): every rejected record and a summary; "
        "writes nothing, exits 1 when a record is bad",
    )
    chk.add_argument("path", type=Path, help="the suite file")
    chk.add_argument("--json", action="store_true", help="print the report as JSON")
    chk.set_defaults(func=_cmd_data_check)

    kinds = dsub.add_parser(
        "kinds",
        help="the question kinds recovered from a suite's wording, their questions per split and "
        "the concept-lexicon stems their words hit (none: searched over the whole catalog)",
    )
    kinds.add_argument("suite", help="synthetic[:size] or a suite file (split as evolve splits)")
    kinds.add_argument("--seed", type=int, default=0, help="split seed (as tsevo evolve --seed)")
    kinds.add_argument("--concepts", type=Path, help="lexicon entries to add (JSON, as evolve)")
    kinds.add_argument("--json", action="store_true", help="print kinds and summary as JSON")
    kinds.set_defaults(func=_cmd_data_kinds)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    if getattr(args, "allow_unconfined_sandbox", False):
        os.environ[ALLOW_ENV] = "1"
    try:
        rc: int = args.func(args)
    except (ValueError, FileNotFoundError, RunFolderBusy, SandboxError) as exc:
        print(f"tsevo: error: {exc}", file=sys.stderr)
        return 2
    return rc
