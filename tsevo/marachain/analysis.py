"""The LLM chain step's contracts, checked against row sets tsevo precomputes (design §3.2).

An LLM chain step makes two calls: an *analysis* of the node to edit over the whole batch, then a
*mutation* of it. Both replies are plain JSON; this module checks them as data (the LLM role
validates their shape with pydantic, one layer down), so the same checks serve the scripted tier,
a real model and a replayed cassette. :class:`StepFacts` is what tsevo knows before the call, as
the model is shown it (rows under their shown labels):

* the parent's per-row part, fact, raw and credited scores, the lineage and the changes on it;
* the row classes the analysis must account for: residual held-out errors (never credited on the
  path), rows the parent's own change regressed, rows that flipped two or more times, lost wins;
* which lineage node's change credited each row the parent holds (``success_extraction``);
* inconsistency pairs: two lineage nodes with the same artifact hash that disagree on a row;
* the stored fields a citation may quote (``{node_id, qid, field}`` -> text).

:func:`check_analysis` returns every reason an analysis is refused (empty: accepted):
an unknown category; a row outside the batch; a category whose precondition fails (A needs facts
O/S/A, B a wrong replacement or a harmed probe row, C and I kept rows, F two changes on the
lineage, G a precomputed pair, H a lost win, D and E a citation); a responsible node off the
lineage; a residual or regressed row left unexplained; an uncovered oscillating row; a credited
row without the change behind it; a quote that is not verbatim in the field it names; a
data-quality row that also carries a diagnosis. :func:`check_edit` refuses a mutation whose
actions resolve nothing or name rows outside the batch. The changelog of an accepted mutation is
written by tsevo (:func:`change_of`), never taken from the model.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .history import ChangeEntry, ScoreHistory

__all__ = [
    "CATEGORY_CODES",
    "CATEGORY_MEANINGS",
    "EDIT_TARGETS",
    "StepFacts",
    "change_of",
    "check_analysis",
    "check_edit",
    "source_diff",
]

#: Diagnosis categories of an LLM chain step and what each means in tsevo (design §3.2).
CATEGORY_MEANINGS: dict[str, str] = {
    "A": "never triggered: the tool did not run or decided nothing (facts O, S, A)",
    "B": "content wrong: a wrong replacement (fact R, answer wrong) or a harmed probe row",
    "C": "vague: guidance too loose on rows the tool ran on and kept (fact K)",
    "D": "conflict: another tool or stage wins the row (cite it)",
    "E": "cause-irrelevant: the row's failure is not about this measurement (cite it)",
    "F": "direction exhausted: the same kind of change made twice without gain",
    "G": "inconsistent: the same artifact gave different outcomes (a precomputed pair)",
    "H": "lost win: a row some earlier node on the lineage credited and this one does not",
    "I": "mechanism too weak: the evidence is right but the review kept the answer (fact K)",
}
CATEGORY_CODES: tuple[str, ...] = tuple(CATEGORY_MEANINGS)
#: What a mutation's action may target.
EDIT_TARGETS: tuple[str, ...] = ("source", "guidance", "reading_rule", "scope")
#: Facts a category's rows must have on the node it diagnoses.
_FACTS_NEEDED = {"A": ("O", "S", "A"), "C": ("K",), "I": ("K",)}


@dataclass(frozen=True)
class StepFacts:
    """What tsevo knows of a chain step before the LLM is asked, rows under their shown labels.

    Build it with :meth:`of`; every check of the step's replies reads only this.
    """

    rows: tuple[str, ...]
    parts: Mapping[str, str]
    facts: Mapping[str, str]
    raw: Mapping[str, int]
    credited: Mapping[str, int]
    lineage: tuple[str, ...]
    residuals: tuple[str, ...]
    regressed: tuple[str, ...]
    oscillating: tuple[str, ...]
    lost_wins: tuple[str, ...]
    credited_by: Mapping[str, tuple[str, ...]]
    pairs: frozenset[tuple[str, str, str]]
    changes: int
    stored: Mapping[tuple[str, str, str], str]

    @classmethod
    def of(
        cls,
        history: ScoreHistory,
        stored: Mapping[tuple[str, str, str], str],
        label: Callable[[str], str] | None = None,
        hashes: Mapping[str, str] | None = None,
    ) -> StepFacts:
        """The facts of a step that edits the last node of ``history``.

        Args:
            history: The lineage path, v0 first, the node to edit last.
            stored: ``(node_id, qid label or "", field) -> text``: what citations may quote.
            label: How a question id is shown (the run's opaque view ids).
            hashes: Artifact hash per node (for inconsistency pairs).
        """
        show = label or (lambda q: q)
        node = history.nodes[-1]
        s = node.score
        lab = [show(q) for q in history.batch.qids]
        lineage = history.node_ids
        credited_by = {
            show(q): tuple(n for n in lineage if q in history.fixed(n))
            for j, q in enumerate(history.batch.qids)
            if s.credited[j] and history.batch.parts[j] == "H"
        }
        pairs: set[tuple[str, str, str]] = set()
        hashes = hashes or {}
        for i, a in enumerate(history.nodes):
            for b in history.nodes[i + 1 :]:
                ha, hb = hashes.get(a.node_id), hashes.get(b.node_id)
                if ha is None or ha != hb:
                    continue
                for j, q in enumerate(history.batch.qids):
                    if a.score.raw[j] != b.score.raw[j]:
                        pairs.add((a.node_id, b.node_id, show(q)))
        return cls(
            rows=tuple(lab),
            parts=dict(zip(lab, history.batch.parts, strict=True)),
            facts=dict(zip(lab, s.facts, strict=True)) if s.facts else {},
            raw=dict(zip(lab, s.raw, strict=True)),
            credited=dict(zip(lab, s.credited, strict=True)),
            lineage=lineage,
            residuals=tuple(show(q) for q in history.residuals()),
            regressed=tuple(show(q) for q in history.broke(node.node_id)),
            oscillating=tuple(show(q) for q in history.oscillations()),
            lost_wins=tuple(show(q) for q in history.lost_wins()),
            credited_by=credited_by,
            pairs=frozenset(pairs),
            changes=max(0, len(history.nodes) - 1),
            stored=dict(stored),
        )

    def required(self) -> dict[str, list[str]]:
        """The row classes an analysis must account for (as shown in the step's context)."""
        return {
            "explain (residual or regressed)": sorted({*self.residuals, *self.regressed}),
            "oscillating": list(self.oscillating),
            "credited (name the change behind each)": sorted(self.credited_by),
            "inconsistency pairs": [f"{a} vs {b} on {q}" for a, b, q in sorted(self.pairs)],
        }


def _quote_ok(c: Mapping[str, Any], f: StepFacts) -> str | None:
    node, qid, field = str(c.get("node_id", "")), str(c.get("qid", "")), str(c.get("field", ""))
    quote = str(c.get("quote", ""))
    if node not in f.lineage:
        return f"citation of {node!r}: not a node on the lineage {list(f.lineage)}"
    text = f.stored.get((node, qid, field))
    if text is None:
        where = f"{node}/{qid}/{field}" if qid else f"{node}/{field}"
        return f"citation {where}: no such stored field"
    if not quote.strip() or quote not in text:
        return f"citation {node}/{qid or '-'}/{field}: the quote is not verbatim in that field"
    return None


def _diagnosis_reasons(d: Mapping[str, Any], f: StepFacts, where: str) -> list[str]:
    out: list[str] = []
    cat = str(d.get("category", ""))
    rows = [str(r) for r in d.get("rows", ())]
    cites = list(d.get("citations", ()))
    if cat not in CATEGORY_MEANINGS:
        return [f"{where}: unknown category {cat!r}; one of {list(CATEGORY_CODES)}"]
    node = str(d.get("responsible_node", ""))
    if node not in (*f.lineage, "root"):
        out.append(f"{where}: responsible_node {node!r} is not on the lineage")
    off = [r for r in rows if r not in f.parts]
    if off:
        out.append(f"{where}: rows {off[:4]} are not batch rows")
    rows = [r for r in rows if r in f.parts]
    if cat in _FACTS_NEEDED:
        bad = [r for r in rows if f.facts.get(r) not in _FACTS_NEEDED[cat]]
        if bad:
            need = "/".join(_FACTS_NEEDED[cat])
            out.append(f"{where}: category {cat} needs facts {need}; rows {bad[:4]} are not")
    elif cat == "B":
        bad = [
            r
            for r in rows
            if not (
                (f.parts[r] == "H" and f.facts.get(r) in ("R", "E") and not f.raw[r])
                or (f.parts[r] == "P" and not f.raw[r])
            )
        ]
        if bad:
            out.append(
                f"{where}: category B needs a wrong replacement or a harm; {bad[:4]} are not"
            )
    elif cat == "H":
        bad = [r for r in rows if r not in f.lost_wins]
        if bad or not rows:
            out.append(f"{where}: category H needs lost wins; {bad[:4] or 'no rows'} are not")
    elif cat == "G":
        found = {(q) for _a, _b, q in f.pairs}
        if not rows or any(r not in found for r in rows):
            out.append(
                f"{where}: category G needs a precomputed inconsistency pair; none for {rows[:4]}"
            )
    elif cat == "F" and f.changes < 2:
        out.append(f"{where}: category F needs two changes on the lineage; there are {f.changes}")
    if cat in ("D", "E") and not cites:
        out.append(f"{where}: category {cat} needs a citation")
    for c in cites:
        r = _quote_ok(c, f)
        if r is not None:
            out.append(f"{where}: {r}")
    return out


def check_analysis(a: Mapping[str, Any], f: StepFacts) -> list[str]:
    """Every reason the analysis ``a`` is refused (empty: accepted); see the module docstring."""
    out: list[str] = []
    diagnosed: set[str] = set()
    for key in ("delta_tracing", "oscillation"):
        for i, d in enumerate(a.get(key, ())):
            out += _diagnosis_reasons(d, f, f"{key}[{i}]")
            diagnosed |= {str(r) for r in d.get("rows", ())}
    quality = {str(x.get("qid", "")) for x in a.get("data_quality_issues", ())}
    both = sorted(quality & diagnosed)
    if both:
        out.append(f"data_quality_issues: rows {both[:4]} also carry a diagnosis")
    unknown = sorted(quality - set(f.parts))
    if unknown:
        out.append(f"data_quality_issues: rows {unknown[:4]} are not batch rows")
    explained = {str(r) for d in a.get("delta_tracing", ()) for r in d.get("rows", ())} | quality
    missing = [r for r in (*f.residuals, *f.regressed) if r not in explained]
    if missing:
        out.append(
            f"delta_tracing: residual or regressed rows {sorted(set(missing))[:6]} unexplained"
        )
    osc = {str(r) for d in a.get("oscillation", ()) for r in d.get("rows", ())} | quality
    missing = [r for r in f.oscillating if r not in osc]
    if missing:
        out.append(f"oscillation: oscillating rows {missing[:6]} not covered")
    credits = {
        str(c.get("qid", "")): str(c.get("node_id", "")) for c in a.get("success_extraction", ())
    }
    for q, nodes in f.credited_by.items():
        if q not in credits:
            out.append(f"success_extraction: credited row {q} without the change behind it")
        elif credits[q] not in nodes:
            out.append(f"success_extraction: {q} was not credited by {credits[q]}'s change")
    extra = sorted(set(credits) - set(f.credited_by))
    if extra:
        out.append(f"success_extraction: rows {extra[:4]} are not credited on this node")
    for i, p in enumerate(a.get("inconsistency", ())):
        pair = (str(p.get("node_a", "")), str(p.get("node_b", "")), str(p.get("qid", "")))
        if pair not in f.pairs and (pair[1], pair[0], pair[2]) not in f.pairs:
            out.append(f"inconsistency[{i}]: {pair} is not a pair tsevo found")
    for i, c in enumerate(a.get("corroboration", ())):
        r = _quote_ok(c, f)
        if r is not None:
            out.append(f"corroboration[{i}]: {r}")
    return out


def check_edit(e: Mapping[str, Any], f: StepFacts) -> list[str]:
    """Every reason the mutation ``e`` is refused: no action, an empty or unknown ``resolves``."""
    actions = list(e.get("actions", ()))
    if not actions:
        return ["actions: at least one action is needed"]
    out = []
    for i, act in enumerate(actions):
        if str(act.get("target", "")) not in EDIT_TARGETS:
            out.append(f"actions[{i}]: target must be one of {list(EDIT_TARGETS)}")
        res = [str(r) for r in act.get("resolves", ())]
        if not res:
            out.append(f"actions[{i}]: resolves is empty (name the rows the change is for)")
        off = [r for r in res if r not in f.parts]
        if off:
            out.append(f"actions[{i}]: resolves {off[:4]} are not batch rows")
    return out


def source_diff(before: str, after: str, name: str = "tool.py") -> str:
    """A unified diff of two sources (empty when equal)."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
        n=1,
    )
    return "".join(lines)


def change_of(
    seq: int,
    node_id: str,
    e: Mapping[str, Any],
    fields_changed: Sequence[str],
    diff: str,
    real: Callable[[str], str] | None = None,
) -> ChangeEntry:
    """The changelog entry tsevo writes for an accepted mutation (never the model's own text).

    The subject names the targets and the first action's issue; the body lists every action;
    ``resolves`` are the actions' rows mapped back to question ids through ``real``.
    """
    back = real or (lambda q: q)
    acts = list(e.get("actions", ()))
    targets = ", ".join(dict.fromkeys(str(a.get("target", "")) for a in acts))
    subject = f"llm: {targets}: {str(acts[0].get('issue', '')).strip()}" if acts else "llm edit"
    body = "\n".join(
        f"- {a.get('target')}/{a.get('op', 'edit')}: {str(a.get('change', '')).strip()[:200]}"
        for a in acts
    )
    resolves = tuple(dict.fromkeys(back(str(r)) for a in acts for r in a.get("resolves", ())))
    return ChangeEntry.make(
        seq,
        node_id,
        "llm",
        subject,
        body=body,
        fields_changed=tuple(fields_changed),
        diff=diff,
        resolves=resolves,
    )
