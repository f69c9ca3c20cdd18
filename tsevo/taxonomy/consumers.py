"""The pinned taxonomy's consumers in a round: codes as triage categories, coded diagnoses (§5.2-5.3).

Both read train errors only (the round's base-pass records of train questions): a code *fires* on
an error when its detector holds on the error's features, the trace registry's own
(:mod:`.traces`) plus the outcome features (``correct.final``, ``correct.base``,
``stage.harmed``), which are allowed here because the errors are train rows whose gold the
evolution roles see anyway. A code without a detector never fires (the LLM judge is not called
here). Nothing of validation or test is read: the engine passes train questions and their records.

*Codes as triage categories* (:class:`CodedTriage`, ``taxonomy.triage``) wraps the round's triage
role. Define: the codes firing on at least ``min_errors`` (2) errors of the sample but not on all
of them (a code on every error separates nothing), ranked by how many they fire on, then severity,
then taxonomy order, at most ``max_categories``; the errors none of them fires on are defined by
the inner triage with the slots left (at least one: the last code gives its slot up). Assign: each
error's top code, the first defined code (in rank order) that fires on it; the inner triage
assigns the others among its categories. So a re-split of a coded bucket (its code fires on every
member) is the inner triage's unless another code separates the members. Decided against a single
``uncoded`` residual category: on the tiny seed-5 run's round 2 with its own builtin taxonomy it
left 52 errors in one bucket (under ``resplit_above``), where the inner triage splits them.

*Coded diagnoses* (:func:`coded_diagnosis`, ``taxonomy.diagnoses``): per bucket, over the support
rows the planner sees (never the held-out rows of the prefilter), the top ``top`` codes by share
with at most ``evidence`` verbatim excerpts each (the line of the error's rendered trace that the
code's detector reads: :func:`error_trace`), the codes they co-fire with on at least two rows, and
the taxonomy's fingerprint and the mode. The engine puts them in :attr:`Dossier.codes` (with
``instead`` it drops the category's free-text criteria); planners copy them into their cards
(:attr:`ContractCard.codes`, a replan's too; the engine attaches them to cards that lack them),
and the LLM synthesizer renders them beside the planner's failure type and root cause, or with
``instead`` in their place (the cards keep what the planner wrote, ``contracts.json`` too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.roles.protocols import Category, ErrorItem, Triage

from .codes import Code
from .config import TaxonomyConfig
from .induce import fires
from .judge import SEVERITY_WEIGHTS
from .model import Taxonomy
from .subdomains import subdomains
from .traces import _events, _features, _outcome, render

__all__ = [
    "CodedTriage",
    "Consumers",
    "Firing",
    "coded_diagnosis",
    "error_features",
    "error_trace",
    "fire_codes",
]

_QUOTE = 200

# the event kinds whose rendered line is quoted for a feature (by name, then by prefix)
_KINDS: dict[str, tuple[str, ...]] = {
    "tool.shortlisted": ("shortlist",),
    "tool.evidence_unused": ("review", "tool_run"),
    "chain.no_tool": ("shortlist", "tool_error", "tool_run"),
    "chain.incomplete": ("fallback",),
    "tool.n_run": ("tool_run", "tool_error", "shortlist"),
}
_PREFIX_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tool.error_", ("tool_error",)),
    ("tool.any_error", ("tool_error",)),
    ("tool.n_error", ("tool_error",)),
    ("tool.", ("tool_run",)),
    ("answer.", ("answer",)),
    ("review.", ("review",)),
    ("correct.", ("final", "fallback")),
    ("stage.", ("final", "review")),
)


@dataclass(frozen=True)
class Firing:
    """One code firing on one train error, with the verbatim excerpt of its trace it rests on."""

    code: str
    quote: str


def error_features(rec: AnswerRecord, q: Question, subdomain: str | None = None) -> dict[str, Any]:
    """Every registry feature of a train error: outcome-blind ones and the outcome ones."""
    feats = _features(rec, q)
    out = _outcome(rec, q)
    feats.update(
        {
            "correct.final": out["correct"],
            "correct.base": out["base_correct"],
            "stage.harmed": out["harmed"],
        }
    )
    if subdomain is not None:
        feats["domain.subdomain"] = subdomain
    return feats


def error_trace(rec: AnswerRecord, q: Question) -> tuple[str, list[str]]:
    """The question text and the numbered lines of the error's trace, tools under their own ids.

    The rendering is the trace registry's (:func:`~.traces.render`) with the library's tool ids
    kept (a planner knows them), the outcome left out.
    """
    tools = {t: t for s in rec.steps for t in (*s.shortlisted, *(r.tool_id for r in s.runs))}
    return q.question, render(_events(rec, q, tools)).splitlines()


def _kinds(feature: str) -> tuple[str, ...]:
    if feature in _KINDS:
        return _KINDS[feature]
    return next((k for p, k in _PREFIX_KINDS if feature.startswith(p)), ())


def _kind_of(line: str) -> str:
    return line.split("] ", 1)[-1].split(" ", 1)[0]


def _quote(code: Code, feats: Mapping[str, Any], text: str, lines: Sequence[str]) -> str:
    """The line of the trace the firing clause's first placeable atom points at (verbatim)."""
    assert code.detector is not None
    clause = next(c for c in code.detector["any"] if fires({"any": [c]}, feats))
    for atom in clause["all"]:
        name = atom["feature"]
        if name.startswith("domain."):
            return text[:_QUOTE]
        for kind in _kinds(name):
            hit = next((ln for ln in lines if _kind_of(ln) == kind), None)
            if hit is not None:
                return hit[:_QUOTE]
    return lines[-1][:_QUOTE] if lines else text[:_QUOTE]


def fire_codes(
    taxonomy: Taxonomy,
    questions: Mapping[str, Question],
    records: Mapping[str, AnswerRecord],
    errors: Sequence[str],
    *,
    seed: int = 0,
) -> dict[str, tuple[Firing, ...]]:
    """The codes firing on each train error (taxonomy order), each with its quoted evidence.

    Args:
        taxonomy: The pinned taxonomy.
        questions: The round's train questions by id (subdomains are fitted over them when a
            detector reads ``domain.subdomain``).
        records: Base-pass records by question id.
        errors: The train errors to fire on (ids of ``questions``).
        seed: Seeds the subdomains.

    Raises:
        KeyError: An error is not one of ``questions`` (not a train question).
    """
    codes = [c for c in taxonomy.codes if c.detector is not None]
    reads_sub = any(
        a["feature"] == "domain.subdomain"
        for c in codes
        for cl in (c.detector or {}).get("any", ())
        for a in cl["all"]
    )
    sub = subdomains({k: q.question for k, q in questions.items()}, seed) if reads_sub else {}
    out: dict[str, tuple[Firing, ...]] = {}
    for qid in errors:
        q, rec = questions[qid], records[qid]
        feats = error_features(rec, q, sub.get(qid))
        hit = [c for c in codes if fires(c.detector, feats)]
        if hit:
            text, lines = error_trace(rec, q)
            out[qid] = tuple(Firing(c.id, _quote(c, feats, text, lines)) for c in hit)
        else:
            out[qid] = ()
    return out


def _weight(code: Code) -> int:
    return SEVERITY_WEIGHTS.get(code.severity or "", 1)


class CodedTriage:
    """Codes of a pinned taxonomy as triage categories, the inner triage for what they miss.

    Args:
        inner: The round's triage role (defines when no code qualifies).
        taxonomy: The pinned taxonomy.
        fired: Per error id as the triage sees it (opaque), the ids of the codes firing on it.
        min_errors: A code becomes a category when it fires on at least this many errors.
    """

    def __init__(
        self,
        inner: Triage,
        taxonomy: Taxonomy,
        fired: Mapping[str, Sequence[str]],
        min_errors: int = 2,
    ) -> None:
        self.inner = inner
        self.taxonomy = taxonomy
        self.fired = {k: tuple(v) for k, v in fired.items()}
        self.min_errors = min_errors
        self.name = f"coded-triage:{inner.name}"
        self._order = {c.id: i for i, c in enumerate(taxonomy.codes)}

    def _category(self, cid: str, n: int, of: int) -> Category:
        code = self.taxonomy[cid]
        text = code.description or code.when_to_use or code.name
        return Category(cid, code.name, f"code {cid} ({code.category}): {text}; {n} of {of}")

    def _top(self, qid: str, coded: Sequence[str]) -> str | None:
        mine = set(self.fired.get(qid, ()))
        return next((c for c in coded if c in mine), None)

    def define(self, errors: Sequence[ErrorItem], max_categories: int) -> list[Category]:
        """Codes on >= ``min_errors`` errors but not all; the inner triage's for the rest."""
        counts = Counter(c for e in errors for c in self.fired.get(e.qid, ()))
        ranked = sorted(
            (c for c, n in counts.items() if self.min_errors <= n < len(errors)),
            key=lambda c: (-counts[c], -_weight(self.taxonomy[c]), self._order[c]),
        )[:max_categories]
        rest = [e for e in errors if self._top(e.qid, ranked) is None]
        if rest and len(ranked) >= max_categories:  # a slot for the errors no code takes
            ranked = ranked[: max_categories - 1]
            rest = [e for e in errors if self._top(e.qid, ranked) is None]
        cats = [self._category(c, counts[c], len(errors)) for c in ranked]
        if rest:
            taken = {*self._order, *ranked}
            for c in self.inner.define(rest, max_categories - len(ranked)):
                # an inner id that is a code id is renamed (the inner assigns by the ids given)
                cats.append(replace(c, id=f"r{c.id}") if c.id in taken else c)
        return cats

    def assign(
        self, categories: Sequence[Category], batch: Sequence[ErrorItem]
    ) -> dict[str, str | None]:
        """Each error's top code among ``categories``; the inner triage assigns the others."""
        coded = [c.id for c in categories if c.id in self._order]
        out: dict[str, str | None] = {e.qid: self._top(e.qid, coded) for e in batch}
        rest = [e for e in batch if out[e.qid] is None]
        others = [c for c in categories if c.id not in self._order]
        if rest and others:
            out.update(self.inner.assign(others, rest))
        return out


def coded_diagnosis(
    taxonomy: Taxonomy,
    fired: Mapping[str, Sequence[Firing]],
    rows: Sequence[str],
    *,
    name: Any = str,
    top: int = 6,
    evidence: int = 3,
    mode: str = "beside",
) -> tuple[dict[str, Any], ...]:
    """The top codes of a bucket's rows, each with its share and verbatim evidence.

    Args:
        taxonomy: The pinned taxonomy.
        fired: Per train error id, the firings (:func:`fire_codes`).
        rows: The bucket's support rows (question ids), in the dossier's order.
        name: Maps a question id to the id a role sees it under (the opaque id).
        top: At most this many codes (by share, then severity, then taxonomy order).
        evidence: At most this many excerpts per code (one per row, rows in order).
        mode: ``beside`` or ``instead`` (of the free text), recorded in each entry so that a
            card a planner writes later (a replan) renders the same way.

    Returns:
        One dict per code: ``id, name, axis, severity, definition, share, n, of, evidence
        [{row, quote}], with [co-firing code ids], taxonomy`` (the fingerprint), ``mode``.
    """
    order = {c.id: i for i, c in enumerate(taxonomy.codes)}
    counts = Counter(f.code for r in rows for f in fired.get(r, ()))
    chosen = sorted(counts, key=lambda c: (-counts[c], -_weight(taxonomy[c]), order[c]))[:top]
    out = []
    for cid in chosen:
        code = taxonomy[cid]
        quotes = [
            {"row": name(r), "quote": f.quote}
            for r in rows
            for f in fired.get(r, ())
            if f.code == cid
        ][:evidence]
        on = {r for r in rows if any(f.code == cid for f in fired.get(r, ()))}
        with_ = [
            o
            for o in chosen
            if o != cid and sum(1 for r in on if any(f.code == o for f in fired.get(r, ()))) >= 2
        ]
        out.append(
            {
                "id": cid,
                "name": code.name,
                "axis": code.category,
                "severity": code.severity,
                "definition": code.description or code.when_to_use,
                "share": round(counts[cid] / max(len(rows), 1), 4),
                "n": counts[cid],
                "of": len(rows),
                "evidence": quotes,
                "with": with_,
                "taxonomy": taxonomy.fingerprint,
                "mode": mode,
            }
        )
    return tuple(out)


@dataclass(frozen=True)
class Consumers:
    """The round's active consumers of the pinned taxonomy (``None`` from :meth:`of` when off)."""

    taxonomy: Taxonomy
    triage: bool
    diagnoses: str

    @classmethod
    def of(cls, cfg: TaxonomyConfig) -> Consumers | None:
        """The active consumers of ``ProtocolConfig.taxonomy``, the pinned file loaded and checked.

        ``None`` when neither ``triage`` nor ``diagnoses`` is on (the protocol as it is).
        """
        if not cfg.triage and cfg.diagnoses == "off":
            return None
        return cls(cfg.load(), cfg.triage, cfg.diagnoses)

    def record(self, **extra: Any) -> dict[str, Any]:
        """What a round's artifact records of the consumers: fingerprint, status, switches."""
        return {
            "fingerprint": self.taxonomy.fingerprint,
            "status": self.taxonomy.status,
            "triage": "codes" if self.triage else "inner",
            "diagnoses": self.diagnoses,
            **extra,
        }
