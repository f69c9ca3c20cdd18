"""MAST's 14 failure modes as a shipped ``baseline`` taxonomy (design §1.7).

MAST (Cemri et al., *Why Do Multi-Agent LLM Systems Fail?*, 2025) is the fixed catalogue AdaMAST
compares against. :func:`load_mast` returns its 14 modes under the paper's own ids, on axis ``A``,
with the paper's category as area and status ``baseline`` (usable without a gate):

=========  ==========================  ============================================
category   ids                         modes
=========  ==========================  ============================================
1          ``FM-1.1`` … ``FM-1.5``     specification and system design
2          ``FM-2.1`` … ``FM-2.6``     inter-agent misalignment
3          ``FM-3.1`` … ``FM-3.3``     task verification and termination
=========  ==========================  ============================================

Foreign ids move no mark, so codes induced beside MAST still start at ``A.1``. AdaMAST's own
``mast.json`` numbers the modes ``MAST-1`` … ``MAST-14``; :data:`MAST_ALIASES` maps 13 of them onto
the paper's ids (AdaMAST's ``MAST-13`` "weak verification" has no paper counterpart, and the paper's
``FM-2.6`` none in AdaMAST's file). Descriptions are tsevo's short paraphrases of the paper's
definitions.

Builtin detectors (a later part of issue 12) exist only where the residual chain has an analogue:
FM-1.1 (answer outside the options), 1.3 (evidence repeated), 1.5 (tool budget spent, no decision),
2.5 (keep against confident evidence), 2.6 (reason and decision name different options), 3.1
(shortlisted, nothing ran), 3.2 (decision without evidence), 3.3 (wrong keep or replace after
evidence; outcome-aware). The other six never fire on the builtin backend.
"""

from __future__ import annotations

from .codes import Code
from .model import Taxonomy

__all__ = ["MAST_ALIASES", "MAST_AREAS", "MAST_MODES", "load_mast", "mast_id"]

#: Area (the paper's category) of each MAST category number.
MAST_AREAS: dict[str, str] = {
    "1": "specification",
    "2": "inter_agent_misalignment",
    "3": "verification",
}

#: ``(id, name, description)`` of the paper's 14 modes, in the paper's order.
MAST_MODES: tuple[tuple[str, str, str], ...] = (
    (
        "FM-1.1",
        "Disobey task specification",
        "The system does not meet the constraints or requirements the task states.",
    ),
    (
        "FM-1.2",
        "Disobey role specification",
        "An agent acts outside the responsibilities of the role it was given.",
    ),
    (
        "FM-1.3",
        "Step repetition",
        "A step already completed is repeated without new information, delaying or derailing "
        "progress.",
    ),
    (
        "FM-1.4",
        "Loss of conversation history",
        "Context established earlier is dropped, so the system acts as if it had never been said.",
    ),
    (
        "FM-1.5",
        "Unaware of termination conditions",
        "The system does not recognise when the interaction should end, stopping too late or "
        "continuing without purpose.",
    ),
    (
        "FM-2.1",
        "Conversation reset",
        "The interaction restarts unexpectedly, losing the progress and context built so far.",
    ),
    (
        "FM-2.2",
        "Fail to ask for clarification",
        "Faced with unclear or incomplete information, an agent proceeds on a guess instead of "
        "asking.",
    ),
    (
        "FM-2.3",
        "Task derailment",
        "The work drifts away from the intended objective toward an irrelevant or unproductive "
        "one.",
    ),
    (
        "FM-2.4",
        "Information withholding",
        "An agent holds information another agent needs for its decision and does not share it.",
    ),
    (
        "FM-2.5",
        "Ignored other agent's input",
        "An agent disregards input or recommendations from another agent or tool.",
    ),
    (
        "FM-2.6",
        "Reasoning-action mismatch",
        "What an agent states in its reasoning and what it then does disagree.",
    ),
    (
        "FM-3.1",
        "Premature termination",
        "The interaction ends before the objectives are met or the needed information is "
        "exchanged.",
    ),
    (
        "FM-3.2",
        "No or incomplete verification",
        "Results are not checked, or checked only partly, so errors pass unnoticed.",
    ),
    (
        "FM-3.3",
        "Incorrect verification",
        "A check is made but does not validate the result correctly (wrong check, or its outcome "
        "misread).",
    ),
)

#: AdaMAST's ``mast.json`` ids onto the paper's (13 pairs; ``MAST-13`` and ``FM-2.6`` unpaired).
MAST_ALIASES: dict[str, str] = {
    "MAST-1": "FM-1.1",
    "MAST-2": "FM-1.2",
    "MAST-3": "FM-1.3",
    "MAST-4": "FM-1.4",
    "MAST-5": "FM-1.5",
    "MAST-6": "FM-2.1",
    "MAST-7": "FM-2.2",
    "MAST-8": "FM-2.3",
    "MAST-9": "FM-2.4",
    "MAST-10": "FM-2.5",
    "MAST-11": "FM-3.1",
    "MAST-12": "FM-3.2",
    "MAST-14": "FM-3.3",
}


def mast_id(code_id: str) -> str | None:
    """The paper's id for a MAST id or an AdaMAST alias; ``None`` if it names no paper mode.

    Example:
        >>> mast_id("MAST-12"), mast_id("FM-2.6"), mast_id("MAST-13")
        ('FM-3.2', 'FM-2.6', None)
    """
    if any(code_id == m[0] for m in MAST_MODES):
        return code_id
    return MAST_ALIASES.get(code_id)


def load_mast() -> Taxonomy:
    """MAST's 14 modes as a ``baseline`` taxonomy (ids ``FM-x.y``, axis ``A``, area = category)."""
    codes = [
        Code(
            id=code_id,
            category="A",
            name=name,
            description=description,
            area=MAST_AREAS[code_id[3]],
            origin="mast",
        )
        for code_id, name, description in MAST_MODES
    ]
    return Taxonomy(
        codes=tuple(codes),
        status="baseline",
        display_name="MAST: multi-agent system failure taxonomy",
        domain="multi-agent LLM systems",
        summary=(
            "The 14 failure modes of Cemri et al. (2025), in three categories: specification, "
            "inter-agent misalignment, verification. A fixed catalogue, shipped as a baseline."
        ),
        generation={"provider": "mast", "model": "Cemri et al. 2025 (arXiv:2503.13657)"},
    )
