"""A run's taxonomy on disk: its traces from a round's base pass, induce, gate and refine artifacts.

Every path comes from :class:`~tsevo.store.RunLayout` (``layout.taxonomy``); JSON is written with
sorted keys and no timestamps, so reruns are byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tsevo.data import Suite
from tsevo.roles.llm import LLMClient, LLMConfig, RoleConfigs
from tsevo.store import RunStore
from tsevo.store.layout import TaxonomyPaths

from .gate import GateConfig, GateResult, gate
from .induce import InduceConfig, Induction, induce
from .jsonio import append_lineage, load_taxonomy, read_lineage, save_taxonomy
from .llm import LLMOptions
from .llm_induce import llm_induce
from .llm_panel import PANEL, llm_gate
from .model import Taxonomy
from .refine import RefineConfig, RefineResult, refine, refine_paths, write_version
from .sources import SOURCES, source_arms
from .traces import Trace, normalize_arms, read_traces, write_traces

__all__ = [
    "BACKENDS",
    "agreement_records",
    "base_round",
    "gate_run",
    "induce_run",
    "llm_client",
    "refine_run",
    "run_traces",
    "show_run",
    "trace_source",
]


#: Induction and gate backends.
BACKENDS: tuple[str, ...] = ("builtin", "llm")

LLMSettings = LLMConfig | RoleConfigs | LLMClient


def _store(run: str | Path | RunStore) -> RunStore:
    return run if isinstance(run, RunStore) else RunStore.open(run)


def base_round(store: RunStore) -> int:
    """The latest round with a stored base pass (its library is the richest train chain)."""
    r, last = 1, 0
    while store.layout.round(r).base_pass.exists():
        last, r = r, r + 1
    if not last:
        raise FileNotFoundError(f"{store.layout.root}: no round has a base pass yet")
    return last


def trace_source(run: str | Path | RunStore, round_: int | None = None) -> tuple[int, str]:
    """The round whose base pass the traces come from, and its library's fingerprint."""
    store = _store(run)
    r = base_round(store) if round_ is None else int(round_)
    summary = store.read_json_or(store.layout.round(r).summary, {}) or {}
    arm = str((summary.get("arms") or {}).get("train_base", ""))
    return r, (arm.split(".", 1)[1] if "." in arm else "")


def run_traces(
    run: str | Path | RunStore, round_: int | None = None, seed: int = 0, source: str = "base"
) -> list[Trace]:
    """The normalized train traces of a round (default: the latest round with a base pass).

    Args:
        run: The run folder (or its store).
        round_: The round.
        seed: Seeds the induction/gate pool split and the subdomains.
        source: ``base`` (the round's base pass), ``evolution`` (its candidate arms: train-side
            evolution traces) or ``all`` (both); see :mod:`tsevo.taxonomy.sources`.
    """
    store = _store(run)
    r, _ = trace_source(store, round_)
    arms = source_arms(store, r, source)
    suite = Suite.load(store.layout.suite)
    questions = {q.id: q for q in suite}
    return normalize_arms(arms, questions, suite.splits, round_=r, seed=seed)


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n", "utf-8")


def _check_backend(backend: str, llm: LLMSettings | None) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown taxonomy backend {backend!r}; use one of {BACKENDS}")
    if backend == "llm" and llm is None:
        raise ValueError("the llm backend needs llm= (an LLMConfig, RoleConfigs or LLMClient)")


def llm_client(run: str | Path | RunStore, llm: LLMSettings) -> LLMClient:
    """The client for the taxonomy's LLM steps (a config's cache defaults to the run's cache)."""
    if isinstance(llm, LLMClient):
        return llm
    roles = llm if isinstance(llm, RoleConfigs) else RoleConfigs(llm)
    d = roles.default
    if d.cache_path is None and d.cache_mode != "off":
        cache = str(_store(run).layout.llm_cache)
        roles = RoleConfigs(d.replace(cache_path=cache), dict(roles.overrides))
    return LLMClient(roles)


def _llm_record(client: LLMClient, opts: LLMOptions) -> dict[str, Any]:
    """What the manifest says about the LLM.

    No credentials, no endpoint and no counts: a rerun from the cache (or against the same
    model elsewhere) writes the same bytes.
    """
    d = client.config
    return {
        "model": d.model,
        "temperature": d.temperature,
        "seed": d.seed,
        "options": {**opts.__dict__, "annotator_models": list(opts.annotator_models)},
    }


def _with_client(run: RunStore, llm: LLMSettings, fn: Any) -> Any:
    client = llm_client(run, llm)
    try:
        return fn(client)
    finally:
        if client is not llm:
            client.close()


def induce_run(
    run: str | Path | RunStore,
    *,
    round_: int | None = None,
    config: InduceConfig | None = None,
    backend: str = "builtin",
    llm: LLMSettings | None = None,
    options: LLMOptions | None = None,
    source: str = "base",
) -> Induction:
    """Normalize the traces and induce a draft, written under the run's taxonomy folder.

    Writes the train traces, one record per induction step, the draft and the manifest.

    Args:
        run: The run folder (or its store).
        round_: The base pass round (default: the latest).
        config: The miner's numbers and the pool seed.
        backend: ``builtin`` (the miner) or ``llm`` (8 LLM steps, :mod:`.llm_induce`).
        llm: For ``llm``: a config (its cache defaults to the run's ``llm_cache.sqlite``) or a
            client (the caller's, not closed here).
        options: What the LLM steps show and how they ask.
        source: Which train traces: ``base`` (the base pass), ``evolution`` (the round's
            candidate arms) or ``all`` (both; see :mod:`tsevo.taxonomy.sources`).
    """
    _check_backend(backend, llm)
    if source not in SOURCES:
        raise ValueError(f"unknown trace source {source!r}; use one of {SOURCES}")
    store = _store(run)
    cfg = config or InduceConfig()
    opts = options or LLMOptions()
    tp = store.layout.taxonomy
    r, library = trace_source(store, round_)
    traces = run_traces(store, r, seed=cfg.seed, source=source)
    write_traces(traces, tp.traces("train"))
    llm_rec: dict[str, Any] | None = None
    if backend == "llm":
        assert llm is not None

        def go(client: LLMClient) -> Induction:
            nonlocal llm_rec
            llm_rec = _llm_record(client, opts)
            return llm_induce(traces, client, cfg, opts)

        result = _with_client(store, llm, go)
    else:
        result = induce(traces, cfg)
    if tp.dir.joinpath("draft").exists():  # step records of an earlier run that this one lacks
        for old in tp.dir.joinpath("draft").glob("*.json"):
            if old.stem not in result.steps:
                old.unlink()
    for name, record in result.steps.items():
        _write_json(tp.draft_step(name), record)
    save_taxonomy(result.taxonomy, tp.draft)
    _write_json(
        tp.manifest,
        {
            "induce": {
                "config": cfg.__dict__,
                "traces": len(traces),
                "pool": len(result.pool_ids),
                "gate_pool": len(result.gate_ids),
                "backend": backend,
                **({"llm": llm_rec} if llm_rec is not None else {}),
            },
            "draft_fingerprint": result.taxonomy.fingerprint,
            "source": {
                "round": r,
                "split": "train",
                "library": library,
                "kind": "answer",
                **({"traces": source} if source != "base" else {}),
            },
        },
    )
    return result


def gate_run(
    run: str | Path | RunStore,
    *,
    config: GateConfig | None = None,
    backend: str = "builtin",
    llm: LLMSettings | None = None,
    options: LLMOptions | None = None,
) -> GateResult:
    """Gate the run's draft on its gate pool, written under the run's taxonomy folder.

    Writes each round's agreement record, the taxonomy (status from the last round), its
    version, the lineage of gate edits and the manifest.

    Args:
        run: The run folder (or its store).
        config: The gate's numbers.
        backend: ``builtin`` (the four-reader panel) or ``llm`` (four LLM annotators,
            :mod:`.llm_panel`).
        llm: For ``llm``: a config or a client (as in :func:`induce_run`).
        options: What the annotators see and how they ask.
    """
    _check_backend(backend, llm)
    store = _store(run)
    cfg = config or GateConfig()
    opts = options or LLMOptions()
    tp = store.layout.taxonomy
    draft = load_taxonomy(tp.draft)
    traces = read_traces(tp.traces("train"))
    llm_rec: dict[str, Any] | None = None
    if backend == "llm":
        assert llm is not None

        def go(client: LLMClient) -> GateResult:
            nonlocal llm_rec
            llm_rec = _llm_record(client, opts)
            return llm_gate(draft, traces, client, cfg, opts)

        result = _with_client(store, llm, go)
    else:
        result = gate(draft, traces, cfg)
    for rnd in result.rounds:
        _write_json(tp.agreement_round(rnd["fingerprint"][7:19], rnd["round"]), rnd)
    if tp.agreement_dir.exists():  # rounds of an earlier gate run that this one did not rewrite
        fresh = {tp.agreement_round(r["fingerprint"][7:19], r["round"]) for r in result.rounds}
        for old in tp.agreement_dir.rglob("round_*.json"):
            if old not in fresh:
                old.unlink()
    write_version(tp, result.taxonomy)  # first: a pinned version refuses before anything moves
    if tp.lineage.exists():
        tp.lineage.unlink()
    append_lineage(tp.lineage, result.lineage)
    save_taxonomy(result.taxonomy, tp.taxonomy)
    manifest = json.loads(tp.manifest.read_text("utf-8")) if tp.manifest.exists() else {}
    manifest["gate"] = {
        "config": cfg.__dict__,
        "panel": PANEL if backend == "llm" else "builtin-4view",
        "backend": backend,
        **({"llm": llm_rec} if llm_rec is not None else {}),
        "metric": result.metric,
        "status": result.taxonomy.status,
        "fingerprint": result.taxonomy.fingerprint,
        "rounds": len(result.rounds),
    }
    _write_json(tp.manifest, manifest)
    return result


def _refine_base(tp: TaxonomyPaths, round_: int, current: Taxonomy) -> Taxonomy:
    """The version a round's refinement starts from.

    A rerun of a round starts from the version its earlier record refined (so it rewrites the
    same bytes); otherwise, and when that version file no longer matches, ``current``.
    """
    record, _ = refine_paths(tp, round_)
    if not record.exists():
        return current
    base = json.loads(record.read_text("utf-8")).get("base") or {}
    path = tp.version(int(base.get("version_n") or 0)) if base.get("version_n") else None
    if path is None or not path.exists():
        return current
    tax = load_taxonomy(path, verify_fingerprint=False)
    return tax if tax.fingerprint == base.get("fingerprint") else current


def refine_run(
    run: str | Path | RunStore,
    *,
    round_: int | None = None,
    source: str = "base",
    config: RefineConfig | None = None,
    backend: str = "builtin",
    llm: LLMSettings | None = None,
    options: LLMOptions | None = None,
) -> RefineResult:
    """Refine the run's current taxonomy on a later round's train traces (:mod:`.refine`).

    Writes the round's traces (``traces/refine_r<r>.jsonl``), its record
    (``refine/round_<r>.json``: proposal, evidence, gate figures, decision) and the proposal;
    the gate's rounds under ``agreement/``; when the gate accepts, the new version
    (``versions/v<n>.json``, never over a pinned one), ``taxonomy.json`` and the lineage. A rerun of
    a round starts from the version that round refined before, so it writes the same bytes.
    ``when="off"`` reads and writes nothing.

    Args:
        run: The run folder (or its store); ``taxonomy.json`` must exist (gate first).
        round_: The round whose base pass brings the new traces (default: the latest).
        source: ``base``, ``evolution`` or ``all`` (as in :func:`induce_run`).
        config: When, the caps and the gate's numbers.
        backend: The gate's panel: ``builtin`` or ``llm`` (edits are always mined builtin).
        llm: For ``llm``: a config or a client (as in :func:`induce_run`).
        options: What the LLM annotators see and how they ask.
    """
    _check_backend(backend, llm)
    if source not in SOURCES:
        raise ValueError(f"unknown trace source {source!r}; use one of {SOURCES}")
    store = _store(run)
    cfg = config or RefineConfig()
    tp = store.layout.taxonomy
    if not tp.taxonomy.exists():
        raise FileNotFoundError(f"{tp.taxonomy}: no gated taxonomy yet (run taxonomy gate first)")
    current = load_taxonomy(tp.taxonomy)
    if cfg.when == "off":
        return refine(current, [], cfg)
    r, _ = trace_source(store, round_)
    base = _refine_base(tp, r, current)
    traces = run_traces(store, r, seed=cfg.seed, source=source)
    write_traces(traces, tp.traces(f"refine_r{r}"))
    trigger = f"refine round {r}"
    if backend == "llm":
        assert llm is not None
        opts = options or LLMOptions()

        def go(client: LLMClient) -> RefineResult:
            def panel(d: Taxonomy, t: Any, c: GateConfig) -> GateResult:
                return llm_gate(d, t, client, c, opts)

            return refine(base, traces, cfg, trigger=trigger, gate_fn=panel)

        result = _with_client(store, llm, go)
    else:
        result = refine(base, traces, cfg, trigger=trigger)
    if result.accepted:  # first: a pinned version refuses before anything moves
        write_version(tp, result.current)
    for rnd in result.rounds:  # marked, so readers can tell them from the first gate's rounds
        path = tp.agreement_round(rnd["fingerprint"][7:19], rnd["round"])
        _write_json(path, {**rnd, "stage": "refine", "refine_round": r})
    kept = [e for e in read_lineage(tp.lineage) if e.version_n <= base.version_n]
    if tp.lineage.exists():
        tp.lineage.unlink()
    append_lineage(tp.lineage, kept + (result.lineage if result.accepted else []))
    save_taxonomy(result.current, tp.taxonomy)
    record_path, proposal_path = refine_paths(tp, r)
    _write_json(record_path, result.record(trigger))
    if result.proposal is not None:
        save_taxonomy(result.proposal, proposal_path)
    elif proposal_path.exists():
        proposal_path.unlink()
    manifest = json.loads(tp.manifest.read_text("utf-8")) if tp.manifest.exists() else {}
    refine_rec = manifest.setdefault("refine", {})
    refine_rec.setdefault("rounds", {})[str(r)] = {
        "decision": result.decision,
        "source": source,
        "panel": PANEL if backend == "llm" else "builtin-4view",
        "base": base.fingerprint,
        "current": result.current.fingerprint,
    }
    _write_json(tp.manifest, manifest)
    return result


def show_run(run: str | Path | RunStore) -> Taxonomy:
    """The run's taxonomy (``taxonomy.json`` if gated, else the draft)."""
    tp = _store(run).layout.taxonomy
    return load_taxonomy(tp.taxonomy if tp.taxonomy.exists() else tp.draft)


def agreement_records(run: str | Path | RunStore) -> list[dict[str, Any]]:
    """Every stored gate round's record, by round number."""
    tp = _store(run).layout.taxonomy
    if not tp.agreement_dir.exists():
        return []
    out = [json.loads(p.read_text("utf-8")) for p in tp.agreement_dir.rglob("round_*.json")]
    return sorted(out, key=lambda r: (int(r["round"]), str(r["fingerprint"])))
