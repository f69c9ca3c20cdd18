"""MMTS-Bench Match (Yin et al. 2026): ``Benchmark/Match/qats_400.csv``, a reference and candidates.

Read shape (``research/ts_qa_sources.md`` §5, from public loader code; the files were not seen):
CSV (or JSONL/JSON/Parquet) columns ``num`` (id), ``task_type`` (match category), ``value`` (a
list literal ``[reference, cand_1, cand_2, ...]``), ``question``, ``option`` (list literal or
lettered string), ``answer`` (gold letter), ``qa_type``, ``domain``. The Hugging Face copy names
them ``id``, ``taxonomy_level``, ``time_series``; both spellings are read.

Conversion: the reference is the primary ``"reference"``; candidate *k* is the candidate series
named ``"A"``, ``"B"``, ... in order. Options are the ``option`` texts (or the letters when the
row has none); gold = the ``answer`` letter (or the option equal to it). Candidates may differ
in length; values must be finite. A row whose ``split``/``subset`` column names another MMTS
subset (base, inwild, align) is skipped and counted. Task ``"MMTS match"``; subtask =
``task_type``; group = the row id.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tsevo.data.report import RecordError
from tsevo.data.suite import Suite

from ._common import (
    LETTERS,
    Collector,
    SourceReport,
    is_missing,
    letter_index,
    match_option,
    parse_literal,
    resolve_files,
    text_field,
    to_float_list,
)

__all__ = ["load_mmts"]

SOURCE = "mmts"
TASK = "MMTS match"
_OPT_MARK = re.compile(r"(?:^|(?<=\s))\(?([A-J])[).:]\s*")


def _first(row: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in row and not is_missing(row[k]):
            return row[k]
    return None


def _options(rid: str, raw: Any, n_cand: int) -> list[str]:
    if raw is None:
        return list(LETTERS[:n_cand])
    val: Any = raw
    if isinstance(raw, str):
        s = raw.strip()
        if s.startswith(("[", "(", "{")):
            val = parse_literal(rid, "option", s)
        else:
            marks = list(_OPT_MARK.finditer(s))
            if len(marks) >= 2 and [m.group(1) for m in marks] == list(LETTERS[: len(marks)]):
                return [
                    s[m.end() : marks[k + 1].start() if k + 1 < len(marks) else len(s)]
                    .strip()
                    .rstrip(",;")
                    .strip()
                    or m.group(1)
                    for k, m in enumerate(marks)
                ]
            raise RecordError(rid, "option", f"unparsable options {s!r:.60}")
    if isinstance(val, dict):
        val = [f"{k}. {v}" for k, v in val.items()]
    if not isinstance(val, list | tuple):
        raise RecordError(rid, "option", f"expected a list, got {type(val).__name__}")
    return [str(x) for x in val]


def convert_row(row: dict[str, Any], rownum: int) -> dict[str, Any]:
    """Convert one MMTS Match row into a question record."""
    raw_id = _first(row, "num", "id")
    rid = f"{SOURCE}:{raw_id if raw_id is not None else f'row{rownum}'}"
    question = text_field(rid, row, "question")
    value = _first(row, "value", "time_series")
    if value is None:
        raise RecordError(rid, "value", "missing required field")
    value = parse_literal(rid, "value", value)
    if not isinstance(value, list | tuple) or not all(isinstance(v, list | tuple) for v in value):
        raise RecordError(rid, "value", "expected [reference, candidate, ...] (a list of series)")
    if len(value) < 3:
        raise RecordError(rid, "value", f"{len(value)} series; a reference and >= 2 candidates")
    if len(value) - 1 > len(LETTERS):
        raise RecordError(rid, "value", f"{len(value) - 1} candidates; at most {len(LETTERS)}")
    series = {"reference": to_float_list(rid, "value[0]", value[0])}
    cands = []
    for k, v in enumerate(value[1:]):
        name = LETTERS[k]
        series[name] = to_float_list(rid, f"value[{k + 1}]", v)
        cands.append(name)
    options = _options(rid, _first(row, "option", "options"), len(cands))
    answer = _first(row, "answer")
    if answer is None:
        raise RecordError(rid, "answer", "missing required field")
    gold = letter_index(str(answer), len(options))
    if gold is None:
        gold = match_option(options, str(answer))
    if gold is None:
        raise RecordError(rid, "answer", f"{answer!r:.40} is neither a letter nor an option")
    category = _first(row, "task_type", "taxonomy_level")
    meta = {
        "source_id": raw_id,
        "row": rownum,
        "category": category,
        "qa_type": _first(row, "qa_type"),
        "domain": _first(row, "domain"),
        "n_candidates": len(cands),
    }
    return {
        "id": rid,
        "source": SOURCE,
        "task": TASK,
        "subtask": str(category or ""),
        "question": question,
        "context": "",
        "options": options,
        "gold": gold,
        "group": rid,
        "primary": ["reference"],
        "candidates": cands,
        "series": series,
        "metadata": {k: v for k, v in meta.items() if v is not None},
    }


def load_mmts(path: str | Path, *, lenient: bool = False) -> tuple[Suite, SourceReport]:
    """Load MMTS-Bench Match questions (reference series plus lettered candidate series).

    Args:
        path: ``qats_400.csv`` (or a JSONL/JSON/Parquet export), or a folder holding it.
        lenient: Collect malformed rows in the report instead of raising on the first.

    Returns:
        The suite (task ``"MMTS match"``) and a :class:`SourceReport`.

    Raises:
        FileNotFoundError: When ``path`` does not exist or holds no readable table.
        RecordError: (strict) on the first malformed row, naming the row id and field.
    """
    files = resolve_files(path, name_hint=r"qats|match")
    col = Collector(SOURCE, lenient=lenient)
    for rownum, row in col.rows(files):
        subset = _first(row, "split", "subset")
        if subset is not None and str(subset).strip().lower() != "match":
            col.skip(f"subset={subset}")
            continue
        rec = col.attempt(convert_row, row, rownum)
        if rec is not None:
            col.add(rec)
    return col.finish(SOURCE)
