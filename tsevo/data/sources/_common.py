"""Shared machinery of the public-source loaders: file discovery, table reading, array parsing.

Every loader turns source rows into plain question records (dicts shaped like
:meth:`tsevo.data.Question.to_dict`) and hands them to :class:`_Collector`, which validates them
through :meth:`tsevo.data.Suite.from_records`. A row that cannot be converted raises a
:class:`~tsevo.data.RecordError` naming the row id and the source field (strict) or lands in the
:class:`SourceReport` (lenient). Rows a loader leaves out on purpose (another task, a forecasting
row) are counted in :attr:`SourceReport.skipped`, so nothing vanishes unexplained.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import hashlib
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow.parquet as pq

from tsevo.data.report import LoadReport, RecordError
from tsevo.data.suite import Suite
from tsevo.data.validation import norm_text

__all__ = ["SourceReport"]

TABLE_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")

T = TypeVar("T")


@dataclass
class SourceReport(LoadReport):
    """A :class:`~tsevo.data.LoadReport` plus what a source loader left out on purpose.

    ``n_read`` counts the records the loader tried to turn into questions (one per sub-question
    where a row is exploded; one per row when a whole row fails before it can be exploded).
    Rows left out on purpose are not errors and are not in ``n_read``; they are counted here.

    Attributes:
        source: The source name (``"timeseriesexam"``, ...).
        files: The files read.
        skipped: Rows left out on purpose, by reason (e.g. ``"task=classification": 12``).
    """

    source: str = ""
    files: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def n_skipped(self) -> int:
        """Total rows left out on purpose."""
        return sum(self.skipped.values())

    def __str__(self) -> str:
        text = super().__str__()
        if self.skipped:
            parts = ", ".join(f"{k}: {v}" for k, v in sorted(self.skipped.items()))
            text += f"\nskipped on purpose {self.n_skipped} ({parts})"
        return text


class Collector:
    """Gathers converted records, conversion errors and deliberate skips, then validates."""

    def __init__(self, source: str, *, lenient: bool) -> None:
        self.source = source
        self.lenient = lenient
        self.records: list[dict[str, Any]] = []
        self.errors: list[RecordError] = []
        self.skipped: Counter[str] = Counter()
        self.files: list[str] = []

    def rows(self, files: Iterable[Path]) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every readable row of ``files`` with its row number (:func:`iter_rows`).

        Each file is recorded for the report; an unreadable row fails (:meth:`fail`).
        """
        for f in files:
            self.files.append(str(f))
            for rownum, row in iter_rows(f):
                if isinstance(row, RecordError):
                    self.fail(row)
                    continue
                yield rownum, row

    def attempt(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T | None:
        """``fn(*args, **kw)``, or None when it raised a :class:`RecordError` (see :meth:`fail`)."""
        try:
            return fn(*args, **kw)
        except RecordError as err:
            self.fail(err)
            return None

    def add(self, record: dict[str, Any]) -> None:
        """Queue one converted record for validation."""
        self.records.append(record)

    def fail(self, err: RecordError) -> None:
        """Raise ``err`` (strict) or keep it for the report (lenient)."""
        if not self.lenient:
            raise err
        self.errors.append(err)

    def skip(self, reason: str, n: int = 1) -> None:
        """Count ``n`` rows left out on purpose for ``reason``."""
        self.skipped[reason] += n

    def finish(self, name: str) -> tuple[Suite, SourceReport]:
        """Validate the queued records into a suite and build the report."""
        suite, rep = Suite.from_records(self.records, name=name, lenient=self.lenient)
        report = SourceReport(
            n_read=rep.n_read + len(self.errors),
            n_kept=rep.n_kept,
            errors=[*self.errors, *rep.errors],
            duplicates=list(rep.duplicates),
            source=self.source,
            files=list(self.files),
            skipped=dict(self.skipped),
        )
        return suite, report


# ---------------------------------------------------------------------------- files and tables


def resolve_files(
    path: str | Path, *, suffixes: Sequence[str] = TABLE_SUFFIXES, name_hint: str | None = None
) -> list[Path]:
    """Return the data files at ``path`` (a file, or a folder searched recursively).

    Args:
        path: A file or a folder.
        suffixes: File suffixes to accept inside a folder.
        name_hint: Regex; inside a folder, prefer files whose name matches it (when any do).

    Raises:
        FileNotFoundError: When the path does not exist or a folder holds no matching file.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file or folder: {p}")
    if p.is_file():
        return [p]
    files = sorted(
        f
        for f in p.rglob("*")
        if f.is_file() and f.suffix.lower() in suffixes and not f.name.startswith(".")
    )
    if name_hint is not None:
        hinted = [f for f in files if re.search(name_hint, f.name, re.IGNORECASE)]
        files = hinted or files
    if not files:
        raise FileNotFoundError(f"no {'/'.join(suffixes)} file under {p}")
    return files


@contextlib.contextmanager
def _big_csv_fields() -> Iterator[None]:
    old = csv.field_size_limit()
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def iter_rows(path: Path) -> Iterator[tuple[int, dict[str, Any] | RecordError]]:
    """Yield ``(row number, row)`` from a JSON list, JSONL, CSV or Parquet file.

    A JSON file that is not one document is read as JSONL (the Merrill ``.json`` files are JSONL).
    An unreadable line or a non-object row is yielded as a :class:`RecordError` in its place.
    Row numbers start at 1 (the line number for JSONL, the data row for CSV).
    """
    suffix = path.suffix.lower()
    where = path.name
    if suffix == ".parquet":
        for i, row in enumerate(pq.read_table(path).to_pylist(), 1):
            yield i, row
        return
    if suffix == ".csv":
        with _big_csv_fields(), path.open(encoding="utf-8", newline="") as fh:
            for i, row in enumerate(csv.DictReader(fh), 1):
                if None in row:  # more cells than header names
                    yield i, RecordError(f"{where}:row {i}", "<csv>", "more cells than columns")
                    continue
                yield i, dict(row)
        return
    text = path.read_text(encoding="utf-8")
    if suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None  # fall through to JSONL
        if doc is not None:
            if isinstance(doc, dict):
                for key in ("data", "rows", "questions", "items"):
                    if isinstance(doc.get(key), list):
                        doc = doc[key]
                        break
                else:
                    doc = [doc]
            if not isinstance(doc, list):
                yield 1, RecordError(where, "<json>", f"expected a list of rows, got {type(doc)}")
                return
            for i, row in enumerate(doc, 1):
                if isinstance(row, dict):
                    yield i, row
                else:
                    yield i, RecordError(f"{where}[{i}]", "<row>", "row is not a JSON object")
            return
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield i, RecordError(f"{where}:line {i}", "<json>", f"invalid JSON: {exc.msg}")
            continue
        if not isinstance(obj, dict):
            yield i, RecordError(f"{where}:line {i}", "<json>", "line is not a JSON object")
            continue
        yield i, obj


# ---------------------------------------------------------------------------- values


def short_hash(*parts: Any, n: int = 10) -> str:
    """A short stable hex digest of JSON-serialised ``parts``."""
    h = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return h[:n]


def is_missing(v: Any) -> bool:
    """True for None, NaN, empty strings and pandas-style missing cells."""
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return isinstance(v, str) and not v.strip()


def text_field(rid: str, row: dict[str, Any], key: str, *, required: bool = True) -> str:
    """Return ``row[key]`` as a non-empty string, or raise naming the field."""
    v = row.get(key)
    if is_missing(v):
        if required:
            raise RecordError(rid, key, "missing required field")
        return ""
    if not isinstance(v, str):
        raise RecordError(rid, key, f"expected a string, got {type(v).__name__}")
    return v


def parse_literal(rid: str, fld: str, v: Any) -> Any:
    """Parse a JSON or Python literal held in a string (lists pass through unchanged)."""
    if not isinstance(v, str):
        return v
    s = v.strip()
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise RecordError(rid, fld, f"unparsable literal ({type(exc).__name__})") from None


def to_float_list(rid: str, fld: str, v: Any, *, allow_nan: bool = False) -> list[float]:
    """Convert a flat sequence of numbers to floats, naming the field on any bad element.

    Args:
        rid: Record id for errors.
        fld: Field name for errors.
        v: The sequence (or a string holding a list literal).
        allow_nan: Map ``None``/``"nan"``/non-finite values to NaN instead of failing.
    """
    v = parse_literal(rid, fld, v)
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if not isinstance(v, list | tuple):
        raise RecordError(rid, fld, f"expected a list of numbers, got {type(v).__name__}")
    if not v:
        raise RecordError(rid, fld, "empty series")
    out: list[float] = []
    for i, x in enumerate(v):
        if isinstance(x, bool | list | tuple | dict):
            raise RecordError(rid, fld, f"element {i} is not a number ({x!r:.40})")
        if x is None or (isinstance(x, str) and x.strip().lower() in ("nan", "null", "none", "")):
            if allow_nan:
                out.append(math.nan)
                continue
            raise RecordError(rid, fld, f"missing value at index {i}")
        try:
            f = float(x)
        except (TypeError, ValueError):
            raise RecordError(rid, fld, f"element {i} is not a number ({x!r:.40})") from None
        if not math.isfinite(f) and not allow_nan:
            raise RecordError(rid, fld, f"non-finite value at index {i}")
        out.append(f if math.isfinite(f) else math.nan)
    return out


def fill_missing(values: Sequence[float]) -> tuple[list[float], list[float] | None]:
    """Fill NaN gaps by linear interpolation (edges take the nearest observed value).

    Returns:
        The filled values and a 0/1 mask (1 = was missing), or ``None`` when nothing was missing.
        An all-missing series is filled with zeros (its mask is all ones).
    """
    arr = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(arr)
    if not bad.any():
        return arr.tolist(), None
    if bad.all():
        return np.zeros_like(arr).tolist(), np.ones_like(arr).tolist()
    idx = np.arange(arr.size)
    filled = arr.copy()
    filled[bad] = np.interp(idx[bad], idx[~bad], arr[~bad])
    return filled.tolist(), bad.astype(np.float64).tolist()


def find_arrays(text: str) -> list[tuple[int, int, Any]]:
    """Find top-level bracketed numeric arrays (flat or nested) in ``text``.

    Returns:
        ``(start, end, value)`` spans in order; ``value`` is the parsed nested list of floats,
        or ``None`` when the brackets hold something that is not a numeric array.
    """
    spans: list[tuple[int, int, Any]] = []
    i = 0
    n = len(text)
    while i < n:
        if text[i] != "[":
            i += 1
            continue
        depth = 0
        j = i
        while j < n:
            c = text[j]
            if c == "[":
                depth += 1
            elif c == "]":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if depth != 0:  # unbalanced: stop scanning
            spans.append((i, n, None))
            break
        raw = text[i : j + 1]
        spans.append((i, j + 1, _parse_numeric_array(raw)))
        i = j + 1
    return spans


_NUMERIC_ARRAY = re.compile(r"^[\[\]\s,0-9eE+\-.nNaAiIfFtTyYuUlLoO]*$")


def _parse_numeric_array(raw: str) -> Any:
    if not _NUMERIC_ARRAY.match(raw) or not re.search(r"\d", raw):
        return None
    cleaned = re.sub(r"(?i)\bnan\b", "NaN", raw)
    cleaned = re.sub(r"(?i)-?\binf(inity)?\b", "NaN", cleaned)
    cleaned = re.sub(r"(?i)\b(null|none)\b", "null", cleaned)
    try:
        val = json.loads(cleaned)
    except json.JSONDecodeError:
        return None
    return val if _is_numeric_nested(val) else None


def _is_numeric_nested(v: Any) -> bool:
    if isinstance(v, list):
        return bool(v) and all(_is_numeric_nested(x) for x in v)
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool))


def letter_index(answer: Any, n_options: int) -> int | None:
    """Read a gold letter (``"B"``, ``"(B)"``, ``"B."``, ``"b"``) as an option index, else None."""
    if not isinstance(answer, str):
        return None
    m = re.fullmatch(r"\s*\(?([A-Za-z])\)?[.):]?\s*", answer)
    if not m:
        return None
    k = ord(m.group(1).upper()) - ord("A")
    return k if 0 <= k < n_options else None


def match_option(options: Sequence[str], answer: str) -> int | None:
    """Index of the option equal to ``answer`` (exact, then normalised), else None."""
    if answer in options:
        return list(options).index(answer)
    na = norm_text(answer).strip(" .\"'")
    hits = [i for i, o in enumerate(options) if norm_text(o).strip(" .\"'") == na]
    return hits[0] if len(hits) == 1 else None


LETTERS = "ABCDEFGHIJ"
