"""Per-update attribution of a paired validation run (the input of the one-shot prune).

Every update ``u`` of a candidate stage (a tool, a guidance refine, a rescope override, a retire
tombstone) gets its own counts: ``h_u`` helped and ``m_u`` harmed questions it was *responsible*
for (its evidence was used by a review that replaced the incoming answer; for a rescope or retire:
its override suppressed an earlier tool and the answer changed). A helped or harmed question counts
for every responsible update. :mod:`tsevo.evolve.prune` plans the prune from these counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tsevo.evolve.gate import ArmOutcome, paired_flips

__all__ = ["Attribution", "AttributionSummary", "UpdateCounts", "attribute"]


@dataclass(frozen=True)
class Attribution:
    """Which updates were responsible for the candidate arm's answer on one question.

    Attributes:
        qid: Question id.
        responsible: Ids of the updates (tools, artifacts, overrides) whose evidence was used by a
            review that replaced the incoming answer; empty when the incoming answer was kept.
    """

    qid: str
    responsible: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.qid, str) or not self.qid:
            raise ValueError(f"Attribution.qid must be a non-empty str, got {self.qid!r}")
        object.__setattr__(self, "responsible", tuple(self.responsible))
        if len(set(self.responsible)) != len(self.responsible):
            raise ValueError(f"Attribution {self.qid!r}: duplicate update ids {self.responsible}")


@dataclass(frozen=True)
class UpdateCounts:
    """Validation counts of one update.

    Attributes:
        helped: ``h_u``, helped questions the update was responsible for.
        harmed: ``m_u``, harmed questions the update was responsible for.
        helped_ids: Those helped question ids, sorted.
        harmed_ids: Those harmed question ids, sorted.
    """

    helped: int = 0
    harmed: int = 0
    helped_ids: tuple[str, ...] = ()
    harmed_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.helped < 0 or self.harmed < 0:
            raise ValueError("UpdateCounts: counts must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        """Return the counts as a JSON-friendly dict."""
        return {
            "helped": self.helped,
            "harmed": self.harmed,
            "helped_ids": list(self.helped_ids),
            "harmed_ids": list(self.harmed_ids),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UpdateCounts:
        """Rebuild counts from :meth:`to_dict` output."""
        return cls(
            helped=int(data["helped"]),
            harmed=int(data["harmed"]),
            helped_ids=tuple(data.get("helped_ids", ())),
            harmed_ids=tuple(data.get("harmed_ids", ())),
        )


@dataclass(frozen=True)
class AttributionSummary:
    """Per-update counts of one paired run, plus the flips no update was responsible for.

    Attributes:
        by_update: Update id -> counts (every update named in ``updates`` or an attribution).
        unattributed_helped: Helped question ids with no responsible update, sorted.
        unattributed_harmed: Harmed question ids with no responsible update, sorted.
    """

    by_update: Mapping[str, UpdateCounts]
    unattributed_helped: tuple[str, ...] = ()
    unattributed_harmed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return the summary as a JSON-friendly dict."""
        return {
            "by_update": {u: c.to_dict() for u, c in sorted(self.by_update.items())},
            "unattributed_helped": list(self.unattributed_helped),
            "unattributed_harmed": list(self.unattributed_harmed),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttributionSummary:
        """Rebuild a summary from :meth:`to_dict` output."""
        return cls(
            by_update={u: UpdateCounts.from_dict(c) for u, c in data["by_update"].items()},
            unattributed_helped=tuple(data.get("unattributed_helped", ())),
            unattributed_harmed=tuple(data.get("unattributed_harmed", ())),
        )


def attribute(
    base: Mapping[str, ArmOutcome],
    cand: Mapping[str, ArmOutcome],
    attributions: Iterable[Attribution],
    *,
    updates: Iterable[str] = (),
) -> AttributionSummary:
    """Compute ``h_u`` and ``m_u`` for every update from a paired run and its traces.

    Only questions both arms completed count (as in the gate). A helped or harmed question is
    attributed to every responsible update; unchanged questions attribute nothing.

    Args:
        base: Base (current library) outcomes by question id.
        cand: Candidate outcomes by question id (same ids).
        attributions: At most one record per question (questions without one have no
            responsible update).
        updates: Ids of every update in the candidate stage, so that updates that changed no
            answers appear with zero counts.

    Returns:
        The per-update counts and the unattributed flips.

    Raises:
        ValueError: On mismatched arms, a duplicate attribution, or an attribution for a
            question that neither arm attempted.
    """
    flips = paired_flips(base, cand)
    responsible: dict[str, tuple[str, ...]] = {}
    for a in attributions:
        if a.qid not in flips:
            raise ValueError(f"attribution for question {a.qid!r}, which no arm attempted")
        if a.qid in responsible:
            raise ValueError(f"two attributions for question {a.qid!r}")
        responsible[a.qid] = a.responsible
    helped: dict[str, list[str]] = {u: [] for u in updates}
    harmed: dict[str, list[str]] = {u: [] for u in updates}
    for ids in responsible.values():
        for u in ids:
            helped.setdefault(u, [])
            harmed.setdefault(u, [])
    lost_h: list[str] = []
    lost_m: list[str] = []
    for qid, cls in flips.items():
        if cls not in ("helped", "harmed"):
            continue
        who = responsible.get(qid, ())
        if not who:
            (lost_h if cls == "helped" else lost_m).append(qid)
        for u in who:
            (helped if cls == "helped" else harmed)[u].append(qid)
    by_update = {
        u: UpdateCounts(
            helped=len(helped[u]),
            harmed=len(harmed[u]),
            helped_ids=tuple(sorted(helped[u])),
            harmed_ids=tuple(sorted(harmed[u])),
        )
        for u in sorted(helped)
    }
    return AttributionSummary(
        by_update=by_update,
        unattributed_helped=tuple(sorted(lost_h)),
        unattributed_harmed=tuple(sorted(lost_m)),
    )
