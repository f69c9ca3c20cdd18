"""The roles a run uses, as one object: :class:`RoleSet`.

Every role is a small protocol (:mod:`tsevo.roles.protocols`); a role set names one implementation
per role. Two backends implement all of them: :meth:`RoleSet.builtin` (deterministic, offline; the
embedded default) and :meth:`RoleSet.llm` (any OpenAI-compatible endpoint). Roles can be mixed per
role (``RoleSet.builtin(synthesizer=my_synth)`` or ``roles.replace(answerer=...)``); the engine
only sees the protocols, and the callbacks a backend contributes (:attr:`RoleSet.callbacks`).

Example:
    >>> rs = RoleSet.builtin()
    >>> rs.backend, sorted(rs.names())[:2]
    ('builtin', ['answerer', 'global_planner'])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .builtin import (
    ClusterTriage,
    GlobalSummaryAnswerer,
    MeasurementPlanner,
    MergeCoordinator,
    RuleReviewer,
    TemplateSynthesizer,
)
from .builtin.concepts import ConceptEntries, concept_entries
from .builtin.planner import DEFAULT_KINDS
from .callbacks import Callback
from .llm.backend import LLMBackend, open_backend
from .llm.config import RoleConfigs
from .llm.roles import BaselineAnswerer, LLMAnswerer
from .protocols import Answerer, Example, GlobalPlanner, LocalPlanner, Reviewer, Synthesizer, Triage

__all__ = ["ROLE_NAMES", "RoleSet"]

#: The roles of a round, in the order they act.
ROLE_NAMES: tuple[str, ...] = (
    "answerer",
    "reviewer",
    "triage",
    "local_planner",
    "global_planner",
    "synthesizer",
)


@dataclass
class RoleSet:
    """One implementation per role, plus what the backend contributes to a run.

    Attributes:
        answerer: Base answerer.
        reviewer: Stage reviewer.
        triage: Failure clustering (define, assign).
        local_planner: Per-bucket planner.
        global_planner: Coordinator of the local plans.
        synthesizer: Tool synthesizer.
        workers: Questions answered concurrently by the agent (>1 for network-bound answering).
        callbacks: Run hooks the backend contributes (the LLM backend's accounting and resume check).
        backend_handle: The LLM backend behind the LLM roles (``None`` for builtin); closed by
            :meth:`close`.
    """

    answerer: Answerer
    reviewer: Reviewer
    triage: Triage
    local_planner: LocalPlanner
    global_planner: GlobalPlanner
    synthesizer: Synthesizer
    workers: int = 1
    callbacks: tuple[Callback, ...] = ()
    backend_handle: LLMBackend | None = field(default=None, repr=False)

    @classmethod
    def builtin(
        cls, *, concepts: Mapping[str, Sequence[str]] | ConceptEntries = (), **overrides: Any
    ) -> RoleSet:
        """The embedded default: deterministic, offline builtin roles (``overrides`` replace roles).

        ``concepts`` adds entries to the builtin planner's concept lexicon for a benchmark's own
        words (stem -> catalog groups, a mapping or :func:`~.builtin.concepts.load_concepts`'
        pairs; :func:`~.builtin.concepts.extend`); a run records them in ``config.json``.
        """
        kinds = DEFAULT_KINDS
        if concepts and kinds is not None:
            kinds = dataclasses.replace(kinds, concepts=concept_entries(concepts))
        elif concepts:
            raise ValueError("concepts: the builtin planner's kind planning is off (DEFAULT_KINDS)")
        rs = cls(
            GlobalSummaryAnswerer(),
            RuleReviewer(),
            ClusterTriage(),
            MeasurementPlanner(kinds=kinds),
            MergeCoordinator(),
            TemplateSynthesizer(),
        )
        return rs.replace(**overrides) if overrides else rs

    @classmethod
    def llm(
        cls,
        configs: RoleConfigs | None = None,
        *,
        run_dir: str | Path | None = None,
        retries: int = 2,
        max_attempts: int = 3,
        max_points: int = 128,
        **overrides: Any,
    ) -> RoleSet:
        """Every role on one OpenAI-compatible endpoint (per-role models through ``configs``).

        Args:
            configs: Role configs (default: ``RoleConfigs.load()``: environment variables).
            run_dir: The run folder; the response cache lives in it unless ``configs`` names one.
            retries: Re-asks after an invalid reply (the protocol's 2).
            max_attempts: Synthesis attempts per work group (shown to the synthesizer).
            max_points: Most values per series in answering prompts.
            **overrides: Roles to take from elsewhere (e.g. ``answerer=GlobalSummaryAnswerer()``).

        Returns:
            The role set; :meth:`close` it (or use it as a context manager) when done.
        """
        be = open_backend(
            configs if configs is not None else RoleConfigs.load(),
            run_dir=run_dir,
            retries=retries,
            max_attempts=max_attempts,
            max_points=max_points,
        )
        rs = cls(
            be.roles["answerer"],
            be.roles["reviewer"],
            be.roles["triage"],
            be.roles["local_planner"],
            be.roles["global_planner"],
            be.roles["synthesizer"],
            workers=be.workers,
            callbacks=(be.callback,),
            backend_handle=be,
        )
        return rs.replace(**overrides) if overrides else rs

    def replace(self, **changes: Any) -> RoleSet:
        """A copy with some roles (or ``workers`` / ``callbacks``) replaced."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"unknown role(s) {unknown}; roles are {list(ROLE_NAMES)}")
        return dataclasses.replace(self, **changes)

    def baseline_answerer(
        self,
        *,
        selection: str = "single",
        samples: int = 1,
        temperature: float = 0.7,
        refine: bool = False,
        examples: tuple[Example, ...] = (),
        shots: int | None = None,
    ) -> Answerer:
        """The base answerer running one of the paper's answering baselines (LLM backend only).

        With the defaults (a single answer, no reflection, no examples) the answerer itself.

        Raises:
            ValueError: When the answerer is not an LLM answerer: the builtin answerer is
                deterministic (N samples give N identical answers), reflects on nothing and
                reads no examples, so these baselines have no builtin analogue.
        """
        if selection == "single" and not refine and not examples:
            return self.answerer
        if not isinstance(self.answerer, LLMAnswerer):
            raise ValueError(
                f"the answering baselines (self-consistency, Self-Refine, few-shot ICL) run on "
                f"an LLM answerer; {self.names()['answerer']!r} is deterministic and reads no "
                "examples, so they have no builtin analogue (use --backend llm, or serve-scripted "
                "for a scripted server)"
            )
        return BaselineAnswerer(
            self.answerer,
            selection=selection,
            samples=samples,
            temperature=temperature,
            refine=refine,
            examples=examples,
            shots=shots,
        )

    def names(self) -> dict[str, str]:
        """Role name per role (for the manifest)."""
        return {
            k: getattr(getattr(self, k), "name", type(getattr(self, k)).__name__)
            for k in ROLE_NAMES
        }

    @property
    def backend(self) -> str:
        """``builtin`` or ``llm`` when every role is on one backend, else ``mixed``."""
        kinds = {"builtin" if n.startswith("builtin") else "llm" for n in self.names().values()}
        return kinds.pop() if len(kinds) == 1 else "mixed"

    def recorded_settings(self) -> dict[str, dict[str, Any]]:
        """Per role, the settings a run records beside its protocol (only roles that have some).

        A role may say what of its own settings changes a run's outcome, e.g. the builtin
        planner's lexicon additions (``recorded_settings()``); :func:`tsevo.evolve.evolve` writes
        them in ``config.json`` under ``roles``, so a resume under other settings is refused.
        """
        out = {}
        for k, role in self.roles().items():
            rec = getattr(role, "recorded_settings", None)
            got = dict(rec()) if callable(rec) else {}
            if got:
                out[k] = got
        return out

    def roles(self) -> Mapping[str, Any]:
        """The six roles by name."""
        return {k: getattr(self, k) for k in ROLE_NAMES}

    def close(self) -> None:
        """Close what the backend opened (the LLM client and its cache)."""
        if self.backend_handle is not None:
            self.backend_handle.close()

    def __enter__(self) -> RoleSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
