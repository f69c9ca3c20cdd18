"""The gate's per-trace phases, panel-independent (design §4.2): pure, deterministic, no I/O.

Both panels (builtin and LLM) run the same five phases on a round's sampled traces; this module
holds what does not depend on how an annotator reads:

1. *discovery*: each annotator proposes errors (:class:`Proposal`: trace, event seq, role,
   description, a quote verbatim from that event's rendered line; :func:`check_proposal`);
2. *reconciliation* (:func:`reconcile`): keys (trace, event seq) proposed by ≥ ``quorum_propose``
   distinct annotators go to a vote; every annotator votes, a proposer's vote counts as confirm;
   confirmed at ≥ ``quorum_confirm`` confirms. Keys below the proposal quorum are dropped (recorded);
3. *typing* (:func:`type_of`): A / B / C by majority of the annotators' types, ties A > B > C;
4. *code assignment*: the panel's own (κ is computed on these labels);
5. *deliberation* (:func:`deliberate`): on confirmed errors whose labels are not unanimous, at most
   ``rounds`` rounds; each annotator sees the others' labels and may revise; the consolidated labels
   are the codes ≥ ``quorum`` annotators hold afterwards (coverage is computed on them).

:class:`SharedBase` is what grows across gate rounds (anchors, rules, confusion pairs);
:func:`phase_record` is the ``phases`` field of a round's ``agreement/<fp12>/round_k.json``.
Error ids are ``<trace id>#<event seq>`` (:func:`error_id`), the format of the trace-level gate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .agreement import consolidate
from .traces import Trace, render

__all__ = [
    "AXES",
    "Deliberation",
    "Proposal",
    "Reconciled",
    "SharedBase",
    "check_proposal",
    "deliberate",
    "error_id",
    "event_line",
    "event_role",
    "failed_answer",
    "phase_record",
    "reconcile",
    "split_error_id",
    "type_of",
]

#: The error types, in tie-break order.
AXES: tuple[str, ...] = ("A", "B", "C")


@dataclass(frozen=True)
class Proposal:
    """One annotator's proposed error: where (trace, event), whose (role), what, and a quote."""

    trace_id: str
    event_seq: int
    role: str
    description: str
    quote: str

    @property
    def key(self) -> str:
        """The error id this proposal names."""
        return error_id(self.trace_id, self.event_seq)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record."""
        return {
            "trace_id": self.trace_id,
            "event_seq": self.event_seq,
            "role": self.role,
            "description": self.description,
            "quote": self.quote,
        }


def error_id(trace_id: str, event_seq: int) -> str:
    """``<trace id>#<event seq>``."""
    return f"{trace_id}#{int(event_seq)}"


def split_error_id(eid: str) -> tuple[str, int]:
    """The (trace id, event seq) of an error id."""
    trace, _, seq = eid.rpartition("#")
    return trace, int(seq)


def _order(eid: str) -> tuple[str, int]:
    return split_error_id(eid)


def event_role(events: Sequence[Mapping[str, Any]], seq: int) -> str:
    """The role of event ``seq`` (which must exist)."""
    return next(str(e.get("role")) for e in events if e.get("seq") == seq)


def failed_answer(t: Trace, seq: int) -> bool:
    """Whether event ``seq`` is the last event of a failed train trace: the wrong answer itself."""
    return seq == t.events[-1]["seq"] and t.outcome is not None and t.failed


def event_line(
    events: Sequence[Mapping[str, Any]], seq: int, rendering: str | None = None
) -> str | None:
    """The line of event ``seq`` as annotators see it (``None``: no such event).

    ``rendering`` is the trace's ``raw_trajectory``, the text every annotator reads and quotes;
    its line for the event is the answer. Without it (or when it lacks the line) the event is
    rendered again, which on a stored trace may order the fields differently (stored events'
    keys are sorted).
    """
    if not any(e.get("seq") == seq for e in events):
        return None
    head = f"[#{seq} "
    for ln in (rendering or "").split("\n"):
        if ln.startswith(head):
            return ln
    return next(render([e]) for e in events if e.get("seq") == seq)


def check_proposal(
    events: Sequence[Mapping[str, Any]], p: Proposal, rendering: str | None = None
) -> list[str]:
    """Why a proposal is refused (empty: it is valid).

    The event must exist, the quote be verbatim in its line (:func:`event_line`, read from
    ``rendering`` when given) and the role be the event's.
    """
    line = event_line(events, p.event_seq, rendering)
    if line is None:
        return [f"event #{p.event_seq} does not exist in trace {p.trace_id}"]
    why = []
    if not p.quote.strip() or p.quote not in line:
        why.append(f"quote {p.quote!r} is not verbatim in event #{p.event_seq}: {line!r}")
    role = event_role(events, p.event_seq)
    if p.role != role:
        why.append(f"event #{p.event_seq}'s role is {role!r}, not {p.role!r}")
    return why


@dataclass(frozen=True)
class Reconciled:
    """Reconciliation's outcome.

    Attributes:
        confirmed: Confirmed error ids, sorted by (trace id, event seq).
        proposers: Per voted key, the annotators (indices) that proposed it.
        votes: Per voted key, each annotator's vote (True: confirm).
        dropped: Keys proposed by fewer than ``quorum_propose`` annotators (not voted).
    """

    confirmed: tuple[str, ...]
    proposers: Mapping[str, tuple[int, ...]]
    votes: Mapping[str, tuple[bool, ...]]
    dropped: Mapping[str, tuple[int, ...]]

    def tally(self, eid: str) -> int:
        """Confirms a voted key received."""
        return sum(self.votes[eid])

    def to_dict(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        """The JSON record (annotators by name when ``names`` is given)."""

        def who(rs: Iterable[int]) -> list[Any]:
            return [names[r] if names else r for r in rs]

        return {
            "confirmed": list(self.confirmed),
            "voted": {
                e: {
                    "proposers": who(self.proposers[e]),
                    "confirm": who(r for r, v in enumerate(self.votes[e]) if v),
                    "tally": self.tally(e),
                }
                for e in sorted(self.votes, key=_order)
            },
            "dropped": {
                e: who(rs) for e, rs in sorted(self.dropped.items(), key=lambda kv: _order(kv[0]))
            },
        }


def reconcile(
    proposals: Sequence[Sequence[Proposal]],
    votes: Callable[[int, str], bool] | Sequence[Mapping[str, bool]],
    *,
    quorum_propose: int = 2,
    quorum_confirm: int = 3,
) -> Reconciled:
    """Phase 2: keys with ≥ ``quorum_propose`` distinct proposers go to a vote of every annotator.

    Args:
        proposals: ``proposals[r]`` is annotator ``r``'s proposals (duplicates count once).
        votes: Annotator ``r``'s vote on an error id: a callable ``(r, error id) -> confirm``, or
            one mapping per annotator (a key missing from it is a reject). Only non-proposers are
            asked; a proposer's vote counts as confirm.
        quorum_propose: Distinct proposers a key needs to be voted on.
        quorum_confirm: Confirms a voted key needs.
    """
    n = len(proposals)
    by: dict[str, set[int]] = {}
    for r, props in enumerate(proposals):
        for p in props:
            by.setdefault(p.key, set()).add(r)

    def vote(r: int, eid: str) -> bool:
        if callable(votes):
            return bool(votes(r, eid))
        return bool(votes[r].get(eid, False))

    proposers: dict[str, tuple[int, ...]] = {}
    tallies: dict[str, tuple[bool, ...]] = {}
    dropped: dict[str, tuple[int, ...]] = {}
    for eid in sorted(by, key=_order):
        who = tuple(sorted(by[eid]))
        if len(who) < quorum_propose:
            dropped[eid] = who
            continue
        proposers[eid] = who
        tallies[eid] = tuple(r in by[eid] or vote(r, eid) for r in range(n))
    confirmed = tuple(e for e in tallies if sum(tallies[e]) >= quorum_confirm)
    return Reconciled(confirmed, proposers, tallies, dropped)


def type_of(types: Sequence[str | None]) -> str:
    """Phase 3: the majority type among the annotators' (``None``: abstained); ties A > B > C."""
    bad = [t for t in types if t is not None and t not in AXES]
    if bad:
        raise ValueError(f"error types must be one of {AXES}, got {bad}")
    counts = Counter(t for t in types if t is not None)
    if not counts:
        return "A"
    return min(AXES, key=lambda a: (-counts.get(a, 0), AXES.index(a)))


@dataclass(frozen=True)
class Deliberation:
    """Phase 5's record and outcome.

    Attributes:
        rounds: Per round run: ``{"round", "deliberated": [error ids], "changed": [{"annotator",
            "error", "before", "after"}]}``.
        consolidated: Per error, the codes ≥ ``quorum`` annotators hold after deliberation.
    """

    rounds: tuple[Mapping[str, Any], ...]
    consolidated: Mapping[str, frozenset[str]]

    def to_dict(self) -> dict[str, Any]:
        """The JSON record."""
        return {
            "rounds": [dict(r) for r in self.rounds],
            "consolidated": {e: sorted(v) for e, v in self.consolidated.items()},
        }


def _unanimous(labels: Sequence[Mapping[str, set[str]]], eid: str) -> bool:
    first = set(labels[0].get(eid, ())) if labels else set()
    return all(set(lab.get(eid, ())) == first for lab in labels)


def deliberate(
    labels: Sequence[Mapping[str, Iterable[str]]],
    errors: Sequence[str],
    revise: Callable[[int, str, list[set[str]]], set[str]],
    *,
    rounds: int = 2,
    quorum: int = 2,
) -> tuple[list[dict[str, set[str]]], Deliberation]:
    """Phase 5: at most ``rounds`` rounds of revision on the non-unanimous errors.

    Every round, each annotator ``r`` sees the others' labels of each non-unanimous error (from
    the round's start, in annotator order, its own left out) and answers its new label set,
    ``revise(r, error, others)``. All answers of a round apply together. Deliberation stops early
    when every error is unanimous or a round changes nothing.

    Returns:
        The labels after deliberation (new dicts; the input is not changed) and the record.
    """
    cur = [{e: set(lab.get(e, ())) for e in errors} for lab in labels]
    record: list[dict[str, Any]] = []
    for k in range(1, rounds + 1):
        pending = [e for e in errors if not _unanimous(cur, e)]
        if not pending:
            break
        nxt = [dict(lab) for lab in cur]
        changed = []
        for e in pending:
            for r in range(len(cur)):
                others = [set(cur[o][e]) for o in range(len(cur)) if o != r]
                new = set(revise(r, e, others))
                if new != cur[r][e]:
                    nxt[r][e] = new
                    changed.append(
                        {
                            "annotator": r,
                            "error": e,
                            "before": sorted(cur[r][e]),
                            "after": sorted(new),
                        }
                    )
        record.append({"round": k, "deliberated": pending, "changed": changed})
        cur = nxt
        if not changed:
            break
    cons = {e: frozenset(v) for e, v in consolidate(cur, errors, quorum=quorum).items()}
    return cur, Deliberation(tuple(record), cons)


@dataclass
class SharedBase:
    """What the panel shares and grows across gate rounds (design §4.2), kept in full.

    Attributes:
        anchors: Error id -> codes every annotator gave it (after deliberation).
        rules: Free-text rules a panel derives (e.g. a relabel's ``when_not_to_use``), in order.
        confusions: ``"a|b"`` (a < b) -> errors on which annotators split between codes a and b.
    """

    anchors: dict[str, list[str]] = field(default_factory=dict)
    rules: list[str] = field(default_factory=list)
    confusions: dict[str, int] = field(default_factory=dict)

    def grow(
        self,
        labels: Sequence[Mapping[str, Iterable[str]]],
        errors: Sequence[str],
        rules: Iterable[str] = (),
    ) -> dict[str, Any]:
        """Add a round's anchors, confusion pairs and rules; returns what was added."""
        added: dict[str, Any] = {"anchors": {}, "rules": [], "confusions": {}}
        for e in errors:
            sets = [set(lab.get(e, ())) for lab in labels]
            common = set.intersection(*sets) if sets else set()
            if common and all(s == common for s in sets) and e not in self.anchors:
                self.anchors[e] = added["anchors"][e] = sorted(common)
            held = set().union(*sets) if sets else set()
            split = sorted(i for i in held if not all(i in s for s in sets))
            for a in split:
                for b in split:
                    if (
                        a < b
                        and any(a in s and b not in s for s in sets)
                        and any(b in s and a not in s for s in sets)
                    ):
                        key = f"{a}|{b}"
                        self.confusions[key] = self.confusions.get(key, 0) + 1
                        added["confusions"][key] = added["confusions"].get(key, 0) + 1
        for rule in rules:
            if rule not in self.rules:
                self.rules.append(rule)
                added["rules"].append(rule)
        return added

    def to_dict(self) -> dict[str, Any]:
        """The JSON record."""
        return {
            "anchors": dict(sorted(self.anchors.items())),
            "rules": list(self.rules),
            "confusions": dict(sorted(self.confusions.items())),
        }


def phase_record(
    names: Sequence[str],
    proposals: Sequence[Sequence[Proposal]],
    reconciled: Reconciled,
    types: Mapping[str, Sequence[str | None]],
    deliberation: Deliberation,
    final_labels: Sequence[Mapping[str, Iterable[str]]],
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A round's ``phases`` field: every phase's inputs and outcome, annotators by name.

    Args:
        names: The annotators' names, in panel order.
        proposals: Phase 1, per annotator.
        reconciled: Phase 2.
        types: Phase 3: per confirmed error, each annotator's type (``None``: none given).
        deliberation: Phase 5's record.
        final_labels: The labels after deliberation, per annotator.
        base: The shared base after the round (and what it added), if the panel keeps one.
    """
    out: dict[str, Any] = {
        "proposals": {
            n: [p.to_dict() for p in sorted(ps, key=lambda p: (p.trace_id, p.event_seq))]
            for n, ps in zip(names, proposals, strict=True)
        },
        "reconciliation": reconciled.to_dict(names),
        "types": {
            e: {"type": type_of(ts), "by": dict(zip(names, ts, strict=True))}
            for e, ts in sorted(types.items(), key=lambda kv: _order(kv[0]))
        },
        "deliberation": [
            dict(r) | {"changed": [dict(c, annotator=names[c["annotator"]]) for c in r["changed"]]}
            for r in deliberation.rounds
        ],
        "final_labels": {
            n: {e: sorted(v) for e, v in sorted(lab.items(), key=lambda kv: _order(kv[0]))}
            for n, lab in zip(names, final_labels, strict=True)
        },
    }
    if base is not None:
        out["base"] = dict(base)
    return out
