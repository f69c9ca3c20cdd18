"""One failure code: its fields, its id rules and its JSON form (design §1.1, §1.3).

A :class:`Code` sits on one of three fixed axes (``A`` system-level, ``B`` role-specific, ``C``
domain-specific). Its ``id`` is an identity: a minted id (``A.3``) matches :data:`MINTED_ID`, is
given once by :class:`~tsevo.taxonomy.model.Taxonomy` from the axis' high-water mark and never
reused; a foreign id (``FM-2.6``, ``MAST-12``) is kept verbatim and moves no mark. ``id``,
``category``, ``applies_to_role`` and ``origin`` never change after minting.

The JSON form is AdaMAST's flat code record (``id, name, category, description, when_to_use,
when_not_to_use, detection_heuristics, severity, applies_to_role, examples``) plus tsevo's extras
(``area, revision, origin, parent, detector, outcome_blind, evidence_trace_ids``); fields neither
side knows are kept in :attr:`Code.extras` and written back unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AXES",
    "DETECTOR_OPS",
    "MINTED_ID",
    "ORIGINS",
    "SEVERITIES",
    "Code",
    "TaxonomyError",
    "area_of",
    "check_detector",
    "code_from_dict",
    "code_to_dict",
    "id_sort_key",
    "minted_number",
    "or_detectors",
]

#: The three fixed axes: system-level, role-specific, domain-specific.
AXES: tuple[str, ...] = ("A", "B", "C")
#: Where a code came from (never changes after minting).
ORIGINS: tuple[str, ...] = ("induced", "added", "split", "merged", "mast", "foreign")
#: The severities consumers weigh (1/2/3); other strings are kept but weigh nothing.
SEVERITIES: tuple[str, ...] = ("minor", "major", "critical")
#: The shape of a minted id: axis, dot, a positive number without leading zeros.
MINTED_ID = re.compile(r"^([ABC])\.([1-9][0-9]*)$")
#: Comparison operators a detector atom may use.
DETECTOR_OPS: tuple[str, ...] = ("==", "!=", "<", "<=", ">", ">=")

#: Fields a relabel may change (text and guidance; never identity fields).
TEXT_FIELDS: tuple[str, ...] = (
    "name",
    "description",
    "when_to_use",
    "when_not_to_use",
    "detection_heuristics",
    "severity",
    "examples",
    "evidence_trace_ids",
)
#: AdaMAST's own origins, read as ours.
_ORIGIN_ALIASES = {"seed": "induced"}
_KNOWN_KEYS = frozenset(
    {
        "id",
        "category",
        "name",
        "description",
        "definition",
        "when_to_use",
        "when_not_to_use",
        "detection_heuristics",
        "severity",
        "applies_to_role",
        "examples",
        "area",
        "revision",
        "origin",
        "parent",
        "detector",
        "outcome_blind",
        "evidence_trace_ids",
    }
)


class TaxonomyError(ValueError):
    """A taxonomy or code that breaks the model's rules (bad field, duplicate or recycled id)."""


def minted_number(code_id: str) -> tuple[str, int] | None:
    """``(axis, n)`` of a minted id, ``None`` for a foreign one.

    Example:
        >>> minted_number("B.12"), minted_number("FM-2.6"), minted_number("A.01")
        (('B', 12), None, None)
    """
    m = MINTED_ID.match(code_id)
    return (m.group(1), int(m.group(2))) if m else None


def id_sort_key(code_id: str) -> tuple[int, str, int, str]:
    """Order ids naturally: minted ids by axis and number (``A.2`` before ``A.10``), then foreign.

    Example:
        >>> sorted(["A.10", "FM-1.1", "A.2", "B.1"], key=id_sort_key)
        ['A.2', 'A.10', 'B.1', 'FM-1.1']
    """
    m = minted_number(code_id)
    return (0, m[0], m[1], "") if m else (1, "", 0, code_id)


def check_detector(detector: Any, where: str) -> dict[str, Any]:
    """Validate a detector: ``{"any": [{"all": [{"feature", "op", "value"}, ...]}, ...]}``.

    A detector is an OR (``any``) of ANDs (``all``) of atoms ``feature op value`` over the trace
    feature registry. Induction bounds its size (design §3.2); a merge may OR two detectors, so the
    data model only checks the shape.

    Args:
        detector: The parsed JSON value.
        where: Where it sits, for the message (``codes[2].detector``).

    Returns:
        A plain copy of the detector.

    Raises:
        TaxonomyError: Naming the first malformed part.
    """
    if not isinstance(detector, Mapping) or not isinstance(detector.get("any"), Sequence):
        raise TaxonomyError(f"{where}: a detector is an object with an 'any' list of clauses")
    clauses = []
    for i, clause in enumerate(detector["any"]):
        if not isinstance(clause, Mapping) or not isinstance(clause.get("all"), Sequence):
            raise TaxonomyError(f"{where}.any[{i}]: a clause is an object with an 'all' list")
        if not clause["all"]:
            raise TaxonomyError(f"{where}.any[{i}].all: a clause needs at least one atom")
        atoms = []
        for j, atom in enumerate(clause["all"]):
            at = f"{where}.any[{i}].all[{j}]"
            if not isinstance(atom, Mapping) or set(atom) != {"feature", "op", "value"}:
                raise TaxonomyError(f"{at}: an atom has exactly 'feature', 'op' and 'value'")
            if not isinstance(atom["feature"], str) or not atom["feature"]:
                raise TaxonomyError(f"{at}.feature: a non-empty feature name is required")
            if atom["op"] not in DETECTOR_OPS:
                raise TaxonomyError(f"{at}.op: {atom['op']!r} is not one of {DETECTOR_OPS}")
            if not isinstance(atom["value"], str | int | float | bool):
                raise TaxonomyError(f"{at}.value: a string, number or boolean is required")
            atoms.append(dict(atom))
        clauses.append({"all": atoms})
    if not clauses:
        raise TaxonomyError(f"{where}.any: a detector needs at least one clause")
    return {"any": clauses}


def or_detectors(detectors: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """OR detectors together (a merge's detector); ``None`` entries are skipped, repeats dropped."""
    clauses: list[dict[str, Any]] = []
    for d in detectors:
        for clause in (d or {}).get("any", ()):
            if clause not in clauses:
                clauses.append(dict(clause))
    return {"any": clauses} if clauses else None


@dataclass(frozen=True, kw_only=True)
class Code:
    """One failure code (design §1.1). Immutable; edits build new codes.

    Attributes:
        id: Its identity (``""`` only before minting: an :class:`~tsevo.taxonomy.edits.Add`).
        category: The axis, ``A`` | ``B`` | ``C``.
        name: Short title, e.g. ``Reviewer_Keeps_Answer_Against_Evidence``.
        description: What the failure is (AdaMAST's ``description``; ``definition`` on load).
        when_to_use: When an annotator should assign it.
        when_not_to_use: Its boundary against the nearest other code.
        detection_heuristics: Checkable hints, in prose or ``feature op value`` form.
        severity: ``minor`` | ``major`` | ``critical`` (other strings kept), or ``None``.
        applies_to_role: The role a ``B`` code belongs to (required for ``B``).
        examples: Example snippets (not part of the fingerprint).
        area: The area agreement collapses labels to (A: system group, B: role, C: subdomain,
            MAST: category); ``None`` falls back to :func:`area_of`'s default.
        revision: 1 when minted, +1 per relabel or merge that changes it.
        origin: One of :data:`ORIGINS`.
        parent: The id of the code it was split from.
        detector: A structured predicate (:func:`check_detector`) or ``None``.
        outcome_blind: Whether it can be judged without the outcome (``None``: not said).
        evidence_trace_ids: Trace ids it was induced from or exemplified by.
        extras: Fields neither AdaMAST nor tsevo knows, written back unchanged.
    """

    id: str
    category: str
    name: str
    description: str = ""
    when_to_use: str = ""
    when_not_to_use: str = ""
    detection_heuristics: tuple[str, ...] = ()
    severity: str | None = None
    applies_to_role: str | None = None
    examples: tuple[Any, ...] = ()
    area: str | None = None
    revision: int = 1
    origin: str = "induced"
    parent: str | None = None
    detector: Mapping[str, Any] | None = None
    outcome_blind: bool | None = None
    evidence_trace_ids: tuple[str, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"code {self.id or self.name!r}"
        for name in ("detection_heuristics", "examples", "evidence_trace_ids"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise TaxonomyError(f"{where}: {name} must be a list")
            object.__setattr__(self, name, tuple(value))
        if not isinstance(self.id, str):
            raise TaxonomyError(f"{where}: id must be a string, got {type(self.id).__name__}")
        if self.category not in AXES:
            raise TaxonomyError(f"{where}: category {self.category!r} is not one of {AXES}")
        if not isinstance(self.name, str) or not self.name.strip():
            raise TaxonomyError(f"{where}: name must be a non-empty string")
        for name in ("description", "when_to_use", "when_not_to_use"):
            if not isinstance(getattr(self, name), str):
                raise TaxonomyError(f"{where}: {name} must be a string")
        if not all(isinstance(h, str) for h in self.detection_heuristics):
            raise TaxonomyError(f"{where}: detection_heuristics must be strings")
        if not all(isinstance(t, str) for t in self.evidence_trace_ids):
            raise TaxonomyError(f"{where}: evidence_trace_ids must be strings")
        for name in ("severity", "applies_to_role", "area", "parent"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TaxonomyError(f"{where}: {name} must be a string or null")
        if self.category == "B" and not self.applies_to_role:
            raise TaxonomyError(f"{where}: a B code needs applies_to_role")
        if self.origin not in ORIGINS:
            raise TaxonomyError(f"{where}: origin {self.origin!r} is not one of {ORIGINS}")
        if isinstance(self.revision, bool) or not isinstance(self.revision, int):
            raise TaxonomyError(f"{where}: revision must be an integer")
        if self.revision < 1:
            raise TaxonomyError(f"{where}: revision must be >= 1")
        if self.outcome_blind is not None and not isinstance(self.outcome_blind, bool):
            raise TaxonomyError(f"{where}: outcome_blind must be true, false or null")
        if self.detector is not None:
            object.__setattr__(self, "detector", check_detector(self.detector, f"{where} detector"))
        m = minted_number(self.id)
        if m and m[0] != self.category:
            raise TaxonomyError(f"{where}: id axis {m[0]} does not match category {self.category}")
        object.__setattr__(self, "extras", dict(self.extras))

    @property
    def minted(self) -> bool:
        """Whether the id has the minted shape (``A.3``), i.e. is not foreign."""
        return minted_number(self.id) is not None

    def semantic(self) -> dict[str, Any]:
        """The fields the fingerprint hashes (no examples, evidence, revision or extras)."""
        return {
            "id": self.id,
            "category": self.category,
            "name": self.name,
            "description": self.description,
            "when_to_use": self.when_to_use,
            "when_not_to_use": self.when_not_to_use,
            "detection_heuristics": list(self.detection_heuristics),
            "severity": self.severity,
            "applies_to_role": self.applies_to_role,
            "area": self.area,
            "origin": self.origin,
            "parent": self.parent,
            "detector": self.detector,
            "outcome_blind": self.outcome_blind,
        }


def area_of(code: Code) -> str:
    """The area a code's labels collapse to for ``cohen_area``, qualified by its axis.

    ``area`` when set, else the role for a ``B`` code, else the axis itself (one area per axis).

    Example:
        >>> area_of(Code(id="B.1", category="B", name="x", applies_to_role="reviewer"))
        'B:reviewer'
    """
    if code.area:
        return f"{code.category}:{code.area}"
    if code.category == "B" and code.applies_to_role:
        return f"B:{code.applies_to_role}"
    return f"{code.category}:{code.category}"


def _text(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TaxonomyError(f"{where}.{key}: expected a string, got {type(value).__name__}")
    return value


def _str_list(raw: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key) or []
    if isinstance(value, str) or not isinstance(value, list):
        raise TaxonomyError(f"{where}.{key}: expected a list")
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise TaxonomyError(f"{where}.{key}[{i}]: expected a string")
    return tuple(value)


def code_from_dict(
    raw: Any,
    where: str,
    *,
    category: str | None = None,
    id_key: str = "id",
    default_origin: str = "foreign",
) -> Code:
    """Read one code record (AdaMAST flat or layered, or ours).

    Args:
        raw: The parsed JSON object.
        where: Its place in the file, for messages (``codes[3]``).
        category: The axis when the container says it (a layered draft's ``category_b``); a
            record's own ``category`` must then agree.
        id_key: ``"id"`` (flat files) or ``"code"`` (AdaMAST's layered draft).
        default_origin: The origin of a record that names none (``foreign``: not minted here).

    Returns:
        The code; an empty ``id`` means the record had none (the taxonomy mints it).

    Raises:
        TaxonomyError: Naming the field, e.g. ``codes[3].category``.
    """
    if not isinstance(raw, Mapping):
        raise TaxonomyError(f"{where}: a code must be a JSON object")
    code_id = raw.get(id_key)
    if code_id is None:
        code_id = ""
    if not isinstance(code_id, str):
        raise TaxonomyError(f"{where}.{id_key}: expected a string, got {type(code_id).__name__}")
    code_id = code_id.strip()
    if code_id == "?" or code_id.endswith(".?"):  # AdaMAST's placeholder for "not yet minted"
        code_id = ""
    where = f"{where} ({code_id})" if code_id else where
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise TaxonomyError(f"{where}.name: a non-empty string is required")
    area = raw.get("area")
    cat_raw = raw.get("category", category)
    if not isinstance(cat_raw, str) or not cat_raw:
        raise TaxonomyError(f"{where}.category: one of {AXES} is required")
    cat = cat_raw.upper() if len(cat_raw) == 1 else cat_raw
    if cat not in AXES:
        if minted_number(code_id) or not code_id:
            raise TaxonomyError(f"{where}.category: {cat_raw!r} is not one of {AXES}")
        # a foreign catalogue's own grouping (MAST's "Specification"): axis A, that group as area
        cat, area = "A", area or cat_raw.lower()
    if category is not None and cat != category:
        raise TaxonomyError(f"{where}.category: {cat_raw!r} in the {category} layer")
    minted = minted_number(code_id)
    if minted and minted[0] != cat:
        raise TaxonomyError(f"{where}.id: axis {minted[0]} does not match category {cat}")
    if "description" in raw:
        description = _text(raw, "description", where)
    else:
        description = _text(raw, "definition", where)
    origin = raw.get("origin", default_origin)
    origin = _ORIGIN_ALIASES.get(origin, origin)
    if origin not in ORIGINS:
        raise TaxonomyError(f"{where}.origin: {origin!r} is not one of {ORIGINS}")
    examples = raw.get("examples") or []
    if not isinstance(examples, list):
        raise TaxonomyError(f"{where}.examples: expected a list")
    revision = raw.get("revision", 1)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise TaxonomyError(f"{where}.revision: a positive integer is required")
    for key in ("severity", "applies_to_role", "parent"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise TaxonomyError(f"{where}.{key}: expected a string")
    if area is not None and not isinstance(area, str):
        raise TaxonomyError(f"{where}.area: expected a string")
    blind = raw.get("outcome_blind")
    if blind is not None and not isinstance(blind, bool):
        raise TaxonomyError(f"{where}.outcome_blind: expected true, false or null")
    detector = raw.get("detector")
    if detector is not None:
        detector = check_detector(detector, f"{where}.detector")
    role = raw.get("applies_to_role") or None
    if cat == "B" and not role:
        raise TaxonomyError(f"{where}.applies_to_role: required for a B code")
    extras = {k: v for k, v in raw.items() if k not in _KNOWN_KEYS}
    if "description" in raw and "definition" in raw:
        extras["definition"] = raw["definition"]
    extras.pop(id_key, None)  # a layered draft's "code" is the id
    return Code(
        id=code_id,
        category=cat,
        name=name,
        description=description,
        when_to_use=_text(raw, "when_to_use", where),
        when_not_to_use=_text(raw, "when_not_to_use", where),
        detection_heuristics=_str_list(raw, "detection_heuristics", where),
        severity=raw.get("severity"),
        applies_to_role=role,
        examples=tuple(examples),
        area=area,
        revision=revision,
        origin=origin,
        parent=raw.get("parent"),
        detector=detector,
        outcome_blind=blind,
        evidence_trace_ids=_str_list(raw, "evidence_trace_ids", where),
        extras=extras,
    )


def code_to_dict(code: Code) -> dict[str, Any]:
    """The flat JSON record of a code: AdaMAST's fields first, tsevo's extras, then unknown ones.

    Empty optional fields are left out, so an AdaMAST record reads back as it was written.
    """
    out: dict[str, Any] = dict(code.extras)
    out.update(id=code.id, name=code.name, category=code.category, description=code.description)
    optional: dict[str, Any] = {
        "when_to_use": code.when_to_use,
        "when_not_to_use": code.when_not_to_use,
        "detection_heuristics": list(code.detection_heuristics),
        "severity": code.severity,
        "applies_to_role": code.applies_to_role,
        "examples": list(code.examples),
        "area": code.area,
        "parent": code.parent,
        "detector": code.detector,
        "outcome_blind": code.outcome_blind,
        "evidence_trace_ids": list(code.evidence_trace_ids),
    }
    out.update({k: v for k, v in optional.items() if v not in (None, "", [])})
    out["revision"] = code.revision
    out["origin"] = code.origin
    return out
