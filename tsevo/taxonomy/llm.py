"""The taxonomy's LLM backend: options, trace views, strict JSON contracts and grounding checks.

Induction (:mod:`.llm_induce`) and the annotator panel (:mod:`.llm_panel`) share this module. Every
LLM step goes through :func:`~tsevo.roles.llm.json_call` (pydantic contract, schema in the prompt,
re-asks with the error fed back, the client's response cache and accounting); what the contract
cannot say is checked here in code and fed back the same way (:func:`draft_problems`):

* a code draft carries no id (tsevo mints ids; an ``id`` the model adds is ignored);
* its axis, role and area are the step's; its evidence names ≥ 2 traces that the prompt showed,
  with event numbers that exist and quotes copied from those traces;
* its detector uses outcome-blind registry features only, with values of the feature's kind.

What a prompt shows of a trace (:func:`trace_view`) is the canonical record's question and
rendering (no task, subtask, family, template or question id exists in them), clipped head and
tail, and its outcome-blind features; outcomes only where a step needs to know a trace failed.
Only the traces the caller passes are ever rendered: induction passes the induction pool, the gate
its sampled gate-pool traces.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from tsevo.roles.llm import (
    BudgetExhausted,
    InvalidReply,
    LLMCallError,
    LLMClient,
    PromptTooLong,
    json_call,
)

from .codes import Code
from .prompts import load
from .traces import FEATURES, Trace

__all__ = [
    "ANNOTATOR_ROLE",
    "INDUCE_ROLE",
    "CodeDraft",
    "DraftsReply",
    "LLMOptions",
    "StepCall",
    "ask",
    "draft_problems",
    "draft_to_code",
    "dumps",
    "quote_in",
    "rules_text",
    "spread",
    "system_groups",
    "trace_view",
]

#: The accounting role of induction (and gate edit) calls.
INDUCE_ROLE = "taxonomy"
#: The accounting role of annotator calls.
ANNOTATOR_ROLE = "annotator"

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class LLMOptions:
    """What the LLM steps show and how they ask (the numbers of design §3 and §4.3).

    Attributes:
        retries: Re-asks after an invalid reply (so at most ``retries + 1`` replies per step).
        temperature: Induction's sampling temperature.
        domain_traces: Traces step 1 sees (stratified).
        role_traces: Traces step 2 sees.
        failures_shown: Failed traces a code step sees.
        signals_shown: Signal rows a code step sees.
        trace_chars: Characters of one trace's trajectory in an induction prompt (head and tail).
        annotate_chars: The same in an annotator prompt.
        max_codes: Codes one step may propose.
        annotator_temperature: The annotators' temperature.
        annotator_models: One model per annotator (empty: the run's model for all four).
    """

    retries: int = 2
    temperature: float = 0.0
    domain_traces: int = 40
    role_traces: int = 10
    failures_shown: int = 20
    signals_shown: int = 15
    trace_chars: int = 1200
    annotate_chars: int = 6000
    max_codes: int = 8
    annotator_temperature: float = 0.7
    annotator_models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "annotator_models", tuple(self.annotator_models))
        if self.annotator_models and len(self.annotator_models) != 4:
            raise ValueError("annotator_models names one model per annotator (4) or none")


# -- contracts ---------------------------------------------------------------------------------

_Value = bool | int | float | str


class AtomModel(BaseModel):
    """``feature op value``."""

    feature: str
    op: Literal["==", "!=", "<", "<=", ">", ">="]
    value: _Value


class ClauseModel(BaseModel):
    """An AND of at most 3 atoms."""

    all: list[AtomModel] = Field(min_length=1, max_length=3)


class DetectorModel(BaseModel):
    """An OR of at most 2 clauses."""

    any: list[ClauseModel] = Field(min_length=1, max_length=2)


class EvidenceModel(BaseModel):
    """Where a failure shows: a trace, an event and a quote copied from it."""

    trace_id: str
    event_seq: int
    quote: str = Field(min_length=4)


class CodeDraft(BaseModel):
    """One proposed code (design §3.2); no id: tsevo mints it."""

    model_config = ConfigDict(extra="ignore")

    axis: Literal["A", "B", "C"]
    name: str = Field(min_length=1)
    description: str
    when_to_use: str
    when_not_to_use: str
    detection_heuristics: list[str] = Field(min_length=1, max_length=5)
    severity: Literal["minor", "major", "critical"]
    area: str | None = None
    applies_to_role: str | None = None
    evidence: list[EvidenceModel] = Field(min_length=2, max_length=8)
    detector: DetectorModel | None = None


class DraftsReply(BaseModel):
    """A code step's reply."""

    codes: list[CodeDraft] = Field(max_length=12)


# -- views ---------------------------------------------------------------------------------------


def dumps(obj: Any) -> str:
    """Compact, sorted, deterministic JSON for a prompt."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _clip_middle(text: str, n: int) -> str:
    if len(text) <= n:
        return text
    head = text[: n // 2].rsplit("\n", 1)[0]
    tail = text[-(n // 2) :].split("\n", 1)[-1]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters left out ...]\n{tail}"


def trace_view(
    t: Trace, chars: int, *, outcome: bool = False, features: bool = True
) -> dict[str, Any]:
    """What a prompt shows of one trace: question, clipped trajectory, outcome-blind features.

    Args:
        t: The trace (train).
        chars: Characters of the trajectory kept (head and tail).
        outcome: Add ``final_correct`` (induction steps that contrast failures with passes).
        features: Add the outcome-blind registry features (steps that may write detectors, and
            the annotators).
    """
    view: dict[str, Any] = {
        "trace_id": t.problem_id,
        "question": _clip_middle(t.task, max(200, chars // 2)),
        "trajectory": _clip_middle(t.raw_trajectory, chars),
    }
    if features:
        view["features"] = {
            k: v for k, v in sorted(t.features.items()) if FEATURES[k].outcome_blind
        }
    if outcome:
        view["final_correct"] = not t.failed
    return view


def _norm(s: str) -> str:
    return " ".join(str(s).split())


def quote_in(quote: str, t: Trace) -> bool:
    """Whether a quote (whitespace-normalised) is copied from the trace's question or rendering."""
    q = _norm(quote)
    return bool(q) and (q in _norm(t.raw_trajectory) or q in _norm(t.task))


def system_groups() -> list[str]:
    """The system groups an A code's area names (heads of the system features)."""
    return sorted({n.split(".")[0] for n, f in FEATURES.items() if f.family == "system"})


def rules_text(max_codes: int) -> str:
    """The shared code rules (``code_rules`` asset)."""
    return load("code_rules").render(max_codes=max_codes)


def _rank(seed: int, tag: str, key: str) -> str:
    return hashlib.sha256(f"llm-{tag}\x00{seed}\x00{key}".encode()).hexdigest()


def spread(traces: Sequence[Trace], n: int, seed: int, tag: str) -> list[Trace]:
    """Up to ``n`` traces, round-robin over (failed, subdomain) groups, seeded order inside each."""
    groups: dict[tuple[bool, str], list[Trace]] = {}
    for t in traces:
        groups.setdefault((not t.failed, str(t.features.get("domain.subdomain"))), []).append(t)
    queues = [
        sorted(v, key=lambda t: _rank(seed, tag, t.problem_id)) for _, v in sorted(groups.items())
    ]
    out: list[Trace] = []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return sorted(out, key=lambda t: t.problem_id)


# -- checks --------------------------------------------------------------------------------------

_KIND_TYPES: dict[str, tuple[type, ...]] = {"bool": (bool,), "int": (int, float), "str": (str,)}


def _detector_problems(d: DetectorModel, where: str) -> list[str]:
    out = []
    for clause in d.any:
        for a in clause.all:
            f = FEATURES.get(a.feature)
            if f is None:
                out.append(f"{where}: unknown feature {a.feature!r}")
            elif not f.outcome_blind:
                out.append(f"{where}: feature {a.feature!r} is not outcome-blind")
            elif isinstance(a.value, bool) != (f.kind == "bool") or not isinstance(
                a.value, _KIND_TYPES[f.kind]
            ):
                out.append(f"{where}: {a.feature} takes a {f.kind} value, got {a.value!r}")
    return out


def draft_problems(
    d: CodeDraft,
    where: str,
    *,
    shown: Mapping[str, Trace],
    axis: str | Iterable[str],
    role: str | None = None,
    areas: Sequence[str] = (),
) -> list[str]:
    """Why a draft breaks the contract (empty: it holds).

    Args:
        d: The draft.
        where: Its place in the reply, for messages (``codes[2]``).
        shown: The traces the prompt showed, by id (evidence must come from them).
        axis: The axis (or axes) the step allows.
        role: The role a B draft must name (``None``: any active role is checked by the caller).
        areas: Allowed areas (C: subdomain ids, A: system groups); empty: any.
    """
    out: list[str] = []
    axes = {axis} if isinstance(axis, str) else set(axis)
    if d.axis not in axes:
        out.append(f"{where}.axis: {d.axis!r} where this step asks for {sorted(axes)}")
    if d.axis == "B":
        if not d.applies_to_role or (role is not None and d.applies_to_role != role):
            out.append(f"{where}.applies_to_role: must be {role!r} for a B code")
    elif d.applies_to_role:
        out.append(f"{where}.applies_to_role: only B codes name a role")
    if d.axis != "B" and areas and d.area not in areas:
        out.append(f"{where}.area: {d.area!r} is not one of {list(areas)}")
    traces = {e.trace_id for e in d.evidence}
    if len(traces) < 2:
        out.append(f"{where}.evidence: needs at least two different traces")
    for i, e in enumerate(d.evidence):
        t = shown.get(e.trace_id)
        at = f"{where}.evidence[{i}]"
        if t is None:
            out.append(f"{at}.trace_id: {e.trace_id!r} is not one of the traces shown")
            continue
        if not 1 <= e.event_seq <= len(t.events):
            out.append(f"{at}.event_seq: trace {e.trace_id} has events 1..{len(t.events)}")
        if not quote_in(e.quote, t):
            out.append(f"{at}.quote: not copied from trace {e.trace_id}")
    if d.detector is not None:
        out += _detector_problems(d.detector, f"{where}.detector")
    return out


def draft_to_code(d: CodeDraft, *, support: int, origin: str = "induced") -> Code:
    """The code a checked draft becomes (id empty: minted by the taxonomy)."""
    area = d.applies_to_role if d.axis == "B" else d.area
    evidence = sorted({e.trace_id for e in d.evidence})
    examples = tuple(
        {"trace_id": e.trace_id, "event_seq": e.event_seq, "quote": _norm(e.quote)}
        for e in d.evidence
    )
    return Code(
        id="",
        category=d.axis,
        name=d.name.strip(),
        description=d.description.strip(),
        when_to_use=d.when_to_use.strip(),
        when_not_to_use=d.when_not_to_use.strip(),
        detection_heuristics=tuple(h.strip() for h in d.detection_heuristics),
        severity=d.severity,
        applies_to_role=d.applies_to_role if d.axis == "B" else None,
        area=area,
        examples=examples,
        detector=d.detector.model_dump() if d.detector is not None else None,
        outcome_blind=True if d.detector is not None else None,
        evidence_trace_ids=tuple(evidence),
        origin=origin,
        extras={"support": support},
    )


# -- calls ---------------------------------------------------------------------------------------


@dataclass
class StepCall:
    """One JSON call's outcome for the step records (no cache flags: reruns stay identical).

    Attributes:
        reply: The accepted object (``None``: the call failed; see ``error``).
        attempts: Replies asked for.
        invalid: Replies rejected.
        errors: Why each rejected reply was rejected.
        error: Why the call failed for good (transport, budget, every reply invalid).
    """

    reply: Any = None
    attempts: int = 0
    invalid: int = 0
    errors: tuple[str, ...] = ()
    error: str | None = None

    def record(self) -> dict[str, Any]:
        """The JSON record."""
        reply = self.reply.model_dump(mode="json") if isinstance(self.reply, BaseModel) else None
        return {
            "reply": reply,
            "attempts": self.attempts,
            "invalid": self.invalid,
            "errors": list(self.errors),
            "error": self.error,
        }


def ask(
    client: LLMClient,
    role: str,
    stage: str,
    messages: Sequence[Mapping[str, Any]],
    model_cls: type[M],
    *,
    retries: int,
    validate: Callable[[M], str | None] | None = None,
    **params: Any,
) -> StepCall:
    """:func:`json_call` that never raises for a bad reply or a failed request: it records them.

    Budget exhaustion is recorded too (the step is skipped, its gap recorded by the caller).
    """
    try:
        obj, meta = json_call(
            client, role, stage, messages, model_cls, retries=retries, validate=validate, **params
        )
    except InvalidReply as e:
        errs = tuple(str(a.error) for a in e.attempts if a.error)
        return StepCall(None, len(e.attempts), len(errs), errs, f"invalid reply: {errs[-1]}")
    except (LLMCallError, BudgetExhausted, PromptTooLong) as e:
        return StepCall(None, 0, 0, (), f"{type(e).__name__}: {e}")
    errs = tuple(str(a.error) for a in meta.attempts if a.error)
    return StepCall(obj, meta.n_attempts, meta.n_invalid, errs, None)


def validation_text(problems: Sequence[str], limit: int = 12) -> str | None:
    """Problems joined for :func:`json_call`'s feedback (``None``: none)."""
    if not problems:
        return None
    more = f"; and {len(problems) - limit} more" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


def pydantic_ok(model_cls: type[BaseModel], obj: Any) -> bool:
    """Whether ``obj`` validates (for the scripted responder's self-checks and tests)."""
    try:
        model_cls.model_validate(obj)
    except pydantic.ValidationError:
        return False
    return True


_TITLE = re.compile(r"^[A-Z][A-Za-z0-9]*(_[A-Z0-9][A-Za-z0-9]*){0,5}$")
_PLACEHOLDER = re.compile(
    r"\b(TODO|TBD|FIXME|lorem|placeholder)\b|\.\.\.|<[A-Za-z_ ]+>", re.IGNORECASE
)


def structure_problems(code: Code, roles: Iterable[str]) -> list[str]:
    """Step 7's checks on one code: name shape, role in B names only, prose present, no filler."""
    out = []
    if not _TITLE.match(code.name):
        out.append("name: Title_Snake_Case with at most 6 words")
    tokens = {t.lower() for t in code.name.split("_")}
    named = sorted(tokens & {r.lower() for r in roles if r != "tool"})
    if code.category != "B" and named:
        out.append(f"name: only B codes name a role ({', '.join(named)})")
    for f in ("description", "when_to_use", "when_not_to_use"):
        text = getattr(code, f)
        if len(text.strip()) < 8:
            out.append(f"{f}: empty or too short")
        elif _PLACEHOLDER.search(text):
            out.append(f"{f}: placeholder text")
    if _PLACEHOLDER.search(code.name):
        out.append("name: placeholder text")
    return out
