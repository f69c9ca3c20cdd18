"""The taxonomy's consumers as switches: one frozen config nested in the protocol, ``taxonomy``.

``TaxonomyConfig()`` is every consumer off: a run is the TimeEvo protocol byte for byte (the engine
drops the key from ``config.json`` while :attr:`TaxonomyConfig.is_default`). A consumer reads one
pinned taxonomy file (``path``), optionally checked against an expected ``fingerprint``, and only
when its status is ``accepted`` or ``baseline`` (``allow_unaccepted`` overrides that, and is saved
with the run, so it is in every output that records the config).

=====================  =========================================================================
consumer               switch
=====================  =========================================================================
judge                  ``answer.selection = "judge"`` (:mod:`tsevo.taxonomy.judge`): the sampled
                       answer on which the fewest (severity-weighted) outcome-blind codes fire
triage                 ``taxonomy.triage``: codes as triage categories (define = codes firing on
                       >= 2 train errors but not all, assign = each error's top code; the round's
                       triage takes the rest: :class:`~tsevo.taxonomy.consumers.CodedTriage`)
diagnoses              ``taxonomy.diagnoses``: coded diagnoses (top codes with quoted evidence)
                       for the planner and synthesizer, ``beside`` or ``instead`` of free text
                       (:func:`~tsevo.taxonomy.consumers.coded_diagnosis`)
=====================  =========================================================================

Nesting (done by the engine): ``ProtocolConfig.taxonomy: TaxonomyConfig``; ``from_params`` takes the
``taxonomy.<knob>`` and ``taxonomy`` keys out through :func:`taxonomy_params`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from tsevo.knobs import NestedKnobs, check_knobs, knob

from .codes import TaxonomyError
from .jsonio import load_taxonomy
from .model import Taxonomy, require_usable

__all__ = ["JUDGE_WEIGHTS", "TAXONOMY_DOC", "TaxonomyConfig", "check_judge", "taxonomy_params"]

#: How the judge weighs a code that fires: by its severity (minor 1, major 2, critical 3; a code
#: without one weighs 1), or every code 1.
JUDGE_WEIGHTS: tuple[str, ...] = ("severity", "uniform")

#: The documentation of ``ProtocolConfig.taxonomy``.
TAXONOMY_DOC = (
    "Failure-taxonomy consumers (tsevo.taxonomy.config, taxonomy.<knob>): a pinned taxonomy.json "
    "(path, fingerprint) read by the judge (answer.selection='judge'), codes as triage "
    "categories (triage) and coded diagnoses (diagnoses); every consumer off by default (the "
    "protocol as it is). Saved only when not the default."
)

_FP = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True, kw_only=True)
class TaxonomyConfig(NestedKnobs):
    """Which consumers read a pinned taxonomy (the defaults: none, the protocol as it is)."""

    OWNER: ClassVar[str] = "ProtocolConfig.taxonomy"

    path: str = knob(
        "",
        "The pinned taxonomy.json every consumer reads (empty: none). Required by "
        "answer.selection='judge'.",
    )
    fingerprint: str = knob(
        "",
        "Expected fingerprint of the file at 'path' ('sha256:<64 hex>'; empty: not checked). "
        "Loading a file with another fingerprint fails, naming the path and both fingerprints.",
    )
    allow_unaccepted: bool = knob(
        False,
        "Let consumers use a taxonomy whose status is not 'accepted' or 'baseline' (a draft, or "
        "one the gate sent to review). Off: such a file is refused.",
    )
    triage: bool = knob(
        False,
        "Codes as triage categories (define = codes firing on >= 2 errors, assign = each "
        "error's top code; a code on every error is no category, and the round's own triage "
        "defines and assigns the errors no category code fires on). Needs taxonomy.path.",
    )
    diagnoses: str = knob(
        "off",
        "Coded diagnoses (top codes with quoted evidence) for the planner and synthesizer: "
        "'off', 'beside' free text or 'instead' of it (the planner's criteria, the synthesizer's "
        "root cause and failure type dropped). Needs taxonomy.path.",
        choices=("off", "beside", "instead"),
    )
    judge_weights: str = knob(
        "severity",
        "Judge ('answer.selection=judge'): the weight of a code that fires on a sampled answer: "
        "'severity' (minor 1, major 2, critical 3, none 1) or 'uniform' (1). The lowest total wins.",
        choices=JUDGE_WEIGHTS,
    )

    def __post_init__(self) -> None:
        check_knobs(self, self.OWNER)
        if self.fingerprint and not _FP.match(self.fingerprint):
            raise ValueError(
                f"{self.OWNER}.fingerprint: expected 'sha256:' and 64 hex digits, "
                f"got {self.fingerprint!r}"
            )
        if self.fingerprint and not self.path:
            raise ValueError(f"{self.OWNER}.fingerprint: given without a path to check it against")
        if (self.triage or self.diagnoses != "off") and not self.path:
            which = "triage" if self.triage else f"diagnoses={self.diagnoses!r}"
            raise ValueError(
                f"{self.OWNER}.{which} needs a pinned taxonomy: set taxonomy.path to an accepted "
                "taxonomy.json"
            )

    @property
    def is_default(self) -> bool:
        """Whether every consumer is off and no taxonomy is pinned (the protocol)."""
        return self == TaxonomyConfig()

    def load(self) -> Taxonomy:
        """The pinned taxonomy, checked: fingerprint (if expected) and status.

        Raises:
            ValueError: No ``path`` is set.
            TaxonomyError: The file is unreadable or malformed, its fingerprint is not the
                expected one, or its status is not usable (each naming the path).
        """
        if not self.path:
            raise ValueError(f"{self.OWNER}.path: no taxonomy is pinned (set taxonomy.path)")
        taxonomy = load_taxonomy(self.path)
        if self.fingerprint and taxonomy.fingerprint != self.fingerprint:
            raise TaxonomyError(
                f"{self.path}: fingerprint {taxonomy.fingerprint} is not the pinned "
                f"{self.OWNER}.fingerprint {self.fingerprint}"
            )
        try:
            return require_usable(taxonomy, allow_unaccepted=self.allow_unaccepted)
        except TaxonomyError as exc:
            raise TaxonomyError(f"{self.path}: {exc}") from exc


def taxonomy_params(
    lowered: dict[str, Any], start: Mapping[str, Any]
) -> tuple[dict[str, Any], TaxonomyConfig | None]:
    """Take the ``taxonomy.<knob>`` and ``taxonomy`` keys out of loose protocol parameters.

    ``taxonomy`` may be a dict of knobs or a :class:`TaxonomyConfig`; ``taxonomy.<knob>`` keys
    apply on top. Returns the remaining parameters and the resulting config (``None`` when no key
    named it and ``start`` has none), as :func:`tsevo.evolve.baseline.answer_params` does.
    """
    return TaxonomyConfig.take_params(lowered, start)


def check_judge(selection: str, taxonomy: TaxonomyConfig) -> None:
    """Refuse ``answer.selection = "judge"`` without a pinned taxonomy (``ProtocolConfig`` calls it).

    Raises:
        ValueError: The judge is selected and ``taxonomy.path`` is empty.
    """
    if selection == "judge" and not taxonomy.path:
        raise ValueError(
            "ProtocolConfig.answer.selection='judge' needs a pinned taxonomy: set taxonomy.path "
            "to an accepted taxonomy.json (the judge scores sampled answers by its codes)"
        )
