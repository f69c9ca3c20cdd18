"""Planning: bucket splits, dossiers, local planning per bucket, global coordination with mechanical checks.

*Bucket split* (a decided gap): each bucket's members are ordered by a seeded hash and split into
support rows (at most ``planner_support``, shown to the planner and synthesizer, usable for
calibration) and held-out rows (at most ``prefilter_errors``, used only by the prefilter). The two
never overlap; with few members the support gets half (rounded up). A local planner may ask for a
larger share from the members' wording (:mod:`.support`; granted within ``ProtocolConfig.support``).

*Background*: up to ``planner_background`` other train rows of the bucket's tasks
(``support.background`` where a granted request widened the bucket's support), most similar in
wording to the support rows, right or wrong, excluding every held-out row.

*Coordination*: the global planner's groups are checked mechanically — every card exactly once, and
members of a merged group share measurement, signature, input shape, option shape and rule kind. An
invalid coordination is retried up to ``global_planner_attempts`` times, then the round falls back to
singleton groups of the validated local plans.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.library.tool import question_tokens
from tsevo.procs import forked_map
from tsevo.roles.protocols import (
    ContractCard,
    Dossier,
    GlobalPlanner,
    LocalPlanner,
    WorkGroup,
)
from tsevo.taxonomy.consumers import Consumers, coded_diagnosis, fire_codes

from .cluster import Bucket
from .config import ProtocolConfig
from .support import background_rows, granted_support, request_support
from .views import ViewIds

__all__ = [
    "BucketSplit",
    "build_dossier",
    "coded_dossiers",
    "coded_groups",
    "coordinate",
    "split_bucket",
    "split_buckets",
    "validate_groups",
]


def _h(seed: int, qid: str) -> str:
    return hashlib.sha256(f"{seed}\x01{qid}".encode()).hexdigest()


@dataclass(frozen=True)
class BucketSplit:
    """Support and held-out rows of one bucket (disjoint)."""

    bucket_id: str
    support: tuple[str, ...]
    held_out: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "bucket_id": self.bucket_id,
            "support": list(self.support),
            "held_out": list(self.held_out),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BucketSplit:
        """Inverse of :meth:`to_dict`."""
        return cls(d["bucket_id"], tuple(d["support"]), tuple(d["held_out"]))


def split_bucket(
    bucket: Bucket,
    cfg: ProtocolConfig,
    ids: ViewIds | None = None,
    request: tuple[float, int] | None = None,
) -> BucketSplit:
    """Deterministic support / held-out split of a bucket's members.

    Members are ordered by a seeded hash of their content (of the ids themselves without ``ids``);
    the first ones are support rows, the next ones held out for the prefilter. ``request`` is the
    local planner's ``support_request`` (share, rows), granted within ``cfg.support``.
    """
    key = ids.key if ids is not None else str
    order = sorted(bucket.members, key=lambda q: _h(cfg.seed, key(q)))
    n_support = granted_support(len(order), cfg.planner_support, cfg.support, request)
    support = tuple(order[:n_support])
    held = tuple(order[n_support : n_support + cfg.prefilter_errors])
    return BucketSplit(bucket.id, support, held)


def split_buckets(
    buckets: Sequence[Bucket],
    cfg: ProtocolConfig,
    ids: ViewIds,
    planner: Any,
    train: Mapping[str, Question],
) -> dict[str, BucketSplit]:
    """Every bucket's split, with the local planner's ``support_request`` when asks are granted.

    With ``support.planner_requests`` off (the default) the planner is not asked at all.
    """
    splits = {}
    views = [ids.view(q) for q in train.values()] if cfg.support.planner_requests else []
    for b in buckets:
        request = None
        if cfg.support.planner_requests:
            members = [ids.view(train[q]) for q in b.members]
            request = request_support(planner, members, views)
        splits[b.id] = split_bucket(b, cfg, ids, request)
    return splits


def _similarity(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def build_dossier(
    bucket: Bucket,
    split: BucketSplit,
    train: Mapping[str, Question],
    records: Mapping[str, AnswerRecord],
    cfg: ProtocolConfig,
    *,
    exclude: set[str],
    ids: ViewIds,
    catalog: str = "",
    library_tools: Sequence[str] = (),
    library: Any = None,
) -> Dossier:
    """The planner's view of a bucket: support rows and similar background train rows.

    Args:
        bucket: The bucket.
        split: Its support / held-out split.
        train: Train questions by id (the only split a planner may see).
        records: Current library's train records by id.
        cfg: Protocol config.
        exclude: Ids never shown (every bucket's held-out rows).
        ids: The run's opaque ids (rows are shown as views, their gold beside them).
        catalog: Current library's scope catalog text.
        library_tools: Current library's tool ids.
        library: The current library (artifacts only).
    """
    support = tuple(ids.example(train[q], records[q]) for q in split.support)
    tasks = {train[q].task for q in split.support}
    stoks = [question_tokens(train[q].question) for q in split.support]
    pool = [
        q
        for q in train.values()
        if q.task in tasks
        and q.id not in exclude
        and q.id not in split.support
        and q.gold is not None
    ]
    scored = sorted(
        pool,
        key=lambda q: (
            -max((_similarity(question_tokens(q.question), t) for t in stoks), default=0.0),
            _h(cfg.seed, ids.key(q.id)),
        ),
    )
    n_background = background_rows(
        len(bucket.members),
        len(split.support),
        cfg.planner_support,
        cfg.planner_background,
        cfg.support,
    )
    background = tuple(ids.example(q, records[q.id]) for q in scored[:n_background])
    return Dossier(
        bucket_id=bucket.id,
        side=bucket.side,
        label=bucket.category.label,
        criteria=bucket.category.criteria,
        support=support,
        background=background,
        catalog=catalog,
        library_tools=tuple(library_tools),
        library=library,
    )


def coded_dossiers(
    dossiers: dict[str, Dossier],
    cfg: ProtocolConfig,
    train: Mapping[str, Question],
    records: Mapping[str, AnswerRecord],
    ids: ViewIds,
) -> dict[str, Any]:
    """Under ``taxonomy.diagnoses``, put each bucket's coded diagnosis in its dossier (in place).

    The diagnosis reads the dossier's support rows only (train errors; never the held-out rows);
    ``instead`` drops the category's free-text criteria. Returns what ``contracts.json``
    records: ``{"diagnoses": {fingerprint, status, ..., buckets}}``, or ``{}`` when off (the
    protocol's bytes).
    """
    consumers = Consumers.of(cfg.taxonomy)
    if consumers is None or consumers.diagnoses == "off":
        return {}
    rows = {b: [ids.real(e.question.id) for e in d.support] for b, d in dossiers.items()}
    fired = fire_codes(
        consumers.taxonomy, train, records, sorted({q for r in rows.values() for q in r})
    )
    out = {}
    for b, d in dossiers.items():
        codes = coded_diagnosis(
            consumers.taxonomy, fired, rows[b], name=ids.opaque, mode=consumers.diagnoses
        )
        criteria = "" if consumers.diagnoses == "instead" else d.criteria
        dossiers[b] = replace(d, codes=codes, criteria=criteria)
        out[b] = list(codes)
    return {"diagnoses": consumers.record(buckets=out)}


def coded_groups(
    groups: Sequence[WorkGroup], dossiers: Mapping[str, Dossier], cfg: ProtocolConfig
) -> list[WorkGroup]:
    """The work groups with each card's coded diagnosis attached (unchanged when off).

    A card that already carries codes (a planner copied its dossier's) keeps them; the cards keep
    the planner's free text (the synthesizer's prompt leaves it out under ``instead``).
    """
    if cfg.taxonomy.diagnoses == "off":
        return list(groups)

    def card(c: ContractCard) -> ContractCard:
        d = dossiers.get(c.bucket_id)
        return c if c.codes or d is None else replace(c, codes=d.codes)

    return [replace(g, cards=tuple(card(c) for c in g.cards)) for g in groups]


def validate_groups(groups: Sequence[WorkGroup], cards: Sequence[ContractCard]) -> list[str]:
    """Mechanical checks of a coordination; returns the problems (empty when valid)."""
    problems = []
    seen = [c.bucket_id for g in groups for c in g.cards]
    want = sorted(c.bucket_id for c in cards)
    if sorted(seen) != want:
        problems.append(
            f"groups cover buckets {sorted(seen)} instead of each of {want} exactly once"
        )
    ids = [g.id for g in groups]
    if len(set(ids)) != len(ids):
        problems.append("duplicate group ids")
    for g in groups:
        keys = {c.merge_key() for c in g.cards}
        if len(keys) > 1:
            problems.append(f"group {g.id} merges incompatible contracts: {sorted(map(str, keys))}")
        if g.cards and g.contract.measurement != g.cards[0].contract.measurement:
            problems.append(f"group {g.id} contract measurement differs from its members'")
    return problems


def coordinate(
    cards: Sequence[ContractCard],
    planner: GlobalPlanner,
    cfg: ProtocolConfig,
    support_texts: Mapping[str, Sequence[str]],
) -> tuple[list[WorkGroup], dict[str, Any]]:
    """Run the global planner with mechanical rejection and the singleton fallback.

    Returns:
        The work groups and a log (attempts, problems, whether the fallback was used).
    """
    log: dict[str, Any] = {"attempts": [], "fallback": False}
    for _ in range(cfg.global_planner_attempts):
        try:
            groups = planner.coordinate(cards, support_texts)
            problems = validate_groups(groups, cards)
        except Exception as exc:  # a failed coordination is retried, then falls back
            groups, problems = [], [f"coordinator failed: {exc}"]
        log["attempts"].append(problems)
        if not problems:
            return list(groups), log
    log["fallback"] = True
    return [WorkGroup(f"g{i}", (c,), c.contract, c.scope) for i, c in enumerate(cards, 1)], log


def _plan_one(planner: LocalPlanner, d: Dossier) -> tuple[str, ContractCard | None, str]:
    try:
        card = planner.plan(d)
    except Exception as exc:  # one bucket's failure must not stop the round
        return d.bucket_id, None, f"planner failed: {exc}"
    if card is None:
        return d.bucket_id, None, "no measurement recovers the bucket's answers"
    return d.bucket_id, card, ""


def local_plans(
    dossiers: Sequence[Dossier], planner: LocalPlanner, *, workers: int = 1
) -> tuple[list[ContractCard], dict[str, str]]:
    """Plan every bucket; a planner failure or no plan leaves that bucket without a card.

    Buckets are planned independently, so they may run in parallel: a planner that declares
    ``parallel = "process"`` (CPU-bound, like the builtin one) is run in forked worker processes,
    ``"thread"`` (network-bound, like an LLM) in threads. The result does not depend on ``workers``.
    """
    mode = getattr(planner, "parallel", "")
    results: list[tuple[str, ContractCard | None, str]]
    if workers > 1 and len(dossiers) > 1 and mode in ("process", "thread"):
        try:
            if mode == "process":  # workers inherit the planner (its warm cache): nothing pickled
                order = sorted(range(len(dossiers)), key=lambda i: -_size(dossiers[i]))
                results = forked_map(
                    lambda i: _plan_one(planner, dossiers[i]), len(dossiers), workers, order
                )
            else:
                with cf.ThreadPoolExecutor(workers) as pool:
                    results = list(pool.map(_plan_one, [planner] * len(dossiers), dossiers))
        except (OSError, RuntimeError, cf.process.BrokenProcessPool):
            results = [_plan_one(planner, d) for d in dossiers]
    else:
        results = [_plan_one(planner, d) for d in dossiers]
    cards: list[ContractCard] = []
    skipped: dict[str, str] = {}
    for bucket_id, card, why in results:
        if card is None:
            skipped[bucket_id] = why
        else:
            cards.append(card)
    return cards, skipped


def _size(d: Dossier) -> int:
    """Rows a bucket's planner reads (the largest buckets are handed out first)."""
    return len(getattr(d, "support", ())) + len(getattr(d, "background", ()))
