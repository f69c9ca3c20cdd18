"""The Pareto-filtered top-N pool of a work group and its seeded samplers (design §5).

One pool per group and round holds every valid scored node by its *credited* vector on the batch.
An update (:func:`update_pool`, the release's ``eliminate``) first pre-sorts the members by
``(depth, local_seq)`` descending and removes every member some alive member weakly dominates
(``a ⪰ b`` iff ``a_i + ε >= b_i`` for every row, ε = 1e-8; false for empty or unequal vectors), so
of two identical vectors the newer survives; then it keeps the top ``N`` by
``(mean, depth, local_seq)``. Only ``pooled`` members retire: an ``evolving`` member (a chain is
refining it) stays, so the pool holds at most ``N`` plus the evolving members, and a best-mean
member always survives.

Samplers (:func:`sample`) pick the start node of chains 2.. and of polish steps:

* ``leadership`` (default): on each *informative* row (members disagree) a member leads if it is
  within ε of the row's best; its weight is 1 plus its leads. All-zero and all-one rows change
  nothing, and no member ever has zero mass.
* ``leadership_raw``: the Mara paper's count over every row (all-equal rows included); all-zero
  weights fall back to uniform instead of raising.
* ``lexicase``: rows in a random order, keep the members best on each row in turn, pick one.

Every draw uses its own ``random.Random`` seeded from ``sha256(seed, round, group, event)`` and
the members in id order: no global RNG, no dependence on how the members were listed or
scheduled.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EPS",
    "MEMBER_STATES",
    "SAMPLERS",
    "PoolMember",
    "PoolUpdate",
    "draw_rng",
    "sample",
    "sampler_weights",
    "update_pool",
    "weakly_dominates",
]

#: The dominance and leadership tolerance.
EPS = 1e-8
#: A member is ``pooled`` (selectable, may retire) or ``evolving`` (a chain refines it).
MEMBER_STATES: tuple[str, ...] = ("pooled", "evolving")
#: The samplers by name (``MaraConfig.sampler``).
SAMPLERS: tuple[str, ...] = ("leadership", "leadership_raw", "lexicase")


def weakly_dominates(a: Sequence[float], b: Sequence[float], eps: float = EPS) -> bool:
    """``a ⪰ b``: ``a`` is within ``eps`` of at least ``b`` on every row.

    False for empty vectors and for vectors of different lengths.
    """
    if not a or len(a) != len(b):
        return False
    return all(x + eps >= y for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class PoolMember:
    """A scored node in the pool: its credited vector, depth, per-group sequence and state."""

    node_id: str
    vector: tuple[float, ...]
    depth: int
    local_seq: int
    state: str = "pooled"

    def __post_init__(self) -> None:
        if self.state not in MEMBER_STATES:
            raise ValueError(
                f"PoolMember {self.node_id}: state must be one of {list(MEMBER_STATES)}"
            )

    @property
    def mean(self) -> float:
        """The mean credited score (0 for an empty vector)."""
        return sum(self.vector) / len(self.vector) if self.vector else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "node_id": self.node_id,
            "vector": list(self.vector),
            "depth": self.depth,
            "local_seq": self.local_seq,
            "state": self.state,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PoolMember:
        """Inverse of :meth:`to_dict`."""
        return cls(
            d["node_id"],
            tuple(float(x) for x in d["vector"]),
            int(d["depth"]),
            int(d["local_seq"]),
            d.get("state", "pooled"),
        )


@dataclass(frozen=True)
class PoolUpdate:
    """The outcome of one update: the kept members (best first) and the retired ones, with why.

    ``retired`` pairs a node id with ``"dominated by <id>"`` or ``"top-N"``.
    """

    kept: tuple[PoolMember, ...]
    retired: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (a pool snapshot)."""
        return {
            "kept": [m.to_dict() for m in self.kept],
            "retired": [list(r) for r in self.retired],
        }


def _newest_first(m: PoolMember) -> tuple[int, int, str]:
    return (-m.depth, -m.local_seq, m.node_id)


def update_pool(members: Iterable[PoolMember], n: int, eps: float = EPS) -> PoolUpdate:
    """Weak-dominance filter, then top-``n`` by ``(mean, depth, local_seq)`` (design §5.1).

    Deterministic and independent of the order ``members`` come in.

    Args:
        members: The pool's members and the newly scored nodes.
        n: The pool size ``N`` (>= 1).
        eps: The dominance tolerance.

    Raises:
        ValueError: For ``n < 1`` or a node id given twice.
    """
    if n < 1:
        raise ValueError(f"pool size must be >= 1, got {n}")
    order = sorted(members, key=_newest_first)
    ids = [m.node_id for m in order]
    if len(set(ids)) != len(ids):
        raise ValueError("update_pool: a node id appears twice")
    alive = dict.fromkeys(ids, True)
    retired: dict[str, str] = {}
    for a in order:
        if not alive[a.node_id]:
            continue
        for b in order:
            if b is a or not alive[b.node_id] or b.state == "evolving":
                continue
            if weakly_dominates(a.vector, b.vector, eps):
                alive[b.node_id] = False
                retired[b.node_id] = f"dominated by {a.node_id}"
    front = [m for m in order if alive[m.node_id]]
    front.sort(key=lambda m: (-m.mean, -m.depth, -m.local_seq, m.node_id))
    kept = []
    for i, m in enumerate(front):
        if i >= n and m.state == "pooled":
            retired[m.node_id] = "top-N"
        else:
            kept.append(m)
    return PoolUpdate(tuple(kept), tuple((i, retired[i]) for i in ids if i in retired))


def draw_rng(seed: int | str, round_: int, group_id: str, event: str | int) -> random.Random:
    """The generator of one draw: ``random.Random`` seeded from ``sha256(seed, round, group, event)``."""
    key = f"{seed}\x1f{round_}\x1f{group_id}\x1f{event}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def _matrix(members: Sequence[PoolMember]) -> list[tuple[float, ...]]:
    vecs = [m.vector for m in members]
    if len({len(v) for v in vecs}) > 1:
        raise ValueError("sampler: members' vectors differ in length")
    return vecs


def sampler_weights(
    members: Sequence[PoolMember], sampler: str = "leadership", eps: float = EPS
) -> tuple[float, ...]:
    """The weights of ``leadership`` or ``leadership_raw`` (in the order given).

    Raises:
        ValueError: For ``lexicase`` (it has no weights) or an unknown sampler.
    """
    if sampler not in ("leadership", "leadership_raw"):
        raise ValueError(f"sampler {sampler!r} has no weights (one of leadership, leadership_raw)")
    vecs = _matrix(members)
    if not vecs:
        return ()
    width = len(vecs[0])
    counts = [0] * len(vecs)
    for j in range(width):
        col = [v[j] for v in vecs]
        top = max(col)
        if sampler == "leadership" and top - min(col) <= eps:
            continue  # an uninformative row: every member equal
        for i, x in enumerate(col):
            counts[i] += x >= top - eps
    if sampler == "leadership":
        return tuple(1.0 + c for c in counts)
    if not any(counts):
        return (1.0,) * len(vecs)
    return tuple(float(c) for c in counts)


def _pick_weighted(rng: random.Random, weights: Sequence[float]) -> int:
    total = sum(weights)
    if total <= 0:
        return rng.randrange(len(weights))
    u = rng.random() * total
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if u < acc:
            return i
    return max(i for i, w in enumerate(weights) if w > 0)


def _pick_lexicase(rng: random.Random, vecs: Sequence[tuple[float, ...]], eps: float) -> int:
    alive = list(range(len(vecs)))
    rows = list(range(len(vecs[0]))) if vecs else []
    rng.shuffle(rows)
    for j in rows:
        top = max(vecs[i][j] for i in alive)
        alive = [i for i in alive if vecs[i][j] >= top - eps]
        if len(alive) == 1:
            break
    return alive[rng.randrange(len(alive))]


def sample(
    members: Iterable[PoolMember],
    k: int,
    *,
    sampler: str,
    seed: int | str,
    round_: int,
    group_id: str,
    event: str | int,
    eps: float = EPS,
) -> tuple[str, ...]:
    """Draw ``k`` distinct start nodes (ids) from the pool's ``pooled`` members, without replacement.

    Weights are recomputed over the members still in the draw after each pick. Fewer than ``k``
    ids come back when fewer members are selectable.

    Args:
        members: The pool (``evolving`` members are not selectable).
        k: How many to draw.
        sampler: ``leadership``, ``leadership_raw`` or ``lexicase``.
        seed: The draw seed (protocol and chain seed).
        round_: The round.
        group_id: The work group.
        event: What the draw is for (``"chain:2"``, ``"polish:1"``): each event draws anew.
        eps: The leadership tolerance.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {list(SAMPLERS)}, got {sampler!r}")
    pool = sorted((m for m in members if m.state == "pooled"), key=lambda m: m.node_id)
    rng = draw_rng(seed, round_, group_id, event)
    out: list[str] = []
    while pool and len(out) < k:
        if sampler == "lexicase":
            i = _pick_lexicase(rng, _matrix(pool), eps)
        else:
            i = _pick_weighted(rng, sampler_weights(pool, sampler, eps))
        out.append(pool.pop(i).node_id)
    return tuple(out)
