"""Suite files: ``.jsonl`` (a header line, then one question per line) and ``.parquet``.

Both formats hold every field of :meth:`tsevo.data.Question.to_dict` plus the question's split, and
a schema version (the JSONL header, the parquet schema metadata). Writes are atomic: a temporary
sibling is renamed into place, so a failed save leaves any existing file untouched and no partial
file behind. Reading returns the raw records, each labelled with its position (``<line N>``,
``<row N>``, counted from 1), for :class:`~tsevo.data.Suite` to validate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from tsevo.fileio import atomic_writer

from .question import Question
from .report import RecordError

__all__ = ["FORMATS", "SCHEMA_VERSION", "read_suite_file", "suite_rows", "write_suite_file"]

SCHEMA_VERSION = 1
#: File suffixes a suite can be saved as.
FORMATS = (".jsonl", ".parquet")

ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("source", pa.string()),
        ("task", pa.string()),
        ("subtask", pa.string()),
        ("question", pa.string()),
        ("context", pa.string()),
        ("options", pa.list_(pa.string())),
        ("gold", pa.int64()),
        ("group", pa.string()),
        ("primary", pa.list_(pa.string())),
        ("covariates", pa.list_(pa.string())),
        ("candidates", pa.list_(pa.string())),
        (
            "series",
            pa.list_(pa.struct([("name", pa.string()), ("values", pa.list_(pa.float64()))])),
        ),
        ("metadata", pa.string()),
        ("fingerprint", pa.string()),
        ("split", pa.string()),
    ]
)


def suite_rows(
    questions: Iterable[Question], splits: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """One :meth:`Question.to_dict` per question, plus its ``split`` (None when unassigned)."""
    for q in questions:
        d = q.to_dict()
        d["split"] = splits.get(q.id)
        yield d


def _format_of(p: Path) -> str:
    fmt = p.suffix.lower()
    if fmt not in FORMATS:
        raise ValueError(f"unsupported suite file {p.name!r}: use .parquet or .jsonl")
    return fmt


def write_suite_file(
    path: str | Path, name: str, questions: Iterable[Question], splits: Mapping[str, str]
) -> Path:
    """Write a suite as ``.parquet`` or ``.jsonl`` (by suffix), atomically.

    Returns:
        The path written.

    Raises:
        ValueError: For a suffix other than ``.parquet`` or ``.jsonl``.
    """
    p = Path(path)
    fmt = _format_of(p)
    with atomic_writer(p) as fh:
        rows = suite_rows(questions, splits)
        if fmt == ".jsonl":
            _write_jsonl(fh, name, rows)
        else:
            _write_parquet(fh, name, rows)
    return p


def _write_jsonl(fh: BinaryIO, name: str, rows: Iterable[dict[str, Any]]) -> None:
    header = {"__suite__": name, "schema_version": SCHEMA_VERSION}
    fh.write((json.dumps(header) + "\n").encode())
    for d in rows:
        fh.write((json.dumps(d, ensure_ascii=False, allow_nan=False) + "\n").encode())


def _write_parquet(fh: BinaryIO, name: str, rows: Iterable[dict[str, Any]]) -> None:
    table_rows = []
    for d in rows:
        d["series"] = [{"name": k, "values": v} for k, v in d["series"].items()]
        d["metadata"] = json.dumps(d["metadata"], sort_keys=True)
        table_rows.append(d)
    table = pa.Table.from_pylist(table_rows, schema=ARROW_SCHEMA)
    table = table.replace_schema_metadata(
        {"tsevo.suite": name, "tsevo.schema_version": str(SCHEMA_VERSION)}
    )
    pq.write_table(table, fh)


def _check_schema_version(path: Path, version: Any) -> None:
    try:
        v = int(version)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: unreadable schema_version {version!r}") from None
    if v > SCHEMA_VERSION:
        raise ValueError(
            f"{path} was written with suite schema {v}; this tsevo reads up to {SCHEMA_VERSION}"
        )


def read_suite_file(path: str | Path) -> tuple[str, list[tuple[str | None, Any]]]:
    """Read a suite file's name and its raw records, each with the label of its position.

    A line or row that cannot be parsed is returned as a :class:`RecordError` in its place (in file
    order), for the caller to raise or report.

    Returns:
        The suite name (the file's header, else its stem) and the ``(label, record)`` pairs.

    Raises:
        FileNotFoundError: If there is no file at ``path``.
        ValueError: For an unsupported suffix or a file from a newer schema version.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no suite file at {p}")
    if _format_of(p) == ".jsonl":
        return _read_jsonl(p)
    return _read_parquet(p)


def _read_jsonl(p: Path) -> tuple[str, list[tuple[str | None, Any]]]:
    name = p.stem
    labeled: list[tuple[str | None, Any]] = []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"<line {lineno}>"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                err = RecordError(where, "<json>", f"invalid JSON: {exc.msg} (col {exc.colno})")
                labeled.append((where, err))  # raised in file order when strict
                continue
            if isinstance(obj, dict) and "__suite__" in obj:
                name = str(obj["__suite__"])
                _check_schema_version(p, obj.get("schema_version", SCHEMA_VERSION))
                continue
            labeled.append((where, obj))
    return name, labeled


def _read_parquet(p: Path) -> tuple[str, list[tuple[str | None, Any]]]:
    table = pq.read_table(p)
    meta = table.schema.metadata or {}
    name = meta.get(b"tsevo.suite", p.stem.encode()).decode()
    _check_schema_version(p, meta.get(b"tsevo.schema_version", SCHEMA_VERSION))
    labeled: list[tuple[str | None, Any]] = []
    for rowno, row in enumerate(table.to_pylist(), 1):
        where = f"<row {rowno}>"
        if isinstance(row.get("series"), list):
            row["series"] = {s["name"]: s["values"] for s in row["series"]}
        md = row.get("metadata")
        if isinstance(md, str):
            try:
                row["metadata"] = json.loads(md)
            except json.JSONDecodeError as exc:
                rid = row.get("id") if isinstance(row.get("id"), str) else where
                labeled.append((where, RecordError(rid, "metadata", f"invalid JSON: {exc.msg}")))
                continue
        labeled.append((where, row))
    return name, labeled
