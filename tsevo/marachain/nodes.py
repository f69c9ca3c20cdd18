"""Node ids and the chain node record.

Direct attempts keep the ids synthesis stamps on them, ``r<N>.<group>.a<K>`` (``...a<K>r`` after a
repair). Chain nodes are ``r<N>.<group>.c<C>.s<S>``: step ``S >= 1`` of chain ``C >= 1`` of the
group (``p<C>`` instead of ``c<C>`` for a polish run), and the chain itself is
``r<N>.<group>.c<C>``. A direct id ends in an ``a<K>`` segment and a node id in an ``s<S>`` one,
so the two never collide, whatever the group is called; :func:`parse_node_id` reads any of them
back. Group ids carry no dots (``g1``, ``g12``), so every id parses one way only.

A :class:`ChainNode` is one node of a group's lineage tree (design §2.1): a direct attempt or a
chain step, with its parent, chain, per-group ``local_seq`` (the tie-break that keeps ordering off
the clock and off scheduling), artifact hash, and score, or the reason it is invalid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .score import NodeScore

__all__ = [
    "NODE_KINDS",
    "ChainNode",
    "NodeRef",
    "chain_id",
    "chain_node_id",
    "direct_node_id",
    "is_chain_id",
    "parse_node_id",
]

#: A node is a direct attempt or a chain step.
NODE_KINDS: tuple[str, ...] = ("direct", "chain")

_GROUP = re.compile(r"^[A-Za-z0-9_\-]+$")
_DIRECT = re.compile(
    r"^r(?P<round>[1-9][0-9]*)\.(?P<group>[A-Za-z0-9_\-]+)\.a(?P<k>[1-9][0-9]*)(?P<rep>r?)$"
)
_STEP = re.compile(
    r"^r(?P<round>[1-9][0-9]*)\.(?P<group>[A-Za-z0-9_\-]+)\.(?P<kind>[cp])(?P<c>[1-9][0-9]*)"
    r"\.s(?P<s>[1-9][0-9]*)$"
)
_CHAIN = re.compile(r"^r[1-9][0-9]*\.[A-Za-z0-9_\-]+\.[cp][1-9][0-9]*$")


def _check(round_: int, group_id: str, **positive: int) -> None:
    if not _GROUP.fullmatch(group_id):
        raise ValueError(f"bad group id {group_id!r}: letters, digits, '_' and '-' only")
    for name, v in {"round": round_, **positive}.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")


def direct_node_id(round_: int, group_id: str, attempt: int, *, repaired: bool = False) -> str:
    """The id synthesis gives direct attempt ``attempt`` (``r1.g2.a3``; ``r1.g2.a3r`` repaired)."""
    _check(round_, group_id, attempt=attempt)
    return f"r{round_}.{group_id}.a{attempt}" + ("r" if repaired else "")


def chain_id(round_: int, group_id: str, chain: int, *, polish: bool = False) -> str:
    """The id of chain ``chain`` of a group (``r1.g2.c1``; a polish run ``r1.g2.p1``)."""
    _check(round_, group_id, chain=chain)
    return f"r{round_}.{group_id}.{'p' if polish else 'c'}{chain}"


def chain_node_id(
    round_: int, group_id: str, chain: int, step: int, *, polish: bool = False
) -> str:
    """The id of step ``step`` (1-based) of a chain (``r1.g2.c1.s3``)."""
    _check(round_, group_id, chain=chain, step=step)
    return f"{chain_id(round_, group_id, chain, polish=polish)}.s{step}"


def is_chain_id(text: str) -> bool:
    """Whether ``text`` is a chain id (``r1.g2.c1``, ``r1.g2.p1``)."""
    return bool(_CHAIN.fullmatch(text))


@dataclass(frozen=True)
class NodeRef:
    """A node id read back: round, group, kind and position."""

    round: int
    group_id: str
    kind: str
    attempt: int = 0
    repaired: bool = False
    chain: int = 0
    step: int = 0
    polish: bool = False

    @property
    def node_id(self) -> str:
        """The id this reference was read from."""
        if self.kind == "direct":
            return direct_node_id(self.round, self.group_id, self.attempt, repaired=self.repaired)
        return chain_node_id(self.round, self.group_id, self.chain, self.step, polish=self.polish)

    @property
    def chain_id(self) -> str:
        """The node's chain (``""`` for a direct attempt)."""
        if self.kind == "direct":
            return ""
        return chain_id(self.round, self.group_id, self.chain, polish=self.polish)


def parse_node_id(text: str) -> NodeRef:
    """Read a direct attempt's or a chain node's id.

    Raises:
        ValueError: For anything else (a chain id, a draft id, a library tool id).
    """
    m = _DIRECT.fullmatch(text)
    if m:
        return NodeRef(int(m["round"]), m["group"], "direct", int(m["k"]), bool(m["rep"]))
    m = _STEP.fullmatch(text)
    if m:
        return NodeRef(
            int(m["round"]),
            m["group"],
            "chain",
            chain=int(m["c"]),
            step=int(m["s"]),
            polish=m["kind"] == "p",
        )
    raise ValueError(f"not a node id: {text!r}")


@dataclass(frozen=True)
class ChainNode:
    """One node of a group's lineage: a direct attempt (depth 0) or a chain step (depth >= 1).

    Attributes:
        node_id: Its id (:func:`direct_node_id` or :func:`chain_node_id`).
        group_id: The work group.
        kind: ``direct`` or ``chain``.
        attempt: The direct attempt number (0 for chain steps).
        depth: 0 for direct attempts; a chain step's distance from v0.
        parent_id: The node it was edited from (``""`` for direct attempts).
        chain_id: Its chain (``""`` for direct attempts).
        local_seq: Per-group sequence number in creation order (tie-breaks).
        artifact_hash: The artifact's content hash.
        score: Its batch score, or ``None`` when invalid or not scored.
        invalid_reason: Why it was not scored (``""`` when valid).
    """

    node_id: str
    group_id: str
    kind: str
    attempt: int
    depth: int
    parent_id: str
    chain_id: str
    local_seq: int
    artifact_hash: str
    score: NodeScore | None = None
    invalid_reason: str = ""

    def __post_init__(self) -> None:
        ref = parse_node_id(self.node_id)
        if ref.kind != self.kind or ref.group_id != self.group_id:
            raise ValueError(f"ChainNode {self.node_id}: kind/group disagree with its id")
        if self.kind == "direct":
            if (self.attempt, self.depth, self.parent_id, self.chain_id) != (
                ref.attempt,
                0,
                "",
                "",
            ):
                raise ValueError(
                    f"ChainNode {self.node_id}: a direct attempt has depth 0, no parent"
                )
        else:
            if self.attempt != 0 or self.depth < 1 or not self.parent_id:
                raise ValueError(
                    f"ChainNode {self.node_id}: a chain step has depth >= 1 and a parent"
                )
            if self.chain_id != ref.chain_id:
                raise ValueError(f"ChainNode {self.node_id}: chain id {self.chain_id!r} disagrees")
        if self.local_seq < 0:
            raise ValueError(f"ChainNode {self.node_id}: local_seq must be >= 0")
        if self.score is not None and self.invalid_reason:
            raise ValueError(f"ChainNode {self.node_id}: an invalid node has no score")

    @property
    def valid(self) -> bool:
        """Whether the node was scored."""
        return self.score is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (the score nested)."""
        d = dict(self.__dict__)
        d["score"] = self.score.to_dict() if self.score is not None else None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChainNode:
        """Inverse of :meth:`to_dict`."""
        data = dict(d)
        score = data.pop("score", None)
        return cls(**data, score=NodeScore.from_dict(score) if score is not None else None)
