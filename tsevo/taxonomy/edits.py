"""Edits to a taxonomy: add, relabel, retire, merge, split, in batches with lineage (design §1.4).

Edits are values; :func:`apply_edits` applies a batch to one version and returns the next one
with its :class:`LineageEntry` (``{version_n, parent_fp, fp, edits, trigger}``, one line of
``lineage.jsonl``). Nothing is changed in place. The rules that make ids identities:

* :class:`Add` and :class:`Split` children get minted ids (axis mark + 1; marks only rise);
* :class:`Retire` and :class:`Merge` move ids to ``retired``, where they stay: no later edit can
  mint, relabel or reuse them;
* ``id``, ``category``, ``applies_to_role`` and ``origin`` never change (a :class:`Relabel` of
  them raises).

The new version's status is ``draft``: a status belongs to one fingerprint, and an edit batch
makes a new one (the old agreement figures are dropped from ``generation`` for the same reason).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .codes import TEXT_FIELDS, Code, TaxonomyError, code_from_dict, or_detectors
from .model import Retired, Taxonomy

__all__ = [
    "Add",
    "Edit",
    "EditBatch",
    "LineageEntry",
    "Merge",
    "Relabel",
    "Retire",
    "Split",
    "apply_edits",
]


@dataclass(frozen=True)
class Add:
    """Add a code; its id is minted (``code.id`` must be empty)."""

    code: Code
    origin: str = "added"

    def to_dict(self) -> dict[str, Any]:
        """The edit's record in the lineage (the minted id is added by :func:`apply_edits`)."""
        return {"op": "add", "name": self.code.name, "category": self.code.category}


@dataclass(frozen=True)
class Relabel:
    """Change text fields of a code (:data:`~tsevo.taxonomy.codes.TEXT_FIELDS`); revision + 1.

    A relabel that changes nothing leaves the code (and its revision) as it was.
    """

    id: str
    changes: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The edit's record in the lineage."""
        return {"op": "relabel", "id": self.id, "fields": sorted(self.changes)}


@dataclass(frozen=True)
class Retire:
    """Retire a code; its id is remembered and never used again."""

    id: str
    reason: str = "retire"

    def to_dict(self) -> dict[str, Any]:
        """The edit's record in the lineage."""
        return {"op": "retire", "id": self.id, "reason": self.reason}


@dataclass(frozen=True)
class Merge:
    """Merge codes into ``keep``: the absorbed ids are retired with ``merged_into = keep``.

    ``keep``'s detector becomes the OR of all detectors, its heuristics, examples and evidence the
    union (in order, without repeats); its revision rises by one. All codes must be on one axis,
    and ``B`` codes of one role.
    """

    keep: str
    absorb: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The edit's record in the lineage."""
        return {"op": "merge", "keep": self.keep, "absorb": list(self.absorb)}


@dataclass(frozen=True)
class Split:
    """Split children off a code: the parent keeps its id, each child is minted with ``parent``.

    ``children`` are code records (``name``, ``description``, ... as in ``taxonomy.json``);
    their axis and role are the parent's.
    """

    parent: str
    children: tuple[Mapping[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        """The edit's record in the lineage (the minted ids are added by :func:`apply_edits`)."""
        return {"op": "split", "parent": self.parent}


Edit = Add | Relabel | Retire | Merge | Split


@dataclass(frozen=True, kw_only=True)
class LineageEntry:
    """One edit batch in a taxonomy's history (one line of ``lineage.jsonl``)."""

    version_n: int
    parent_fp: str
    fp: str
    edits: tuple[Mapping[str, Any], ...]
    trigger: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON record."""
        return {
            "version_n": self.version_n,
            "parent_fp": self.parent_fp,
            "fp": self.fp,
            "edits": [dict(e) for e in self.edits],
            "trigger": self.trigger,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> LineageEntry:
        """Read a record written by :meth:`to_dict`."""
        try:
            return cls(
                version_n=int(raw["version_n"]),
                parent_fp=str(raw["parent_fp"]),
                fp=str(raw["fp"]),
                edits=tuple(dict(e) for e in raw["edits"]),
                trigger=str(raw["trigger"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TaxonomyError(f"lineage entry: missing or bad field ({exc})") from exc


@dataclass(frozen=True)
class EditBatch:
    """What :func:`apply_edits` returns: the new version, its lineage entry and the minted ids."""

    taxonomy: Taxonomy
    entry: LineageEntry
    minted: tuple[str, ...] = field(default=())


def _union(*seqs: Sequence[Any]) -> tuple[Any, ...]:
    out: list[Any] = []
    for seq in seqs:
        for v in seq:
            if v not in out:
                out.append(v)
    return tuple(out)


class _Work:
    """The mutable state of one batch: codes by id (ordered), marks, retired records."""

    def __init__(self, tax: Taxonomy, version_n: int) -> None:
        self.codes: dict[str, Code] = {c.id: c for c in tax.codes}
        self.marks = dict(tax.id_high_water)
        self.retired = list(tax.retired)
        self.version_n = version_n
        self.minted: list[str] = []

    def get(self, code_id: str, what: str) -> Code:
        if code_id in self.codes:
            return self.codes[code_id]
        if any(r.id == code_id for r in self.retired):
            raise TaxonomyError(f"{what}: code {code_id!r} is retired")
        raise TaxonomyError(f"{what}: no code {code_id!r}")

    def mint(self, code: Code, after: str | None = None) -> str:
        self.marks[code.category] += 1
        new_id = f"{code.category}.{self.marks[code.category]}"
        if new_id in self.codes or any(r.id == new_id for r in self.retired):
            raise AssertionError(f"mark for {code.category} below an existing id {new_id}")
        new = replace(code, id=new_id)
        if after is None:
            self.codes[new_id] = new
        else:  # place children right after their parent (and its earlier children)
            items = list(self.codes.items())
            idx = max(i for i, (k, c) in enumerate(items) if k == after or c.parent == after)
            items.insert(idx + 1, (new_id, new))
            self.codes = dict(items)
        self.minted.append(new_id)
        return new_id

    def retire(self, code_id: str, reason: str, merged_into: str | None = None) -> None:
        del self.codes[code_id]
        self.retired.append(
            Retired(id=code_id, version_n=self.version_n, reason=reason, merged_into=merged_into)
        )


def _new_code(raw: Code | Mapping[str, Any], what: str, **fixed: Any) -> Code:
    if not isinstance(raw, Code):
        inherited = {k: fixed[k] for k in ("category", "applies_to_role") if fixed.get(k)}
        raw = code_from_dict({**inherited, **raw}, what, default_origin="added")
    code = raw
    if code.id:
        raise TaxonomyError(f"{what}: ids are minted, not given (got {code.id!r})")
    for key, value in fixed.items():
        given = getattr(code, key)
        if key in ("category", "applies_to_role") and given not in (None, value):
            raise TaxonomyError(f"{what}: {key} {given!r} differs from the parent's {value!r}")
    return replace(code, revision=1, **fixed)


def _relabel(work: _Work, edit: Relabel) -> dict[str, Any]:
    what = f"relabel {edit.id}"
    code = work.get(edit.id, what)
    bad = sorted(set(edit.changes) - set(TEXT_FIELDS))
    if bad:
        raise TaxonomyError(f"{what}: {bad} cannot be relabelled (only {TEXT_FIELDS})")
    changes = dict(edit.changes)
    for key in ("detection_heuristics", "examples", "evidence_trace_ids"):
        if key in changes:
            if isinstance(changes[key], str):
                raise TaxonomyError(f"{what}: {key} must be a list")
            changes[key] = tuple(changes[key])
    changed = sorted(k for k, v in changes.items() if getattr(code, k) != v)
    if changed:
        work.codes[edit.id] = replace(code, revision=code.revision + 1, **changes)
    return {**edit.to_dict(), "changed": changed}


def _merge(work: _Work, edit: Merge) -> dict[str, Any]:
    what = f"merge into {edit.keep}"
    absorb = tuple(edit.absorb)
    if not absorb:
        raise TaxonomyError(f"{what}: nothing to absorb")
    if edit.keep in absorb or len(set(absorb)) != len(absorb):
        raise TaxonomyError(f"{what}: absorb {list(absorb)} repeats an id or names keep")
    keep = work.get(edit.keep, what)
    others = [work.get(a, what) for a in absorb]
    for o in others:
        if o.category != keep.category:
            raise TaxonomyError(
                f"{what}: {o.id} is on axis {o.category}, {keep.id} on {keep.category}"
            )
        if o.applies_to_role != keep.applies_to_role:
            raise TaxonomyError(
                f"{what}: {o.id} applies to {o.applies_to_role!r}, {keep.id} to {keep.applies_to_role!r}"
            )
    group = [keep, *others]
    work.codes[keep.id] = replace(
        keep,
        detector=or_detectors([c.detector for c in group]),
        detection_heuristics=_union(*(c.detection_heuristics for c in group)),
        examples=_union(*(c.examples for c in group)),
        evidence_trace_ids=_union(*(c.evidence_trace_ids for c in group)),
        revision=keep.revision + 1,
    )
    for o in others:
        work.retire(o.id, "merge", merged_into=keep.id)
    return edit.to_dict()


def _apply_one(work: _Work, edit: Edit, k: int) -> dict[str, Any]:
    if isinstance(edit, Add):
        code = _new_code(edit.code, f"edits[{k}] add", origin=edit.origin, parent=None)
        return {**edit.to_dict(), "id": work.mint(code)}
    if isinstance(edit, Relabel):
        return _relabel(work, edit)
    if isinstance(edit, Retire):
        work.get(edit.id, f"edits[{k}] retire")
        work.retire(edit.id, edit.reason)
        return edit.to_dict()
    if isinstance(edit, Merge):
        return _merge(work, edit)
    if isinstance(edit, Split):
        parent = work.get(edit.parent, f"edits[{k}] split")
        if not edit.children:
            raise TaxonomyError(f"edits[{k}] split {edit.parent}: no children")
        ids = [
            work.mint(
                _new_code(
                    child,
                    f"edits[{k}] split {edit.parent} children[{j}]",
                    category=parent.category,
                    applies_to_role=parent.applies_to_role,
                    parent=parent.id,
                    origin="split",
                ),
                after=parent.id,
            )
            for j, child in enumerate(edit.children)
        ]
        return {**edit.to_dict(), "children": ids}
    raise TaxonomyError(f"edits[{k}]: not an edit: {type(edit).__name__}")


def apply_edits(taxonomy: Taxonomy, edits: Sequence[Edit], *, trigger: str) -> EditBatch:
    """Apply a batch of edits, in order, and return the next version with its lineage entry.

    Args:
        taxonomy: The version edited (unchanged).
        edits: :class:`Add`, :class:`Relabel`, :class:`Retire`, :class:`Merge`, :class:`Split`.
        trigger: Why (``gate_round_2``, ``refine_round_3``, ``manual``): kept in the lineage.

    Returns:
        The new version (``version_n + 1``, status ``draft``, ``parent`` = the old fingerprint),
        its :class:`LineageEntry` and the ids minted, in order.

    Raises:
        TaxonomyError: An empty batch, an edit naming a missing or retired code, a relabel of an
            identity field, a merge across axes or roles, a given id on an added code.
    """
    if not edits:
        raise TaxonomyError("an edit batch needs at least one edit")
    version_n = taxonomy.version_n + 1
    work = _Work(taxonomy, version_n)
    records = [_apply_one(work, e, k) for k, e in enumerate(edits)]
    generation = {k: v for k, v in taxonomy.generation.items() if k != "agreement"}
    parent_fp = taxonomy.fingerprint
    new = replace(
        taxonomy,
        codes=tuple(work.codes.values()),
        id_high_water=work.marks,
        retired=tuple(work.retired),
        version_n=version_n,
        parent=parent_fp,
        status="draft",
        generation=generation,
    )
    entry = LineageEntry(
        version_n=version_n,
        parent_fp=parent_fp,
        fp=new.fingerprint,
        edits=tuple(records),
        trigger=trigger,
    )
    return EditBatch(taxonomy=new, entry=entry, minted=tuple(work.minted))
