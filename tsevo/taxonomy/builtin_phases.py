"""The builtin panel's event-level views: discovery, vote and typing per reader (design §4.4).

Each reader reads one view of a trace, fitted (where it needs statistics) on the shared base's
*passing* traces, and never another reader's output:

=========  ======================================  ===========================================
reader     view                                    discovers (vote: the relaxed test)
=========  ======================================  ===========================================
alpha      features + the events' structured       events an anomaly atom ties to: a fixed
           fields (kind, decision, error kind,     system atom (tool error, chain incomplete,
           option)                                 abstained, no decision, evidence unused) or
                                                   an atom of a code's firing detector clause
                                                   (vote: an atom of any clause that holds)
beta       the events' payload numbers (count of   a number with z > 2 against the same event
           its kind, stage, option, changed        kind in passing base traces; sd 0 and a
           answer, evidence values, ...; the       different value, or a kind never seen in a
           final answer also the domain numbers)   pass, count as z = inf (vote: z > 1)
gamma      the rendered lines (``raw_trajectory``) a strong error lexicon word in the line
                                                   (vote: the weak lexicon, which adds decision
                                                   words: replace, no_decision, none, ...)
delta      event tokens (kind + decision/status)   a transition into the event with bigram
                                                   probability < 0.05 on passing base traces
                                                   (vote: < 0.2 into or out of the event)
=========  ======================================  ===========================================

The final event of a *failed* train trace is proposed when a reader's own test flags it (alpha:
a domain atom of a C code's firing clause; beta: its numbers; gamma: its line; delta: its
transition), or when the reader's view flags nothing else in that trace (the failure it cannot
place elsewhere lies in the answer). In the vote a reader confirms it on its relaxed test, or when
its own discovery placed that trace's failure nowhere else (the train outcome says the answer is
wrong). Typing: alpha by the family of the atoms tying it (system A, role B, domain C), gamma by
its lexicon (error words A, decision words B), beta and delta by the event kind (tool error,
fallback, shortlist A; final C; the other roles' decisions B); the final answer of a failed trace
by the axes of the codes the reader's own trace-level reading gives (the kind if none). Code
assignment stays the trace-level readers', restricted to codes compatible with the error's type
and role (:func:`compatible`); a reader left with no compatible code assigns nothing.
Deliberation (:func:`revise_scores`): a reader adopts a code another chose when its own score is
≥ half its threshold, and drops a code of its own nobody else chose when its support is weak.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from .codes import Code
from .induce import atom_mask
from .model import Taxonomy
from .phases import (
    Deliberation,
    Proposal,
    Reconciled,
    SharedBase,
    deliberate,
    event_line,
    event_role,
    failed_answer,
    phase_record,
    reconcile,
    split_error_id,
)
from .phases import type_of as phase_type
from .traces import FEATURES, Trace

__all__ = [
    "EventRound",
    "EventViews",
    "clause_share",
    "compatible",
    "eligible_codes",
    "event_round",
    "event_token",
    "revise_scores",
]

#: The readers, in panel order (the gate's ``READERS``).
READERS_N: tuple[str, ...] = ("alpha", "beta", "gamma", "delta")
#: Fixed anomaly atoms alpha always checks: (feature, value).
ANOMALY: tuple[tuple[str, Any], ...] = (
    ("tool.any_error", True),
    ("chain.incomplete", True),
    ("answer.abstained", True),
    ("review.no_decision", True),
    ("tool.evidence_unused", True),
)
_A_WORDS = r"error|timed out|timeout|exception|rlimit|memory limit|nonfinite|contract|fallback|incomplete|fail"
_B_WORDS = r"abstain|no_decision|no_tool|replace|disagree"
STRONG = re.compile(rf"\b(?:{_A_WORDS})", re.IGNORECASE)
WEAK = re.compile(rf"(?:{_A_WORDS}|{_B_WORDS}|out of range|\bnone\b)", re.IGNORECASE)
_A_RE = re.compile(_A_WORDS, re.IGNORECASE)
_B_RE = re.compile(_B_WORDS, re.IGNORECASE)
_LINE = re.compile(r"^\[#(\d+) ([A-Z_]+) s\d+\] (\S+)")
_KIND_AXIS = {"tool_error": "A", "fallback": "A", "shortlist": "A", "final": "C"}
_BUCKET = {"short": 0.0, "medium": 1.0, "long": 2.0}


def _kind_axis(kind: str) -> str:
    return _KIND_AXIS.get(kind, "B")


def _family_axis(feature: str) -> str:
    fam = FEATURES[feature].family if feature in FEATURES else "system"
    return "A" if fam == "system" else "C" if fam == "domain" else "B"


def _tied(feature: str, value: Any, e: Mapping[str, Any]) -> bool:
    """Whether a holding atom ``feature == value`` (or ``>= value``) points at event ``e``."""
    kind, dec = e["kind"], e.get("decision")
    if feature.startswith("tool.error_"):
        return kind == "tool_error" and e.get("error_kind") == feature.removeprefix("tool.error_")
    ties: dict[str, bool] = {  # review.n_stages (the role guard atom) ties to no event
        "tool.any_error": kind == "tool_error",
        "tool.n_error": kind == "tool_error",
        "chain.incomplete": kind == "fallback",
        "chain.no_tool": kind == "shortlist",
        "tool.shortlisted": kind == "shortlist",
        "tool.n_run": kind in ("tool_run", "tool_error"),
        "answer.abstained": kind == "answer" and e.get("option") is None,
        "review.any_keep": kind == "review" and dec == "keep",
        "review.any_replace": kind == "review" and dec == "replace",
        "review.no_decision": kind == "review" and dec == "no_decision",
        "review.changed": kind == "review" and e.get("answer_in") != e.get("answer_out"),
        "tool.evidence": kind == "tool_run" and e.get("status") == "ok",
        "tool.n_ok": kind == "tool_run" and e.get("status") == "ok",
        "tool.any_abstain": kind == "tool_run" and e.get("status") == "abstain",
        "tool.evidence_unused": kind == "review" and dec in ("no_decision", "no_tool"),
    }
    if feature in ties:
        return ties[feature] and value not in (False, 0)
    return feature.startswith("answer.") and kind == "answer" and value not in (False, 0)


def _atoms(code: Code, features: Mapping[str, Any], firing: bool) -> list[Mapping[str, Any]]:
    """Holding atoms of ``code``'s detector: of its firing clauses only, or of any clause."""
    out: list[Mapping[str, Any]] = []
    for clause in (code.detector or {}).get("any", ()):
        held = _holding(clause["all"], features)
        if not firing or len(held) == len(clause["all"]):
            out += held
    return out


def clause_share(code: Code, features: Mapping[str, Any]) -> float:
    """Alpha's score of a code: the largest share of one detector clause's atoms that hold."""
    return max(
        (
            len(_holding(clause["all"], features)) / len(clause["all"])
            for clause in (code.detector or {}).get("any", ())
            if clause["all"]
        ),
        default=0.0,
    )


def _holding(atoms: Sequence[Mapping[str, Any]], f: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        a
        for a in atoms
        if f.get(a["feature"]) is not None and atom_mask([f[a["feature"]]], a["op"], a["value"])[0]
    ]


def _numbers(t: Trace, e: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> dict:
    """Beta's view of an event: its payload numbers (the final answer adds the domain numbers)."""
    kind = e["kind"]
    x: dict[str, float] = {"count": float(sum(o["kind"] == kind for o in events))}
    x["stage"] = float(e.get("stage") or 0)
    if kind in ("answer", "final", "fallback"):
        x["option"] = -1.0 if e.get("option") is None else float(e["option"])
    if kind == "answer":
        x["reason_words"] = float(len(str(e.get("reason") or "").split()))
    if kind == "review":
        x["changed"] = float(e.get("answer_in") != e.get("answer_out"))
        x["no_answer"] = float(e.get("answer_out") is None)
    if kind == "shortlist":
        x["n_tools"] = float(len(e.get("tools") or ()))
    if kind == "tool_run":
        nums = re.findall(r"(\w+)=(-?\d+(?:\.\d+)?)", str(e.get("evidence") or ""))
        x["evidence_n"] = float(len(nums))
        x |= {f"ev_{k}": float(v) for k, v in nums}
    if kind in ("final", "fallback"):
        f = t.features
        x["n_options"] = float(f.get("domain.n_options") or 0)
        x["n_series"] = float(f.get("domain.n_series") or 0)
        x["series_len"] = _BUCKET.get(str(f.get("domain.series_len")), 1.0)
        x["question_len"] = _BUCKET.get(str(f.get("domain.question_len")), 1.0)
    return x


def event_token(e: Mapping[str, Any]) -> str:
    """An event as one token: its kind and its decision, error kind or status (``answer_abstain``)."""
    detail = e.get("decision") or e.get("error_kind") or e.get("status") or ""
    if e["kind"] == "answer" and e.get("option") is None:
        detail = "abstain"
    return f"{e['kind']}_{detail}".rstrip("_")


class EventViews:
    """The readers' event-level views, fitted once on the shared base's passing traces."""

    def __init__(self, passes: Sequence[Trace]) -> None:
        vals: dict[tuple[str, str], list[float]] = {}
        self.big: Counter[tuple[str, str]] = Counter()
        self.uni: Counter[str] = Counter()
        for t in passes:
            evs = t.events
            for e in evs:
                for name, v in _numbers(t, e, evs).items():
                    vals.setdefault((e["kind"], name), []).append(v)
            toks = ["<s>", *(event_token(e) for e in evs), "</s>"]
            self.uni.update(toks[:-1])
            self.big.update(pairwise(toks))
        self.stats = {k: (float(np.mean(v)), float(np.std(v))) for k, v in sorted(vals.items())}

    # -- per-reader scores of one event -------------------------------------------------------

    def z(self, t: Trace, e: Mapping[str, Any]) -> tuple[float, str]:
        """Beta: the largest |z| of the event's numbers and which number it is."""
        best, which = 0.0, ""
        for name, v in sorted(_numbers(t, e, t.events).items()):
            mean, sd = self.stats.get((e["kind"], name), (math.nan, 0.0))
            if math.isnan(mean):
                z = math.inf
            elif sd == 0.0:
                z = 0.0 if v == mean else math.inf
            else:
                z = abs(v - mean) / sd
            if z > best:
                best, which = z, name
        return best, which

    def p(self, a: str, b: str) -> float:
        """Delta: P(b | a) on the passing base (an unseen ``a``: 0)."""
        n = self.uni.get(a, 0)
        return self.big.get((a, b), 0) / n if n else 0.0

    def transitions(self, t: Trace, seq: int) -> tuple[float, float]:
        """Delta: the probabilities of the transitions into and out of event ``seq``."""
        toks = ["<s>", *(event_token(e) for e in t.events), "</s>"]
        i = next(i for i, e in enumerate(t.events, start=1) if e["seq"] == seq)
        return self.p(toks[i - 1], toks[i]), self.p(toks[i], toks[i + 1])

    @staticmethod
    def lines(t: Trace) -> dict[int, str]:
        """Gamma's view: the rendered lines by event seq."""
        out = {}
        for line in t.raw_trajectory.splitlines():
            m = _LINE.match(line)
            if m:
                out[int(m.group(1))] = line
        return out

    # -- discovery, vote, typing --------------------------------------------------------------

    def discover(self, r: int, t: Trace, tax: Taxonomy) -> list[Proposal]:
        """Reader ``r``'s proposals in trace ``t`` (see the module doc)."""
        out = []
        evs = t.events
        if r == 2:
            for seq, line in sorted(self.lines(t).items()):
                m = STRONG.search(line.split("] ", 1)[-1])
                if m and any(e["seq"] == seq for e in evs):
                    role = event_role(evs, seq)
                    out.append(
                        Proposal(t.problem_id, seq, role, f"gamma: {m.group(0)!r}", m.group(0))
                    )
        else:
            for e in evs:
                why = self._flag(r, t, e, tax, strict=True)
                if why:
                    quote = event_line(evs, e["seq"], t.raw_trajectory) or ""
                    out.append(Proposal(t.problem_id, e["seq"], str(e["role"]), why, quote))
        if not out and evs and failed_answer(t, evs[-1]["seq"]):
            last = evs[-1]  # a failure its view explains nowhere else: the answer itself
            why = f"{READERS_N[r]}: failed, no other event flagged"
            out.append(
                Proposal(
                    t.problem_id,
                    last["seq"],
                    str(last["role"]),
                    why,
                    event_line(evs, last["seq"], t.raw_trajectory) or "",
                )
            )
        return out

    def _alpha_atoms(self, t: Trace, e: Mapping[str, Any], tax: Taxonomy, strict: bool) -> list:
        f = t.features
        atoms = [(n, v) for n, v in ANOMALY if f.get(n) == v]
        for c in tax.codes:
            atoms += [(a["feature"], a["value"]) for a in _atoms(c, f, firing=strict)]
        tied = [(n, v) for n, v in atoms if _tied(n, v, e)]
        if failed_answer(t, e["seq"]):
            tied += [(n, v) for n, v in atoms if FEATURES.get(n) and _family_axis(n) == "C"]
        return sorted(set(tied), key=str)

    def _flag(self, r: int, t: Trace, e: Mapping[str, Any], tax: Taxonomy, strict: bool) -> str:
        """Why reader ``r`` flags event ``e`` (empty: it does not); ``strict``: discovery."""
        last = e["seq"] == t.events[-1]["seq"]
        if last and e["kind"] in ("final",) and (t.outcome is None or not t.failed):
            return ""  # a right final answer is no error
        if r == 0:
            atoms = self._alpha_atoms(t, e, tax, strict)
            return f"alpha: {atoms[0][0]} == {atoms[0][1]}" if atoms else ""
        if r == 1:
            z, name = self.z(t, e)
            return f"beta: {name} z={z:.2f}" if z > (2.0 if strict else 1.0) else ""
        if r == 2:
            line = self.lines(t).get(e["seq"], "")
            m = (STRONG if strict else WEAK).search(line.split("] ", 1)[-1])
            return f"gamma: {m.group(0)!r}" if m else ""
        p_in, p_out = self.transitions(t, e["seq"])
        if strict:
            return f"delta: P={p_in:.3f}" if p_in < 0.05 else ""
        return f"delta: P={min(p_in, p_out):.3f}" if min(p_in, p_out) < 0.2 else ""

    def vote(self, r: int, t: Trace, seq: int, tax: Taxonomy, placed: Collection[int]) -> bool:
        """Reader ``r`` confirms event ``seq`` when its relaxed test holds.

        The final event of a failed trace is also confirmed when the reader's own discovery
        (``placed``: the event seqs it proposed in ``t``) placed that trace's failure nowhere else.
        """
        e = next(e for e in t.events if e["seq"] == seq)
        if failed_answer(t, seq) and set(placed) <= {seq}:
            return True
        return bool(self._flag(r, t, e, tax, strict=False))

    def type_of(self, r: int, t: Trace, seq: int, tax: Taxonomy) -> str:
        """Reader ``r``'s type (A/B/C) of event ``seq``."""
        e = next(e for e in t.events if e["seq"] == seq)
        if r == 0:
            fams = [_family_axis(n) for n, _ in self._alpha_atoms(t, e, tax, strict=False)]
            if fams:
                return min(fams, key=lambda a: (-fams.count(a), a))
        if r == 2:
            line = self.lines(t).get(seq, "").split("] ", 1)[-1]
            if _A_RE.search(line):
                return "A"
            if _B_RE.search(line):
                return "B"
            return "C" if line.startswith("final") else "B"
        return _kind_axis(str(e["kind"]))


def compatible(code: Code, axis: str, role: str) -> bool:
    """Whether a code may label an error of type ``axis`` at an event of ``role``.

    A errors take A codes, B errors the B codes of the event's role (``"*"``, the final answer of
    a failed trace: any role's), C errors C codes.
    """
    if code.category != axis:
        return False
    return axis != "B" or role == "*" or code.applies_to_role == role


def eligible_codes(tax: Taxonomy, axis: str, t: Trace, seq: int) -> list[Code]:
    """The codes an error of type ``axis`` at event ``seq`` of ``t`` may get.

    :func:`compatible` with the event's role; the final event of a failed trace (the wrong answer
    itself) takes any role's B codes.
    """
    role = "*" if failed_answer(t, seq) else event_role(t.events, seq)
    return [c for c in tax.codes if compatible(c, axis, role)]


def revise_scores(
    own: set[str],
    others: list[set[str]],
    scores: Mapping[str, float],
    allowed: set[str],
    *,
    relax: float,
    strong: float,
) -> set[str]:
    """A builtin reader's deliberation answer (pure; the thresholds are its own, relative).

    Adopts a code another reader chose when its own score is ≥ ``relax`` (a relaxed threshold);
    drops a code of its own nobody else chose when its score is < ``strong`` (weak support).
    Only ``allowed`` (compatible) codes are adopted.
    """
    held = set().union(*others) if others else set()
    out = {c for c in own if c in held or scores.get(c, 0.0) >= strong}
    out |= {c for c in held & allowed if scores.get(c, 0.0) >= relax}
    return out


#: Per reader, the normalized score (1 = its assignment threshold) from which it keeps a code of
#: its own nobody else chose in deliberation: alpha's rules are crisp (1), beta needs all three
#: neighbours (3/2), gamma 1.2 x its threshold, delta p >= 0.7. Adopting needs 0.5 (RELAX).
STRONG_SUPPORT: tuple[float, ...] = (1.0, 1.5, 1.2, 1.4)
RELAX = 0.5


@dataclass(frozen=True)
class EventRound:
    """One round's five phases on the builtin panel."""

    proposals: list[list[Proposal]]
    reconciled: Reconciled
    types: dict[str, list[str | None]]
    labels: list[dict[str, set[str]]]
    final: list[dict[str, set[str]]]
    deliberation: Deliberation

    @property
    def errors(self) -> list[str]:
        """The confirmed error ids."""
        return list(self.reconciled.confirmed)

    def record(self, names: Sequence[str], shared: SharedBase) -> dict[str, Any]:
        """The round record's event-level fields (the shared base grows by this round first)."""
        added = shared.grow(self.final, self.errors)
        cons = self.deliberation.consolidated
        return {
            "unit": "event",
            "consolidated": {e: sorted(v) for e, v in cons.items()},
            "phases": phase_record(
                names,
                self.proposals,
                self.reconciled,
                self.types,
                self.deliberation,
                self.final,
                base={**shared.to_dict(), "added": added},
            ),
        }


def event_round(
    views: EventViews,
    tax: Taxonomy,
    batch: Sequence[Trace],
    readers: Sequence[Callable[[Trace], set[str]]] | None,
    scores: Callable[[int, Trace], Mapping[str, float]] | None,
    *,
    quorum_propose: int,
    quorum_confirm: int,
    deliberation_rounds: int,
    quorum: int,
) -> EventRound:
    """Discovery, reconciliation, typing, assignment and deliberation on one round's traces.

    ``readers`` are the trace-level code readers (``None``: no codes, nothing assigned);
    ``scores(r, trace)`` gives reader ``r``'s normalized score per code (for deliberation).
    """
    n = len(READERS_N)
    by_id = {t.problem_id: t for t in batch}
    props = [[p for t in batch for p in views.discover(r, t, tax)] for r in range(n)]

    def vote(r: int, eid: str) -> bool:
        tid, seq = split_error_id(eid)
        placed = {p.event_seq for p in props[r] if p.trace_id == tid}
        return views.vote(r, by_id[tid], seq, tax, placed)

    rec = reconcile(props, vote, quorum_propose=quorum_propose, quorum_confirm=quorum_confirm)
    memo: dict[tuple[int, str], Any] = {}

    def read(r: int, tid: str) -> set[str]:
        if (r, tid) not in memo and readers is not None:
            memo[r, tid] = readers[r](by_id[tid])
        return set(memo.get((r, tid), set()))

    axis_of = {c.id: c.category for c in tax.codes}
    types: dict[str, list[str | None]] = {}
    allowed: dict[str, set[str]] = {}
    for e in rec.confirmed:
        tid, seq = split_error_id(e)
        t = by_id[tid]
        types[e] = [views.type_of(r, t, seq, tax) for r in range(n)]
        if failed_answer(t, seq):  # the wrong answer: typed by each reader's reading of the trace
            for r in range(n):
                axes = [axis_of[c] for c in sorted(read(r, tid)) if c in axis_of]
                types[e][r] = phase_type(axes) if axes else types[e][r]
        allowed[e] = {c.id for c in eligible_codes(tax, phase_type(types[e]), t, seq)}
    labels: list[dict[str, set[str]]] = [{} for _ in range(n)]
    for r in range(n):
        labels[r] = {e: read(r, split_error_id(e)[0]) & allowed[e] for e in rec.confirmed}

    def revise(r: int, e: str, others: list[set[str]]) -> set[str]:
        t = by_id[split_error_id(e)[0]]
        own = scores(r, t) if scores is not None else {}
        return revise_scores(
            labels[r][e], others, own, allowed[e], relax=RELAX, strong=STRONG_SUPPORT[r]
        )

    final, delib = deliberate(
        labels, list(rec.confirmed), revise, rounds=deliberation_rounds, quorum=quorum
    )
    return EventRound(props, rec, types, labels, final, delib)
