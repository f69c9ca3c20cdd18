"""TimeSeriesExam (Cai et al. 2024): ``qa_dataset.json``, a JSON list of question dicts.

Conversion (``research/ts_qa_sources.md`` §2):

- question text = ``question``; the hint fields ``question_hint``, ``relevant_concepts`` and the
  answer-format instruction ``format_hint`` are dropped (TimeEvo adds no hand-written prompts).
- series: ``ts`` becomes the single primary ``"ts"``; ``ts1`` + ``ts2`` become two primaries
  ``"ts1"``, ``"ts2"`` (lengths may differ).
- options = ``options`` (numbers, which the real file has for amplitude/period/noise-level
  questions, are written as their shortest round-trip text, e.g. ``4.52``); gold = the index of
  ``answer`` in ``options``.
- task ``"TimeSeriesExam"``; subtask ``"<category>/<subcategory>"``; ``tid``, ``difficulty``,
  ``question_type`` and the original id go to metadata.
- group = the question id (every question has its own series; a template-level split is the
  stricter option: group by ``metadata["tid"]`` yourself).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tsevo.data.report import RecordError
from tsevo.data.suite import Suite

from ._common import Collector, SourceReport, match_option, resolve_files, to_float_list

__all__ = ["load_timeseriesexam"]

SOURCE = "timeseriesexam"
TASK = "TimeSeriesExam"


def _option_text(rid: str, fld: str, v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool) or v is None or not isinstance(v, int | float):
        raise RecordError(rid, fld, f"expected text or a number, got {v!r:.40}")
    if isinstance(v, float):
        if not math.isfinite(v):
            raise RecordError(rid, fld, f"non-finite value {v!r}")
        return repr(v)
    return str(v)


def convert_row(row: dict[str, Any], rownum: int) -> dict[str, Any]:
    """Convert one TimeSeriesExam row into a question record (raises :class:`RecordError`)."""
    raw_id = row.get("id")
    if raw_id is None or isinstance(raw_id, bool) or not isinstance(raw_id, int | str):
        raise RecordError(f"<row {rownum}>", "id", "missing or invalid id")
    rid = f"{SOURCE}:{raw_id}"
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RecordError(rid, "question", "missing or empty question")
    opts_raw = row.get("options")
    if not isinstance(opts_raw, list):
        raise RecordError(rid, "options", "missing or not a list")
    options = [_option_text(rid, f"options[{i}]", o) for i, o in enumerate(opts_raw)]
    if "answer" not in row or row["answer"] is None:
        raise RecordError(rid, "answer", "missing required field")
    gold = match_option(options, _option_text(rid, "answer", row["answer"]))
    if gold is None:
        raise RecordError(rid, "answer", f"{row['answer']!r:.60} is not one of the options")

    if "ts" in row and ("ts1" in row or "ts2" in row):
        raise RecordError(rid, "ts", "row has both ts and ts1/ts2")
    if "ts" in row:
        series = {"ts": to_float_list(rid, "ts", row["ts"])}
    elif "ts1" in row and "ts2" in row:
        series = {
            "ts1": to_float_list(rid, "ts1", row["ts1"]),
            "ts2": to_float_list(rid, "ts2", row["ts2"]),
        }
    else:
        raise RecordError(rid, "ts", "no series (expected ts, or ts1 and ts2)")

    category = row.get("category") or ""
    subcategory = row.get("subcategory") or ""
    meta = {
        "source_id": raw_id,
        "tid": row.get("tid"),
        "difficulty": row.get("difficulty"),
        "question_type": row.get("question_type"),
        "category": category,
        "subcategory": subcategory,
    }
    return {
        "id": rid,
        "source": SOURCE,
        "task": TASK,
        "subtask": f"{category}/{subcategory}" if category or subcategory else "",
        "question": question,
        "context": "",
        "options": options,
        "gold": gold,
        "group": rid,
        "primary": list(series),
        "series": series,
        "metadata": {k: v for k, v in meta.items() if v is not None},
    }


def load_timeseriesexam(path: str | Path, *, lenient: bool = False) -> tuple[Suite, SourceReport]:
    """Load TimeSeriesExam questions from ``qa_dataset.json`` (or a folder holding it).

    Args:
        path: The JSON file, or a folder searched for ``*.json`` files (``qa_dataset*`` first).
        lenient: Collect malformed rows in the report instead of raising on the first.

    Returns:
        The suite (task ``"TimeSeriesExam"``) and a :class:`SourceReport`.

    Raises:
        FileNotFoundError: When ``path`` does not exist or holds no JSON file.
        RecordError: (strict) on the first malformed row, naming the row id and field.
    """
    files = resolve_files(path, suffixes=(".json", ".jsonl"), name_hint=r"qa")
    col = Collector(SOURCE, lenient=lenient)
    for rownum, row in col.rows(files):
        rec = col.attempt(convert_row, row, rownum)
        if rec is not None:
            col.add(rec)
    return col.finish(SOURCE)
