"""The chain ledger: every step, rollout, LLM call and token a chain spends, in one append-only log.

All scoring and chain-role calls of a round go through one :class:`ChainLedger` (design §6). Each
spend is one :class:`LedgerEntry`, appended as one JSON line and flushed to disk before the work
it records is used (:class:`tsevo.store.RecordLog`: a torn last line is cut before the next
append). Reloading ignores a last line without its newline, the line a killed writer may leave,
so what a reload counts is exactly what the next append keeps.

Entries carry an idempotency ``key`` (``"<node_id>:score"``, ``"<node_id>:analyse"``): recording
a key already in the ledger appends nothing and returns the stored entry, so a chain resumed after
``kill -9`` asks :meth:`ChainLedger.has` before spending and never spends twice.

Caps are checked through :meth:`ChainLedger.stop_reason` before each step, against the round's
caps and the run's (the spend of earlier rounds passed in); an exhausted axis stops the chain
with ``budget:<axis>``. ``val_runs`` counts validation reads, which must stay 0.

The ledger names no run path: the engine passes the file (``rounds/r<N>/chains/ledger.jsonl``,
to be named by :class:`tsevo.store.RoundPaths`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tsevo.store import RecordLog, check_no_secrets

from .config import Caps

__all__ = [
    "AXES",
    "CHAIN_ROLES",
    "ChainLedger",
    "LedgerEntry",
    "Spend",
    "read_ledger_lines",
]

#: The capped axes, in the order caps are checked.
AXES: tuple[str, ...] = ("steps", "rollouts", "calls", "tokens")
#: The LLM roles a chain step calls (and ``""`` for work that calls none).
CHAIN_ROLES: tuple[str, ...] = ("", "chain_analyse", "chain_mutate")


@dataclass(frozen=True)
class Spend:
    """What was spent: steps, invalid nodes, rollouts (cache hits apart), calls, tokens, val reads."""

    steps: int = 0
    invalid: int = 0
    rollouts: int = 0
    cache_hits: int = 0
    calls: int = 0
    retries: int = 0
    replays: int = 0
    tokens: int = 0
    val_runs: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"Spend.{f.name}: must be an int >= 0, got {v!r}")

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    def axis(self, name: str) -> int:
        """The spend on one capped axis (:data:`AXES`)."""
        if name not in AXES:
            raise ValueError(f"unknown axis {name!r}; one of {list(AXES)}")
        return int(getattr(self, name))

    def to_dict(self) -> dict[str, int]:
        """JSON-friendly dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class LedgerEntry:
    """One spend of one node.

    Attributes:
        key: Idempotency key, unique in the ledger (``"<node_id>:<what>"``).
        round: The round.
        group_id: The work group.
        chain_id: The chain (``""`` for direct attempts scored into a pool).
        node_id: The node the spend belongs to.
        event: What it was (``step``, ``score``, ``call``, ``invalid``, ...).
        role: The LLM role called (:data:`CHAIN_ROLES`).
        spend: The amounts.
        category: The diagnosis category that led the step (``H``, ``A``, ``I``, ``B``; empty
            when none was diagnosed).
        label: What the step did (the move family and its subject, e.g. ``window: ...``).
    """

    key: str
    round: int
    group_id: str
    chain_id: str
    node_id: str
    event: str
    role: str = ""
    spend: Spend = Spend()
    category: str = ""
    label: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError("LedgerEntry: empty key")
        if self.role not in CHAIN_ROLES:
            raise ValueError(f"LedgerEntry {self.key}: role must be one of {list(CHAIN_ROLES)}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON line's object (the amounts flat beside the fields).

        ``category`` and ``label`` appear only when set, so entries without them keep their bytes.
        """
        d = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "spend" and (f.name not in ("category", "label") or getattr(self, f.name))
        }
        return {**d, **self.spend.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LedgerEntry:
        """Inverse of :meth:`to_dict`."""
        amounts = {f.name: int(d.get(f.name, 0)) for f in fields(Spend)}
        return cls(
            d["key"],
            int(d["round"]),
            d["group_id"],
            d["chain_id"],
            d["node_id"],
            d["event"],
            d.get("role", ""),
            Spend(**amounts),
            d.get("category", ""),
            d.get("label", ""),
        )


def read_ledger_lines(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a ledger file; a last line without its newline (torn) is ignored.

    Raises:
        ValueError: A complete line that is not JSON (the file is damaged, not torn).
    """
    if not path.exists():
        return []
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    out = []
    for i, line in enumerate(complete.decode("utf-8").split("\n")[:-1], 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {i} is not JSON ({exc})") from exc
    return out


class ChainLedger:
    """The append-only spend log of one round's chains (in memory when ``path`` is ``None``).

    Args:
        path: The JSONL file (created on the first record); reloaded when it exists.
        earlier_rounds: The spend of the run's earlier rounds (the default of
            :meth:`stop_reason`'s, so the run caps count the whole run).
    """

    def __init__(self, path: Path | None = None, *, earlier_rounds: Spend | None = None) -> None:
        self.path = path
        self.earlier_rounds = earlier_rounds if earlier_rounds is not None else Spend()
        self._log = RecordLog(path, key="key") if path is not None else None
        self._entries: list[LedgerEntry] = []
        self._by_key: dict[str, LedgerEntry] = {}
        if path is not None:
            for d in read_ledger_lines(path):
                self._add(LedgerEntry.from_dict(d))

    def _add(self, entry: LedgerEntry) -> None:
        if entry.key in self._by_key:
            raise ValueError(f"ledger: key {entry.key!r} recorded twice")
        self._entries.append(entry)
        self._by_key[entry.key] = entry

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """Every entry in the order recorded."""
        return tuple(self._entries)

    def has(self, key: str) -> bool:
        """Whether a spend with this key is already recorded (resume: do not spend it again)."""
        return key in self._by_key

    def get(self, key: str) -> LedgerEntry | None:
        """The entry recorded under ``key``, if any."""
        return self._by_key.get(key)

    def record(self, entry: LedgerEntry) -> LedgerEntry:
        """Append one entry, flushed to disk; a key already recorded appends nothing.

        Returns:
            The stored entry (the earlier one for a repeated key).
        """
        old = self._by_key.get(entry.key)
        if old is not None:
            return old
        line = entry.to_dict()
        check_no_secrets(line, "chain ledger")
        if self._log is not None:
            self._log.append([line])
        self._add(entry)
        return entry

    def total(self, *, group_id: str | None = None, chain_id: str | None = None) -> Spend:
        """The total spend, optionally of one group or one chain."""
        out = Spend()
        for e in self._entries:
            if group_id is not None and e.group_id != group_id:
                continue
            if chain_id is not None and e.chain_id != chain_id:
                continue
            out = out + e.spend
        return out

    def by_node(self) -> dict[str, Spend]:
        """The spend per node id (first-recorded order)."""
        out: dict[str, Spend] = {}
        for e in self._entries:
            out[e.node_id] = out.get(e.node_id, Spend()) + e.spend
        return out

    def calls_by_role(self) -> dict[str, int]:
        """LLM calls per chain role (retries and replays counted apart, in :class:`Spend`)."""
        out: dict[str, int] = {}
        for e in self._entries:
            if e.role:
                out[e.role] = out.get(e.role, 0) + e.spend.calls
        return out

    def stop_reason(
        self,
        round_caps: Caps,
        run_caps: Caps | None = None,
        *,
        earlier_rounds: Spend | None = None,
        next_step: Spend = Spend(steps=1),
    ) -> str | None:
        """Why the next step may not start, or ``None`` when every axis has room.

        An axis is exhausted when what was spent plus ``next_step`` would pass its cap. Pass at
        least 1 on every axis the step will touch (``Spend(steps=1, rollouts=len(batch),
        calls=2, tokens=1)`` for an LLM step): an axis whose spend is unknown beforehand (tokens)
        then stops the chain once its cap is reached, and a step in flight drains first.

        Args:
            round_caps: This round's caps.
            run_caps: The run's caps, or ``None``.
            earlier_rounds: The spend of the run's earlier rounds (for ``run_caps``; the
                ledger's own :attr:`earlier_rounds` when ``None``).
            next_step: What the next step is expected to spend.

        Returns:
            ``"budget:<axis>"`` for the first exhausted axis (:data:`AXES` order, round before
            run), else ``None``.
        """
        now = self.total()
        earlier_rounds = self.earlier_rounds if earlier_rounds is None else earlier_rounds
        for caps, spent in ((round_caps, now), (run_caps, earlier_rounds + now)):
            if caps is None:
                continue
            for axis in AXES:
                cap = getattr(caps, axis)
                have, want = spent.axis(axis), next_step.axis(axis)
                if have + want > cap:
                    return f"budget:{axis}"
        return None

    def summary(self) -> dict[str, Any]:
        """Totals, calls per role, and the per-node spend (for ``chains/ledger`` reports)."""
        return {
            "total": self.total().to_dict(),
            "calls_by_role": self.calls_by_role(),
            "nodes": {k: v.to_dict() for k, v in self.by_node().items()},
        }
