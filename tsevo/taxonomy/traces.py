"""Answer traces in AdaMAST's canonical JSONL, with a feature registry (design §2).

One trace is one train :class:`~tsevo.agent.AnswerRecord` of a round's base pass (question ×
library). :func:`normalize` turns it into AdaMAST's canonical record::

    {"problem_id": <16-hex content hash>, "task": <question + options>,
     "raw_trajectory": "[#1 ANSWERER s0] answer ...<newline>[#2 TOOL s1] shortlist ...",
     "metadata": {"system", "kind", "split", "pool", "events", "features", "outcome"}}

What an annotator or the induction reads holds no task, subtask, family, template or source id:
the trace id hashes the question's content fingerprint (never its id), tools are named by their
position in the run's sorted tool list (``tool1``), and the rendering numbers every event. The
outcome (``metadata.outcome``) is written for train traces only; :func:`project` strips it.

Features form a registry (:data:`FEATURES`): each has a family (``system``, ``role:<r>``,
``domain``) and says whether it is outcome-blind. Induction mines outcome-blind features only and
uses the outcome as the label.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question

from .subdomains import subdomains

__all__ = [
    "FEATURES",
    "GATE_SHARE",
    "TRACE_KINDS",
    "Feature",
    "Trace",
    "normalize",
    "normalize_arms",
    "pool_of",
    "project",
    "read_traces",
    "render",
    "subdomains",
    "trace_id",
    "write_traces",
]

#: Share of train split units in the gate pool (the rest feed induction).
GATE_SHARE = 0.30
#: Tool error kinds the sandbox reports (anything else is ``other``).
ERROR_KINDS: tuple[str, ...] = ("timeout", "rlimit", "contract", "nonfinite", "exception")
_QUOTE = 160


@dataclass(frozen=True)
class Feature:
    """One registry entry.

    Attributes:
        name: The feature name detectors use (``tool.n_error``).
        family: ``system``, ``role:<role>`` or ``domain``.
        kind: ``bool``, ``int`` or ``str``.
        outcome_blind: Whether it can be computed without the gold answer.
        phrase: A few words naming it (for code names and prose).
    """

    name: str
    family: str
    kind: str
    outcome_blind: bool
    phrase: str


def _f(name: str, family: str, kind: str, phrase: str, blind: bool = True) -> Feature:
    return Feature(name, family, kind, blind, phrase)


#: The feature registry, by name.
FEATURES: dict[str, Feature] = {
    f.name: f
    for f in [
        _f("tool.shortlisted", "system", "bool", "tool shortlisted"),
        _f("tool.n_run", "system", "int", "tools run"),
        _f("tool.any_error", "system", "bool", "tool error"),
        _f("tool.n_error", "system", "int", "tool errors"),
        *[_f(f"tool.error_{k}", "system", "bool", f"tool {k}") for k in ERROR_KINDS],
        _f("tool.error_other", "system", "bool", "tool other error"),
        _f("chain.no_tool", "system", "bool", "shortlisted nothing ran"),
        _f("chain.incomplete", "system", "bool", "chain incomplete"),
        _f("answer.abstained", "system", "bool", "no base answer"),
        _f("answer.position", "role:answerer", "str", "answer position"),
        _f("answer.reason_words", "role:answerer", "int", "reason length"),
        _f("answer.reason_kind", "role:answerer", "str", "answer rule"),
        _f("review.any_keep", "role:reviewer", "bool", "review keeps answer"),
        _f("review.any_replace", "role:reviewer", "bool", "review replaces answer"),
        _f("review.no_decision", "role:reviewer", "bool", "review without decision"),
        _f("review.changed", "role:reviewer", "bool", "answer changed"),
        _f("review.n_stages", "role:reviewer", "int", "stages reviewed"),
        _f("tool.evidence", "role:tool", "bool", "evidence present"),
        _f("tool.n_ok", "role:tool", "int", "tools with evidence"),
        _f("tool.any_abstain", "role:tool", "bool", "tool abstains"),
        _f("tool.evidence_unused", "role:tool", "bool", "evidence without decision"),
        _f("domain.n_options", "domain", "int", "options"),
        _f("domain.question_len", "domain", "str", "question length"),
        _f("domain.series_len", "domain", "str", "series length"),
        _f("domain.n_series", "domain", "int", "series"),
        _f("domain.has_context", "domain", "bool", "context given"),
        _f("domain.numeric_options", "domain", "bool", "numeric options"),
        _f("domain.subdomain", "domain", "str", "subdomain"),
        _f("correct.final", "outcome", "bool", "final correct", blind=False),
        _f("correct.base", "outcome", "bool", "base correct", blind=False),
        _f("stage.harmed", "outcome", "bool", "chain harmed", blind=False),
    ]
}


@dataclass(frozen=True)
class Trace:
    """One normalized trace (the canonical record's fields, with parsed metadata)."""

    problem_id: str
    task: str
    raw_trajectory: str
    metadata: Mapping[str, Any]

    @property
    def features(self) -> Mapping[str, Any]:
        """The registry features."""
        feats: Mapping[str, Any] = self.metadata["features"]
        return feats

    @property
    def outcome(self) -> Mapping[str, Any] | None:
        """``{correct, base_correct, harmed}`` (train traces only; ``None`` when projected)."""
        return self.metadata.get("outcome")

    @property
    def failed(self) -> bool:
        """Whether the final answer was wrong or missing (needs the outcome)."""
        out = self.outcome
        if out is None:
            raise ValueError(f"trace {self.problem_id} has no outcome (projected)")
        return not out["correct"]

    @property
    def events(self) -> list[dict[str, Any]]:
        """The numbered events."""
        return list(self.metadata["events"])

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON record."""
        return {
            "problem_id": self.problem_id,
            "task": self.task,
            "raw_trajectory": self.raw_trajectory,
            "metadata": dict(self.metadata),
        }


def trace_id(fingerprint: str, round_: int, split: str, library: str, sample: int = 0) -> str:
    """The 16-hex trace id: sha256 of the question's content, round, split, library and sample."""
    key = f"tsevo-trace\x00{round_}\x00{split}\x00{fingerprint}\x00{library}\x00{sample}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def pool_of(unit: str, seed: int = 0, gate_share: float = GATE_SHARE) -> str:
    """``induction`` or ``gate``: a seeded hash of the question's split unit (siblings together)."""
    h = hashlib.sha256(f"tsevo-taxonomy-pool\x00{seed}\x00{unit}".encode()).hexdigest()
    return "gate" if int(h[:12], 16) / float(16**12) < gate_share else "induction"


def _clip(text: str, n: int = _QUOTE) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _opt(q: Question, i: int | None) -> str:
    if i is None:
        return "none"
    return f"{i} ({_clip(q.options[i], 60)})" if 0 <= i < len(q.options) else f"{i} (out of range)"


def _outputs(outputs: Mapping[str, Any] | None) -> str:
    if not outputs:
        return "{}"
    items = []
    for k in sorted(outputs):
        v = outputs[k]
        v = round(v, 4) if isinstance(v, float) else v
        items.append(f"{k}={_clip(json.dumps(v, sort_keys=True, default=str), 40)}")
    return "{" + ", ".join(items[:8]) + ("" if len(items) <= 8 else ", …") + "}"


def _scrub(text: str, tools: Mapping[str, str]) -> str:
    """Free text with every tool id replaced by its positional name (longest ids first)."""
    for t in sorted(tools, key=lambda t: (-len(t), t)):
        if t in text:
            text = text.replace(t, tools[t])
    return text


def _events(rec: AnswerRecord, q: Question, tools: Mapping[str, str]) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = []

    def add(role: str, kind: str, stage: int, **payload: Any) -> None:
        ev.append({"seq": len(ev) + 1, "role": role, "kind": kind, "stage": stage, **payload})

    if rec.base_answer is None:
        add(
            "answerer",
            "answer",
            0,
            option=None,
            text="abstain",
            reason=_clip(_scrub(rec.base_reason, tools)),
        )
    else:
        add(
            "answerer",
            "answer",
            0,
            option=rec.base_answer,
            text=_opt(q, rec.base_answer),
            reason=_clip(_scrub(rec.base_reason, tools)),
        )
    for s in rec.steps:
        add("tool", "shortlist", s.stage, tools=[tools[t] for t in s.shortlisted])
        for r in s.runs:
            name = tools[r.tool_id]
            if r.status == "error":
                kind = r.error_kind if r.error_kind in ERROR_KINDS else "other"
                add("tool", "tool_error", s.stage, tool=name, error_kind=kind)
            else:
                add(
                    "tool",
                    "tool_run",
                    s.stage,
                    tool=name,
                    status=r.status,
                    evidence=_outputs(r.outputs) if r.status == "ok" else "",
                )
        add(
            "reviewer",
            "review",
            s.stage,
            decision=s.decision,
            answer_in=s.answer_in,
            answer_out=s.answer_out,
            reason=_clip(_scrub(s.reason, tools)),
        )
    if rec.completed:
        add("system", "final", 0, option=rec.final_answer, text=_opt(q, rec.final_answer))
    else:
        add(
            "system",
            "fallback",
            0,
            option=None,
            text=_clip(_scrub(rec.error or "incomplete", tools)),
        )
    return ev


def render(events: Sequence[Mapping[str, Any]]) -> str:
    """The deterministic rendering: one numbered line per event, no outcome."""
    lines = []
    for e in events:
        head = f"[#{e['seq']} {str(e['role']).upper()} s{e['stage']}] {e['kind']}"
        body = " ".join(
            f"{k}={v}" if not isinstance(v, list) else f"{k}={','.join(map(str, v)) or '-'}"
            for k, v in e.items()
            if k not in ("seq", "role", "kind", "stage") and v not in ("", None)
        )
        lines.append(f"{head} {body}".rstrip())
    return "\n".join(lines)


def _bucket(n: int, cuts: tuple[int, int]) -> str:
    return "short" if n < cuts[0] else "long" if n >= cuts[1] else "medium"


def _position(i: int | None, n: int) -> str:
    if i is None:
        return "none"
    return "first" if i == 0 else "last" if i == n - 1 else "middle"


_NUM = re.compile(r"^\s*[-+]?\d+(\.\d+)?\s*%?\s*$")


def _features(rec: AnswerRecord, q: Question) -> dict[str, Any]:
    runs = [r for s in rec.steps for r in s.runs]
    errors = [r for r in runs if r.status == "error"]
    kinds = {r.error_kind if r.error_kind in ERROR_KINDS else "other" for r in errors}
    decisions = [s.decision for s in rec.steps]
    n_series = len(q.series)
    length = max((len(v) for v in q.series.values()), default=0)
    reason = rec.base_reason.split(":")[0].strip().lower()
    feats: dict[str, Any] = {
        "tool.shortlisted": any(s.shortlisted for s in rec.steps),
        "tool.n_run": len(runs),
        "tool.any_error": bool(errors),
        "tool.n_error": len(errors),
        **{f"tool.error_{k}": k in kinds for k in (*ERROR_KINDS, "other")},
        "chain.no_tool": any(s.shortlisted for s in rec.steps) and not rec.tools_ok,
        "chain.incomplete": not rec.completed,
        "answer.abstained": rec.base_answer is None,
        "answer.position": _position(rec.base_answer, len(q.options)),
        "answer.reason_words": len(rec.base_reason.split()),
        "answer.reason_kind": " ".join(re.findall(r"[a-z]+", reason)[:3]) or "none",
        "review.any_keep": "keep" in decisions,
        "review.any_replace": "replace" in decisions,
        "review.no_decision": "no_decision" in decisions,
        "review.changed": rec.completed and rec.changed,
        "review.n_stages": len(rec.steps),
        "tool.evidence": bool(rec.tools_ok),
        "tool.n_ok": len(rec.tools_ok),
        "tool.any_abstain": any(r.status == "abstain" for r in runs),
        "tool.evidence_unused": any(
            s.decision in ("no_decision", "no_tool") and any(r.status == "ok" for r in s.runs)
            for s in rec.steps
        ),
        "domain.n_options": len(q.options),
        "domain.question_len": _bucket(len(q.question.split()), (12, 30)),
        "domain.series_len": _bucket(length, (64, 256)),
        "domain.n_series": n_series,
        "domain.has_context": bool(q.context.strip()),
        "domain.numeric_options": all(_NUM.match(o) for o in q.options),
    }
    return feats


def _outcome(rec: AnswerRecord, q: Question) -> dict[str, Any]:
    correct = bool(rec.completed and rec.correct)
    base = q.gold is not None and rec.base_answer == q.gold
    return {"correct": correct, "base_correct": base, "harmed": base and not correct}


#: ``metadata.kind`` of a trace: a base-pass answer, or a train-side evolution trace (a candidate
#: library answering its work group's held-out errors and harm probe during synthesis).
TRACE_KINDS: tuple[str, ...] = ("answer", "candidate")


def normalize(
    records: Mapping[str, AnswerRecord],
    questions: Mapping[str, Question],
    splits: Mapping[str, str],
    *,
    round_: int,
    library: str = "",
    system: str = "tsevo-residual-chain",
    seed: int = 0,
) -> list[Trace]:
    """Normalize the train records of one base pass into canonical traces, sorted by id.

    Args:
        records: Answer records by question id (one base-pass arm).
        questions: The run's questions by id.
        splits: Question id -> ``train`` | ``val`` | ``test``; only ``train`` records become
            traces (val/test text never reaches a trace).
        round_: The round whose base pass the records are.
        library: The library's fingerprint (part of the trace id).
        system: AdaMAST's ``metadata.system``.
        seed: Seeds the induction/gate pool split.

    Returns:
        Traces with ``metadata.outcome`` (train traces carry it).
    """
    return normalize_arms(
        [(library, "answer", records)], questions, splits, round_=round_, system=system, seed=seed
    )


def normalize_arms(
    arms: Sequence[tuple[str, str, Mapping[str, AnswerRecord]]],
    questions: Mapping[str, Question],
    splits: Mapping[str, str],
    *,
    round_: int,
    system: str = "tsevo-residual-chain",
    seed: int = 0,
) -> list[Trace]:
    """Normalize several arms' train records (one library each) into canonical traces, sorted by id.

    Tools are named by position in the sorted list of every tool any arm ran, and subdomains are
    fitted once over the union of the arms' train questions, so a question reads the same in every
    arm. A question's traces all fall in its split unit's pool (induction or gate), whichever arm.

    Args:
        arms: ``(library fingerprint, kind, records by question id)``; ``kind`` is one of
            :data:`TRACE_KINDS`. The fingerprint is part of the trace id.
        questions: The run's questions by id.
        splits: Question id -> split; only ``train`` records become traces.
        round_: The round the records belong to.
        system: AdaMAST's ``metadata.system``.
        seed: Seeds the induction/gate pool split and the subdomains.
    """
    for _, kind, _ in arms:
        if kind not in TRACE_KINDS:
            raise ValueError(f"unknown trace kind {kind!r}; use one of {TRACE_KINDS}")
    trains = [
        sorted(qid for qid in recs if splits.get(qid) == "train" and qid in questions)
        for _, _, recs in arms
    ]
    tool_ids = sorted(
        {
            t
            for (_, _, recs), train in zip(arms, trains, strict=True)
            for qid in train
            for s in recs[qid].steps
            for t in (*s.shortlisted, *(r.tool_id for r in s.runs))
        }
    )
    tools = {t: f"tool{i + 1}" for i, t in enumerate(tool_ids)}
    union = sorted({qid for train in trains for qid in train})
    sub = subdomains({qid: questions[qid].question for qid in union}, seed)
    seen: set[str] = set()
    out = []
    for (library, kind, recs), train in zip(arms, trains, strict=True):
        train.sort(key=lambda qid: (questions[qid].fingerprint, qid))
        for qid in train:
            rec, q = recs[qid], questions[qid]
            events = _events(rec, q, tools)
            options = "\n".join(f"  ({i}) {o}" for i, o in enumerate(q.options))
            text = q.question + (f"\nContext: {q.context}" if q.context.strip() else "")
            meta = {
                "system": system,
                "kind": kind,
                "split": "train",
                "pool": pool_of(q.group, seed),
                "events": events,
                "features": {**_features(rec, q), "domain.subdomain": sub[qid]},
                "outcome": _outcome(rec, q),
            }
            tid, k = trace_id(q.fingerprint, round_, "train", library), 0
            while tid in seen:  # equal content (a suite without dedup): the next sample index
                k += 1
                tid = trace_id(q.fingerprint, round_, "train", library, k)
            seen.add(tid)
            out.append(Trace(tid, f"{text}\nOptions:\n{options}", render(events), meta))
    return sorted(out, key=lambda t: t.problem_id)


def project(trace: Trace) -> Trace:
    """The trace without its outcome (what answer-time consumers and the judge see)."""
    meta = {k: v for k, v in trace.metadata.items() if k != "outcome"}
    feats = {k: v for k, v in trace.features.items() if FEATURES[k].outcome_blind}
    meta["features"] = feats
    return Trace(trace.problem_id, trace.task, trace.raw_trajectory, meta)


def write_traces(traces: Iterable[Trace], path: str | Path) -> Path:
    """Write canonical JSONL (sorted keys, UTF-8, one record a line; byte-identical reruns)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(
        json.dumps(t.to_dict(), sort_keys=True, ensure_ascii=False) + "\n" for t in traces
    )
    p.write_text(text, encoding="utf-8")
    return p


def read_traces(path: str | Path) -> list[Trace]:
    """Read traces written by :func:`write_traces`."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(Trace(d["problem_id"], d["task"], d["raw_trajectory"], d["metadata"]))
    return out
