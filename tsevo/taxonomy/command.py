"""The taxonomy command: ``tsevo taxonomy induce|gate|show RUN`` (builtin, offline).

``induce`` normalizes the train traces of a round's base pass and mines a draft; ``gate`` runs
the builtin four-reader panel on the gate pool and writes the status; ``show`` prints the codes,
the gaps and the agreement. Every file lands under the run's taxonomy folder.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from .gate import GateConfig
from .induce import InduceConfig
from .jsonio import taxonomy_to_dict
from .model import Taxonomy
from .runs import gate_run, induce_run, show_run

__all__ = ["add_taxonomy_parser", "describe", "taxonomy_command"]


def describe(tax: Taxonomy) -> str:
    """A few lines about a taxonomy: status, κ and coverage, codes by axis, gaps."""
    agr = dict(tax.generation.get("agreement") or {})
    lines = [f"taxonomy {tax.fingerprint[:19]}  status {tax.status}  v{tax.version_n}"]
    if agr:

        def fmt(x: Any) -> str:
            return "undefined" if x is None else f"{x:.3f}"

        lines.append(
            f"  gated by {agr.get('metric')}: kappa {fmt(agr.get('final_kappa'))}, coverage "
            f"{fmt(agr.get('final_coverage'))}, fleiss_code_macro {fmt(agr.get('fleiss_code_macro'))}"
            f", rounds {agr.get('rounds_completed')}"
        )
    for axis in ("A", "B", "C"):
        for c in tax.axis(axis):
            role = f" [{c.applies_to_role}]" if c.applies_to_role else ""
            lines.append(f"  {c.id:<5} {c.name}{role}: {'; '.join(c.detection_heuristics)}")
    for g in tax.coverage_gaps:
        who = f" {g.get('role')}" if g.get("role") else ""
        lines.append(f"  gap {g.get('axis')}{who}: {g.get('reason')}")
    return "\n".join(lines)


def taxonomy_command(args: argparse.Namespace) -> int:
    """Run one ``tsevo taxonomy`` subcommand."""
    t0 = time.perf_counter()
    if args.taxonomy_cmd == "induce":
        result = induce_run(args.run, round_=args.round, config=InduceConfig(seed=args.seed))
        tax = result.taxonomy
        print(
            f"induced from {len(result.pool_ids)} traces ({len(result.gate_ids)} in the gate pool)"
        )
    elif args.taxonomy_cmd == "gate":
        res = gate_run(args.run, config=GateConfig(seed=args.seed, metric=args.metric))
        tax = res.taxonomy
        for rnd in res.rounds:
            print(
                f"round {rnd['round']}: {len(rnd['errors'])} errors, cohen_area "
                f"{rnd['cohen_area']}, fleiss_code_macro {rnd['fleiss_code_macro']}, coverage "
                f"{rnd['coverage']} -> {'pass' if rnd['passed'] else 'fail'}"
            )
    else:
        tax = show_run(args.run)
        if args.json:
            print(json.dumps(taxonomy_to_dict(tax), indent=2, sort_keys=True))
            return 0
    print(describe(tax))
    if args.taxonomy_cmd != "show":
        print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


def add_taxonomy_parser(sub: Any) -> None:
    """Add ``taxonomy induce|gate|show`` to the ``tsevo`` subparsers."""
    tx = sub.add_parser(
        "taxonomy", help="failure taxonomies (AdaMAST, builtin): induce, gate, show"
    )
    txsub = tx.add_subparsers(dest="taxonomy_cmd", required=True)
    ind = txsub.add_parser("induce", help="mine a draft taxonomy from a run's train traces")
    ind.add_argument("run", help="run folder")
    ind.add_argument("--round", type=int, default=None, help="base pass round (default: latest)")
    ind.add_argument("--seed", type=int, default=0)
    gt = txsub.add_parser("gate", help="gate the draft with the builtin four-reader panel")
    gt.add_argument("run", help="run folder")
    gt.add_argument("--seed", type=int, default=0)
    gt.add_argument("--metric", default="cohen_area", choices=("cohen_area", "fleiss_code_macro"))
    sh = txsub.add_parser("show", help="print the run's taxonomy (gated, else the draft)")
    sh.add_argument("run", help="run folder")
    sh.add_argument("--json", action="store_true", help="print taxonomy.json")
    for p in (ind, gt, sh):
        p.set_defaults(func=taxonomy_command)
