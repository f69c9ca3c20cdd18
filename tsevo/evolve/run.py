"""The one engine for every backend: multi-round runs with the run store, resume, callbacks, report-only test."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tsevo.agent import Agent
from tsevo.data import Suite
from tsevo.library.library import Library
from tsevo.library.roots import make_root
from tsevo.library.sandbox import Sandbox
from tsevo.roles import Callback, RoleSet, RunStopped
from tsevo.store import RunStore, run_lock
from tsevo.taxonomy.consumers import Consumers

from .ablation import ablation_manifest
from .baseline import baseline_answerer, baseline_manifest
from .config import ProtocolConfig
from .evaluate import Evaluator, outcomes, paired_frame, task_table
from .gate import paired_counts
from .result import EvolutionResult, RoundResult
from .round import run_round
from .views import ViewIds

__all__ = ["evolve", "report_test"]


def report_test(
    r: int,
    before: Library,
    result: RoundResult,
    evaluator: Evaluator,
    test: Suite,
    cfg: ProtocolConfig,
    store: RunStore | None,
) -> dict[str, Any]:
    """Answer test with the libraries before and after round ``r`` (report only; used in no decision).

    A rejected round also gets one diagnostic test run of its best candidate library when
    ``test_rejected_candidate`` is on; an invalid round (a clustering failure or an invalid
    measurement) gets none: it measured nothing the diagnostic could be compared with.
    """
    qs = list(test)
    b = evaluator.answer("test", before, qs)
    a = evaluator.answer("test", result.library, qs)
    out: dict[str, Any] = {
        "round": r,
        "status": result.status,
        "report_only": True,
        "arms": {
            "before": evaluator.arm_name("test", before),
            "after": evaluator.arm_name("test", result.library),
        },
        "tasks": task_table(b, a),
        "counts": paired_counts(outcomes(b), outcomes(a)).to_dict(),
    }
    frame = paired_frame(
        b, a, labels=("before", "after"), order=[q.id for q in qs], tool_errors=False
    )
    if result.status == "rejected" and cfg.test_rejected_candidate and result.candidate is not None:
        d = evaluator.answer("test", result.candidate, qs)
        out["arms"]["diagnostic"] = evaluator.arm_name("test", result.candidate)
        out["diagnostic"] = {
            "note": "best rejected candidate, measured once for reporting; used in no decision",
            "tasks": task_table(b, d),
            "counts": paired_counts(outcomes(b), outcomes(d)).to_dict(),
        }
    if store is not None:
        paths = store.layout.round(r)
        store.write_parquet(paths.test_table, frame)
        store.write_json(paths.test, out)
    return out


class _Progress:
    """tqdm bars per evaluation arm (only when asked for)."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.bars: dict[str, Any] = {}

    def __call__(self, arm: str, done: int, total: int) -> None:
        if not self.on:
            return
        from tqdm.auto import tqdm

        bar = self.bars.get(arm)
        if bar is None:
            bar = self.bars[arm] = tqdm(total=total, desc=arm.split(".")[0], leave=False)
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()


def _open_store(
    out: str | Path,
    suite: Suite,
    cfg: ProtocolConfig,
    roles: RoleSet,
    suite_ref: str,
    callbacks: Sequence[Callback],
) -> tuple[RunStore, bool]:
    resumed = RunStore(out).layout.is_run()
    manifest: dict[str, Any] = {"roles": roles.names(), "backend": roles.backend}
    manifest["ablation"] = ablation_manifest(cfg.root, cfg.ablation)
    if not cfg.answer.is_default:
        manifest["baseline"] = baseline_manifest(
            cfg.answer, getattr(roles.answerer, "examples", ())
        )
    for cb in callbacks:
        manifest.update(cb.manifest())
    settings = roles.recorded_settings()  # e.g. the builtin planner's lexicon additions
    store = RunStore.create(
        out,
        {
            "protocol": _protocol_record(out, cfg, resumed),
            **({"roles": settings} if settings else {}),
            "suite": {
                "name": suite.name,
                "ref": suite_ref,
                "questions": len(suite),
                "splits": {
                    "train": len(suite.train),
                    "val": len(suite.val),
                    "test": len(suite.test),
                },
            },
        },
        manifest,
    )
    if not store.layout.suite.exists():
        suite.save(store.layout.suite)
    return store, resumed


def _protocol_record(out: str | Path, cfg: ProtocolConfig, resumed: bool) -> dict[str, Any]:
    """The protocol as ``config.json`` records it.

    A run folder written before the ablation switches existed has no ``ablation`` entry; it
    resumes under the default switches (the protocol it ran) and keeps its config as written.
    """
    d = cfg.to_dict()
    if resumed and cfg.ablation.is_default:
        stored = RunStore(out).config.get("protocol", {})
        if isinstance(stored, dict) and "ablation" not in stored:
            d.pop("ablation")
    return d


def evolve(
    suite: Suite,
    *,
    roles: RoleSet | None = None,
    config: ProtocolConfig | None = None,
    out: str | Path | None = None,
    callbacks: Sequence[Callback] = (),
    sandbox: Any = None,
    suite_ref: str = "",
    log: Callable[[str], None] = print,
    progress: bool = False,
) -> EvolutionResult:
    """Run ``config.rounds`` rounds on a split suite; with ``out``, everything is stored and resumable.

    The same engine runs every backend: the roles (builtin, LLM or mixed per role) are plug-ins,
    and what a backend must record (the LLM backend's accounting, budgets, resume check) reaches the
    run through the role set's callbacks, then ``callbacks``.

    Args:
        suite: A suite with a train/val/test assignment.
        roles: The role set (default: :meth:`RoleSet.builtin`).
        config: The frozen protocol config (default: the paper's protocol).
        out: Run folder (``None``: in memory only). Rerunning the same call resumes it.
        callbacks: More run hooks (called after the role set's own).
        sandbox: Tool executor (default: a new :class:`~tsevo.library.sandbox.Sandbox`).
        suite_ref: How the suite was specified (recorded in the config).
        log: Line logger.
        progress: Show tqdm progress bars for evaluations.

    Raises:
        RunStopped: A role stopped the run (budget, replay miss, endpoint down); the folder is left
            resumable and every callback saw the stop.
        ValueError: The folder holds another run, or a callback refused to resume it.
        TaxonomyError: Codes as triage categories or coded diagnoses are on and the pinned
            taxonomy is unreadable, not the pinned fingerprint, or not accepted.
    """
    cfg = config if config is not None else ProtocolConfig()
    roles = roles if roles is not None else RoleSet.builtin()
    if not suite.splits:
        raise ValueError("evolve needs a split suite (Suite.split)")
    Consumers.of(cfg.taxonomy)  # a pinned taxonomy the rounds will read fails here, not later
    if not cfg.answer.is_default:  # an answering baseline: the run's answerer (refused on builtin)
        view = ViewIds(suite, str(cfg.seed)).view
        answerer = baseline_answerer(
            roles, cfg.answer, train=suite.train, seed=cfg.seed, view=view, taxonomy=cfg.taxonomy
        )
        roles = roles.replace(answerer=answerer)
    with run_lock(out):  # one writer per run folder; a second one fails at once
        return _evolve(suite, roles, cfg, out, callbacks, sandbox, suite_ref, log, progress)


def _evolve(
    suite: Suite,
    roles: RoleSet,
    cfg: ProtocolConfig,
    out: str | Path | None,
    callbacks: Sequence[Callback],
    sandbox: Any,
    suite_ref: str,
    log: Callable[[str], None],
    progress: bool,
) -> EvolutionResult:
    hooks = [*roles.callbacks, *callbacks]
    store, resumed = (None, False)
    if out is not None:
        store, resumed = _open_store(out, suite, cfg, roles, suite_ref, hooks)
    for cb in hooks:
        cb.on_run_start(store, resumed=resumed)
    sb = sandbox if sandbox is not None else Sandbox()
    status = "error"
    try:
        if store is not None and hasattr(sb, "os_layers"):
            store.update_manifest(sandbox=sb.os_layers())  # refuses to start when unconfined
        result = _rounds(suite, roles, cfg, store, sb, hooks, log, _Progress(progress))
        status = "finished"
        return result
    except RunStopped as stop:
        status = f"stopped:{stop.reason}"
        for cb in hooks:
            cb.on_stop(stop, store)
        log(f"run stopped ({stop.reason}): {stop}")
        raise
    finally:
        for cb in hooks:
            cb.on_run_end(status, store)
        if sandbox is None:
            sb.close()


def _rounds(
    suite: Suite,
    roles: RoleSet,
    cfg: ProtocolConfig,
    store: RunStore | None,
    sb: Any,
    hooks: Sequence[Callback],
    log: Callable[[str], None],
    progress: _Progress,
) -> EvolutionResult:
    train, val, test = suite.train, suite.val, suite.test
    ids = ViewIds(suite, str(cfg.seed))  # roles see every question under these opaque ids
    root = make_root(cfg.root)
    agent = Agent(
        root,
        roles.answerer,
        roles.reviewer,
        executor=sb,
        max_tools=cfg.max_tools_per_question,
        workers=roles.workers,
        views=ids.view,
        mode="residual" if cfg.ablation.residual_chain else "overwrite",
        scoped=cfg.ablation.scope,
    )
    decide = Evaluator(agent, store, forbidden=[q.id for q in test], progress=progress)
    reporter = Evaluator(agent, store, progress=progress)
    lib = root
    results: list[RoundResult] = []
    tests: list[dict[str, Any]] = []
    for r in range(1, cfg.rounds + 1):
        t0 = time.perf_counter()
        res = run_round(
            r,
            lib,
            train,
            val,
            roles=roles,
            cfg=cfg,
            evaluator=decide,
            sandbox=sb,
            store=store,
            log=log,
        )
        results.append(res)
        stored = store.read_json_or(store.layout.round(r).test) if store is not None else None
        tests.append(
            stored if stored is not None else report_test(r, lib, res, reporter, test, cfg, store)
        )
        if res.status == "accepted":
            lib = res.library
            if store is not None:
                store.save(store.layout.library, lib)
        log(f"round {r}: {res.status} in {time.perf_counter() - t0:.1f} s")
        for cb in hooks:
            cb.on_round_end(r, res, store)
    if store is not None and not store.layout.library.exists():
        store.save(store.layout.library, lib)
    if store is not None:
        store.event("finished", rounds=len(results), library=lib.fingerprint())
    return EvolutionResult(results, lib, root, tests, store)
