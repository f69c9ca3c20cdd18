"""Merrill et al. 2024 (TSandLanguage): JSONL rows of 4-way multiple-choice questions.

Two row shapes are read (``research/ts_qa_sources.md`` §3):

- **QA MCQ** (verified on the 270-row subset): ``uuid``, ``question``, ``options`` (and/or
  ``option_0..3``), ``category``, ``label`` (gold index), ``series``, ``description_tiny``,
  ``metadata`` {start, end, units, frequency}. Question text = ``question``; context = the
  description and metadata, as the original evaluation prompt shows them
  (``Description: ...`` / ``MetaData: ...``). A row whose ``series`` holds two lists (the
  unverified ``MCQ_2_TS`` shape) gets two primaries ``"series1"``, ``"series2"``.
- **Etiological** (``TS_Dataset_MCQ``, from the public code, not verified): ``series``,
  ``options`` (4 descriptions), no question and no label. ``make_mcq.py`` puts the true
  description first, so gold = ``options[0]``; the options are shuffled deterministically per
  uuid and the question is "Which description most likely produced this series?". Only read when
  ``etiological=True``; otherwise such rows are skipped and counted.

``gpt_pred`` (the subset's model prediction) is dropped. Task ``"Merrill"``; subtask = the QA
``category`` (or ``"etiological"``); group = ``uuid`` (one series carries several questions).
Ids are ``merrill:<uuid>:<hash of question and options>``; an exact repeat gets ``~2``, ``~3``
appended so it reaches the suite's fingerprint dedup and is reported as a duplicate.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from tsevo.data.report import RecordError
from tsevo.data.suite import Suite

from ._common import (
    Collector,
    SourceReport,
    is_missing,
    resolve_files,
    short_hash,
    text_field,
    to_float_list,
)

__all__ = ["load_merrill"]

SOURCE = "merrill"
TASK = "Merrill"
ETIOLOGICAL_QUESTION = "Which description most likely produced this series?"


def _options(rid: str, row: dict[str, Any]) -> list[str]:
    opts = row.get("options")
    numbered = [row.get(f"option_{i}") for i in range(10) if f"option_{i}" in row]
    if opts is None:
        if not numbered:
            raise RecordError(rid, "options", "missing required field")
        opts = numbered
    if not isinstance(opts, list):
        raise RecordError(rid, "options", f"expected a list, got {type(opts).__name__}")
    for i, o in enumerate(opts):
        if not isinstance(o, str):
            raise RecordError(rid, f"options[{i}]", f"expected a string, got {type(o).__name__}")
    if numbered and numbered != opts:
        raise RecordError(rid, "option_0..3", "option_i fields disagree with options")
    return list(opts)


def _series(rid: str, raw: Any) -> dict[str, list[float]]:
    if is_missing(raw):
        raise RecordError(rid, "series", "missing required field")
    if isinstance(raw, list) and raw and all(isinstance(x, list) for x in raw):
        if len(raw) != 2:
            raise RecordError(rid, "series", f"{len(raw)} nested series; 1 or 2 expected")
        return {
            "series1": to_float_list(rid, "series[0]", raw[0]),
            "series2": to_float_list(rid, "series[1]", raw[1]),
        }
    return {"series": to_float_list(rid, "series", raw)}


def _context(row: dict[str, Any]) -> str:
    parts = []
    desc = row.get("description_tiny")
    if isinstance(desc, str) and desc.strip():
        parts.append(f"Description: {' '.join(desc.split())}")
    meta = row.get("metadata")
    if isinstance(meta, dict) and meta:
        parts.append("MetaData: " + ", ".join(f"{k}: {v}" for k, v in meta.items()))
    return "\n".join(parts)


def convert_row(row: dict[str, Any], rownum: int, *, etiological: bool) -> dict[str, Any] | None:
    """Convert one Merrill row; returns None for an etiological row when those are not wanted."""
    uuid = row.get("uuid")
    if not isinstance(uuid, str) or not uuid.strip():
        raise RecordError(f"<row {rownum}>", "uuid", "missing or invalid uuid")
    rid0 = f"{SOURCE}:{uuid}"
    options = _options(rid0, row)
    is_qa = "question" in row or "label" in row
    if not is_qa and not etiological:
        return None
    if is_qa:
        question = text_field(rid0, row, "question")
        label = row.get("label")
        if label is None:
            raise RecordError(rid0, "label", "missing required field")
        if isinstance(label, bool) or not isinstance(label, int):
            raise RecordError(rid0, "label", f"expected an int index, got {label!r:.30}")
        if not 0 <= label < len(options):
            raise RecordError(rid0, "label", f"index {label} out of range for {len(options)}")
        gold = label
        subtask = str(row.get("category") or "")
    else:
        question = ETIOLOGICAL_QUESTION
        order = list(range(len(options)))
        random.Random(f"merrill-etiological:{uuid}").shuffle(order)
        options = [options[i] for i in order]
        gold = order.index(0)
        subtask = "etiological"
    rid = f"{rid0}:{short_hash(question, options, n=8)}"
    series = _series(rid, row.get("series"))
    meta: dict[str, Any] = {"uuid": uuid, "row": rownum}
    if subtask:
        meta["category"] = subtask
    if isinstance(row.get("metadata"), dict):
        meta["source_metadata"] = row["metadata"]
    return {
        "id": rid,
        "source": SOURCE,
        "task": TASK,
        "subtask": subtask,
        "question": question,
        "context": _context(row),
        "options": options,
        "gold": gold,
        "group": rid0,
        "primary": list(series),
        "series": series,
        "metadata": meta,
    }


def load_merrill(
    path: str | Path, *, lenient: bool = False, etiological: bool = False
) -> tuple[Suite, SourceReport]:
    """Load Merrill et al. multiple-choice questions from JSONL files.

    Args:
        path: A ``.jsonl``/``.json`` file (the ``.json`` files are JSONL) or a folder of them.
        lenient: Collect malformed rows in the report instead of raising on the first.
        etiological: Also read etiological rows (no ``question``/``label``; gold = the first
            option per the public ``make_mcq.py``, which is unverified on the real file).

    Returns:
        The suite (task ``"Merrill"``) and a :class:`SourceReport`.

    Raises:
        FileNotFoundError: When ``path`` does not exist or holds no JSON/JSONL file.
        RecordError: (strict) on the first malformed row, naming the row id and field.
    """
    files = resolve_files(path, suffixes=(".jsonl", ".json"))
    col = Collector(SOURCE, lenient=lenient)
    seen: dict[str, int] = {}
    for rownum, row in col.rows(files):
        try:
            rec = convert_row(row, rownum, etiological=etiological)
        except RecordError as err:
            col.fail(err)
            continue
        if rec is None:
            col.skip("etiological row (etiological=False)")
            continue
        n = seen.get(rec["id"], 0) + 1
        seen[rec["id"]] = n
        if n > 1:
            rec["id"] = f"{rec['id']}~{n}"
        col.add(rec)
    return col.finish(SOURCE)
