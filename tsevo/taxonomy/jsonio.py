"""``taxonomy.json`` and ``lineage.jsonl``: AdaMAST's public format, read and written (design §1.2).

The file is AdaMAST's flat ``taxonomy.json`` (``schema_version`` 1)::

    {"schema_version": 1, "status": "accepted", "display_name": "…", "domain": "…", "summary": "…",
     "codes": [{"id": "B.2", "name": "…", "category": "B", "description": "…",
                "applies_to_role": "reviewer", "area": "reviewer", "revision": 1, …}],
     "id_high_water": {"A": 4, "B": 6, "C": 5},
     "generation": {"provider": "…", "model": "…", "trace_count": 240, "agreement": {…}},
     "tsevo": {"schema": 1, "version_n": 3, "fingerprint": "sha256:…", "parent": "sha256:…",
               "coverage_gaps": [], "retired": [{"id": "C.2", "version_n": 2, "reason": "merge",
                                                 "merged_into": "C.1"}]}}

``id_high_water`` sits at the top level, where AdaMAST's flat loader reads it; tsevo's own state
lives under ``tsevo``, which AdaMAST ignores. :func:`taxonomy_from_dict` also reads AdaMAST's
layered draft (``annotation_layer`` / ``full_layer``, codes keyed ``code`` with ``definition``)
and its ``mast.json`` (ids ``MAST-n``, categories ``Specification`` ...: axis ``A``, the category
as area, status ``baseline``). Unknown fields, top-level, in ``tsevo`` and in codes, are kept and
written back. Bad input raises :class:`~tsevo.taxonomy.codes.TaxonomyError` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tsevo.fileio import atomic_write_text
from tsevo.hashing import canonical_json
from tsevo.store import check_no_secrets, read_jsonl

from .codes import AXES, Code, TaxonomyError, code_from_dict, code_to_dict
from .edits import LineageEntry
from .model import Retired, Taxonomy

__all__ = [
    "SCHEMA_VERSION",
    "TSEVO_SCHEMA",
    "append_lineage",
    "load_taxonomy",
    "read_lineage",
    "save_taxonomy",
    "taxonomy_from_dict",
    "taxonomy_to_dict",
]

#: AdaMAST's ``schema_version`` this module reads and writes.
SCHEMA_VERSION = 1
#: The version of the ``tsevo`` object (tsevo's extras).
TSEVO_SCHEMA = 1

_TOP_KEYS = frozenset(
    {
        "schema_version",
        "status",
        "display_name",
        "domain",
        "summary",
        "codes",
        "id_high_water",
        "generation",
        "tsevo",
    }
)
_TSEVO_KEYS = frozenset(
    {"schema", "version_n", "fingerprint", "parent", "coverage_gaps", "retired"}
)
_LAYERS = (("A", "category_a"), ("B", "category_b"), ("C", "category_c"))


def _int(value: Any, where: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TaxonomyError(f"{where}: an integer >= {minimum} is required, got {value!r}")
    return value


def _str(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TaxonomyError(f"{where}{key}: expected a string, got {type(value).__name__}")
    return value


def _marks(raw: Any, where: str) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise TaxonomyError(f"{where}: expected an object of per-axis marks")
    out = {}
    for axis, n in raw.items():
        if axis not in AXES:
            raise TaxonomyError(f"{where}.{axis}: unknown axis (axes are {AXES})")
        out[axis] = _int(n, f"{where}.{axis}")
    return out


def _retired(raw: Any) -> list[Retired]:
    if not isinstance(raw, list):
        raise TaxonomyError("tsevo.retired: expected a list")
    out = []
    for i, r in enumerate(raw):
        where = f"tsevo.retired[{i}]"
        if not isinstance(r, Mapping) or not isinstance(r.get("id"), str) or not r["id"]:
            raise TaxonomyError(f"{where}.id: a non-empty string is required")
        merged = r.get("merged_into")
        if merged is not None and not isinstance(merged, str):
            raise TaxonomyError(f"{where}.merged_into: expected a string")
        reason = r.get("reason", "retire")
        if not isinstance(reason, str):
            raise TaxonomyError(f"{where}.reason: expected a string")
        out.append(
            Retired(
                id=r["id"],
                version_n=_int(r.get("version_n"), f"{where}.version_n", minimum=1),
                reason=reason,
                merged_into=merged,
                extras={k: v for k, v in r.items() if k not in Retired.__dataclass_fields__},
            )
        )
    return out


def _layered_codes(raw: Mapping[str, Any]) -> list[Code]:
    full = raw.get("full_layer") or {}
    ann = raw.get("annotation_layer") or {}
    if not isinstance(full, Mapping) or not isinstance(ann, Mapping):
        raise TaxonomyError("full_layer / annotation_layer: expected objects")
    codes = []
    for axis, key in _LAYERS:
        layer, where = full.get(key), f"full_layer.{key}"
        if not layer:
            layer, where = ann.get(key) or [], f"annotation_layer.{key}"
        if isinstance(layer, Mapping):
            items = [(f"{where}.{k}", v) for k, v in layer.items()]
        elif isinstance(layer, list):
            items = [(f"{where}[{i}]", v) for i, v in enumerate(layer)]
        else:
            raise TaxonomyError(f"{where}: expected a list or an object of codes")
        for at, v in items:
            codes.append(code_from_dict(v, at, category=axis, id_key="code"))
    return codes


def taxonomy_from_dict(raw: Any, *, verify_fingerprint: bool = True) -> Taxonomy:
    """Read a taxonomy from parsed JSON: ours, AdaMAST's flat or layered file, or ``mast.json``.

    Args:
        raw: The parsed JSON object.
        verify_fingerprint: When the file carries ``tsevo.fingerprint``, check that its content
            still hashes to it (a hand-edited file would otherwise keep a stale identity).

    Returns:
        The taxonomy; codes without an id get minted ones (after the present ids raised the marks).

    Raises:
        TaxonomyError: Naming the bad field or code: a wrong ``schema_version``, an unknown status,
            a code without a name, a duplicate or recycled id, a stale fingerprint, ...
    """
    if not isinstance(raw, Mapping):
        raise TaxonomyError("taxonomy JSON: the top level must be an object")
    if "annotation_layer" in raw or "full_layer" in raw:
        return _from_layered(raw)
    version = raw.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise TaxonomyError(f"schema_version: {version!r} is not supported (only {SCHEMA_VERSION})")
    codes_raw = raw.get("codes")
    if not isinstance(codes_raw, list):
        raise TaxonomyError("codes: a list of code objects is required")
    codes = [code_from_dict(c, f"codes[{i}]") for i, c in enumerate(codes_raw)]
    status = raw.get("status", "baseline" if raw.get("taxonomy_id") == "mast" else "draft")
    generation = raw.get("generation") or {}
    if not isinstance(generation, Mapping):
        raise TaxonomyError("generation: expected an object")
    ts = raw.get("tsevo") or {}
    if not isinstance(ts, Mapping):
        raise TaxonomyError("tsevo: expected an object")
    if ts.get("schema", TSEVO_SCHEMA) != TSEVO_SCHEMA:
        raise TaxonomyError(f"tsevo.schema: {ts.get('schema')!r} is not supported")
    parent = ts.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise TaxonomyError("tsevo.parent: expected a fingerprint string")
    gaps = ts.get("coverage_gaps") or []
    if not isinstance(gaps, list):
        raise TaxonomyError("tsevo.coverage_gaps: expected a list")
    tax = Taxonomy.create(
        codes,
        id_high_water=_marks(raw.get("id_high_water"), "id_high_water"),
        status=status,
        retired=tuple(_retired(ts.get("retired") or [])),
        version_n=_int(ts.get("version_n", 1), "tsevo.version_n", minimum=1),
        parent=parent,
        display_name=_str(raw, "display_name", ""),
        domain=_str(raw, "domain", ""),
        summary=_str(raw, "summary", ""),
        generation=dict(generation),
        coverage_gaps=tuple(gaps),
        extras={k: v for k, v in raw.items() if k not in _TOP_KEYS},
        tsevo_extras={k: v for k, v in ts.items() if k not in _TSEVO_KEYS},
    )
    stored = ts.get("fingerprint")
    if verify_fingerprint and stored is not None and stored != tax.fingerprint:
        raise TaxonomyError(
            f"tsevo.fingerprint: the file says {stored}, its content hashes to {tax.fingerprint} "
            "(edited by hand? edit through tsevo.taxonomy.apply_edits, or load with "
            "verify_fingerprint=False)"
        )
    return tax


def _from_layered(raw: Mapping[str, Any]) -> Taxonomy:
    """AdaMAST's layered pipeline output (its draft): codes per axis layer, marks in metadata."""
    meta = raw.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise TaxonomyError("metadata: expected an object")
    full = raw.get("full_layer") or {}
    domain = ""
    info = full.get("domain_info") if isinstance(full, Mapping) else None
    if isinstance(info, Mapping) and isinstance(info.get("domain"), Mapping):
        name = info["domain"].get("name")
        domain = name.strip() if isinstance(name, str) else ""
    extras: dict[str, Any] = {"metadata": {k: v for k, v in meta.items() if k != "id_high_water"}}
    if info is not None:
        extras["domain_info"] = info
    extras.update(
        {k: v for k, v in raw.items() if k not in {"metadata", "full_layer", "annotation_layer"}}
    )
    return Taxonomy.create(
        _layered_codes(raw),
        id_high_water=_marks(meta.get("id_high_water"), "metadata.id_high_water"),
        status="draft",
        domain=domain,
        extras=extras,
    )


def taxonomy_to_dict(taxonomy: Taxonomy) -> dict[str, Any]:
    """The ``taxonomy.json`` object (AdaMAST's flat schema plus ``tsevo``); see the module doc."""
    out: dict[str, Any] = dict(taxonomy.extras)
    out.update(
        schema_version=SCHEMA_VERSION,
        status=taxonomy.status,
        display_name=taxonomy.display_name,
        domain=taxonomy.domain,
        summary=taxonomy.summary,
        codes=[code_to_dict(c) for c in taxonomy.codes],
        id_high_water={a: taxonomy.id_high_water[a] for a in AXES},
    )
    if taxonomy.generation:
        out["generation"] = dict(taxonomy.generation)
    ts: dict[str, Any] = dict(taxonomy.tsevo_extras)
    ts.update(
        schema=TSEVO_SCHEMA,
        version_n=taxonomy.version_n,
        fingerprint=taxonomy.fingerprint,
        parent=taxonomy.parent,
        coverage_gaps=list(taxonomy.coverage_gaps),
        retired=[r.to_dict() for r in taxonomy.retired],  # oldest first
    )
    out["tsevo"] = ts
    return out


def load_taxonomy(path: str | Path, *, verify_fingerprint: bool = True) -> Taxonomy:
    """Read a taxonomy file (see :func:`taxonomy_from_dict`).

    Raises:
        TaxonomyError: For input that is not JSON or breaks the model, naming the file and field.
    """
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise TaxonomyError(f"{p}: not JSON ({exc})") from exc
    try:
        return taxonomy_from_dict(raw, verify_fingerprint=verify_fingerprint)
    except TaxonomyError as exc:
        raise TaxonomyError(f"{p}: {exc}") from exc


def save_taxonomy(taxonomy: Taxonomy, path: str | Path) -> Path:
    """Write ``taxonomy.json`` atomically as canonical JSON (same taxonomy, same bytes).

    Returns:
        The path written.
    """
    p = Path(path)
    obj = taxonomy_to_dict(taxonomy)
    check_no_secrets(obj, str(p))
    atomic_write_text(p, canonical_json(obj))
    return p


def append_lineage(path: str | Path, entries: LineageEntry | Iterable[LineageEntry]) -> None:
    """Append lineage entries to ``lineage.jsonl`` (one compact canonical JSON object a line)."""
    items = [entries] if isinstance(entries, LineageEntry) else list(entries)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for e in items:
        obj = e.to_dict()
        check_no_secrets(obj, str(p))
        lines.append(canonical_json(obj, compact=True) + "\n")
    with p.open("a", encoding="utf-8") as fh:
        fh.write("".join(lines))
        fh.flush()


def read_lineage(path: str | Path) -> list[LineageEntry]:
    """The entries of a ``lineage.jsonl`` (a torn last line from a killed writer is ignored)."""
    return [LineageEntry.from_dict(r) for r in read_jsonl(Path(path))]
