"""Builtin induction: codes mined from trace features with support, lift and a BH correction.

Design §3, builtin column. The induction pool (70% of the train split units) gives all its
failures and an equal seeded sample of its passes. Per step (A: ``system`` features; B: each active
role's ``role:<r>`` features; C: ``domain`` features) the miner builds atoms (booleans both ways;
numbers at ``==`` for few values, else cut at quartiles; strings at ``==``) and pairs of atoms on
different features, and keeps a candidate when

* failure support ≥ max(3, 2% of the failures),
* lift (failure rate when it fires / failure rate overall) ≥ 1.25, and
* its one-sided Fisher exact p (hypergeometric tail) passes Benjamini–Hochberg at q = 0.05 over
  all candidates of the step.

A role's B step mines only the traces where the role acted (:data:`ROLE_GUARDS`; its codes'
detectors require the guard), so "the role did not act" stays an A code. Kept candidates are
selected greedily by new failures covered weighted by the lift above 1 (a broad code does not
crowd out the specific one inside it), Jaccard ≤ 0.5 to those selected, at most 8 per axis. A
role or axis left empty gets one relaxed pass (support ≥ 2, lift ≥ 1.1, BH still applied); still
empty, the gap is recorded in ``coverage_gaps``, never filled. Every ordering is fixed (ties by
name), so a rerun is byte-identical.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

import numpy as np
from scipy.stats import hypergeom

from .codes import Code
from .model import Taxonomy
from .traces import FEATURES, Trace

__all__ = [
    "ROLE_GUARDS",
    "Atom",
    "Candidate",
    "InduceConfig",
    "Induction",
    "active_roles",
    "atom_mask",
    "draft_code",
    "fires",
    "induce",
    "induction_pool",
    "mine",
]


@dataclass(frozen=True)
class InduceConfig:
    """The miner's numbers (design §3.3)."""

    seed: int = 0
    min_support: int = 3
    min_support_share: float = 0.02
    min_lift: float = 1.25
    fdr_q: float = 0.05
    max_jaccard: float = 0.5
    max_per_axis: int = 8
    relaxed_support: int = 2
    relaxed_lift: float = 1.1
    dedup_jaccard: float = 0.8
    min_role_events: int = 5


@dataclass(frozen=True, order=True)
class Atom:
    """``feature op value`` over one registry feature."""

    feature: str
    op: str
    value: Any

    def to_dict(self) -> dict[str, Any]:
        """The detector atom."""
        return {"feature": self.feature, "op": self.op, "value": self.value}

    def text(self) -> str:
        """``feature op value`` (a detection heuristic)."""
        v = str(self.value).lower() if isinstance(self.value, bool) else self.value
        return f"{self.feature} {self.op} {v}"

    def phrase(self) -> str:
        """A few words for names."""
        base = FEATURES[self.feature].phrase
        if self.value is True:
            return base
        if self.value is False or (self.op == "==" and self.value == 0):
            return f"no {base}"
        if self.op == ">=":
            return f"{base} high"
        if self.op == "<=":
            return f"{base} low"
        return f"{base} {self.value}"


@dataclass
class Candidate:
    """An atom or a pair of atoms with its measured rates."""

    atoms: tuple[Atom, ...]
    mask: np.ndarray = field(repr=False)
    support: int = 0
    fired: int = 0
    lift: float = 0.0
    p: float = 1.0
    p_adj: float = 1.0

    @property
    def key(self) -> str:
        """A stable name for ordering."""
        return " AND ".join(a.text() for a in self.atoms)


@dataclass
class Induction:
    """What induction produced: the draft taxonomy, per-step records and the pools."""

    taxonomy: Taxonomy
    steps: dict[str, Any]
    pool_ids: list[str]
    gate_ids: list[str]


_OPS = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def atom_mask(values: Sequence[Any], op: str, value: Any) -> np.ndarray:
    """Where ``value_i op value`` holds (a missing value never holds)."""
    out = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if v is None:
            continue
        try:
            out[i] = bool(_OPS[op](v, value))
        except TypeError:
            out[i] = False
    return out


def fires(detector: Mapping[str, Any] | None, features: Mapping[str, Any]) -> bool:
    """Whether a detector holds on one trace's features (unknown features never hold)."""
    if not detector:
        return False
    for clause in detector.get("any", ()):
        ok = True
        for a in clause["all"]:
            v = features.get(a["feature"])
            if v is None or not atom_mask([v], a["op"], a["value"])[0]:
                ok = False
                break
        if ok:
            return True
    return False


#: Where a role acts (the answerer: every trace; reviewer and tools: a stage shortlisted a tool).
ROLE_GUARDS: dict[str, Atom] = {
    "reviewer": Atom("review.n_stages", ">=", 1),
    "tool": Atom("review.n_stages", ">=", 1),
}


def _rank(seed: int, tag: str, key: str) -> str:
    return hashlib.sha256(f"{tag}\x00{seed}\x00{key}".encode()).hexdigest()


def induction_pool(traces: Sequence[Trace], seed: int) -> list[Trace]:
    """All induction-pool failures plus an equal seeded sample of its passes, sorted by id."""
    pool = [t for t in traces if t.metadata.get("pool") == "induction"]
    fails = [t for t in pool if t.failed]
    passes = sorted(
        (t for t in pool if not t.failed), key=lambda t: _rank(seed, "passes", t.problem_id)
    )
    return sorted(fails + passes[: len(fails)], key=lambda t: t.problem_id)


def _atoms(name: str, values: list[Any]) -> list[Atom]:
    kind = FEATURES[name].kind
    present = [v for v in values if v is not None]
    distinct = sorted(set(present), key=str)
    if len(distinct) < 2:
        return []
    if kind == "bool":
        return [Atom(name, "==", True), Atom(name, "==", False)]
    if kind == "str":
        return [Atom(name, "==", v) for v in distinct]
    if len(distinct) <= 3:
        return [Atom(name, "==", int(v)) for v in distinct]
    qs = sorted({float(np.quantile(present, q)) for q in (0.25, 0.5, 0.75)})
    lo, hi = min(present), max(present)
    out = [Atom(name, ">=", _num(t)) for t in qs if t > lo]
    return out + [Atom(name, "<=", _num(t)) for t in qs if t < hi]


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else round(float(x), 6)


def _bh(p: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values."""
    m = len(p)
    if not m:
        return p
    order = np.argsort(p, kind="stable")
    adj = p[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(adj[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


def _candidates(
    feats: list[str], pool: Sequence[Trace], fail: np.ndarray, min_sup: int
) -> list[Candidate]:
    atoms: list[tuple[Atom, np.ndarray]] = []
    for name in feats:
        values = [t.features.get(name) for t in pool]
        for a in _atoms(name, values):
            m = atom_mask(values, a.op, a.value)
            if 0 < m.sum() < len(pool):
                atoms.append((a, m))
    cands = [Candidate((a,), m) for a, m in atoms]
    strong = [(a, m) for a, m in atoms if int((m & fail).sum()) >= min_sup]
    for (a1, m1), (a2, m2) in combinations(strong, 2):
        if a1.feature != a2.feature:
            m = m1 & m2
            if int((m & fail).sum()) >= min_sup and m.sum() < min(m1.sum(), m2.sum()):
                cands.append(Candidate((a1, a2), m))
    n, k = len(pool), int(fail.sum())
    for c in cands:
        c.fired, c.support = int(c.mask.sum()), int((c.mask & fail).sum())
        c.lift = (c.support / c.fired) / (k / n) if c.fired and k else 0.0
        c.p = float(hypergeom.sf(c.support - 1, n, k, c.fired)) if c.fired else 1.0
    adj = _bh(np.array([c.p for c in cands]))
    for c, pa in zip(cands, adj, strict=True):
        c.p_adj = float(pa)
    return cands


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    u = int((a | b).sum())
    return int((a & b).sum()) / u if u else 0.0


def mine(
    feats: list[str], pool: Sequence[Trace], cfg: InduceConfig, *, relaxed: bool = False
) -> tuple[list[Candidate], list[Candidate]]:
    """The selected candidates of one step and every candidate tested (for the records)."""
    fail = np.array([t.failed for t in pool], dtype=bool)
    k = int(fail.sum())
    if not k or k == len(pool):
        return [], []
    if relaxed:
        min_sup, min_lift = cfg.relaxed_support, cfg.relaxed_lift
    else:
        min_sup = max(cfg.min_support, math.ceil(cfg.min_support_share * k))
        min_lift = cfg.min_lift
    cands = _candidates(feats, pool, fail, min_sup)
    kept = [
        c for c in cands if c.support >= min_sup and c.lift >= min_lift and c.p_adj <= cfg.fdr_q
    ]
    chosen: list[Candidate] = []
    covered = np.zeros(len(pool), dtype=bool)
    while len(chosen) < cfg.max_per_axis:
        best, best_key = None, None
        for c in kept:
            if c in chosen or any(_jaccard(c.mask, s.mask) > cfg.max_jaccard for s in chosen):
                continue
            new = int((c.mask & fail & ~covered).sum())
            key = (-round(new * (c.lift - 1.0), 9), -new, len(c.atoms), c.key)
            if new > 0 and (best_key is None or key < best_key):
                best, best_key = c, key
        if best is None:
            break
        chosen.append(best)
        covered |= best.mask & fail
    return chosen, cands


def _title(words: str, role: str | None, limit: int = 6) -> str:
    toks = [w for w in words.replace("_", " ").replace(".", " ").split() if w]
    if role:
        toks = [role] + [w for w in toks if w.lower() != role]
    return "_".join(w[:1].upper() + w[1:] for w in toks[:limit])


def _area(axis: str, atoms: Sequence[Atom], role: str | None) -> str:
    if axis == "B":
        return str(role)
    sub = [a.value for a in atoms if a.feature == "domain.subdomain" and a.op == "=="]
    if sub:
        return str(sub[0])
    head = atoms[0].feature.split(".")[0]
    return head if axis == "A" else {"domain": "question"}.get(head, head)


def draft_code(
    axis: str,
    c: Candidate,
    role: str | None,
    pool: Sequence[Trace],
    fail: np.ndarray,
    sibling: Candidate | None,
    guard: Atom | None = None,
) -> Code:
    """A code drafted from a selected candidate: predicate, measured rates, evidence (≤ 5).

    With ``guard`` (a role's B code, mined on the traces where the role acted) the detector
    requires the guard too, and the rates are those of that sub-pool.
    """
    pred = " and ".join(a.text() for a in c.atoms)
    rate = c.support / c.fired
    base = fail.mean()
    where = "In the induction pool"
    if guard is not None:
        where = (
            f"Among the {len(pool)} induction-pool traces where {guard.text()} (the {role} acted)"
        )
    atoms = c.atoms if guard is None or guard in c.atoms else (guard, *c.atoms)
    evidence = tuple(
        sorted(t.problem_id for t, m, f in zip(pool, c.mask, fail, strict=True) if m and f)[:5]
    )
    if sibling is not None:
        not_use = f"Not when only {' and '.join(a.text() for a in sibling.atoms)} holds; use it "
        not_use += f"when {pred}."
    else:
        not_use = f"Not when {pred} is false."
    severity = "critical" if c.lift >= 2.5 else "major" if c.lift >= 1.6 else "minor"
    return Code(
        id="",
        category=axis,
        name=_title(" ".join(a.phrase() for a in c.atoms), role),
        description=(
            f"Traces where {pred}. {where} {c.support} of the {c.fired} traces it "
            f"fires on failed ({rate:.0%}, against {base:.0%} overall; lift {c.lift:.2f}, "
            f"one-sided Fisher p {c.p:.2g}, BH-adjusted {c.p_adj:.2g})."
        ),
        when_to_use=f"Assign when the trace shows {pred}.",
        when_not_to_use=not_use,
        detection_heuristics=(" AND ".join(a.text() for a in atoms),),
        severity=severity,
        applies_to_role=role,
        area=_area(axis, c.atoms, role),
        detector={"any": [{"all": [a.to_dict() for a in atoms]}]},
        outcome_blind=True,
        evidence_trace_ids=evidence,
        extras={"support": c.support, "lift": round(c.lift, 6)},
    )


def _sibling(c: Candidate, cands: Sequence[Candidate], chosen: Sequence[Candidate]) -> Any:
    rivals = [
        s
        for s in cands
        if s not in chosen and {a.feature for a in s.atoms} & {a.feature for a in c.atoms}
    ]
    rivals.sort(key=lambda s: (-_jaccard(s.mask, c.mask), s.key))
    return rivals[0] if rivals else None


def _family(name: str) -> str:
    return FEATURES[name].family


def active_roles(pool: Sequence[Trace], cfg: InduceConfig) -> dict[str, dict[str, Any]]:
    """Per role: events, failures among its traces, active (≥ min events and ≥ 1 failure)."""
    roles: dict[str, dict[str, Any]] = {}
    for role in ("answerer", "reviewer", "tool"):
        n_ev = sum(1 for t in pool for e in t.events if e["role"] == role)
        n_fail = sum(1 for t in pool if t.failed and any(e["role"] == role for e in t.events))
        active = n_ev >= cfg.min_role_events and n_fail >= 1
        roles[role] = {"events": n_ev, "failures": n_fail, "active": active}
    return roles


def induce(traces: Sequence[Trace], cfg: InduceConfig | None = None) -> Induction:
    """Mine a draft taxonomy from train traces (the induction pool only); see the module doc."""
    cfg = cfg or InduceConfig()
    pool = induction_pool(traces, cfg.seed)
    gate_ids = sorted(t.problem_id for t in traces if t.metadata.get("pool") == "gate")
    fail = np.array([t.failed for t in pool], dtype=bool)
    roles = active_roles(pool, cfg)
    blind = [n for n, f in FEATURES.items() if f.outcome_blind]
    steps: dict[str, Any] = {
        "step2_roles": roles,
        "pool": {"traces": len(pool), "failures": int(fail.sum())},
    }
    plan: list[tuple[str, str, str | None]] = [("step3_A", "system", None)]
    plan += [("step4_B_" + r, f"role:{r}", r) for r in roles if roles[r]["active"]]
    plan += [("step5_C", "domain", None)]
    drafts: list[tuple[Code, np.ndarray]] = []
    gaps: list[dict[str, Any]] = []
    for step, family, role in plan:
        axis = "A" if family == "system" else "B" if role else "C"
        feats = [n for n in blind if _family(n) == family]
        # B codes are mined where the role acted: "it did not act" stays an A code
        guard = ROLE_GUARDS.get(role or "")
        idx = np.arange(len(pool))
        if guard is not None:
            values = [t.features.get(guard.feature) for t in pool]
            idx = np.flatnonzero(atom_mask(values, guard.op, guard.value))
        sub = [pool[i] for i in idx]
        chosen, cands = mine(feats, sub, cfg)
        relaxed = False
        if not chosen:
            chosen, cands = mine(feats, sub, cfg, relaxed=True)
            relaxed = bool(chosen)
        steps[step] = {
            "axis": axis,
            "role": role,
            "where": guard.text() if guard is not None else "every trace",
            "traces": len(sub),
            "relaxed": relaxed,
            "tested": len(cands),
            "selected": [c.key for c in chosen],
            "signals": [
                {
                    "candidate": c.key,
                    "support": c.support,
                    "fired": c.fired,
                    "lift": round(c.lift, 6),
                    "p": float(f"{c.p:.6g}"),
                    "p_adj": float(f"{c.p_adj:.6g}"),
                }
                for c in sorted(cands, key=lambda c: (c.p, c.key))[:40]
            ],
        }
        if not chosen:
            gaps.append(
                {
                    "axis": axis,
                    "role": role,
                    "family": family,
                    "reason": "no candidate passed support, lift and BH (relaxed pass too)",
                }
            )
        sub_fail = fail[idx]
        for c in chosen:
            code = draft_code(axis, c, role, sub, sub_fail, _sibling(c, cands, chosen), guard)
            full = np.zeros(len(pool), dtype=bool)
            full[idx] = c.mask
            drafts.append((code, full))
    # S6: extensional duplicates across steps (firing Jaccard >= 0.8): keep the simpler, earlier
    kept: list[tuple[Code, np.ndarray]] = []
    dropped = []
    for code, mask in drafts:
        dup = next((k for k, m in kept if _jaccard(m, mask) >= cfg.dedup_jaccard), None)
        if dup is not None:
            dropped.append({"dropped": code.name, "kept": dup.name})
        else:
            kept.append((code, mask))
    steps["step6_dedup"] = dropped
    for r in roles:
        kept_roles = {c.applies_to_role for c, _ in kept if c.category == "B"}
        if roles[r]["active"] and r not in kept_roles and not any(g["role"] == r for g in gaps):
            why = [d["kept"] for d in dropped if d["dropped"].lower().startswith(r)]
            gaps.append(
                {
                    "axis": "B",
                    "role": r,
                    "family": f"role:{r}",
                    "reason": f"its codes duplicated {', '.join(why) or 'other codes'}",
                }
            )
    # S7: unique names (a suffix word, never a placeholder)
    seen: dict[str, int] = {}
    codes = []
    for code, _ in sorted(
        kept, key=lambda cm: (cm[0].category, -int(cm[0].extras["support"]), cm[0].name)
    ):
        seen[code.name] = seen.get(code.name, 0) + 1
        if seen[code.name] > 1:
            code = replace(code, name=f"{code.name}_Variant{seen[code.name]}")
        codes.append(code)
    steps["step8_coverage"] = gaps
    tax = Taxonomy.create(
        codes,
        display_name="tsevo residual chain (builtin induction)",
        domain="time-series multiple-choice questions",
        summary=f"Induced from {len(pool)} train traces ({int(fail.sum())} failures) by the "
        "builtin miner (support, lift, Fisher + Benjamini-Hochberg).",
        generation={"provider": "builtin", "model": "builtin-1", "trace_count": len(pool)},
        coverage_gaps=gaps,
    )
    return Induction(tax, steps, [t.problem_id for t in pool], gate_ids)
