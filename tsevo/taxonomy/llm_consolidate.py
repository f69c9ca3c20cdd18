"""Induction steps 6 to 8 (design §3.3): dedup, structural repair, coverage.

Each step takes the induction state of :mod:`.llm_induce` (its pool, failures, roles,
subdomains, options and step records) and the codes drafted so far:

* :func:`dedup`: the drafts under tsevo's keys (D1, ...) go to one call that names duplicate
  pairs by the boundary rules; extensional duplicates (detector firing Jaccard ≥ 0.8 on the pool)
  are dropped too;
* :func:`structure`: name shape, role named in B only, prose present, no placeholder, unique
  names; one repair call for the drafts that break them; those still broken are dropped;
* :func:`coverage`: ≥ 1 A code, ≥ 1 B code per active role, ≥ 1 C code per subdomain with enough
  failures; one call for the gaps; a gap no grounded code fills is recorded, never filled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from .codes import Code
from .llm import (
    DraftsReply,
    draft_problems,
    draft_to_code,
    dumps,
    rules_text,
    structure_problems,
    validation_text,
)
from .prompts import load

__all__ = ["coverage", "dedup", "structure"]


class DuplicateModel(BaseModel):
    """Two drafts naming one concept."""

    concept: str = ""
    keep: str
    remove: str


class DedupReply(BaseModel):
    """Step 6."""

    duplicates: list[DuplicateModel] = Field(default_factory=list)


class FixModel(BaseModel):
    """Corrected fields of one draft."""

    draft: str
    name: str | None = None
    description: str | None = None
    when_to_use: str | None = None
    when_not_to_use: str | None = None


class FixReply(BaseModel):
    """Step 7."""

    fixes: list[FixModel] = Field(default_factory=list)


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    u = int((a | b).sum())
    return int((a & b).sum()) / u if u else 0.0


def dedup(ind: Any, codes: list[Code]) -> list[Code]:
    """Step 6: the drafts without the duplicates the model names and the extensional ones."""
    keys = {f"D{i + 1}": c for i, c in enumerate(codes)}
    removed: dict[str, str] = {}
    record: dict[str, Any] = {"drafts": {k: c.name for k, c in keys.items()}}
    if len(codes) >= 2:
        rows = [
            {
                "key": k,
                "axis": c.category,
                "role": c.applies_to_role,
                "area": c.area,
                "name": c.name,
                "description": c.description,
                "detector": c.detector,
            }
            for k, c in keys.items()
        ]

        def check(r: DedupReply) -> str | None:
            bad = [
                f"{d.keep}/{d.remove}"
                for d in r.duplicates
                if d.keep not in keys or d.remove not in keys or d.keep == d.remove
            ]
            return f"unknown or equal draft keys: {bad}" if bad else None

        text = load("induce_dedup").render(drafts=dumps(rows))
        call = ind.call("s6_dedup", text, DedupReply, check)
        record.update(call.record())
        for d in call.reply.duplicates if call.reply else []:
            if d.keep not in removed and d.remove not in removed:
                removed[d.remove] = f"duplicate of {d.keep} ({d.concept})"
    else:
        record["skipped"] = "fewer than two drafts"
    masks = {k: ind.mask(c) for k, c in keys.items() if c.detector}
    for k in masks:
        for k2 in masks:
            if k2 == k:
                break
            if (
                k2 not in removed
                and k not in removed
                and _jaccard(masks[k], masks[k2]) >= ind.cfg.dedup_jaccard
            ):
                removed[k] = f"fires like {k2} (Jaccard >= {ind.cfg.dedup_jaccard})"
    record["removed"] = dict(sorted(removed.items()))
    ind.steps["step6_dedup"] = record
    return [c for k, c in keys.items() if k not in removed]


def _problems(codes: Sequence[Code], roles: Sequence[str]) -> dict[int, list[str]]:
    seen: dict[str, int] = {}
    out: dict[int, list[str]] = {}
    for i, c in enumerate(codes):
        p = structure_problems(c, roles)
        if c.name.lower() in seen:
            p.append(f"name: repeats the name of another draft ({c.name})")
        seen.setdefault(c.name.lower(), i)
        if p:
            out[i] = p
    return out


def structure(ind: Any, codes: list[Code]) -> list[Code]:
    """Step 7: the drafts with structural problems repaired by one call, or dropped (recorded)."""
    roles = list(ind.roles)
    bad = _problems(codes, roles)
    record: dict[str, Any] = {"problems": {f"D{i + 1}": p for i, p in bad.items()}}
    if bad:
        keys = {f"D{i + 1}": i for i in bad}
        rows = [
            {
                "key": k,
                "axis": codes[i].category,
                "role": codes[i].applies_to_role,
                "name": codes[i].name,
                "description": codes[i].description,
                "when_to_use": codes[i].when_to_use,
                "when_not_to_use": codes[i].when_not_to_use,
                "problems": bad[i],
            }
            for k, i in keys.items()
        ]

        def check(r: FixReply) -> str | None:
            unknown = sorted({f.draft for f in r.fixes} - set(keys))
            return f"fixes name unknown draft keys {unknown}" if unknown else None

        call = ind.call(
            "s7_structure", load("induce_structure").render(drafts=dumps(rows)), FixReply, check
        )
        record.update(call.record())
        for f in call.reply.fixes if call.reply else []:
            change: dict[str, Any] = {
                k: v.strip()
                for k, v in f.model_dump().items()
                if k != "draft" and isinstance(v, str) and v.strip()
            }
            i = keys[f.draft]
            codes[i] = replace(codes[i], **change)
        still = _problems(codes, roles)
        record["dropped"] = {f"D{i + 1}": p for i, p in still.items()}
        codes = [c for i, c in enumerate(codes) if i not in still]
    ind.steps["step7_structure"] = record
    return codes


def _gaps(ind: Any, codes: Sequence[Code], active: Sequence[str]) -> list[dict[str, Any]]:
    gaps: list[dict[str, Any]] = []
    if not any(c.category == "A" for c in codes):
        gaps.append({"axis": "A", "role": None, "area": None, "family": "system"})
    for r in active:
        if not any(c.category == "B" and c.applies_to_role == r for c in codes):
            gaps.append({"axis": "B", "role": r, "area": None, "family": f"role:{r}"})
    for sd in ind.subdomains:
        has = any(c.category == "C" and c.area == sd["id"] for c in codes)
        if sd["failed"] >= ind.cfg.min_support and not has:
            gaps.append({"axis": "C", "role": None, "area": sd["id"], "family": "domain"})
    return gaps


def _fills(c: Code, g: Mapping[str, Any]) -> bool:
    if c.category != g["axis"]:
        return False
    if g["axis"] == "B":
        return c.applies_to_role == g["role"]
    return g["axis"] == "A" or c.area == g["area"]


def coverage(
    ind: Any, codes: list[Code], active: Sequence[str]
) -> tuple[list[Code], list[dict[str, Any]]]:
    """Step 8: the codes with those one call adds for the gaps, and the gaps left (recorded)."""
    gaps = _gaps(ind, codes, active)
    record: dict[str, Any] = {"gaps": gaps}
    if gaps:
        relevant = [
            t
            for t in ind.fails
            if any(
                g["axis"] == "A"
                or (g["axis"] == "B" and any(e["role"] == g["role"] for e in t.events))
                or (g["axis"] == "C" and t.features.get("domain.subdomain") == g["area"])
                for g in gaps
            )
        ]
        shown = ind.pick(relevant, "coverage")
        by_id = {t.problem_id: t for t in shown}
        axes = sorted({g["axis"] for g in gaps})
        areas = [*ind.groups, *[g["area"] for g in gaps if g["area"]]]

        def check(r: DraftsReply) -> str | None:
            problems = []
            for i, d in enumerate(r.codes):
                mine = draft_problems(d, f"codes[{i}]", shown=by_id, axis=axes, areas=areas)
                if not mine and not any(_fills(draft_to_code(d, support=0), g) for g in gaps):
                    mine.append(f"codes[{i}]: fills none of the gaps listed")
                problems += mine
            return validation_text(problems)

        existing = [
            {"axis": c.category, "role": c.applies_to_role, "area": c.area, "name": c.name}
            for c in codes
        ]
        text = load("induce_coverage").render(
            gaps=dumps(gaps),
            codes=dumps(existing),
            traces=ind.view(shown),
            rules=rules_text(ind.opts.max_codes),
            groups=", ".join(ind.groups),
        )
        call = ind.call("s8_coverage", text, DraftsReply, check)
        record.update(call.record())
        added = [
            draft_to_code(d, support=ind.support(d))
            for d in (call.reply.codes if call.reply else [])
        ]
        masks = [ind.mask(c) for c in codes if c.detector]
        kept: list[Code] = []
        for c in added:
            names = {x.name.lower() for x in [*codes, *kept]}
            if structure_problems(c, list(ind.roles)) or c.name.lower() in names:
                record.setdefault("dropped", []).append(c.name)
                continue
            if c.detector and any(_jaccard(ind.mask(c), m) >= ind.cfg.dedup_jaccard for m in masks):
                record.setdefault("dropped", []).append(c.name)
                continue
            kept.append(c)
        codes = codes + kept
        why = call.error or "no grounded code proposed for it"
        gaps = [{**g, "reason": f"step 8: {why}"} for g in _gaps(ind, codes, active)]
    record["open"] = gaps
    ind.steps["step8_coverage"] = record
    return codes, gaps
