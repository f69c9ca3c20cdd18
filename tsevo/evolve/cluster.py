"""Failure clustering: partition train errors, then define/assign on each side under the protocol's limits.

Errors on which a tool fired (``tool_fired``: a defective or misused tool) and errors no tool reached
(``no_tool``: a coverage gap) are clustered independently, in two steps:

* *define*: a deterministic sample of at most ``define_sample`` errors goes to the triage role, which
  returns at most ``max_categories`` categories (label + criteria); an invalid reply is retried at
  most ``define_retries`` times. No task metadata is shown (an :class:`ErrorItem` has no task).
* *assign*: every error goes out in batches of ``assign_batch`` under a strict contract (the reply
  must cover exactly the batch's ids with known category ids or ``None``); an invalid reply is
  retried at most ``assign_retries`` times; at most ``assign_passes`` passes over the errors the
  valid replies left without a category (``None``).

A triage role may also bound the number of categories from all of a side's errors, through an
optional method ``categories_for(errors) -> int | None`` (the builtin triage caps it when the
errors' question kinds hold a handful of errors each, so every bucket keeps enough of each kind's
rows to learn from); the bound only ever lowers ``max_categories``, for the define step and the
re-split alike, and is recorded per side (``caps``; ``support.triage_bound`` False ignores it).

Buckets larger than ``resplit_above`` are split once (define on the bucket's members with
``ceil(size / resplit_part)`` categories, at most ``max_categories``, then assign; not recursive), unassigned errors and buckets smaller than ``min_bucket`` are dropped and reported.
A define step, an assign batch or a re-split that still fails after its retries raises
:class:`ClusteringError`: the round is then measurement-invalid (a rollback, not a verdict),
instead of silently dropping the errors it could not place.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.roles.protocols import Category, ErrorItem, Triage
from tsevo.taxonomy.consumers import CodedTriage, Consumers, fire_codes

from .config import ProtocolConfig
from .views import ViewIds

__all__ = [
    "Bucket",
    "ClusteringError",
    "ClusteringResult",
    "cluster_errors",
    "coded_triage",
    "error_item",
]

SIDES = ("tool_fired", "no_tool")


class ClusteringError(RuntimeError):
    """The triage role could not produce valid categories within the protocol's retries."""


@dataclass(frozen=True)
class Bucket:
    """A failure bucket: errors of one side assigned to one category.

    Attributes:
        id: Bucket id (``no_tool.c1``, ``tool_fired.c2.b`` after a split).
        side: ``tool_fired`` or ``no_tool``.
        category: The category (label, criteria).
        members: Question ids, in deterministic order.
        parent: Id of the bucket it was split from, if any.
    """

    id: str
    side: str
    category: Category
    members: tuple[str, ...]
    parent: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "id": self.id,
            "side": self.side,
            "category": self.category.to_dict(),
            "members": list(self.members),
            "parent": self.parent,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Bucket:
        """Inverse of :meth:`to_dict`."""
        return cls(
            d["id"],
            d["side"],
            Category.from_dict(d["category"]),
            tuple(d["members"]),
            d.get("parent", ""),
        )


@dataclass
class ClusteringResult:
    """What clustering produced, with the protocol's accounting.

    Attributes:
        buckets: Kept buckets.
        unassigned: Errors no valid assignment placed.
        dropped_small: Errors in buckets smaller than ``min_bucket``.
        define_calls: Define calls made (retries included).
        assign_calls: Assign calls made (retries included).
        invalid_replies: Replies rejected by the contract.
        passes: Assign passes used per side.
        splits: Ids of buckets that were split.
        caps: Per side, the category bound the triage role asked for (``categories_for``), where
            it lowered ``max_categories``.
    """

    buckets: list[Bucket] = field(default_factory=list)
    unassigned: list[str] = field(default_factory=list)
    dropped_small: list[str] = field(default_factory=list)
    define_calls: int = 0
    assign_calls: int = 0
    invalid_replies: int = 0
    passes: dict[str, int] = field(default_factory=dict)
    splits: list[str] = field(default_factory=list)
    caps: dict[str, int] = field(default_factory=dict)

    def mapped(self, real: Callable[[str], str]) -> ClusteringResult:
        """The same result with every question id mapped through ``real`` (member order kept)."""
        return replace(
            self,
            buckets=[replace(b, members=tuple(map(real, b.members))) for b in self.buckets],
            unassigned=sorted(map(real, self.unassigned)),
            dropped_small=sorted(map(real, self.dropped_small)),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "buckets": [b.to_dict() for b in self.buckets],
            "unassigned": self.unassigned,
            "dropped_small": self.dropped_small,
            "define_calls": self.define_calls,
            "assign_calls": self.assign_calls,
            "invalid_replies": self.invalid_replies,
            "passes": self.passes,
            "splits": self.splits,
            # only where a triage bound the categories: earlier runs keep their bytes
            **({"caps": self.caps} if self.caps else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClusteringResult:
        """Inverse of :meth:`to_dict`."""
        return cls(
            buckets=[Bucket.from_dict(b) for b in d["buckets"]],
            unassigned=list(d["unassigned"]),
            dropped_small=list(d["dropped_small"]),
            define_calls=int(d["define_calls"]),
            assign_calls=int(d["assign_calls"]),
            invalid_replies=int(d["invalid_replies"]),
            passes=dict(d["passes"]),
            splits=list(d["splits"]),
            caps={str(k): int(v) for k, v in (d.get("caps") or {}).items()},
        )


def error_item(q: Question, rec: AnswerRecord) -> ErrorItem:
    """The triage view of one error: question text, options, shape and trace facts; no task, no gold."""
    text = q.question if not q.context else f"{q.question}\n{q.context}"
    last = rec.steps[-1].decision if rec.steps else ""
    return ErrorItem(
        qid=q.id,
        text=text,
        options=q.options,
        n_primary=len(q.primary),
        n_candidates=len(q.candidates),
        n_covariates=len(q.covariates),
        tool_fired=rec.tool_fired,
        tools=rec.tools_ok,
        decision=last,
    )


def coded_triage(
    triage: Triage,
    cfg: ProtocolConfig,
    train: Mapping[str, Question],
    records: Mapping[str, AnswerRecord],
    errors: Sequence[str],
    ids: ViewIds,
) -> tuple[Triage, dict[str, Any]]:
    """The round's triage: ``triage`` itself, or under ``taxonomy.triage`` the pinned codes.

    Returns the triage role and what ``buckets.json`` records beside the clustering:
    ``{"taxonomy": {fingerprint, status, triage, diagnoses, coded, uncoded}}``, or ``{}`` when
    codes are not the categories (the protocol's bytes).
    """
    consumers = Consumers.of(cfg.taxonomy)
    if consumers is None or not consumers.triage:
        return triage, {}
    fired = fire_codes(consumers.taxonomy, train, records, errors)
    by_view = {ids.opaque(q): tuple(f.code for f in fired[q]) for q in errors}
    coded = sum(bool(v) for v in by_view.values())
    rec = consumers.record(coded=coded, uncoded=len(errors) - coded)
    return CodedTriage(triage, consumers.taxonomy, by_view), {"taxonomy": rec}


def _suffix(j: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return letters[j] if j < 26 else f"p{j}"


def _order(seed: int, qid: str) -> str:
    return hashlib.sha256(f"{seed}\x00{qid}".encode()).hexdigest()


def _valid_categories(cats: Any, max_categories: int) -> list[Category]:
    if not isinstance(cats, list | tuple) or not cats:
        raise ValueError("define returned no categories")
    if len(cats) > max_categories:
        raise ValueError(
            f"define returned {len(cats)} categories; at most {max_categories} allowed"
        )
    ids = [c.id for c in cats]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate category ids")
    for c in cats:
        if not isinstance(c, Category) or not c.label.strip() or not c.id.strip():
            raise ValueError(f"malformed category {c!r}")
    return list(cats)


def _define(
    triage: Triage,
    items: Sequence[ErrorItem],
    k: int,
    cfg: ProtocolConfig,
    res: ClusteringResult,
    where: str,
    key: Callable[[str], str],
) -> list[Category]:
    sample = sorted(items, key=lambda e: _order(cfg.seed, key(e.qid)))[: cfg.define_sample]
    last_err = ""
    for _ in range(1 + cfg.define_retries):
        res.define_calls += 1
        try:
            return _valid_categories(triage.define(sample, k), k)
        except Exception as exc:  # any invalid reply is retried within the protocol's bound
            res.invalid_replies += 1
            last_err = str(exc)
    raise ClusteringError(
        f"define failed for {where} after {1 + cfg.define_retries} attempt(s): {last_err}"
    )


def _assign(
    triage: Triage,
    cats: Sequence[Category],
    items: Sequence[ErrorItem],
    cfg: ProtocolConfig,
    res: ClusteringResult,
    side: str,
    where: str = "",
) -> dict[str, str]:
    ids_ok = {c.id for c in cats}
    placed: dict[str, str] = {}
    pending = list(items)
    passes = 0
    while pending and passes < cfg.assign_passes:
        passes += 1
        still: list[ErrorItem] = []
        for i in range(0, len(pending), cfg.assign_batch):
            batch = pending[i : i + cfg.assign_batch]
            want = {e.qid for e in batch}
            reply: Mapping[str, Any] | None = None
            last_err = ""
            for _ in range(1 + cfg.assign_retries):
                res.assign_calls += 1
                try:
                    r = triage.assign(cats, batch)
                    if not isinstance(r, Mapping) or set(r) != want:
                        missing = sorted(want - set(r)) if isinstance(r, Mapping) else sorted(want)
                        raise ValueError(f"reply does not cover the batch (missing {missing[:5]})")
                    bad = [v for v in r.values() if v is not None and v not in ids_ok]
                    if bad:
                        raise ValueError(f"unknown category ids {bad[:5]}")
                    reply = r
                    break
                except Exception as exc:  # contract violation: retry within bounds
                    res.invalid_replies += 1
                    last_err = str(exc)
            if reply is None:  # a failed assign invalidates the round, like a failed define
                raise ClusteringError(
                    f"assign failed for {where} (a batch of {len(batch)}) after "
                    f"{1 + cfg.assign_retries} attempt(s): {last_err}"
                )
            for e in batch:
                cid = reply[e.qid]
                if cid is None:
                    still.append(e)
                else:
                    placed[e.qid] = cid
        pending = still
    res.passes[side] = max(res.passes.get(side, 0), passes)
    return placed


def cluster_errors(
    errors: Sequence[ErrorItem],
    triage: Triage,
    cfg: ProtocolConfig,
    *,
    ids: ViewIds | None = None,
) -> ClusteringResult:
    """Cluster train errors into buckets under the protocol's limits.

    With ``ids``, the triage role sees the errors under their opaque ids, and the engine orders,
    samples and batches them by content (:meth:`ViewIds.key`), so nothing depends on how a source
    names its questions; buckets and the lists of dropped errors are mapped back to question ids.

    Args:
        errors: The errors (triage items under question ids).
        triage: The triage role.
        cfg: The protocol config.
        ids: The run's opaque ids (``None``: the items' ids are used as given, for tests of the
            clustering mechanics).

    Returns:
        A :class:`ClusteringResult`.

    Raises:
        ClusteringError: when a define step, an assign batch or a re-split fails after its
            retries (the round is invalid).
    """
    if ids is not None:
        return _cluster(ids.items(errors), triage, cfg, ids.key).mapped(ids.real)
    return _cluster(errors, triage, cfg, str)


def _categories(triage: Triage, items: Sequence[ErrorItem], cfg: ProtocolConfig) -> int:
    """``max_categories``, lowered to the triage role's own bound for these errors.

    Only when the role has one (``categories_for``) and ``support.triage_bound`` honours it.
    """
    most = cfg.max_categories
    hook = getattr(triage, "categories_for", None)
    cap = hook(items) if cfg.support.triage_bound and callable(hook) else None
    return max(1, min(most, int(cap))) if cap else most


def _cluster(
    errors: Sequence[ErrorItem], triage: Triage, cfg: ProtocolConfig, key: Callable[[str], str]
) -> ClusteringResult:
    res = ClusteringResult()
    for side in SIDES:
        items = sorted(
            (e for e in errors if e.tool_fired == (side == "tool_fired")),
            key=lambda e: key(e.qid),
        )
        if not items:
            continue
        kmax = _categories(triage, items, cfg)
        if kmax < cfg.max_categories:
            res.caps[side] = kmax
        cats = _define(triage, items, kmax, cfg, res, side, key)
        placed = _assign(triage, cats, items, cfg, res, side, side)
        res.unassigned.extend(sorted(e.qid for e in items if e.qid not in placed))
        by_cat = {c.id: c for c in cats}
        members: dict[str, list[str]] = {c.id: [] for c in cats}
        for e in items:
            if e.qid in placed:
                members[placed[e.qid]].append(e.qid)
        item_by_id = {e.qid: e for e in items}
        for cid, mem in members.items():
            bid = f"{side}.{cid}"
            groups = [(bid, by_cat[cid], mem, "")]
            if len(mem) > cfg.resplit_above and cfg.resplit_times > 0:
                sub_items = [item_by_id[q] for q in mem]
                # a failed re-split (define or assign) invalidates the round like a failed define
                parts = min(kmax, max(2, math.ceil(len(mem) / cfg.resplit_part)))
                sub_cats = _define(triage, sub_items, parts, cfg, res, f"re-split of {bid}", key)
                sub_placed = _assign(
                    triage, sub_cats, sub_items, cfg, res, side, f"re-split of {bid}"
                )
                if len(sub_cats) >= 2 and len(set(sub_placed.values())) >= 2:
                    res.splits.append(bid)
                    groups = []
                    for j, sc in enumerate(sub_cats):
                        sm = [q for q in mem if sub_placed.get(q) == sc.id]
                        groups.append((f"{bid}.{_suffix(j)}", sc, sm, bid))
                    res.unassigned.extend(q for q in mem if q not in sub_placed)
            for gid, cat, mem2, parent in groups:
                if len(mem2) < cfg.min_bucket:
                    res.dropped_small.extend(mem2)
                    continue
                res.buckets.append(Bucket(gid, side, cat, tuple(mem2), parent))
    res.unassigned.sort()
    res.dropped_small.sort()
    return res
