"""The parts of a Mara chain the engine's loop and its two step proposers share.

* :class:`ChainInputs`: what a group's chain needs from synthesis (built by ``run_group``);
* :class:`TrainOnlyEvaluator`: chain scoring answers train questions only and raises on any other
  split (:class:`ChainSplitError`), the guard behind "a chain never reads validation";
* :class:`StepState` and :class:`Proposal`: what a proposer sees at a step and what it returns;
* :class:`BuiltinProposer`: the builtin chain's step (``tsevo.marachain.step.choose_move``). The
  LLM step is ``tsevo.evolve.chain_llm.LLMProposer``; the loop is ``tsevo.evolve.chain.run_chain``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.library.library import Library
from tsevo.library.tool import Tool
from tsevo.marachain import Bar, BatchSpec, ChainLedger, NodeScore, ScoreHistory, Spend
from tsevo.marachain.genome import Genome
from tsevo.marachain.step import Move, Parent, choose_move
from tsevo.roles.protocols import Example, Synthesizer, WorkGroup

__all__ = [
    "LABEL",
    "BuiltinProposer",
    "ChainInputs",
    "ChainSplitError",
    "Proposal",
    "StepState",
    "TrainOnlyEvaluator",
]

#: How reports name the builtin chain.
LABEL = "builtin chain"


class ChainSplitError(RuntimeError):
    """A chain asked for a split other than train (validation and test never feed a chain)."""


class TrainOnlyEvaluator:
    """An evaluator for chain scoring: answers train questions only, raises on anything else."""

    def __init__(self, inner: Any, train: Mapping[str, Question]) -> None:
        self.inner = inner
        self.train = train

    def answer(
        self, split: str, library: Library, questions: Sequence[Question]
    ) -> dict[str, AnswerRecord]:
        """The inner evaluator's records, after checking that every question is on train.

        Raises:
            ChainSplitError: For a split other than ``train`` or a question not on train.
        """
        if split != "train":
            raise ChainSplitError(
                f"a Mara chain asked for the {split!r} split; chains see train only"
            )
        off = [q.id for q in questions if q.id not in self.train]
        if off:
            raise ChainSplitError(f"a Mara chain asked for non-train questions, e.g. {off[:3]}")
        recs: dict[str, AnswerRecord] = self.inner.answer(split, library, questions)
        return recs


@dataclass
class ChainInputs:
    """What a group's chain needs from synthesis (built by ``run_group``)."""

    group: WorkGroup
    round_: int
    library: Library
    held_qs: Sequence[Question]
    base: Mapping[str, AnswerRecord]
    train: Mapping[str, Question]
    synthesizer: Synthesizer
    examples: Sequence[Example]
    #: ``(attempt record, draft)`` of every direct attempt, in order.
    tries: Sequence[tuple[Any, Tool]]
    #: The harm probe of a draft (the one synthesis uses).
    probe_of: Callable[[Tool], list[Question]]
    #: Stamp a draft with a suffix (``c1.s2``): its id, round and group.
    stamp: Callable[[Tool, str], Tool]
    #: Check (and calibrate) a draft: ``(draft, record) -> (draft, violations)``.
    check: Callable[[Tool, Any], tuple[Tool, list[str]]]
    #: Score a draft: ``(draft, probe, evaluator, record) -> records`` (the prefilter).
    score: Callable[[Tool, Sequence[Question], Any, Any], Mapping[str, AnswerRecord]]
    #: A fresh attempt record for a node ``(node_id, measurement)``.
    new_record: Callable[[str, str], Any]
    evaluator: Any
    cfg: Any
    ledger: ChainLedger
    on_candidate: Callable[[Tool, Any], None] | None = None
    #: Store what an LLM step saw and concluded: ``(node_id, "context" | "analysis", text)``.
    on_step_text: Callable[[str, str, str], None] | None = None
    #: How a question id is shown to a model (the run's opaque view ids) and back.
    label: Callable[[str], str] = str
    real: Callable[[str], str] = str


@dataclass
class StepState:
    """What a proposer sees when it picks step ``step``'s move (node ``nid``)."""

    step: int
    nid: str
    chain_id: str
    par: Parent
    history: ScoreHistory
    bar: Bar
    batch: BatchSpec
    v0: Tool
    tried: list[str]
    seen: set[str]
    record: list[tuple[str, int]]
    genomes: Mapping[str, Genome | None]
    #: Every scored node so far (v0 first): draft, score, answer records on the batch.
    scored: Mapping[str, tuple[Tool, NodeScore, Mapping[str, AnswerRecord]]]
    #: The analyses earlier steps' proposals recorded (oldest first).
    analyses: list[dict[str, Any]]


@dataclass
class Proposal:
    """A proposer's answer for one step.

    ``move`` is the edit to check and score; ``None`` with ``invalid`` empty ends the chain
    (``stop`` says why, ``exhausted`` by default); ``invalid`` says why the step's reply was
    refused (the step is spent, an invalid node recorded, nothing scored). ``extra`` goes into
    the node's record (an LLM step's analysis and calls).
    """

    move: Move | None
    lead: str = ""
    cats: Mapping[str, int] = field(default_factory=dict)
    order: Sequence[str] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    invalid: str = ""
    stop: str = "exhausted"


class BuiltinProposer:
    """The builtin chain's step: :func:`~tsevo.marachain.step.choose_move` (no LLM call)."""

    label = LABEL

    def __init__(self, inp: ChainInputs) -> None:
        self.inp = inp

    def next_spend(self, batch_size: int) -> Spend:
        """What a step is expected to spend (for the cap check before it)."""
        return Spend(steps=1, rollouts=batch_size)

    def propose(self, st: StepState) -> Proposal:
        """The first unseen move of the families the score history asks for."""
        batch_qs = [self.inp.train[q] for q in st.batch.qids if q in self.inp.train]
        move, lead, cats, order = choose_move(
            st.par, st.bar, self.inp, st.tried, st.seen, st.history, st.record, st.genomes,
            batch_qs,
        )  # fmt: skip
        return Proposal(move, lead, cats, order)
