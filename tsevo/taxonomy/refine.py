"""Refinement: a later round's traces propose bounded edits, and the gate decides (design §5.1).

After a later round's train traces arrive, :func:`refine` measures the current version (accepted,
or ``review_required`` under ``when="every_round"``) on the induction pool of the NEW traces and
proposes one batch of edits:

* **retire** a code whose detector fires on fewer than ``retire_below`` failures of the pool (its
  failure vanished); its id is remembered and never minted again;
* **merge** two codes of one axis (and role) whose firings on the pool overlap with Jaccard ≥
  ``overlap_jaccard`` (the lower id is kept, detectors OR-ed); the same overlap across axes or
  roles, where a merge is not allowed, **relabels** the higher id's ``when_not_to_use`` to draw
  the boundary;
* **add** codes for the failure mass no remaining code covers: the induction miner (support, lift,
  Fisher + Benjamini-Hochberg; A on system features, B per active role, C on domain features)
  run on the pool traces no remaining code fires on; a mined code that duplicates a kept one
  (firing Jaccard ≥ ``overlap_jaccard``) is dropped. Added codes get fresh minted ids.

Codes without a detector cannot be measured here and are left alone. The batch is capped
(``max_edits``; adds first, then retires, merges, relabels), applied at once (one lineage entry)
and gated on the NEW traces' gate pool (``gate``; two rounds by default): it becomes current only
if the gate accepts it, else the previous version stays and the rejected proposal is recorded.

Pins: ``taxonomy/pins.json`` maps a consumer to the fingerprint and version file it pinned
(:func:`pin`); no pinned version file is ever rewritten (:func:`write_version` raises instead) and
:func:`load_pinned` returns exactly the pinned version, its fingerprint checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tsevo.fileio import atomic_write_text
from tsevo.hashing import canonical_json
from tsevo.store import RunStore
from tsevo.store.layout import TaxonomyPaths

from .codes import Code, TaxonomyError, id_sort_key
from .edits import Add, Edit, LineageEntry, Merge, Relabel, Retire, apply_edits
from .gate import GateConfig, GateResult, gate
from .induce import Candidate, InduceConfig, active_roles, draft_code, fires, induction_pool, mine
from .jsonio import load_taxonomy, save_taxonomy
from .model import Taxonomy
from .traces import FEATURES, Trace

__all__ = [
    "WHEN",
    "RefineConfig",
    "RefineResult",
    "load_pinned",
    "pin",
    "pins_path",
    "propose",
    "read_pins",
    "refine",
    "refine_paths",
    "write_version",
]

#: When refinement runs: never, after an accepted gate, or every round (accepted or review).
WHEN: tuple[str, ...] = ("off", "after_accepted", "every_round")

GateFn = Callable[[Taxonomy, Sequence[Trace], GateConfig], GateResult]


@dataclass(frozen=True)
class RefineConfig:
    """Refinement's switch and numbers.

    Attributes:
        when: ``off``, ``after_accepted`` (only an accepted version is refined) or
            ``every_round`` (an accepted or ``review_required`` one).
        seed: Seeds the induction pool's pass sample and the miner.
        max_edits: Edits per batch, in all.
        max_add: Codes added per batch.
        max_retire: Codes retired per batch.
        max_merge: Merges per batch.
        max_relabel: Relabels per batch.
        retire_below: A code firing on fewer failures of the new pool is retired.
        overlap_jaccard: Firing overlap at which two codes merge (or a relabel draws the line).
        gate: The gate the edited version must pass (two rounds by default, design §5.1).
    """

    when: str = "after_accepted"
    seed: int = 0
    max_edits: int = 5
    max_add: int = 2
    max_retire: int = 2
    max_merge: int = 2
    max_relabel: int = 2
    retire_below: int = 2
    overlap_jaccard: float = 0.8
    gate: GateConfig = field(default_factory=lambda: GateConfig(max_rounds=2))

    def __post_init__(self) -> None:
        if self.when not in WHEN:
            raise ValueError(f"refine when={self.when!r}; use one of {WHEN}")
        caps = (self.max_edits, self.max_add, self.max_retire, self.max_merge, self.max_relabel)
        if min(caps) < 0 or self.retire_below < 0:
            raise ValueError("refine caps and retire_below must be >= 0")
        if not 0.0 < self.overlap_jaccard <= 1.0:
            raise ValueError("overlap_jaccard must be in (0, 1]")


@dataclass
class RefineResult:
    """What one refinement did.

    Attributes:
        decision: ``off``, ``skipped`` (the current version's status does not qualify),
            ``no_edits``, ``accepted`` (the gated edit stands) or ``rejected``.
        reason: Why, in words.
        base: The version refined.
        current: The version current afterwards (the gated one if accepted, else ``base``).
        proposed: One evidence record per proposed edit (what was measured).
        proposal: The edited version before the gate (``None`` without edits).
        gated: The gate's output (with its status), accepted or not.
        rounds: The gate's round records.
        lineage: The proposal's lineage entry, then the gate's own edits.
        pool: Sizes of the pool the edits were measured on.
        config: The configuration used.
    """

    decision: str
    reason: str
    base: Taxonomy
    current: Taxonomy
    proposed: list[dict[str, Any]] = field(default_factory=list)
    proposal: Taxonomy | None = None
    gated: Taxonomy | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    lineage: list[LineageEntry] = field(default_factory=list)
    pool: dict[str, int] = field(default_factory=dict)
    config: RefineConfig = field(default_factory=RefineConfig)

    @property
    def accepted(self) -> bool:
        """Whether the edits stand."""
        return self.decision == "accepted"

    def record(self, trigger: str) -> dict[str, Any]:
        """The JSON record of the refinement (proposal, gate figures, decision)."""

        def ref(t: Taxonomy | None) -> dict[str, Any] | None:
            keys = ("fingerprint", "version_n", "status")
            return None if t is None else {k: getattr(t, k) for k in keys}

        agr = dict(self.gated.generation.get("agreement") or {}) if self.gated else {}
        return {
            "trigger": trigger,
            "decision": self.decision,
            "reason": self.reason,
            "config": asdict(self.config),
            "base": ref(self.base),
            "current": ref(self.current),
            "pool": dict(self.pool),
            "proposed": list(self.proposed),
            "proposal": ref(self.proposal),
            "gated": ref(self.gated),
            "gate": agr or None,
            "gate_rounds": [
                {k: r.get(k) for k in ("round", "fingerprint", "metric", "passed", "coverage")}
                for r in self.rounds
            ],
            "lineage": [e.to_dict() for e in self.lineage],
        }


# -- measuring and proposing -------------------------------------------------------------------


def _mask(detector: Mapping[str, Any] | None, pool: Sequence[Trace]) -> np.ndarray:
    return np.array([fires(detector, t.features) for t in pool], dtype=bool).reshape(len(pool))


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    u = int((a | b).sum())
    return int((a & b).sum()) / u if u else 0.0


def _mined(residual: Sequence[Trace], seed: int) -> list[tuple[str, str | None, Candidate]]:
    """Candidates the induction miner selects on the uncovered traces, per step."""
    if not residual:
        return []
    roles = active_roles(residual, InduceConfig())
    plan: list[tuple[str, str, str | None]] = [("system", "A", None)]
    plan += [(f"role:{r}", "B", r) for r in roles if roles[r]["active"]]
    plan += [("domain", "C", None)]
    out: list[tuple[str, str | None, Candidate]] = []
    for family, axis, role in plan:
        feats = [n for n, f in FEATURES.items() if f.outcome_blind and f.family == family]
        chosen, _ = mine(feats, residual, InduceConfig(seed=seed))
        out += [(axis, role, c) for c in chosen]
    return out


def _unique_name(name: str, taken: set[str]) -> str:
    k, out = 1, name
    while out in taken:
        k += 1
        out = f"{name}_Variant{k}"
    taken.add(out)
    return out


Proposal = tuple[Edit, dict[str, Any]]


def _retires(
    masks: Mapping[str, np.ndarray], fail: np.ndarray, cfg: RefineConfig
) -> list[Proposal]:
    """Codes firing on fewer than ``retire_below`` failures (fewest first)."""
    support = {i: int((m & fail).sum()) for i, m in masks.items()}
    low = sorted(
        (i for i in support if support[i] < cfg.retire_below),
        key=lambda i: (support[i], id_sort_key(i)),
    )[: cfg.max_retire]
    return [
        (
            Retire(i, reason="unused"),
            {"op": "retire", "id": i, "support": support[i], "fired": int(masks[i].sum())},
        )
        for i in low
    ]


def _overlaps(
    kept: Sequence[Code], masks: Mapping[str, np.ndarray], cfg: RefineConfig
) -> tuple[list[Proposal], list[Proposal]]:
    """Merges (same axis and role) and relabels (across) of codes whose firings overlap."""
    pairs = []
    for k, a in enumerate(kept):
        for b in kept[k + 1 :]:
            j = _jaccard(masks[a.id], masks[b.id])
            if j >= cfg.overlap_jaccard:
                lo, hi = sorted((a, b), key=lambda c: id_sort_key(c.id))
                pairs.append((-round(j, 9), id_sort_key(lo.id), id_sort_key(hi.id), lo, hi, j))
    merges: list[Proposal] = []
    relabels: list[Proposal] = []
    touched: set[str] = set()
    for *_, lo, hi, j in sorted(pairs, key=lambda p: p[:3]):
        if {lo.id, hi.id} & touched:
            continue
        ev = {"jaccard": round(j, 6), "fired": [int(masks[lo.id].sum()), int(masks[hi.id].sum())]}
        if lo.category == hi.category and lo.applies_to_role == hi.applies_to_role:
            if len(merges) >= cfg.max_merge:
                continue
            rec = {"op": "merge", "keep": lo.id, "absorb": [hi.id], **ev}
            merges.append((Merge(lo.id, (hi.id,)), rec))
        else:
            if len(relabels) >= cfg.max_relabel:
                continue
            theirs = (lo.detection_heuristics or (lo.description,))[0]
            text = (
                f"Not when the trace fits {lo.id} {lo.name} ({theirs}) with nothing more; the two "
                f"fired together on {j:.0%} of their refinement-pool firings."
            )
            rec = {"op": "relabel", "id": hi.id, "other": lo.id, **ev}
            relabels.append((Relabel(hi.id, {"when_not_to_use": text}), rec))
        touched |= {lo.id, hi.id}
    return merges, relabels


def _adds(
    pool: Sequence[Trace],
    fail: np.ndarray,
    kept: Sequence[Code],
    masks: Mapping[str, np.ndarray],
    taken: set[str],
    cfg: RefineConfig,
) -> tuple[list[Proposal], int]:
    """Mined codes for the failures no kept code covers, and how many failures that is."""
    covered = np.zeros(len(pool), dtype=bool)
    for c in kept:
        covered |= masks[c.id]
    idx = [k for k in range(len(pool)) if not covered[k]]
    residual = [pool[k] for k in idx]
    fail_r = fail[idx] if idx else np.zeros(0, dtype=bool)
    found = []
    for axis, role, cand in _mined(residual, cfg.seed):
        code = draft_code(axis, cand, role, residual, fail_r, None)
        full = _mask(code.detector, pool)
        dup = any(_jaccard(full, masks[c.id]) >= cfg.overlap_jaccard for c in kept)
        found.append((-cand.support, -round(cand.lift, 9), cand.key, code, full, dup, cand))
    adds: list[Proposal] = []
    new_masks: list[np.ndarray] = []
    for *_, code, full, dup, cand in sorted(found, key=lambda f: f[:3]):
        if len(adds) >= cfg.max_add or dup:
            continue
        if any(_jaccard(full, m) >= cfg.overlap_jaccard for m in new_masks):
            continue
        new_masks.append(full)
        code = replace(code, name=_unique_name(code.name, taken))
        rec = {
            "op": "add",
            "name": code.name,
            "category": code.category,
            "role": code.applies_to_role,
            "candidate": cand.key,
            "support": cand.support,
            "fired": cand.fired,
            "lift": round(cand.lift, 6),
            "p_adj": float(f"{cand.p_adj:.6g}"),
        }
        adds.append((Add(code), rec))
    return adds, int(fail_r.sum())


def propose(
    current: Taxonomy, traces: Sequence[Trace], cfg: RefineConfig | None = None
) -> tuple[list[Edit], list[dict[str, Any]], dict[str, int]]:
    """The bounded edit batch refinement proposes on the traces' induction pool.

    Retires are decided first (the adds and overlaps are measured without them); the cap
    ``max_edits`` then keeps adds, retires, merges and relabels in that priority.

    Returns:
        The edits (retires, merges, relabels, adds: the order they are applied in), one evidence
        record per edit, and the pool's sizes.
    """
    cfg = cfg or RefineConfig()
    pool = induction_pool(traces, cfg.seed)
    fail = np.array([t.failed for t in pool], dtype=bool).reshape(len(pool))
    measured = [c for c in current.codes if c.detector]
    masks = {c.id: _mask(c.detector, pool) for c in measured}
    retires = _retires(masks, fail, cfg)
    low = {r["id"] for _, r in retires}
    kept = [c for c in measured if c.id not in low]
    merges, relabels = _overlaps(kept, masks, cfg)
    taken = {c.name for c in current.codes if c.id not in low}
    adds, uncovered = _adds(pool, fail, kept, masks, taken, cfg)
    chosen: list[Proposal] = []
    for group in (adds, retires, merges, relabels):
        chosen += group[: max(0, cfg.max_edits - len(chosen))]
    order = {Retire: 0, Merge: 1, Relabel: 2, Add: 3}
    chosen.sort(key=lambda er: order[type(er[0])])
    sizes = {"traces": len(pool), "failures": int(fail.sum()), "uncovered_failures": uncovered}
    return [e for e, _ in chosen], [r for _, r in chosen], sizes


def _eligible(status: str, when: str) -> str:
    """Why a version of this status is not refined now ('' when it is)."""
    if status == "baseline":
        return "a baseline vocabulary is not refined"
    if status == "draft":
        return "the current version is a draft; gate it first"
    if when == "after_accepted" and status != "accepted":
        return f"the current version is {status}; when=after_accepted refines accepted versions"
    return ""


def refine(
    current: Taxonomy,
    traces: Sequence[Trace],
    cfg: RefineConfig | None = None,
    *,
    trigger: str = "refine",
    gate_fn: GateFn | None = None,
) -> RefineResult:
    """Propose bounded edits on a later round's traces and keep them only if the gate accepts.

    Args:
        current: The version in use (accepted, or ``review_required`` with ``every_round``).
        traces: The NEW round's normalized train traces (pools in their metadata).
        cfg: When, the caps and the gate's numbers.
        trigger: Kept in the lineage (``refine round 3``).
        gate_fn: The gate (default: the builtin four-reader :func:`~tsevo.taxonomy.gate.gate`).

    Returns:
        The decision, the proposal and its evidence, the gate's rounds and the current version.
    """
    cfg = cfg or RefineConfig()
    res = RefineResult("off", "refinement is off", current, current, config=cfg)
    if cfg.when == "off":
        return res
    why = _eligible(current.status, cfg.when)
    if why:
        res.decision, res.reason = "skipped", why
        return res
    edits, proposed, sizes = propose(current, traces, cfg)
    res.proposed, res.pool = proposed, sizes
    if not edits:
        res.decision, res.reason = "no_edits", "no code vanished, overlapped or was missing"
        return res
    batch = apply_edits(current, edits, trigger=trigger)
    gated = (gate_fn or gate)(batch.taxonomy, traces, cfg.gate)
    res.proposal, res.gated, res.rounds = batch.taxonomy, gated.taxonomy, gated.rounds
    res.lineage = [batch.entry, *gated.lineage]
    if gated.taxonomy.status == "accepted":
        res.decision, res.current = "accepted", gated.taxonomy
        res.reason = "the gate accepted the edited version"
    else:
        agr = gated.taxonomy.generation.get("agreement") or {}
        res.decision = "rejected"
        res.reason = (
            f"the gate left the edited version {gated.taxonomy.status} (kappa "
            f"{agr.get('final_kappa')}, coverage {agr.get('final_coverage')}); "
            f"{current.fingerprint[:19]} stays current"
        )
    return res


# -- files: refinement records, versions, pins -------------------------------------------------


def _store(run: str | Path | RunStore) -> RunStore:
    return run if isinstance(run, RunStore) else RunStore.open(run)


def refine_paths(tp: TaxonomyPaths, round_: int) -> tuple[Path, Path]:
    """A round's refinement record and its proposal file (``refine/round_<r>[.proposal].json``)."""
    return tp.refine_record(round_), tp.refine_proposal(round_)


def pins_path(tp: TaxonomyPaths) -> Path:
    """``taxonomy/pins.json``: consumer name -> the fingerprint and version it pinned."""
    return tp.pins


def read_pins(run: str | Path | RunStore | TaxonomyPaths) -> dict[str, dict[str, Any]]:
    """The pins of a run (none: an empty mapping)."""
    tp = run if isinstance(run, TaxonomyPaths) else _store(run).layout.taxonomy
    path = pins_path(tp)
    return dict(json.loads(path.read_text("utf-8"))) if path.exists() else {}


def write_version(tp: TaxonomyPaths, tax: Taxonomy) -> Path:
    """Save ``versions/v<n>.json``, never rewriting a pinned version file.

    Raises:
        TaxonomyError: The file is pinned and holds another fingerprint (naming path and pins).
    """
    path = tp.version(tax.version_n)
    if path.exists():
        held = load_taxonomy(path, verify_fingerprint=False).fingerprint
        by = sorted(c for c, p in read_pins(tp).items() if p.get("fingerprint") == held)
        if by:
            if held != tax.fingerprint:
                raise TaxonomyError(
                    f"{path}: pinned by {', '.join(by)} ({held}); refusing to overwrite it with "
                    f"{tax.fingerprint} (unpin it in {pins_path(tp)} first)"
                )
            return path  # pinned and the same version: its bytes stay as they are
    return save_taxonomy(tax, path)


def pin(run: str | Path | RunStore, consumer: str, version_n: int | None = None) -> dict[str, Any]:
    """Pin a consumer to a version (default: the current one, its version file written if missing).

    Returns:
        The pin record (``fingerprint``, ``version_n``, ``path`` relative to ``taxonomy/``).
    """
    tp = _store(run).layout.taxonomy
    if version_n is None:
        tax = load_taxonomy(tp.taxonomy)
        write_version(tp, tax)
    else:
        tax = load_taxonomy(tp.version(version_n))
    path = tp.version(tax.version_n)
    record = {
        "fingerprint": tax.fingerprint,
        "version_n": tax.version_n,
        "path": path.relative_to(tp.dir).as_posix(),
    }
    pins = read_pins(run)
    pins[str(consumer)] = record
    atomic_write_text(pins_path(tp), canonical_json(pins))
    return record


def load_pinned(run: str | Path | RunStore, consumer: str) -> Taxonomy:
    """Exactly the version a consumer pinned.

    Raises:
        TaxonomyError: The consumer has no pin, or the pinned file is gone or no longer holds the
            pinned fingerprint (the error names the file).
    """
    tp = _store(run).layout.taxonomy
    pins = read_pins(run)
    if consumer not in pins:
        raise TaxonomyError(f"{pins_path(tp)}: no pin for consumer {consumer!r}")
    p = pins[consumer]
    path = tp.dir / str(p["path"])
    if not path.exists():
        raise TaxonomyError(f"{path}: the version {consumer!r} pinned ({p['fingerprint']}) is gone")
    tax = load_taxonomy(path, verify_fingerprint=False)
    if tax.fingerprint != p["fingerprint"]:
        raise TaxonomyError(
            f"{path}: {consumer!r} pinned {p['fingerprint']}, the file now holds "
            f"{tax.fingerprint} (changed since it was pinned)"
        )
    return tax
