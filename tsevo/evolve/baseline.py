"""The paper's answering baselines (§4): one frozen config nested in the protocol, ``answer``.

``ProtocolConfig(answer=AnswerConfig(...))`` changes how the base answerer answers; everything
else (the agent, the residual chain, the paired protocol on the same splits, the report-only test)
stays as it is, so a baseline run is compared with the base run question by question. The default
(one answer, no reflection, no examples) is the protocol's answerer and leaves the run's
``config.json`` and records byte for byte as without this config.

=====================  ========================================================================
name                   config
=====================  ========================================================================
``base``               the defaults
``self-consistency``   ``answer.selection = "majority"``, ``answer.samples = 5``
``self-refine``        ``answer.refine = True``: one critique-and-revise pass
``4-shot ICL``         ``answer.shots = 4``: four train questions with their gold in the prompt
=====================  ========================================================================

The fixed Chronos tool and the expert library, the paper's other baselines, are roots
(``root = "chronos" | "expert"``, :mod:`tsevo.evolve.ablation`). These three run on an LLM
answerer only: the builtin answerer is deterministic (N samples agree), has nothing to reflect
with and reads no examples, so a builtin run with a non-default ``answer`` is refused.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tsevo.data import Question, QuestionView
from tsevo.knobs import NestedKnobs, check_knobs, knob
from tsevo.roles import RoleSet
from tsevo.roles.protocols import Answerer, Example
from tsevo.roles.selection import Selection
from tsevo.taxonomy.config import TaxonomyConfig
from tsevo.taxonomy.judge import Judge, JudgedAnswerer

__all__ = [
    "PAPER_BASELINES",
    "AnswerConfig",
    "baseline_answerer",
    "baseline_manifest",
    "baseline_name",
    "icl_examples",
    "paper_baseline",
]


@dataclass(frozen=True, kw_only=True)
class AnswerConfig(NestedKnobs):
    """How the base answerer answers (the defaults: the protocol's single answer)."""

    OWNER: ClassVar[str] = "ProtocolConfig.answer"

    selection: str = knob(
        "single",
        "How one answer is chosen: 'single' (the protocol: one request), 'majority' "
        "(self-consistency: 'samples' sampled answers, each request with its own seed; the "
        "majority option wins, ties go to the option sampled first and are recorded) or 'judge' "
        "(the same samples; the one on which the pinned taxonomy's outcome-blind codes weigh "
        "least wins, ties -> majority -> first sampled; needs taxonomy.path).",
        choices=("single", "majority", "judge"),
    )
    samples: int = knob(
        5, "Answers sampled per question under 'majority' and 'judge'.", lo=1, hi=32
    )
    temperature: float = knob(
        0.7, "Sampling temperature of the sampled answers ('majority', 'judge').", lo=0.0, hi=2.0
    )
    refine: bool = knob(
        False,
        "Self-Refine: one reflection pass after the answer (the model critiques its answer and "
        "gives a final one in the same reply); both answers and the critique are recorded.",
    )
    shots: int = knob(
        0,
        "In-context examples: this many train questions with their gold, labelled as train "
        "examples, in the answerer's prompt (the one declared exception to the roles' view); "
        "chosen once per run from train only, seeded by the protocol seed (plus one spare, shown "
        "instead of an example when the train question answered is that example itself).",
        lo=0,
        hi=16,
    )

    def __post_init__(self) -> None:
        check_knobs(self, self.OWNER)

    @property
    def is_default(self) -> bool:
        """Whether this is the protocol's answerer (one answer, no reflection, no examples)."""
        return self.selection == "single" and not self.refine and self.shots == 0


#: The paper's answering baselines by name: the ``answer`` settings each one uses.
PAPER_BASELINES: dict[str, dict[str, Any]] = {
    "base": {},
    "self-consistency": {"selection": "majority", "samples": 5},
    "self-refine": {"refine": True},
    "4-shot ICL": {"shots": 4},
}


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", name.lower())


def paper_baseline(name: str) -> AnswerConfig:
    """The ``answer`` config of one of the paper's baselines (case and punctuation ignored).

    Raises:
        ValueError: For a name that is not one of :data:`PAPER_BASELINES`.
    """
    for known, settings in PAPER_BASELINES.items():
        if _norm(known) == _norm(name):
            return AnswerConfig.from_dict(settings)
    raise ValueError(f"unknown baseline {name!r}; one of {list(PAPER_BASELINES)}")


def baseline_name(cfg: AnswerConfig) -> str:
    """The paper's name of an ``answer`` config, or ``"custom"``."""
    for name, settings in PAPER_BASELINES.items():
        if cfg == AnswerConfig.from_dict(settings):
            return name
    return "custom"


def answer_params(
    lowered: dict[str, Any], start: Mapping[str, Any]
) -> tuple[dict[str, Any], AnswerConfig | None]:
    """Take the ``answer.<setting>`` and ``answer`` keys out of loose protocol parameters.

    ``answer`` may be a paper baseline's name, a dict of settings or an :class:`AnswerConfig`;
    ``answer.<setting>`` keys apply on top. Returns the remaining parameters and the resulting
    config (``None`` when no key named it and ``start`` has none).
    """
    return AnswerConfig.take_params(lowered, start, paper_baseline)


def icl_examples(
    train: Iterable[Question],
    k: int,
    seed: int,
    view: Callable[[Question], QuestionView],
    *,
    spare: int = 1,
) -> tuple[Example, ...]:
    """``k`` labelled train questions for the few-shot answerer, then ``spare`` more, by the seed.

    The draw depends only on the train split's ids and the seed (not on its order); questions
    without gold are never chosen. The first ``k`` are what every question is shown; a spare
    takes the place of an example when the question answered is that example itself (on train).
    """
    labelled = sorted((q for q in train if q.gold is not None), key=lambda q: q.id)
    if k > len(labelled):
        raise ValueError(f"answer.shots={k}, but train has {len(labelled)} labelled questions")
    rng = random.Random(f"tsevo-icl:{seed}")
    drawn = rng.sample(range(len(labelled)), min(len(labelled), k + spare))
    chosen = sorted(drawn[:k]) + drawn[k:]
    return tuple(Example(view(labelled[i]), labelled[i].gold, None) for i in chosen)


def baseline_answerer(
    roles: RoleSet,
    cfg: AnswerConfig,
    *,
    train: Iterable[Question],
    seed: int,
    view: Callable[[Question], QuestionView],
    taxonomy: TaxonomyConfig | None = None,
) -> Answerer:
    """The run's base answerer under ``cfg`` (the role set's own answerer for the defaults).

    Under ``selection = "judge"`` the pinned taxonomy of ``taxonomy`` (``ProtocolConfig.taxonomy``)
    chooses among the samples (:class:`~tsevo.taxonomy.judge.JudgedAnswerer`).

    Raises:
        ValueError: A non-default config on an answerer that is not an LLM answerer, or the
            judge without a pinned taxonomy.
        TaxonomyError: The judge's taxonomy is unreadable, not the pinned fingerprint, or not
            accepted.
    """
    if cfg.is_default:
        return roles.answerer
    examples = icl_examples(train, cfg.shots, seed, view) if cfg.shots else ()

    def make(selection: str | Selection) -> Answerer:
        return roles.baseline_answerer(
            selection=selection,  # type: ignore[arg-type]  # a Selection object is accepted too
            samples=cfg.samples if cfg.selection != "single" else 1,
            temperature=cfg.temperature,
            refine=cfg.refine,
            examples=examples,
            shots=cfg.shots,
        )

    if cfg.selection != "judge":
        return make(cfg.selection)
    if taxonomy is None or not taxonomy.path:
        raise ValueError(
            "answer.selection='judge' needs a pinned taxonomy: set taxonomy.path (and pass "
            "ProtocolConfig.taxonomy to baseline_answerer)"
        )
    return JudgedAnswerer(Judge.from_config(taxonomy), make)


def baseline_manifest(cfg: AnswerConfig, examples: Sequence[Example] = ()) -> dict[str, Any]:
    """What a run's manifest records about its answering baseline: name, settings, example ids."""
    out: dict[str, Any] = {"name": baseline_name(cfg), "answer": cfg.to_dict()}
    if examples:
        out["icl_examples"] = [e.question.id for e in examples[: cfg.shots]]
        out["icl_spares"] = [e.question.id for e in examples[cfg.shots :]]
    return out
