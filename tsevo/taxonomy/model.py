"""A taxonomy version: its codes, id marks, retired ids, status and fingerprint (design §1.3–1.6).

A :class:`Taxonomy` is immutable. Its invariants hold for every instance, however it was built
(:meth:`Taxonomy.create`, a loaded file, an edit batch):

* every code has an id, and no two codes share one;
* per axis, the high-water mark is at least every minted id ever seen on that axis, active or
  retired, so the next minted id (mark + 1) is always new;
* a retired id never names an active code (no recycling);
* the status is one of :data:`STATUSES`.

The fingerprint is the sha256 of the canonical JSON of the semantic content: codes sorted by id
(:meth:`~tsevo.taxonomy.codes.Code.semantic` fields), the marks and the retired ids. Status,
metrics, examples, evidence, revisions and timestamps are outside it, so a status decision or a
re-export does not change it, and any change to what a code means does. Every firing records it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tsevo.hashing import canonical_json

from .codes import AXES, Code, TaxonomyError, id_sort_key, minted_number

__all__ = [
    "STATUSES",
    "USABLE_STATUSES",
    "Retired",
    "Taxonomy",
    "fingerprint",
    "require_usable",
]

#: A taxonomy's status. ``baseline``: a shipped catalogue (MAST), usable without a gate.
STATUSES: tuple[str, ...] = ("draft", "accepted", "review_required", "baseline")
#: The statuses consumers take without ``allow_unaccepted``.
USABLE_STATUSES: tuple[str, ...] = ("accepted", "baseline")


@dataclass(frozen=True, kw_only=True)
class Retired:
    """A retired id, remembered so it is never minted or used again.

    Attributes:
        id: The retired code's id.
        version_n: The version that retired it.
        reason: ``retire`` (an explicit retire), ``merge``, or a caller's word.
        merged_into: The id that absorbed it (a merge), else ``None``.
        extras: Unknown fields of the record, written back unchanged.
    """

    id: str
    version_n: int
    reason: str = "retire"
    merged_into: str | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record (``tsevo.retired[]``)."""
        out: dict[str, Any] = dict(self.extras)
        out.update(id=self.id, version_n=self.version_n, reason=self.reason)
        if self.merged_into is not None:
            out["merged_into"] = self.merged_into
        return out


def _marks(codes: Iterable[Code], retired: Iterable[Retired], floor: Mapping[str, int]) -> dict:
    marks = {axis: int(floor.get(axis, 0)) for axis in AXES}
    for code_id in [c.id for c in codes] + [r.id for r in retired]:
        m = minted_number(code_id)
        if m:
            marks[m[0]] = max(marks[m[0]], m[1])
    return marks


@dataclass(frozen=True, kw_only=True)
class Taxonomy:
    """One immutable version of a failure taxonomy.

    Build one with :meth:`create` (which mints missing ids) or load one with
    :func:`~tsevo.taxonomy.jsonio.load_taxonomy`; change it with
    :func:`~tsevo.taxonomy.edits.apply_edits`, which returns the next version.

    Attributes:
        codes: The active codes, in display order.
        status: One of :data:`STATUSES`.
        id_high_water: Per axis (``A``, ``B``, ``C``), the highest number ever minted.
        retired: The retired ids, oldest first.
        version_n: 1 for a new taxonomy, +1 per edit batch.
        parent: The fingerprint of the version it was edited from, if any.
        display_name: A title (AdaMAST's ``display_name``).
        domain: The domain it was induced for.
        summary: One paragraph about it.
        generation: How it was made (provider, model, trace count, agreement), as AdaMAST's
            ``generation`` object; kept as given.
        coverage_gaps: Gaps induction could not fill (recorded, never filled with filler codes).
        extras: Unknown top-level fields of a loaded file (AdaMAST's ``strategy``), kept.
        tsevo_extras: Unknown fields of the file's ``tsevo`` object, kept.
    """

    codes: tuple[Code, ...]
    status: str = "draft"
    id_high_water: Mapping[str, int] = field(default_factory=dict)
    retired: tuple[Retired, ...] = ()
    version_n: int = 1
    parent: str | None = None
    display_name: str = ""
    domain: str = ""
    summary: str = ""
    generation: Mapping[str, Any] = field(default_factory=dict)
    coverage_gaps: tuple[Any, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=dict)
    tsevo_extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "codes", tuple(self.codes))
        object.__setattr__(self, "retired", tuple(self.retired))
        object.__setattr__(self, "coverage_gaps", tuple(self.coverage_gaps))
        for c in self.codes:
            if not isinstance(c, Code):
                raise TaxonomyError(f"codes: expected Code objects, got {type(c).__name__}")
        if self.status not in STATUSES:
            raise TaxonomyError(f"status: {self.status!r} is not one of {STATUSES}")
        if isinstance(self.version_n, bool) or not isinstance(self.version_n, int):
            raise TaxonomyError("version_n: expected an integer")
        if self.version_n < 1:
            raise TaxonomyError(f"version_n: must be >= 1, got {self.version_n}")
        for axis, n in self.id_high_water.items():
            if axis not in AXES:
                raise TaxonomyError(f"id_high_water: unknown axis {axis!r} (axes are {AXES})")
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise TaxonomyError(f"id_high_water.{axis}: a non-negative integer is required")
        seen: set[str] = set()
        for c in self.codes:
            if not c.id:
                raise TaxonomyError(
                    f"code {c.name!r} has no id (build with Taxonomy.create to mint one)"
                )
            if c.id in seen:
                raise TaxonomyError(f"duplicate code id {c.id!r}")
            seen.add(c.id)
        retired_ids: set[str] = set()
        for r in self.retired:
            if r.id in retired_ids:
                raise TaxonomyError(f"tsevo.retired: {r.id!r} is listed twice")
            retired_ids.add(r.id)
        recycled = sorted(seen & retired_ids, key=id_sort_key)
        if recycled:
            raise TaxonomyError(f"recycled id(s) {recycled}: retired ids are never used again")
        # marks only rise: at least every minted id seen on the axis, active or retired
        object.__setattr__(
            self, "id_high_water", _marks(self.codes, self.retired, self.id_high_water)
        )
        object.__setattr__(self, "generation", dict(self.generation))
        object.__setattr__(self, "extras", dict(self.extras))
        object.__setattr__(self, "tsevo_extras", dict(self.tsevo_extras))

    @classmethod
    def create(
        cls, codes: Iterable[Code], *, id_high_water: Mapping[str, int] | None = None, **kw: Any
    ) -> Taxonomy:
        """A taxonomy from codes, minting ids for those without one (in the given order).

        Ids already given are kept verbatim (minted or foreign) and raise the marks first, so a
        missing id never takes one that is present.

        Args:
            codes: The codes; an empty ``id`` is minted as the axis mark + 1.
            id_high_water: Marks to start from (a loaded file's), raised by present ids.
            **kw: The other :class:`Taxonomy` fields.

        Raises:
            TaxonomyError: On duplicate or recycled ids, a bad status, ...
        """
        codes = list(codes)
        marks = _marks([c for c in codes if c.id], kw.get("retired", ()), id_high_water or {})
        out = []
        for c in codes:
            if not c.id:
                marks[c.category] += 1
                c = replace(c, id=f"{c.category}.{marks[c.category]}")
            out.append(c)
        return cls(codes=tuple(out), id_high_water=marks, **kw)

    # -- queries --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.codes)

    def __iter__(self) -> Iterator[Code]:
        return iter(self.codes)

    def __contains__(self, code_id: object) -> bool:
        return any(c.id == code_id for c in self.codes)

    def __getitem__(self, code_id: str) -> Code:
        """The active code with this id (``KeyError`` naming retired ids as such)."""
        for c in self.codes:
            if c.id == code_id:
                return c
        if code_id in self.retired_ids:
            raise KeyError(f"code {code_id!r} is retired")
        raise KeyError(f"no code {code_id!r}")

    @property
    def ids(self) -> tuple[str, ...]:
        """The active ids, in display order."""
        return tuple(c.id for c in self.codes)

    @property
    def retired_ids(self) -> frozenset[str]:
        """Every id retired so far."""
        return frozenset(r.id for r in self.retired)

    def axis(self, axis: str) -> tuple[Code, ...]:
        """The active codes on one axis (``A``, ``B`` or ``C``)."""
        if axis not in AXES:
            raise ValueError(f"unknown axis {axis!r}; axes are {AXES}")
        return tuple(c for c in self.codes if c.category == axis)

    def next_id(self, axis: str) -> str:
        """The id the next code on ``axis`` will get (mark + 1)."""
        if axis not in AXES:
            raise ValueError(f"unknown axis {axis!r}; axes are {AXES}")
        return f"{axis}.{self.id_high_water[axis] + 1}"

    @property
    def fingerprint(self) -> str:
        """``sha256:<hex>`` of the semantic content (see the module docstring)."""
        return fingerprint(self)

    @property
    def usable(self) -> bool:
        """Whether consumers may take it without ``allow_unaccepted``."""
        return self.status in USABLE_STATUSES

    def with_status(self, status: str, *, agreement: Mapping[str, Any] | None = None) -> Taxonomy:
        """The same version with a new status (and agreement record); the fingerprint is unchanged.

        Args:
            status: One of :data:`STATUSES`.
            agreement: If given, stored as ``generation.agreement`` (the gate's figures).
        """
        generation = dict(self.generation)
        if agreement is not None:
            generation["agreement"] = dict(agreement)
        return replace(self, status=status, generation=generation)


def fingerprint(taxonomy: Taxonomy) -> str:
    """The content fingerprint ``sha256:<hex>`` of a taxonomy version.

    Hashes canonical JSON (sorted keys, compact, UTF-8) of the codes' semantic fields sorted by id,
    the per-axis marks and the sorted retired ids. Status, generation metrics, examples, evidence
    ids, revisions, unknown fields and code order are left out.
    """
    body = {
        "codes": [c.semantic() for c in sorted(taxonomy.codes, key=lambda c: id_sort_key(c.id))],
        "id_high_water": {a: taxonomy.id_high_water[a] for a in AXES},
        "retired": sorted(taxonomy.retired_ids, key=id_sort_key),
    }
    digest = hashlib.sha256(canonical_json(body, compact=True).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"


def require_usable(taxonomy: Taxonomy, *, allow_unaccepted: bool = False) -> Taxonomy:
    """Return the taxonomy if a consumer may use it, else raise.

    Args:
        taxonomy: The version a consumer is about to use.
        allow_unaccepted: Use a ``draft`` or ``review_required`` version anyway (the caller records
            this in its manifest and outputs).

    Raises:
        TaxonomyError: Status not ``accepted`` or ``baseline`` and ``allow_unaccepted`` is false.
    """
    if taxonomy.usable or allow_unaccepted:
        return taxonomy
    raise TaxonomyError(
        f"taxonomy {taxonomy.fingerprint[:19]} is {taxonomy.status!r}; consumers take "
        f"{' or '.join(USABLE_STATUSES)} (pass allow_unaccepted=True to use it anyway)"
    )
