"""LLM induction in the paper's 8 steps (design §3, LLM column), over the induction pool only.

1. *domain*: ≤ 40 stratified traces and tsevo's question clusters → domain, a name and terms per
   cluster (every cluster exactly once), terminology, error patterns;
2. *roles*: the event counts tsevo measured and 10 traces → a type and purpose per counted role
   (exactly those roles) and the topology; which roles are active is counted, not asked;
   2.5. *signals* (no call): per outcome-blind feature value, failed and passed support and lift;
3. *A codes*, 4. *B codes* (one call per active role), 5. *C codes*: signals and ≤ 20 failed
   traces → :class:`~tsevo.taxonomy.llm.CodeDraft` lists, each draft checked in code
   (:func:`~tsevo.taxonomy.llm.draft_problems`) and re-asked with the problems fed back;
6. *dedup*: drafts under tsevo's keys (D1, ...) → duplicate pairs to drop; then extensional
   duplicates (detector firing Jaccard ≥ 0.8 on the pool);
7. *structure*: name shape, role named in B only, prose present, no placeholders, unique names;
   one repair call for the drafts that break them, drafts still broken are dropped (recorded);
8. *coverage*: ≥ 1 A code, ≥ 1 B code per active role, ≥ 1 C code per subdomain with ≥ 3
   failures; one call for the gaps; a gap no grounded code fills is recorded, never filled.

A step whose call fails (transport, budget, every reply invalid) is recorded with its error and
proposes nothing; its axis then reaches step 8 as a gap. Ids are minted by tsevo from (axis, support
desc, name); the model never gives one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from tsevo.roles.llm import LLMClient

from .codes import Code
from .induce import InduceConfig, Induction, active_roles, fires, induction_pool, mine
from .llm import (
    INDUCE_ROLE,
    CodeDraft,
    DraftsReply,
    LLMOptions,
    StepCall,
    ask,
    draft_problems,
    draft_to_code,
    dumps,
    rules_text,
    spread,
    system_groups,
    trace_view,
    validation_text,
)
from .llm_consolidate import coverage, dedup, structure
from .model import Taxonomy
from .prompts import load
from .traces import FEATURES, Trace

__all__ = ["ROLE_TYPES", "llm_induce"]

#: The fallback role types when step 2 fails (AdaMAST's role types; tools are measurement steps).
ROLE_TYPES: dict[str, str] = {"answerer": "solver", "reviewer": "checker", "tool": "tool"}


class SubdomainModel(BaseModel):
    """A cluster's human name and key terms."""

    cluster: str
    name: str = Field(min_length=1)
    terms: list[str] = Field(default_factory=list, max_length=12)


class DomainReply(BaseModel):
    """Step 1."""

    domain: str = Field(min_length=1)
    summary: str = ""
    subdomains: list[SubdomainModel]
    terminology: list[str] = Field(default_factory=list, max_length=30)
    error_patterns: list[str] = Field(default_factory=list, max_length=20)


class RoleModel(BaseModel):
    """One role's type and purpose."""

    role: str
    type: Literal["solver", "checker", "refiner", "coordinator", "tool"]
    purpose: str = ""


class RolesReply(BaseModel):
    """Step 2."""

    roles: list[RoleModel]
    topology: str = ""


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _signals(family: str, pool: Sequence[Trace], cfg: InduceConfig, n: int) -> list[dict]:
    feats = [k for k, f in FEATURES.items() if f.outcome_blind and f.family == family]
    _, cands = mine(feats, pool, cfg)
    single = sorted((c for c in cands if len(c.atoms) == 1), key=lambda c: (c.p, c.key))
    return [
        {
            "signal": c.key,
            "failed": c.support,
            "passed": c.fired - c.support,
            "lift": round(c.lift, 3),
        }
        for c in single[:n]
    ]


class _Inducer:
    def __init__(
        self, traces: Sequence[Trace], client: LLMClient, cfg: InduceConfig, opts: LLMOptions
    ) -> None:
        self.client, self.cfg, self.opts = client, cfg, opts
        self.pool = induction_pool(traces, cfg.seed)
        self.gate_ids = sorted(t.problem_id for t in traces if t.metadata.get("pool") == "gate")
        self.fails = [t for t in self.pool if t.failed]
        self.roles = active_roles(self.pool, cfg)
        self.steps: dict[str, Any] = {
            "pool": {"traces": len(self.pool), "failures": len(self.fails)},
        }
        self.groups = system_groups()
        clusters: dict[str, list[Trace]] = {}
        for t in self.pool:
            clusters.setdefault(str(t.features.get("domain.subdomain")), []).append(t)
        self.clusters = dict(sorted(clusters.items()))

    def call(self, stage: str, text: str, model: type, validate: Any = None) -> StepCall:
        return ask(
            self.client,
            INDUCE_ROLE,
            stage,
            _user(text),
            model,
            retries=self.opts.retries,
            validate=validate,
            temperature=self.opts.temperature,
        )

    def view(
        self, ts: Sequence[Trace], outcome: bool = False, chars: int = 0, features: bool = True
    ) -> str:
        n = chars or self.opts.trace_chars
        return dumps([trace_view(t, n, outcome=outcome, features=features) for t in ts])

    # -- steps 1 and 2 ----------------------------------------------------------------------
    def domain(self) -> None:
        clusters = [
            {
                "cluster": c,
                "terms": c.split("_")[1:],
                "traces": len(ts),
                "failed": sum(t.failed for t in ts),
                "questions": [
                    t.task.split("\n", 1)[0][:200] for t in spread(ts, 2, self.cfg.seed, "q")
                ],
            }
            for c, ts in self.clusters.items()
        ]
        sample = spread(self.pool, self.opts.domain_traces, self.cfg.seed, "domain")
        want = set(self.clusters)

        def check(r: DomainReply) -> str | None:
            got = [s.cluster for s in r.subdomains]
            if len(got) != len(set(got)) or set(got) != want:
                return f"subdomains must name each cluster exactly once: {sorted(want)}"
            return None

        text = load("induce_domain").render(
            system=str(self.pool[0].metadata.get("system", "")) if self.pool else "",
            clusters=dumps(clusters),
            traces=self.view(
                sample, outcome=True, chars=self.opts.trace_chars // 2, features=False
            ),
        )
        call = self.call("s1_domain", text, DomainReply, check)
        self.steps["step1_domain"] = {**call.record(), "shown": [t.problem_id for t in sample]}
        r = call.reply
        self.domain_name = r.domain if r else ""
        self.summary = r.summary if r else ""
        self.terminology = list(r.terminology) if r else []
        self.patterns = list(r.error_patterns) if r else []
        named = {s.cluster: s for s in r.subdomains} if r else {}
        self.subdomains: list[dict[str, Any]] = [
            {
                "id": c,
                "name": named[c].name if c in named else c,
                "terms": list(named[c].terms) if c in named else c.split("_")[1:],
                "failed": sum(t.failed for t in ts),
            }
            for c, ts in self.clusters.items()
        ]

    def topology(self) -> None:
        counts = {r: dict(v) for r, v in self.roles.items()}
        sample = spread(self.pool, self.opts.role_traces, self.cfg.seed, "roles")

        def check(r: RolesReply) -> str | None:
            got = [x.role for x in r.roles]
            if len(got) != len(set(got)) or set(got) != set(counts):
                return f"roles must list each counted role exactly once: {sorted(counts)}"
            return None

        text = load("induce_roles").render(
            min_events=self.cfg.min_role_events,
            counts=dumps(counts),
            traces=self.view(sample, features=False),
        )
        call = self.call("s2_roles", text, RolesReply, check)
        self.steps["step2_roles"] = {**call.record(), "counted": counts}
        got = {x.role: x for x in call.reply.roles} if call.reply else {}
        self.role_info = {
            r: {
                "type": got[r].type if r in got else ROLE_TYPES.get(r, "solver"),
                "purpose": got[r].purpose if r in got else "",
            }
            for r in self.roles
        }
        self.topology_text = call.reply.topology if call.reply else ""

    # -- steps 3 to 5 -------------------------------------------------------------------------
    def codes(
        self,
        step: str,
        asset: str,
        shown: Sequence[Trace],
        *,
        axis: str,
        role: str | None = None,
        areas: Sequence[str] = (),
        **slots: Any,
    ) -> list[CodeDraft]:
        by_id = {t.problem_id: t for t in shown}
        limit = self.opts.max_codes

        def check(r: DraftsReply) -> str | None:
            problems = [] if len(r.codes) <= limit else [f"codes: at most {limit}"]
            for i, d in enumerate(r.codes):
                problems += draft_problems(
                    d, f"codes[{i}]", shown=by_id, axis=axis, role=role, areas=areas
                )
            return validation_text(problems)

        if role is not None:
            slots["role"] = role
        text = load(asset).render(
            traces=self.view(shown), rules=rules_text(limit), domain=self.domain_name, **slots
        )
        call = self.call(step.replace("step", "s", 1), text, DraftsReply, check)
        drafts = list(call.reply.codes) if call.reply else []
        self.steps[step] = {
            **call.record(),
            "axis": axis,
            "role": role,
            "shown": sorted(by_id),
        }
        return drafts

    def pick(self, ts: Sequence[Trace], tag: str) -> list[Trace]:
        return spread(ts, self.opts.failures_shown, self.cfg.seed, tag)

    def role_fails(self, role: str) -> list[Trace]:
        return [t for t in self.fails if any(e["role"] == role for e in t.events)]

    # -- support and dedup --------------------------------------------------------------------
    def mask(self, code: Code) -> np.ndarray:
        return np.array([fires(code.detector, t.features) for t in self.pool], dtype=bool)

    def support(self, d: CodeDraft) -> int:
        if d.detector is not None:
            det = d.detector.model_dump()
            return sum(fires(det, t.features) for t in self.fails)
        return len({e.trace_id for e in d.evidence})


def llm_induce(
    traces: Sequence[Trace],
    client: LLMClient,
    cfg: InduceConfig | None = None,
    opts: LLMOptions | None = None,
) -> Induction:
    """Induce a draft taxonomy with an LLM in 8 steps (see the module doc).

    Never raises on a bad reply or a failed request: the step is recorded (its error and every
    rejected reply) and its axis carried to step 8 as a gap.
    """
    cfg, opts = cfg or InduceConfig(), opts or LLMOptions()
    ind = _Inducer(traces, client, cfg, opts)
    ind.domain()
    ind.topology()
    active = [r for r in ind.roles if ind.roles[r]["active"]]
    ind.steps["step2_5_signals"] = {
        fam: _signals(fam, ind.pool, cfg, opts.signals_shown)
        for fam in ["system", *[f"role:{r}" for r in active], "domain"]
    }
    sig = ind.steps["step2_5_signals"]
    drafts: list[CodeDraft] = ind.codes(
        "step3_A",
        "induce_axis_a",
        ind.pick(ind.fails, "A"),
        axis="A",
        areas=ind.groups,
        topology=ind.topology_text or "(not described)",
        groups=", ".join(ind.groups),
        signals=dumps(sig["system"]),
    )
    a_names = dumps([{"name": d.name, "description": d.description} for d in drafts])
    for r in active:
        drafts += ind.codes(
            f"step4_B_{r}",
            "induce_axis_b",
            ind.pick(ind.role_fails(r), "B" + r),
            axis="B",
            role=r,
            role_type=ind.role_info[r]["type"],
            purpose=ind.role_info[r]["purpose"] or "(not described)",
            a_codes=a_names,
            signals=dumps(sig[f"role:{r}"]),
        )
    drafts += ind.codes(
        "step5_C",
        "induce_axis_c",
        ind.pick(ind.fails, "C"),
        axis="C",
        areas=list(ind.clusters),
        terminology=", ".join(ind.terminology) or "(none)",
        patterns="; ".join(ind.patterns) or "(none)",
        subdomains=dumps(ind.subdomains),
        signals=dumps(sig["domain"]),
    )
    codes = [draft_to_code(d, support=ind.support(d)) for d in drafts]
    codes = dedup(ind, codes)
    codes = structure(ind, codes)
    codes, gaps = coverage(ind, codes, active)
    codes.sort(key=lambda c: (c.category, -int(c.extras["support"]), c.name))
    tax = Taxonomy.create(
        codes,
        display_name=f"{ind.domain_name or 'tsevo residual chain'} (LLM induction)",
        domain=ind.domain_name,
        summary=ind.summary
        or f"Induced by an LLM from {len(ind.pool)} train traces ({len(ind.fails)} failures).",
        generation={
            "provider": "llm",
            "model": client.config.model,
            "trace_count": len(ind.pool),
        },
        coverage_gaps=gaps,
    )
    return Induction(tax, ind.steps, [t.problem_id for t in ind.pool], ind.gate_ids)
