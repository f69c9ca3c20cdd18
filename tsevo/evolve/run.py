"""Multi-round evolution runs with the run store, resume, and the report-only test step."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tsevo.agent import Agent
from tsevo.library.library import Library

from .config import ProtocolConfig
from .evaluate import Evaluator, outcomes, task_table
from .gate import paired_counts, paired_flips
from .round import RoleSet, RoundResult, run_round

if TYPE_CHECKING:
    from tsevo.data import Suite
    from tsevo.store import RunStore

__all__ = ["EvolutionResult", "evolve", "report_test"]


@dataclass
class EvolutionResult:
    """A finished (or resumed) evolution run.

    Attributes:
        rounds: One result per round.
        library: The deployed library after the last round.
        root: The root library.
        tests: Per round, the report-only test summary (``test.json``).
        store: The run store (``None`` for in-memory runs).
    """

    rounds: list[RoundResult]
    library: Library
    root: Library
    tests: list[dict[str, Any]] = field(default_factory=list)
    store: RunStore | None = None


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
    ``test_rejected_candidate`` is on.
    """
    import pandas as pd

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
    flips = paired_flips(outcomes(b), outcomes(a))
    frame = pd.DataFrame(
        [
            {
                "qid": q.id,
                "task": q.task,
                "before_answer": b[q.id].final_answer,
                "after_answer": a[q.id].final_answer,
                "before_correct": b[q.id].correct,
                "after_correct": a[q.id].correct,
                "flip": flips.get(q.id),
                "tools_ok": list(a[q.id].tools_ok),
                "replaced_by": list(a[q.id].replaced_by),
            }
            for q in qs
        ]
    )
    if result.status != "accepted" and cfg.test_rejected_candidate and result.candidate is not None:
        d = evaluator.answer("test", result.candidate, qs)
        out["arms"]["diagnostic"] = evaluator.arm_name("test", result.candidate)
        out["diagnostic"] = {
            "note": "best rejected candidate, measured once for reporting; used in no decision",
            "tasks": task_table(b, d),
            "counts": paired_counts(outcomes(b), outcomes(d)).to_dict(),
        }
    if store is not None:
        store.write_parquet(f"rounds/r{r}/test.parquet", frame)
        store.write_json(f"rounds/r{r}/test.json", out)
    return out


def evolve(
    suite: Suite,
    cfg: ProtocolConfig | None = None,
    *,
    out: str | Path | None = None,
    roles: RoleSet | None = None,
    sandbox: Any = None,
    suite_ref: str = "",
    log: Callable[[str], None] = print,
    progress: bool = False,
    manifest_extra: Mapping[str, Any] | None = None,
    on_round_end: Callable[[int, RoundResult], None] | None = None,
) -> EvolutionResult:
    """Run ``cfg.rounds`` rounds on a split suite; with ``out``, everything is stored and resumable.

    Args:
        suite: A suite with a train/val/test assignment.
        cfg: The frozen protocol config (defaults to the paper's protocol).
        out: Run folder (``None``: in memory only).
        roles: Role set (default: builtin).
        sandbox: Tool executor (default: a new :class:`~tsevo.library.sandbox.Sandbox`).
        suite_ref: How the suite was specified (recorded in the config).
        log: Line logger.
        progress: Show tqdm progress bars for evaluations.
        manifest_extra: Extra manifest fields (e.g. the LLM backend's models), written when the
            run folder is created; they override the derived ``backend`` field.
        on_round_end: Called as ``on_round_end(r, result)`` after each round (including its
            report-only test and library write); the LLM backend writes its accounting here.
    """
    from tsevo.library.roots import make_root
    from tsevo.library.sandbox import Sandbox
    from tsevo.store import RunStore

    cfg = cfg or ProtocolConfig()
    roles = roles or RoleSet.builtin()
    if not suite.splits:
        raise ValueError("evolve needs a split suite (Suite.split)")
    train, val, test = suite.train, suite.val, suite.test
    store = None
    if out is not None:
        store = RunStore.create(
            out,
            {
                "protocol": cfg.to_dict(),
                "suite": {
                    "name": suite.name,
                    "ref": suite_ref,
                    "questions": len(suite),
                    "splits": {"train": len(train), "val": len(val), "test": len(test)},
                },
            },
            {
                "roles": roles.names(),
                "backend": "builtin" if roles.names()["answerer"].startswith("builtin") else "llm",
                **dict(manifest_extra or {}),
            },
        )
        if not store.exists("suite.parquet"):
            suite.save(store.path("suite.parquet"))
    own_sandbox = sandbox is None
    sb = sandbox if sandbox is not None else Sandbox()
    bars: dict[str, Any] = {}

    def prog(arm: str, done: int, total: int) -> None:
        if not progress:
            return
        from tqdm.auto import tqdm

        bar = bars.get(arm)
        if bar is None:
            bar = bars[arm] = tqdm(total=total, desc=arm.split(".")[0], leave=False)
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    try:
        root = make_root(cfg.root)
        agent = Agent(
            root,
            roles.answerer,
            roles.reviewer,
            executor=sb,
            max_tools=cfg.max_tools_per_question,
            workers=roles.workers,
        )
        decide = Evaluator(agent, store, forbidden=[q.id for q in test], progress=prog)
        reporter = Evaluator(agent, store, progress=prog)
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
            if store is not None and store.exists(f"rounds/r{r}/test.json"):
                tests.append(store.read_json(f"rounds/r{r}/test.json"))
            else:
                tests.append(report_test(r, lib, res, reporter, test, cfg, store))
            if res.status == "accepted":
                lib = res.library
                if store is not None:
                    lib.save(store.path("library"))
            log(f"round {r}: {res.status} in {time.perf_counter() - t0:.1f} s")
            if on_round_end is not None:
                on_round_end(r, res)
        if store is not None and not store.exists("library"):
            lib.save(store.path("library"))
        if store is not None:
            store.event("finished", rounds=len(results), library=lib.fingerprint())
        return EvolutionResult(results, lib, root, tests, store)
    finally:
        if own_sandbox:
            sb.close()
