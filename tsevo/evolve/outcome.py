"""What synthesis records per work group: each attempt's checks and prefilter numbers, the outcome.

:class:`AttemptRecord` and :class:`GroupOutcome` are written to ``synthesis.json`` and read back on
resume (re-exported by :mod:`tsevo.evolve.synthesize`, which fills them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tsevo.library.tool import Tool

__all__ = ["AttemptRecord", "GroupOutcome"]


@dataclass
class AttemptRecord:
    """One synthesis attempt with its checks and prefilter numbers."""

    attempt: int
    tool_id: str
    measurement: str
    violations: list[str] = field(default_factory=list)
    repaired: bool = False
    calibration: dict[str, Any] | None = None
    checked: bool = False
    n_held_out: int = 0
    n_in_contract: int | None = None
    n_probe: int = 0
    repairs: list[str] = field(default_factory=list)
    harms: list[str] = field(default_factory=list)
    exec_errors: int = 0
    tool_runs: int = 0
    passed: bool = False
    outcome: str = ""

    @property
    def repair_rate(self) -> float:
        """Attributable repairs per held-out error."""
        return len(self.repairs) / self.n_held_out if self.n_held_out else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        d = dict(self.__dict__)
        d["repair_rate"] = round(self.repair_rate, 6)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AttemptRecord:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: v for k, v in d.items() if k != "repair_rate"})


@dataclass
class GroupOutcome:
    """What synthesis produced for one work group."""

    group_id: str
    attempts: list[AttemptRecord] = field(default_factory=list)
    survivor: Tool | None = None
    replans: int = 0
    stopped: str = ""
    adaptations: list[dict[str, Any]] = field(default_factory=list)
    #: The builtin Mara chain's record when one ran (``None``: no chain, ``synthesis.json`` as before).
    chain: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (the survivor by id; its files live in candidates/)."""
        d: dict[str, Any] = {
            "group_id": self.group_id,
            "attempts": [a.to_dict() for a in self.attempts],
            "survivor": self.survivor.id if self.survivor else None,
            "replans": self.replans,
            "stopped": self.stopped,
        }
        if self.adaptations:  # signature adaptations (groups without one keep their bytes)
            d["adaptations"] = self.adaptations
        if self.chain is not None:  # only when a Mara chain ran
            d["chain"] = self.chain
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], survivor: Tool | None = None) -> GroupOutcome:
        """Inverse of :meth:`to_dict`, given the survivor read back from its candidate folder."""
        if (survivor.id if survivor else None) != d.get("survivor"):
            raise ValueError(f"group {d['group_id']}: survivor {d.get('survivor')!r} not given")
        return cls(
            d["group_id"],
            [AttemptRecord.from_dict(a) for a in d["attempts"]],
            survivor,
            int(d.get("replans", 0)),
            d.get("stopped", ""),
            list(d.get("adaptations", [])),
            d.get("chain"),
        )
