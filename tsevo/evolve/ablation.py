"""The ablation switches of the paper's study (§4, Fig. 4): one frozen config nested in the protocol.

``ProtocolConfig(ablation=AblationConfig(...))`` turns one component of the method off at a time;
the default (every switch on) is the frozen protocol and runs exactly as without this config. The
paper's six named ablations are config values (:data:`PAPER_ABLATIONS`,
:meth:`~tsevo.evolve.config.ProtocolConfig.ablated`):

=====================  =======================================================================
name                   config
=====================  =======================================================================
``full``               the defaults
``w/o cali.``          ``ablation.calibration = False``: no train-only calibration trees
``w/o gate``           ``ablation.gate = False``: the candidate library is force-accepted
``w/o scope``          ``ablation.scope = False``: tools carry no structured scope
``w/ chronos``         ``root = "chronos"``: a forecasting wrapper pre-installed as ``L_0``
``w/ expert``          ``root = "expert"``: the hand-written expert library as ``L_0``
``w/o residual chain`` ``ablation.residual_chain = False``: tool readings overwrite answers
=====================  =======================================================================

The two root ablations are the protocol's ``root`` knob (a root is data, not a switch). Offline, the
Chronos root's forecaster is the statistical fallback unless Chronos weights are configured
(``$TSEVO_CHRONOS_MODEL``); :func:`ablation_manifest` says which, and the run's manifest records it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from tsevo.knobs import NestedKnobs, check_knobs, knob
from tsevo.library.forecasting import (
    ChronosUnavailableError,
    configured_chronos_model,
    resolve_chronos_model,
)

__all__ = [
    "PAPER_ABLATIONS",
    "AblationConfig",
    "ablation_manifest",
    "ablation_name",
    "forecaster_in_use",
    "paper_ablation",
]


@dataclass(frozen=True, kw_only=True)
class AblationConfig(NestedKnobs):
    """Switches that remove one component of the method (all on: the frozen protocol).

    Each field's documentation is in its metadata (``doc``), as for the protocol's knobs; JSON
    form, strict construction and rows come from :class:`~tsevo.knobs.NestedKnobs`.
    """

    OWNER: ClassVar[str] = "ProtocolConfig.ablation"
    UNKNOWN: ClassVar[str] = "switch(es)"

    calibration: bool = knob(
        True,
        "Train-only calibration trees. Off ('w/o cali.'): a draft that requests a decision tree "
        "gets none (its request is refused like a tree below the bar, so the synthesizer repairs "
        "it into an uncalibrated reading), and synthesizers are never told a tree will be fitted.",
    )
    gate: bool = knob(
        True,
        "The paired admission gate. Off ('w/o gate'): the candidate library of a round that "
        "reaches the gate is force-accepted as it is (no prune, no scope reconciliation); the "
        "validation run is still made and recorded, so the report shows what the gate would have "
        "decided.",
    )
    scope: bool = knob(
        True,
        "Structured scopes. Off ('w/o scope'): synthesized tools carry no scope, every tool of "
        "the chain is a candidate on every question, and the answerer chooses (at most "
        "max_tools_per_question) from a catalog without scopes; the builtin answerer ranks tools "
        "by its matcher over their descriptions alone. Scope reconciliation does not run.",
    )
    residual_chain: bool = knob(
        True,
        "The residual chain's review. Off ('w/o residual chain'): whenever a tool ran and its "
        "reading gives an option, that option replaces the incoming answer without review; when "
        "the reading abstains the incoming answer stays (Agent mode 'overwrite').",
    )

    def __post_init__(self) -> None:
        check_knobs(self, self.OWNER)

    @property
    def is_default(self) -> bool:
        """Whether every switch is on (the frozen protocol)."""
        return self == AblationConfig()


#: The paper's ablations (Fig. 4) by name: the protocol knobs each one changes.
PAPER_ABLATIONS: dict[str, dict[str, Any]] = {
    "full": {},
    "w/o cali.": {"ablation": {"calibration": False}},
    "w/o gate": {"ablation": {"gate": False}},
    "w/o scope": {"ablation": {"scope": False}},
    "w/ chronos": {"root": "chronos"},
    "w/ expert": {"root": "expert"},
    "w/o residual chain": {"ablation": {"residual_chain": False}},
}


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", name.lower().replace("w/o", "wo").replace("w/", "w"))


def paper_ablation(name: str) -> dict[str, Any]:
    """The protocol knobs one of the paper's ablations changes (``{}`` for ``full``).

    Names are matched ignoring case, spaces and punctuation (``"w/o cali."``, ``"wo_cali"``,
    ``"W/O residual chain"``).

    Raises:
        ValueError: For a name that is not one of :data:`PAPER_ABLATIONS`.
    """
    key = _norm(name)
    for known, changes in PAPER_ABLATIONS.items():
        if _norm(known) == key:
            return {k: dict(v) if isinstance(v, dict) else v for k, v in changes.items()}
    raise ValueError(f"unknown ablation {name!r}; one of {list(PAPER_ABLATIONS)}")


def ablation_name(root: str, ablation: AblationConfig) -> str:
    """The paper's name for a (root, switches) setting, or ``"custom"`` when it is none of them."""
    for name, changes in PAPER_ABLATIONS.items():
        want_root = changes.get("root", "empty")
        want = AblationConfig.from_dict(changes.get("ablation", {}))
        if root == want_root and ablation == want:
            return name
    return "custom"


def forecaster_in_use() -> dict[str, str]:
    """Which forecaster ``P.forecast`` uses in this environment (the Chronos root's engine).

    Returns:
        ``{"backend": "chronos" | "stat", "model": ..., "note": ...}``: ``stat`` is the statistical
        fallback, used whenever no Chronos model is configured (``$TSEVO_CHRONOS_MODEL``).
    """
    name = configured_chronos_model()
    if name is None:
        return {
            "backend": "stat",
            "model": "stat-fallback",
            "note": "statistical fallback: no Chronos model configured ($TSEVO_CHRONOS_MODEL)",
        }
    try:
        ref = resolve_chronos_model(name)
    except ChronosUnavailableError as exc:
        return {"backend": "unavailable", "model": name, "note": str(exc).splitlines()[0]}
    return {"backend": "chronos", "model": ref.model_id, "note": "Chronos weights found locally"}


def ablation_manifest(root: str, ablation: AblationConfig) -> dict[str, Any]:
    """What a run's manifest records about its ablation: name, label, switches, root, forecaster.

    The label says when the ``w/ chronos`` root runs on the statistical fallback, so a table built
    from the run cannot present it as Chronos-2.
    """
    name = ablation_name(root, ablation)
    out: dict[str, Any] = {
        "name": name,
        "label": name,
        "switches": ablation.to_dict(),
        "root": root,
    }
    if root == "chronos":
        fc = forecaster_in_use()
        out["forecaster"] = fc
        if fc["backend"] != "chronos":
            out["label"] = f"{name} (statistical fallback, no Chronos weights)"
    return out
