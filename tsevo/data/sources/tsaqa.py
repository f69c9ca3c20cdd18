"""TSAQA (Jing et al. 2026): data-transformation questions with inline candidate arrays.

Read shape (``research/ts_qa_sources.md`` §6, from public adapter code; the data was not seen):
Parquet (or JSONL/JSON/CSV) rows with ``question``, ``answer`` (a letter), ``question_type``,
``task``, ``domain``, ``dataset``, ``meta_info``, ``raw_ts`` (JSON string) and/or ``input_ts``
(list literal).

Conversion:

- Only ``task == "data_transformation"`` multiple-choice rows; other tasks and question types
  are skipped and counted in the report. With ``exclude_sunspot=True`` rows whose ``dataset``
  mentions sunspot (flagged as contaminated by a third-party pipeline) are skipped too;
  otherwise they are kept with ``metadata["contaminated_sunspot"] = True``.
- Candidates: each ``A. [..]`` / ``B) [..]`` array in the question text becomes the candidate
  series ``"A"``, ``"B"``, ...; the text keeps placeholders (``A. [series A]``). A nested
  candidate (e.g. wavelet approximation and detail coefficients) is concatenated and its part
  lengths go to ``metadata["candidate_parts"]``.
- Primary ``"input"``: ``input_ts``, else ``raw_ts``, else the one unlettered array in the text
  (replaced by ``[input series]``). A single-column 2-D input is flattened; a multichannel input is
  rejected.
- Options = the candidate letters; gold = the ``answer`` letter; context = ``meta_info``.
- Task ``"TSAQA data transformation"``; subtask = ``domain``; group = hash of the input series.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tsevo.data.report import RecordError
from tsevo.data.suite import Suite
from tsevo.hashing import series_hash

from ._common import (
    LETTERS,
    Collector,
    SourceReport,
    find_arrays,
    is_missing,
    letter_index,
    parse_literal,
    resolve_files,
    text_field,
    to_float_list,
)

__all__ = ["load_tsaqa"]

SOURCE = "tsaqa"
TASK = "TSAQA data transformation"
_LETTER_BEFORE = re.compile(r"(?:^|(?<=[\s(]))\(?([A-J])\s*[.):]\s*$")


def _flatten(rid: str, fld: str, v: Any) -> tuple[list[float], list[int] | None]:
    v = parse_literal(rid, fld, v)
    if isinstance(v, list | tuple) and v and all(isinstance(x, list | tuple) for x in v):
        if any(isinstance(y, list | tuple) for x in v for y in x):
            raise RecordError(rid, fld, "more than 2-D array")
        parts = [len(x) for x in v]
        flat = [y for x in v for y in x]
        return to_float_list(rid, fld, flat), parts
    return to_float_list(rid, fld, v), None


def _input_series(rid: str, v: Any, fld: str) -> list[float]:
    v = parse_literal(rid, fld, v)
    if isinstance(v, list | tuple) and v and all(isinstance(x, list | tuple) for x in v):
        if all(len(x) == 1 for x in v):
            v = [x[0] for x in v]
        elif len(v) == 1:
            v = v[0]
        else:
            raise RecordError(rid, fld, "multichannel input is not supported for this task")
    return to_float_list(rid, fld, v)


def convert_row(row: dict[str, Any], rownum: int) -> dict[str, Any]:
    """Convert one TSAQA data-transformation row into a question record."""
    raw_id = next((row[k] for k in ("id", "idx", "uid") if not is_missing(row.get(k))), None)
    rid = f"{SOURCE}:{raw_id if raw_id is not None else f'row{rownum}'}"
    text = text_field(rid, row, "question")
    spans = find_arrays(text)
    cands: dict[str, list[float]] = {}
    parts: dict[str, list[int]] = {}
    unlettered: list[tuple[int, int, Any]] = []
    pieces: list[tuple[int, int, str]] = []
    for s, e, v in spans:
        m = _LETTER_BEFORE.search(text[max(0, s - 6) : s])
        if m is None:
            if v is not None:
                unlettered.append((s, e, v))
            elif e == len(text):
                raise RecordError(rid, "question", "unbalanced brackets")
            continue
        letter = m.group(1)
        if v is None:
            raise RecordError(rid, f"question.{letter}", "unparsable candidate array")
        if letter in cands:
            raise RecordError(rid, f"question.{letter}", "candidate letter repeated")
        vals, p = _flatten(rid, f"question.{letter}", v)
        cands[letter] = vals
        if p is not None:
            parts[letter] = p
        pieces.append((s, e, f"[series {letter}]"))
    letters = list(cands)
    if len(letters) < 2:
        raise RecordError(rid, "question", f"{len(letters)} candidate array(s); 2 or more needed")
    if letters != list(LETTERS[: len(letters)]):
        raise RecordError(
            rid, "question", f"candidate letters {letters} are not A, B, ... in order"
        )

    inp_raw = next((row[k] for k in ("input_ts", "raw_ts") if not is_missing(row.get(k))), None)
    if inp_raw is not None:
        input_field = "input_ts" if not is_missing(row.get("input_ts")) else "raw_ts"
        inp = _input_series(rid, inp_raw, input_field)
        for s, e, _ in unlettered:
            pieces.append((s, e, "[input series]"))
    elif len(unlettered) == 1:
        s, e, v = unlettered[0]
        input_field = "question"
        inp = _input_series(rid, v, "question.input")
        pieces.append((s, e, "[input series]"))
    else:
        raise RecordError(rid, "input_ts", "no input series (input_ts, raw_ts or one text array)")
    for s, e, ph in sorted(pieces, reverse=True):
        text = text[:s] + ph + text[e:]

    answer = row.get("answer")
    gold = letter_index(str(answer), len(letters)) if not is_missing(answer) else None
    if gold is None:
        raise RecordError(rid, "answer", f"{answer!r:.30} is not a candidate letter")
    dataset = row.get("dataset")
    meta: dict[str, Any] = {
        "source_id": raw_id,
        "row": rownum,
        "domain": row.get("domain"),
        "dataset": str(dataset) if not is_missing(dataset) else None,
        "input_field": input_field,
    }
    if parts:
        meta["candidate_parts"] = parts
    if meta["dataset"] and "sunspot" in meta["dataset"].lower():
        meta["contaminated_sunspot"] = True
    context = row.get("meta_info")
    return {
        "id": rid,
        "source": SOURCE,
        "task": TASK,
        "subtask": str(row.get("domain") or ""),
        "question": text.strip(),
        "context": context.strip() if isinstance(context, str) else "",
        "options": letters,
        "gold": gold,
        "group": f"{SOURCE}:{series_hash(inp, framing='separator', n=12)}",
        "primary": ["input"],
        "candidates": letters,
        "series": {"input": inp, **cands},
        "metadata": {k: v for k, v in meta.items() if v is not None},
    }


def load_tsaqa(
    path: str | Path, *, lenient: bool = False, exclude_sunspot: bool = False
) -> tuple[Suite, SourceReport]:
    """Load TSAQA data-transformation questions (inline candidate arrays become candidates).

    Args:
        path: A Parquet/JSONL/JSON/CSV file (e.g. ``test.parquet``) or a folder of them.
        lenient: Collect malformed rows in the report instead of raising on the first.
        exclude_sunspot: Skip (and count) rows whose ``dataset`` mentions sunspot.

    Returns:
        The suite (task ``"TSAQA data transformation"``) and a :class:`SourceReport`; other
        tasks' rows are counted in ``skipped``.

    Raises:
        FileNotFoundError: When ``path`` does not exist or holds no readable table.
        RecordError: (strict) on the first malformed row, naming the row id and field.
    """
    files = resolve_files(path)
    col = Collector(SOURCE, lenient=lenient)
    for rownum, row in col.rows(files):
        task = row.get("task")
        if str(task).strip().lower() != "data_transformation":
            col.skip(f"task={task}")
            continue
        qtype = row.get("question_type")
        if not is_missing(qtype) and str(qtype).strip().lower() not in (
            "multiple_choices",
            "multiple_choice",
            "multiple-choice",
        ):
            col.skip(f"data_transformation question_type={qtype}")
            continue
        ds = row.get("dataset")
        if exclude_sunspot and not is_missing(ds) and "sunspot" in str(ds).lower():
            col.skip("dataset=sunspot (exclude_sunspot)")
            continue
        rec = col.attempt(convert_row, row, rownum)
        if rec is not None:
            col.add(rec)
    return col.finish(SOURCE)
