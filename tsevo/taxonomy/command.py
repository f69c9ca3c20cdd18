"""The taxonomy command: ``tsevo taxonomy induce|gate|refine|show RUN``.

``induce`` normalizes the train traces of a round's base pass and mines a draft; ``gate`` runs
the four-reader panel on the gate pool and writes the status; ``refine`` proposes bounded edits
from a later round's traces and keeps them only if the gate accepts (:mod:`.refine`); ``show``
prints the codes, the gaps and the agreement. Every file lands under the run's taxonomy folder.

``--backend builtin`` (default) is offline; ``--backend llm`` runs induction's 8 LLM steps and
the four LLM annotators, with the LLM settings ``tsevo evolve`` takes (flags < environment
``TSEVO_LLM_*`` < ``--llm-config`` file, the key from the environment only; the response cache
defaults to the run's ``llm_cache.sqlite``, so a rerun makes no calls).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from tsevo.roles.llm import LLMClient
from tsevo.roles.llm.cliargs import add_llm_arguments, role_configs_from_args

from .gate import GateConfig
from .induce import InduceConfig
from .jsonio import taxonomy_to_dict
from .llm import LLMOptions
from .model import Taxonomy
from .refine import WHEN, RefineConfig
from .runs import BACKENDS, gate_run, induce_run, llm_client, refine_run, show_run
from .sources import SOURCES

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
        where = g.get("role") or g.get("area")
        who = f" {where}" if where else ""
        lines.append(f"  gap {g.get('axis')}{who}: {g.get('reason')}")
    return "\n".join(lines)


def _accounting(client: LLMClient | None) -> None:
    if client is None:
        return
    print("LLM accounting:\n" + client.accounting.summary())


def taxonomy_command(args: argparse.Namespace) -> int:
    """Run one ``tsevo taxonomy`` subcommand."""
    t0 = time.perf_counter()
    backend = getattr(args, "backend", "builtin")
    client = None
    if backend == "llm":
        configs = role_configs_from_args(args)
        if not configs.default.model:
            print(
                "tsevo taxonomy: --backend llm needs a model (--model, TSEVO_LLM_MODEL or "
                "--llm-config)",
                file=sys.stderr,
            )
            return 2
        client = llm_client(args.run, configs)
    try:
        return _run(args, backend, client, t0)
    finally:
        if client is not None:
            client.close()


def _run(args: argparse.Namespace, backend: str, client: LLMClient | None, t0: float) -> int:
    if args.taxonomy_cmd == "induce":
        result = induce_run(
            args.run,
            round_=args.round,
            config=InduceConfig(seed=args.seed),
            backend=backend,
            llm=client,
            source=args.traces,
        )
        tax = result.taxonomy
        print(
            f"induced from {len(result.pool_ids)} traces ({len(result.gate_ids)} in the gate pool)"
        )
        _accounting(client)
    elif args.taxonomy_cmd == "gate":
        res = gate_run(
            args.run,
            config=GateConfig(seed=args.seed, metric=args.metric, unit=args.unit),
            backend=backend,
            llm=client,
            options=LLMOptions(annotator_models=tuple(args.annotator_models or ())),
        )
        tax = res.taxonomy
        _accounting(client)
        for rnd in res.rounds:
            print(
                f"round {rnd['round']}: {len(rnd['errors'])} errors, cohen_area "
                f"{rnd['cohen_area']}, fleiss_code_macro {rnd['fleiss_code_macro']}, coverage "
                f"{rnd['coverage']} -> {'pass' if rnd['passed'] else 'fail'}"
            )
    elif args.taxonomy_cmd == "refine":
        ref = refine_run(
            args.run,
            round_=args.round,
            source=args.traces,
            config=RefineConfig(when=args.when, seed=args.seed),
            backend=backend,
            llm=client,
            options=LLMOptions(annotator_models=tuple(args.annotator_models or ())),
        )
        tax = ref.current
        _accounting(client)
        for p in ref.proposed:
            what = p.get("id") or p.get("keep") or p.get("name")
            print(f"proposed {p['op']} {what}: {_evidence(p)}")
        for rnd in ref.rounds:
            print(
                f"gate round {rnd['round']}: {rnd['metric']} {rnd[rnd['metric']]}, coverage "
                f"{rnd['coverage']} -> {'pass' if rnd['passed'] else 'fail'}"
            )
        print(f"refinement {ref.decision}: {ref.reason}")
    else:
        tax = show_run(args.run)
        if args.json:
            print(json.dumps(taxonomy_to_dict(tax), indent=2, sort_keys=True))
            return 0
    print(describe(tax))
    if args.taxonomy_cmd != "show":
        print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


def _evidence(p: dict[str, Any]) -> str:
    keys = ("support", "fired", "lift", "jaccard", "candidate", "other")
    return ", ".join(f"{k} {p[k]}" for k in keys if k in p)


def add_taxonomy_parser(sub: Any) -> None:
    """Add ``taxonomy induce|gate|refine|show`` to the ``tsevo`` subparsers."""
    tx = sub.add_parser(
        "taxonomy", help="failure taxonomies (AdaMAST; builtin or LLM): induce, gate, refine, show"
    )
    txsub = tx.add_subparsers(dest="taxonomy_cmd", required=True)
    ind = txsub.add_parser("induce", help="mine a draft taxonomy from a run's train traces")
    ind.add_argument("run", help="run folder")
    ind.add_argument("--round", type=int, default=None, help="base pass round (default: latest)")
    ind.add_argument("--seed", type=int, default=0)
    ind.add_argument(
        "--traces",
        choices=SOURCES,
        default="base",
        help="train traces: the base pass, the round's candidate arms (evolution), or all",
    )
    gt = txsub.add_parser("gate", help="gate the draft with a four-annotator panel")
    gt.add_argument("run", help="run folder")
    gt.add_argument("--seed", type=int, default=0)
    gt.add_argument("--metric", default="cohen_area", choices=("cohen_area", "fleiss_code_macro"))
    gt.add_argument(
        "--unit",
        default="event",
        choices=("event", "trace"),
        help="event: the five phases per trace (discovery, vote, typing, assignment, deliberation);"
        " trace: each failed trace is one error, codes assigned only",
    )
    gt.add_argument(
        "--annotator-models",
        type=_four_models,
        help="LLM backend: the four annotators' models, comma-separated (default: --model x4)",
    )
    rf = txsub.add_parser(
        "refine", help="propose bounded edits from a later round's traces; keep them if gated"
    )
    rf.add_argument("run", help="run folder")
    rf.add_argument("--round", type=int, default=None, help="base pass round (default: latest)")
    rf.add_argument("--seed", type=int, default=0)
    rf.add_argument(
        "--traces",
        choices=SOURCES,
        default="base",
        help="train traces: the base pass, the round's candidate arms (evolution), or all",
    )
    rf.add_argument(
        "--when",
        choices=WHEN,
        default="after_accepted",
        help="refine an accepted version only (default), also a review_required one, or nothing",
    )
    rf.add_argument(
        "--annotator-models",
        type=_four_models,
        help="LLM backend: the four annotators' models, comma-separated (default: --model x4)",
    )
    sh = txsub.add_parser("show", help="print the run's taxonomy (gated, else the draft)")
    sh.add_argument("run", help="run folder")
    sh.add_argument("--json", action="store_true", help="print taxonomy.json")
    for p in (ind, gt, rf):
        p.add_argument("--backend", choices=BACKENDS, default="builtin")
        add_llm_arguments(p, "the run's llm_cache.sqlite")
    for p in (ind, gt, rf, sh):
        p.set_defaults(func=taxonomy_command)


def _four_models(text: str) -> list[str]:
    models = [m.strip() for m in text.split(",") if m.strip()]
    if len(models) != 4:
        raise argparse.ArgumentTypeError("name four models (alpha,beta,gamma,delta)")
    return models
