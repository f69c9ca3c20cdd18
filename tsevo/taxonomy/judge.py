"""The judge: among sampled answers, the one on which the fewest outcome-blind codes fire.

``answer.selection = "judge"`` (design §5.4) samples the base answerer ``samples`` times, as the
self-consistency baseline does, and lets a pinned taxonomy choose instead of the vote. For each
sampled answer the judge builds the features of the answer trace that answer would start (the
trace registry's own feature code, :mod:`.traces`, on an answer record holding only that answer),
keeps the features known when the answer is chosen (the answer's position, reason length and rule
words, the question's shape; :data:`ANSWER_TIME_FEATURES`), and runs every code's detector on
them. A sample's score is the sum of the weights of the codes that fire (``severity``: minor 1,
major 2, critical 3, none 1; or ``uniform``); the lowest score wins, ties go to the majority option
among the tied samples, then to the first sampled.

Outcome-blind by construction: the judge reads a :class:`~tsevo.data.QuestionView` (no gold, no
metadata) and the sampled answers; it uses only codes marked ``outcome_blind`` with a detector, and
drops (with a warning, listed in :attr:`Judge.dropped`) any code whose detector reads an
outcome-aware or unknown feature, or that cannot fire before the chain has run (tool and review
features). Every choice records the taxonomy's fingerprint and the codes that fired per sample.

Example:
    >>> from tsevo.taxonomy import Code, Taxonomy
    >>> last = {"any": [{"all": [{"feature": "answer.position", "op": "==", "value": "last"}]}]}
    >>> code = Code(id="B.1", category="B", name="Answer_Last", applies_to_role="answerer",
    ...             severity="major", detector=last, outcome_blind=True)
    >>> judge = Judge(Taxonomy.create([code], status="accepted"))
    >>> judge.ids
    ('B.1',)
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tsevo.agent import AnswerRecord
from tsevo.data import QuestionView
from tsevo.roles.protocols import Answerer, BaseAnswer
from tsevo.roles.selection import Selected, Selection

from .codes import Code
from .config import TaxonomyConfig
from .induce import fires
from .model import Taxonomy, require_usable
from .traces import FEATURES, _features

__all__ = [
    "ANSWER_TIME_FEATURES",
    "SEVERITY_WEIGHTS",
    "BoundJudge",
    "Judge",
    "JudgeSelected",
    "JudgedAnswerer",
    "answer_features",
]

#: The registry features known when an answer is chosen (before any tool or reviewer ran). The
#: subdomain is left out: it is fitted over a run's train questions, not known per question.
ANSWER_TIME_FEATURES: tuple[str, ...] = (
    "answer.abstained",
    "answer.position",
    "answer.reason_words",
    "answer.reason_kind",
    "domain.n_options",
    "domain.question_len",
    "domain.series_len",
    "domain.n_series",
    "domain.has_context",
    "domain.numeric_options",
)
#: A code's weight by severity under ``judge_weights = "severity"`` (other severities weigh 1).
SEVERITY_WEIGHTS: dict[str, int] = {"minor": 1, "major": 2, "critical": 3}


def answer_features(question: QuestionView, answer: BaseAnswer) -> dict[str, Any]:
    """The answer-time features of the trace ``answer`` would start on ``question``.

    The trace registry's feature code runs on an answer record that holds the answer alone (no
    stage ran yet, no correctness); only :data:`ANSWER_TIME_FEATURES` are kept.
    """
    rec = AnswerRecord(
        qid=question.id,
        fingerprint=question.fingerprint,
        task="",
        base_answer=answer.option,
        base_reason=answer.reason,
        steps=(),
        final_answer=answer.option,
        correct=None,
    )
    # the registry's code reads the question's text, context, options and series only, which a
    # view has (and nothing else: a view holds no gold)
    feats = _features(rec, cast(Any, question))
    return {k: feats[k] for k in ANSWER_TIME_FEATURES}


def _atoms(detector: Mapping[str, Any]) -> list[str]:
    return [a["feature"] for clause in detector["any"] for a in clause["all"]]


def _why_not(code: Code) -> str | None:
    """Why the judge cannot use ``code`` (``None``: it can)."""
    if code.outcome_blind is not True:
        return "not marked outcome-blind"
    if code.detector is None:
        return "no detector"
    for name in _atoms(code.detector):
        if name not in FEATURES:
            return f"unknown feature {name!r}"
        if not FEATURES[name].outcome_blind:
            return f"reads the outcome-aware feature {name!r}"
    if not any(
        all(a["feature"] in ANSWER_TIME_FEATURES for a in clause["all"])
        for clause in code.detector["any"]
    ):
        return "cannot fire when the answer is chosen (reads tool or review features)"
    return None


@dataclass(frozen=True)
class JudgeSelected(Selected):
    """A judge's choice: :class:`~tsevo.roles.selection.Selected` plus what fired per sample.

    Attributes:
        weights: Per sample, the summed weight of the codes that fired.
        fired: Per sample, the ids of the codes that fired.
        taxonomy: The fingerprint of the taxonomy that judged.
    """

    weights: tuple[int, ...] = ()
    fired: tuple[tuple[str, ...], ...] = ()
    taxonomy: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict: the selection's keys plus ``weights``, ``fired``, ``taxonomy``."""
        return {
            **super().to_dict(),
            "weights": list(self.weights),
            "fired": [list(f) for f in self.fired],
            "taxonomy": self.taxonomy,
        }


@dataclass(frozen=True)
class _Scored:
    code: Code
    weight: int


@dataclass
class Judge:
    """Scores sampled answers by a pinned taxonomy's outcome-blind codes.

    Args:
        taxonomy: The pinned version (``accepted`` or ``baseline`` unless ``allow_unaccepted``).
        weights: ``severity`` or ``uniform`` (see :data:`SEVERITY_WEIGHTS`).
        allow_unaccepted: Judge with a draft or ``review_required`` version anyway.

    Attributes:
        fingerprint: The taxonomy's fingerprint (recorded with every choice).
        dropped: Code id -> why the judge cannot use it (also warned about once).

    Raises:
        TaxonomyError: The taxonomy's status is not usable.
        ValueError: Unknown ``weights``.
    """

    taxonomy: Taxonomy
    weights: str = "severity"
    allow_unaccepted: bool = False
    dropped: dict[str, str] = field(init=False)
    _codes: tuple[_Scored, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        require_usable(self.taxonomy, allow_unaccepted=self.allow_unaccepted)
        if self.weights not in ("severity", "uniform"):
            raise ValueError(f"judge weights must be 'severity' or 'uniform', not {self.weights!r}")
        self.dropped = {}
        kept = []
        for code in self.taxonomy.codes:
            why = _why_not(code)
            if why is not None:
                self.dropped[code.id] = why
                continue
            w = SEVERITY_WEIGHTS.get(code.severity or "", 1) if self.weights == "severity" else 1
            kept.append(_Scored(code, w))
        self._codes = tuple(kept)
        if self.dropped:
            listed = "; ".join(f"{k}: {v}" for k, v in self.dropped.items())
            warnings.warn(
                f"the judge leaves out {len(self.dropped)} code(s): {listed}", stacklevel=3
            )

    @classmethod
    def from_config(cls, cfg: TaxonomyConfig) -> Judge:
        """The judge of ``ProtocolConfig.taxonomy``: its pinned file, checked, and its weights."""
        return cls(cfg.load(), weights=cfg.judge_weights, allow_unaccepted=cfg.allow_unaccepted)

    @property
    def fingerprint(self) -> str:
        """The judging taxonomy's fingerprint."""
        return self.taxonomy.fingerprint

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids of the codes the judge uses."""
        return tuple(s.code.id for s in self._codes)

    def score(self, question: QuestionView, answer: BaseAnswer) -> tuple[int, tuple[str, ...]]:
        """The summed weight of the codes firing on ``answer`` to ``question``, and their ids."""
        feats = answer_features(question, answer)
        hit = [s for s in self._codes if fires(s.code.detector, feats)]
        return sum(s.weight for s in hit), tuple(s.code.id for s in hit)

    def judge(self, samples: Sequence[BaseAnswer], question: QuestionView) -> JudgeSelected:
        """Choose among ``samples`` (answers to ``question``): lowest weight, majority, first."""
        if not samples:
            raise ValueError("no answer to select from")
        scored = [self.score(question, a) for a in samples]
        weights = tuple(w for w, _ in scored)
        low = min(weights)
        best = [i for i, w in enumerate(weights) if w == low]
        counts = Counter(samples[i].option for i in best)
        top = max(counts.values())
        tied = sorted(o for o, c in counts.items() if c == top)
        index = next(i for i in best if samples[i].option in tied)
        rule = f"judge: lowest weight {low} ({len(best)} of {len(samples)} samples)"
        if len(best) > 1:
            rule += ", tie -> majority" + (", tie -> first sampled" if len(tied) > 1 else "")
        votes = Counter(a.option for a in samples)
        return JudgeSelected(
            samples[index].option,
            index,
            {str(o): votes[o] for o in sorted(votes)},
            tuple(tied) if len(tied) > 1 else (),
            rule,
            weights=weights,
            fired=tuple(f for _, f in scored),
            taxonomy=self.fingerprint,
        )

    def bind(self, question: QuestionView | None) -> BoundJudge:
        """The judge as a :class:`~tsevo.roles.selection.Selection` for one question."""
        return BoundJudge(self, question)


class BoundJudge:
    """A :class:`Judge` bound to the question its samples answer (a ``Selection``)."""

    name = "judge"

    def __init__(self, judge: Judge, question: QuestionView | None) -> None:
        self.judge = judge
        self.question = question

    def select(self, samples: Sequence[BaseAnswer]) -> Selected:
        """Choose among ``samples`` with the bound question.

        Raises:
            ValueError: Not bound to a question (the judge reads the question's shape).
        """
        if self.question is None:
            raise ValueError("the judge needs the question its samples answer (Judge.bind(q))")
        return self.judge.judge(samples, self.question)


class JudgedAnswerer:
    """A base answerer whose sampled answers the judge chooses among, question by question.

    Args:
        judge: The judge.
        make: Builds the sampling answerer around a selection (the role set's
            ``baseline_answerer`` with the run's samples, temperature, refine and examples);
            called once per question with the judge bound to it, so nothing is shared between
            questions answered at the same time.
    """

    role = "answerer"

    def __init__(self, judge: Judge, make: Callable[[Selection], Answerer]) -> None:
        self.judge = judge
        self.make = make
        proto = make(judge.bind(None))
        self.name: str = proto.name
        self.examples: tuple[Any, ...] = tuple(getattr(proto, "examples", ()))

    def answer(self, q: QuestionView) -> BaseAnswer:
        """Sample, judge and (with refine) reflect, as the sampling answerer does."""
        return self.make(self.judge.bind(q)).answer(q)
