"""Every role of a round as a small protocol, and the records roles exchange with the engine.

Error policy: a role never raises for one bad question. A base answerer always returns an option;
a reviewer returns ``no_decision`` when it cannot decide, which keeps the incoming answer.

What a role may see (enforced by types): roles receive :class:`~tsevo.data.QuestionView` objects
under opaque per-run ids — never a :class:`~tsevo.data.Question` with its gold, metadata, subtask or
source id. Answering roles (answerer, reviewer) see only the question at hand, the tool evidence
and the library's guidance. Evolution roles (triage, planners, synthesizer) see train rows only,
with the gold of a row passed explicitly beside its view (:class:`Example`); the engine maps every
id they return back to the question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from tsevo.data import QuestionView
from tsevo.library.library import ScopedTool
from tsevo.library.tool import Contract, Scope

__all__ = [
    "Answerer",
    "AttemptFeedback",
    "BaseAnswer",
    "Category",
    "ContractCard",
    "Decision",
    "Dossier",
    "ErrorItem",
    "Evidence",
    "Example",
    "GlobalPlanner",
    "LocalPlanner",
    "Review",
    "Reviewer",
    "Synthesizer",
    "Triage",
    "WorkGroup",
]

Decision = Literal["replace", "keep", "no_decision"]


@dataclass(frozen=True)
class BaseAnswer:
    """A base answer.

    Attributes:
        option: Chosen option index.
        reason: Short explanation (shown in traces and widgets).
        scores: Optional per-option scores.
        detail: What a baseline answerer did to reach it (samples and votes, the reflection
            pass, the in-context examples); ``None`` for a plain answer. Recorded in the trace.
    """

    option: int
    reason: str = ""
    scores: tuple[float, ...] = ()
    detail: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Evidence:
    """One tool run on one question, as a reviewer sees it.

    Attributes:
        tool: The tool as it applies at answer time.
        status: ``ok`` | ``abstain`` | ``error``.
        outputs: The tool's outputs (``None`` unless ``ok``).
    """

    tool: ScopedTool
    status: str
    outputs: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Review:
    """A reviewer's verdict on the incoming answer given a stage's evidence.

    Attributes:
        decision: ``replace`` (take ``option``), ``keep`` or ``no_decision``.
        option: The replacement option (``replace`` only).
        reason: Short explanation.
        responsible: Ids of the tools whose evidence drove the decision.
    """

    decision: Decision
    option: int | None = None
    reason: str = ""
    responsible: tuple[str, ...] = field(default_factory=tuple)


@runtime_checkable
class Answerer(Protocol):
    """Gives the base answer to a question from the question alone."""

    name: str

    def answer(self, q: QuestionView) -> BaseAnswer:
        """Return the base answer."""
        ...


@runtime_checkable
class Reviewer(Protocol):
    """Reviews an incoming answer with one stage's tool evidence."""

    name: str

    def review(self, q: QuestionView, incoming: int, evidence: Sequence[Evidence]) -> Review:
        """Return keep / replace / no_decision."""
        ...


# ---------------------------------------------------------------------------- evolution roles
@dataclass(frozen=True)
class ErrorItem:
    """One train error as the triage role sees it: no task, no gold, no metadata.

    Attributes:
        qid: The question's opaque per-run id.
        text: Question text (and context).
        options: Option texts.
        n_primary: Number of primary series.
        n_candidates: Number of candidate series.
        n_covariates: Number of covariate series.
        tool_fired: Whether any tool returned evidence for it.
        tools: Ids of tools that ran.
        decision: Last stage decision (``replace``/``keep``/``no_decision``/``no_tool``/``""``).
    """

    qid: str
    text: str
    options: tuple[str, ...]
    n_primary: int = 1
    n_candidates: int = 0
    n_covariates: int = 0
    tool_fired: bool = False
    tools: tuple[str, ...] = ()
    decision: str = ""


@dataclass(frozen=True)
class Category:
    """A failure category from the define step.

    Attributes:
        id: Category id (``c1``, ``c2``, ...).
        label: Short label.
        criteria: When an error belongs here, in words.
        centroid: Builtin backend only: term weights of the category's centroid.
    """

    id: str
    label: str
    criteria: str
    centroid: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "id": self.id,
            "label": self.label,
            "criteria": self.criteria,
            "centroid": {k: float(v) for k, v in sorted(self.centroid.items())},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Category:
        """Inverse of :meth:`to_dict`."""
        return cls(d["id"], d["label"], d["criteria"], dict(d.get("centroid") or {}))


@runtime_checkable
class Triage(Protocol):
    """Clusters errors in two steps: define categories from a sample, then assign every error."""

    name: str

    def define(self, errors: Sequence[ErrorItem], max_categories: int) -> list[Category]:
        """Return at most ``max_categories`` categories for a sample of errors."""
        ...

    def assign(
        self, categories: Sequence[Category], batch: Sequence[ErrorItem]
    ) -> dict[str, str | None]:
        """Map every qid of the batch to a category id (or None when none fits)."""
        ...


@dataclass(frozen=True)
class Example:
    """A train row shown to planners and synthesizers: the question's view, its gold and its trace.

    Evolution roles see train rows only, and their gold is passed explicitly beside the view (a
    view never carries gold).

    Attributes:
        question: The view of the question (train split only).
        gold: Index of the correct option (``None`` when unlabeled).
        record: The current library's answer record for it, under the view's opaque id.
    """

    question: QuestionView
    gold: int | None
    record: Any


@dataclass(frozen=True)
class Dossier:
    """What a local planner sees of one bucket (train rows only).

    Attributes:
        bucket_id: Bucket id.
        side: ``tool_fired`` or ``no_tool``.
        label: Category label.
        criteria: Category criteria.
        support: At most ``planner_support`` bucket members (errors).
        background: At most ``planner_background`` similar train rows (right or wrong).
        catalog: The current library's scope catalog text.
        library_tools: Ids of the current library's tools.
        library: The current library object (artifacts with their guidance; no validation data).
        codes: Coded diagnosis of the support rows (``taxonomy.diagnoses``; empty when off): per
            code ``id, name, axis, share, evidence [{row, quote}], taxonomy`` and more.
    """

    bucket_id: str
    side: str
    label: str
    criteria: str
    support: tuple[Example, ...]
    background: tuple[Example, ...]
    catalog: str = ""
    library_tools: tuple[str, ...] = ()
    library: Any = None
    codes: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class ContractCard:
    """A local planner's proposal for one bucket.

    Descriptive fields (context only): ``action``, ``artifact_kind``, ``target_tool``,
    ``failure_type``, ``root_cause``, ``focus``. Contract fields (checked downstream): ``contract``
    (required measurement, signature, success criterion, calibration request) and ``scope``
    (scope, anti-scope, matcher). ``plan`` carries backend-specific detail for the synthesizer (the
    builtin planner puts its measured specs and fitted rules there).

    Attributes:
        bucket_id: The bucket it plans for.
        action: ``create`` | ``refine`` | ``rescope`` | ``retire``.
        artifact_kind: ``tool`` | ``usage_guidance`` | ``prompt_patch`` | ``scope_override`` | ``tombstone``.
        target_tool: Earlier tool an action targets.
        failure_type: e.g. ``missing_measurement``, ``misread_evidence``, ``wrong_scope``.
        root_cause: Diagnosis in words.
        focus: What the artifact should focus on.
        contract: The measurement contract.
        scope: Where the artifact should apply.
        plan: Backend detail (JSON-friendly).
        codes: The bucket's coded diagnosis, attached by the engine for the synthesizer
            (``taxonomy.diagnoses``; empty when off; not part of :meth:`to_dict`).
    """

    bucket_id: str
    action: str
    artifact_kind: str
    target_tool: str
    failure_type: str
    root_cause: str
    focus: str
    contract: Any
    scope: Any
    plan: Mapping[str, Any] = field(default_factory=dict)
    codes: tuple[Mapping[str, Any], ...] = ()

    def merge_key(self) -> tuple[Any, ...]:
        """What cards must share to be merged into one work group (the global planner's rule).

        Same measurement, signature, scope arity and option shape, reading-rule kind and artifact
        kind; the engine rejects a group whose cards differ, and the LLM global planner is told so.
        """
        return (
            self.contract.measurement,
            tuple(self.contract.signature),
            self.scope.arity,
            self.scope.options_kind,
            str(self.plan.get("rule_kind", "")),
            self.artifact_kind,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "bucket_id": self.bucket_id,
            "action": self.action,
            "artifact_kind": self.artifact_kind,
            "target_tool": self.target_tool,
            "failure_type": self.failure_type,
            "root_cause": self.root_cause,
            "focus": self.focus,
            "contract": self.contract.to_dict(),
            "scope": self.scope.to_dict(),
            "plan": dict(self.plan),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ContractCard:
        """Inverse of :meth:`to_dict`."""
        return cls(
            bucket_id=d["bucket_id"],
            action=d["action"],
            artifact_kind=d["artifact_kind"],
            target_tool=d.get("target_tool", ""),
            failure_type=d.get("failure_type", ""),
            root_cause=d.get("root_cause", ""),
            focus=d.get("focus", ""),
            contract=Contract.from_dict(d["contract"]),
            scope=Scope.from_dict(d["scope"]),
            plan=dict(d.get("plan") or {}),
        )


@runtime_checkable
class LocalPlanner(Protocol):
    """Diagnoses one bucket and returns a contract card (or None when it cannot plan)."""

    name: str

    def plan(self, dossier: Dossier, feedback: Sequence[str] = ()) -> ContractCard | None:
        """Return a card; ``feedback`` carries why earlier plans for this bucket failed (replan)."""
        ...


@dataclass(frozen=True)
class WorkGroup:
    """A coordinated unit of synthesis: one or more cards that ask for the same measurement.

    Attributes:
        id: Group id (``g1``, ``g2``, ...).
        cards: The member cards (one for a singleton).
        contract: The group's contract (the shared measurement).
        scope: The group's scope (union of members, narrowed against other groups).
    """

    id: str
    cards: tuple[ContractCard, ...]
    contract: Any
    scope: Any

    @property
    def bucket_ids(self) -> tuple[str, ...]:
        """Buckets the group serves."""
        return tuple(c.bucket_id for c in self.cards)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "id": self.id,
            "cards": [c.to_dict() for c in self.cards],
            "contract": self.contract.to_dict(),
            "scope": self.scope.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WorkGroup:
        """Inverse of :meth:`to_dict`."""
        return cls(
            d["id"],
            tuple(ContractCard.from_dict(c) for c in d["cards"]),
            Contract.from_dict(d["contract"]),
            Scope.from_dict(d["scope"]),
        )


@runtime_checkable
class GlobalPlanner(Protocol):
    """Coordinates local proposals: merge same-measurement cards, narrow overlapping scopes."""

    name: str

    def coordinate(
        self, cards: Sequence[ContractCard], support_texts: Mapping[str, Sequence[str]]
    ) -> list[WorkGroup]:
        """Return work groups covering every card exactly once."""
        ...


@dataclass(frozen=True)
class AttemptFeedback:
    """What the synthesizer learns about an earlier attempt.

    Attributes:
        attempt: Attempt number (1-based).
        tool_id: Candidate id.
        measurement: What it measured.
        outcome: ``rejected_check`` | ``no_repair`` | ``passed`` | ``harmful`` | ``exec_errors``.
        repairs: Attributable repairs on the prefilter.
        harms: Harms on the harm probe.
        detail: Free text (the violated check, numbers).
        strongest: The strongest attempt so far (kept apart: a retry replaces it only by doing
            better on the prefilter); at most one entry of a history has it.
        source: The attempt's source, given for the strongest attempt only.
    """

    attempt: int
    tool_id: str
    measurement: str
    outcome: str
    repairs: int = 0
    harms: int = 0
    detail: str = ""
    strongest: bool = False
    source: str = ""


@runtime_checkable
class Synthesizer(Protocol):
    """Writes a candidate artifact for a work group; repairs one contract violation on request.

    A synthesizer that renders the current library (the LLM one) also has
    ``for_library(library) -> Synthesizer``; the engine binds it to the round's library before a
    group's first attempt, as it binds a reviewer to the library it answers with.
    """

    name: str

    def synthesize(
        self,
        group: WorkGroup,
        attempt: int,
        history: Sequence[AttemptFeedback],
        examples: Sequence[Example],
    ) -> Any:
        """Return a draft artifact (a :class:`~tsevo.library.tool.Tool`) or None when out of ideas."""
        ...

    def repair(
        self, group: WorkGroup, draft: Any, violation: str, examples: Sequence[Example]
    ) -> Any:
        """Return a repaired draft (or None) for one contract violation."""
        ...
