"""TemporalBench (Weng et al. 2026): labelled JSONL, one row per (series, tier), exploded.

Read shapes (``research/ts_qa_sources.md`` §1; the official files are gated and were not seen,
so this follows public adapter code):

- one row per (series, tier): ``id``, ``tier`` (T1-T4), ``source_dataset``, ``prompt``, plus
  ``labels`` (T1), ``input`` + ``mcq`` (T2/T4) or ``pack`` (T3);
- or one row per series with ``tasks: {"T1": {...}, ...}`` (the TimeClaw repackaging); each tier
  node is read like a row of the first shape.

Conversion:

- **Series.** ``input.history`` (T2/T4), or ``input`` itself, or the JSON object printed after
  ``Input (JSON):`` in the prompt (T1/T3): ``{channel: [values]}``. The main series is the
  ``target`` argument, else a row field ``target``/``target_col``/``main_series``, else the first
  channel named in ``ground_truth`` (only its keys are read), else the first channel. It is the
  primary; the other channels are covariates. ``ground_truth`` values are never read.
- **Future covariates (T2/T4).** ``input.future_covariates`` become covariates named by channel:
  a channel that also has history is extended (history then horizon), a future-only channel holds
  the horizon alone. The context says which covariates run past the end of the main series. A
  future covariate that is the main series itself is rejected (it would leak the answer).
- **Missing values.** NaN/null (e.g. stock-outs in ``sales_censored``) never reach a question:
  each gap is filled by linear interpolation (edges take the nearest observed value; an all-NaN
  channel becomes zeros) and a 0/1 covariate ``<channel>_missing`` marks the filled points.
- **Sub-questions.** T1: one question per ``labels`` key (trend, volatility, seasonality,
  outliers); T2/T4: one per ``mcq`` key (``*_options`` keys are option sets, not questions); T3:
  one per ``pack`` item. Options come from the entry (``options``/``label_space``), else from the
  ``{a, b, c}`` set printed for that question in the prompt. Gold = the label's option
  (case-insensitive). Sub-question text comes from the entry or the prompt line.
- **Context.** The prompt's preamble (text before the question list) with the numeric input
  block replaced by a description of the series provided, plus event text for T3/T4.
- task ``"TemporalBench T<k>"``; subtask = the sub-question key (``trend``, ``S1:A``, ...);
  group = the series id (``sample_id``/``series_id``, else ``id`` without a tier suffix) so all
  sub-questions and tiers of one series share a split.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tsevo.data.report import RecordError
from tsevo.data.suite import Suite

from ._common import (
    Collector,
    SourceReport,
    fill_missing,
    match_option,
    resolve_files,
    to_float_list,
)

__all__ = ["load_temporalbench"]

SOURCE = "temporalbench"
TIERS = ("T1", "T2", "T3", "T4")
_INPUT_MARKER = re.compile(r"Input\s*\(JSON\)\s*:\s*", re.IGNORECASE)
_QLINE = re.compile(r"^\s*(?:Q\s*)?(\d+)\s*[).:]\s*(.+?)\s*\{([^{}]*)\}+\s*\.?\s*$")
_QBLOCK = re.compile(
    r"^\s*(?:Questions\b|Multiple[- ]choice questions|Q\s*1\s*\)|1\s*\)|Subtasks\b)",
    re.IGNORECASE | re.MULTILINE,
)
_OUTBLOCK = re.compile(
    r"^\s*(?:Output format|Return ONLY|Return only|Output only)", re.IGNORECASE | re.MULTILINE
)
_T2_ORDER = ("future_vs_history", "volatility_change", "seasonality_shift")
_TIER_SUFFIX = re.compile(r"[_\-:./]?T[1-4]$", re.IGNORECASE)


# ---------------------------------------------------------------------------- prompt parsing


def _input_block(prompt: str) -> tuple[dict[str, Any] | None, tuple[int, int] | None]:
    """The JSON object after ``Input (JSON):`` and its span in the prompt."""
    m = _INPUT_MARKER.search(prompt)
    if not m:
        return None, None
    start = prompt.find("{", m.end())
    if start < 0:
        return None, None
    try:
        obj, end = json.JSONDecoder().raw_decode(prompt, start)
    except json.JSONDecodeError:
        return None, (m.start(), m.end())
    if not isinstance(obj, dict):
        return None, (m.start(), end)
    return obj, (m.start(), end)


def _option_set(text: str) -> list[str]:
    return [o.strip().strip("\"'").strip() for o in text.split(",") if o.strip().strip("\"'")]


def _prompt_questions(prompt: str) -> list[tuple[str, list[str]]]:
    """``(question text, options)`` for each numbered ``{a, b, c}`` line in the prompt."""
    out = []
    for line in prompt.splitlines():
        m = _QLINE.match(line)
        if m:
            out.append((m.group(2).strip(), _option_set(m.group(3))))
    return out


def _preamble(prompt: str, span: tuple[int, int] | None, series_note: str) -> str:
    text = prompt
    if span is not None:
        text = text[: span[0]] + "Input: " + series_note + "\n" + text[span[1] :]
    cuts = [m.start() for m in (_QBLOCK.search(text), _OUTBLOCK.search(text)) if m]
    if cuts:
        text = text[: min(cuts)]
    text = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", text).strip()
    if "Input: " + series_note not in text:
        text = (text + "\n" if text else "") + "Input: " + series_note
    return text


# ---------------------------------------------------------------------------- series


def _channels(rid: str, fld: str, obj: Any) -> dict[str, list[float]]:
    if not isinstance(obj, dict) or not obj:
        raise RecordError(rid, fld, "expected a non-empty mapping channel -> values")
    out: dict[str, list[float]] = {}
    for k, v in obj.items():
        if not isinstance(v, list | tuple):
            continue  # scalar annotations (units, horizon) are not series
        out[str(k)] = to_float_list(rid, f"{fld}.{k}", v, allow_nan=True)
    if not out:
        raise RecordError(rid, fld, "no numeric channel")
    return out


def _row_target(node: dict[str, Any], row: dict[str, Any]) -> str | None:
    for src in (node, row, node.get("meta") or {}, row.get("meta") or {}):
        if isinstance(src, dict):
            for key in ("target", "target_col", "main_series", "target_channel"):
                v = src.get(key)
                if isinstance(v, str) and v:
                    return v
    gt = node.get("ground_truth")
    if isinstance(gt, dict) and gt:
        return str(next(iter(gt)))  # keys only: the values are never read
    return None


def _build_series(
    rid: str, node: dict[str, Any], row: dict[str, Any], prompt: str, target: str | None
) -> tuple[dict[str, list[float]], str, list[str], str, tuple[int, int] | None]:
    """Return (series, primary, covariates, note for the context, input span in prompt)."""
    inp = node.get("input") if isinstance(node.get("input"), dict) else None
    span = None
    if inp is None:
        inp, span = _input_block(prompt)
        if inp is None:
            fld = "prompt" if span is not None else "input"
            why = "unparsable Input (JSON) block" if span is not None else "no input series"
            raise RecordError(rid, fld, why)
    if "history" in inp:
        history = _channels(rid, "input.history", inp["history"])
        fut_raw = inp.get("future_covariates")
        future = _channels(rid, "input.future_covariates", fut_raw) if fut_raw else {}
    else:
        history = _channels(rid, "input", inp)
        future = {}
    main = target or _row_target(node, row)
    if main is None or main not in history:
        if target is not None:
            raise RecordError(rid, "input", f"target channel {target!r} not in {list(history)}")
        main = next(iter(history))
    if main in future:
        raise RecordError(rid, "input.future_covariates", f"holds the main series {main!r}")

    series: dict[str, list[float]] = {}
    masks: dict[str, list[float]] = {}
    extended: list[str] = []
    future_only: list[str] = []
    names = [main, *(c for c in history if c != main), *(c for c in future if c not in history)]
    for name in names:
        hist_vals = history.get(name)
        fut_vals = future.get(name)
        parts = [p for p in (hist_vals, fut_vals) if p is not None]
        values = [x for p in parts for x in p]
        filled, mask = fill_missing(values)
        if name == main and mask is not None and all(m == 1.0 for m in mask):
            raise RecordError(rid, f"input.{main}", "the main series has no observed value")
        series[name] = filled
        if mask is not None:
            masks[f"{name}_missing"] = mask
        if fut_vals is not None:
            (extended if hist_vals is not None else future_only).append(name)
    for mname, mvals in masks.items():
        if mname in series:
            raise RecordError(rid, "input", f"channel name {mname!r} clashes with a mask name")
        series[mname] = mvals
    covariates = [n for n in series if n != main]

    n_hist = len(series[main])
    note = f"main series '{main}' ({n_hist} steps)"
    others = [c for c in history if c != main]
    if others:
        note += "; covariates " + ", ".join(f"'{c}'" for c in others)
    if extended or future_only:
        horizon = len(next(iter(future.values())))
        if extended:
            note += (
                "; covariates " + ", ".join(f"'{c}'" for c in extended) + f" continue {horizon}"
                " steps past the end of the main series (known future values)"
            )
        if future_only:
            note += (
                "; future-only covariates "
                + ", ".join(f"'{c}'" for c in future_only)
                + f" cover the {horizon} steps after the main series"
            )
    if masks:
        note += (
            "; "
            + ", ".join(f"'{m}'" for m in masks)
            + " mark with 1 the values that were missing (NaN) and were filled by linear"
            " interpolation"
        )
    return series, main, covariates, note + ".", span


# ---------------------------------------------------------------------------- sub-questions


def _entry_options(entry: Any) -> list[str] | None:
    if not isinstance(entry, dict):
        return None
    for key in ("options", "label_space", "Options"):
        v = entry.get(key)
        if isinstance(v, list) and v:
            return [str(x) for x in v]
        if isinstance(v, str) and v.strip():
            return _split_options(v)
    return None


def _split_options(text: str) -> list[str]:
    t = text.strip().strip("{}[]")
    sep = "/" if "/" in t and "," not in t else ","
    return [o.strip().strip("\"'").strip() for o in t.split(sep) if o.strip().strip("\"'")]


def _label_of(entry: Any) -> Any:
    if isinstance(entry, dict):
        for key in ("label", "Label", "answer"):
            if key in entry:
                return entry[key]
        return None
    return entry


def _gold(rid: str, fld: str, options: list[str], label: Any) -> int:
    if label is None:
        raise RecordError(rid, fld, "missing label")
    if not isinstance(label, str):
        raise RecordError(rid, fld, f"expected an option string, got {type(label).__name__}")
    g = match_option(options, label)
    if g is None:
        # "A" for an option written "A Morning/Noon"
        m = re.fullmatch(r"\s*([A-J])\s*", label)
        if m:
            hits = [i for i, o in enumerate(options) if re.match(rf"{m.group(1)}[\s.):]", o)]
            g = hits[0] if len(hits) == 1 else None
    if g is None:
        raise RecordError(rid, fld, f"label {label!r:.40} is not one of the options {options}")
    return g


def _find_prompt_q(
    key: str, pos: int, n_keys: int, pq: list[tuple[str, list[str]]]
) -> tuple[str, list[str]] | None:
    word = key.replace("_", " ").lower()
    for text, opts in pq:
        head = text.lower().rstrip(":?").strip()
        if head.startswith(word) or word.startswith(head.split(":")[0].strip() or "\x00"):
            return text, opts
    if len(pq) == n_keys and pos < len(pq):
        return pq[pos]
    return None


def _subquestions(
    rid: str, tier: str, node: dict[str, Any], prompt: str, main: str
) -> list[tuple[str, str, list[str], int, dict[str, Any]]]:
    """(key, question text, options, gold, extra metadata) for each sub-question of a node."""
    pq = _prompt_questions(prompt)
    out: list[tuple[str, str, list[str], int, dict[str, Any]]] = []
    if tier == "T3":
        pack = node.get("pack")
        if not isinstance(pack, list) or not pack:
            raise RecordError(rid, "pack", "missing or empty pack")
        keys_seen: set[str] = set()
        for i, item in enumerate(pack):
            fld = f"pack[{i}]"
            if not isinstance(item, dict):
                raise RecordError(rid, fld, "pack item is not an object")
            key = str(item.get("task_id") or item.get("id") or i)
            if key in keys_seen:
                key = f"{key}#{i}"
            keys_seen.add(key)
            q = item.get("question") or item.get("Question")
            if not isinstance(q, str) or not q.strip():
                raise RecordError(rid, f"{fld}.question", "missing question")
            opts = _entry_options(item)
            if opts is None:
                m = re.search(r"Options?\s*:\s*(.+)$", q, re.IGNORECASE | re.DOTALL)
                if m:
                    opts = _split_options(m.group(1))
                    q = q[: m.start()].strip()
            if not opts:
                raise RecordError(rid, f"{fld}.options", "no options for this question")
            gold = _gold(rid, f"{fld}.label", opts, _label_of(item))
            extra = {"name": item["name"]} if isinstance(item.get("name"), str) else {}
            out.append((key, q.strip(), opts, gold, extra))
        return out

    block_key = "labels" if tier == "T1" else "mcq"
    block = node.get(block_key)
    if block is None and tier == "T1":
        block = node.get("mcq")
        block_key = "mcq"
    if not isinstance(block, dict) or not block:
        raise RecordError(rid, block_key, "missing or empty")
    keys = [k for k in block if not str(k).endswith("_options")]
    if tier in ("T2", "T4"):
        keys.sort(key=lambda k: _T2_ORDER.index(k) if k in _T2_ORDER else len(_T2_ORDER))
    for pos, key in enumerate(keys):
        entry = block[key]
        fld = f"{block_key}.{key}"
        found = _find_prompt_q(str(key), pos, len(keys), pq)
        opts = _entry_options(entry)
        if opts is None and f"{key}_options" in block:
            raw = block[f"{key}_options"]
            opts = [str(x) for x in raw] if isinstance(raw, list) else _split_options(str(raw))
        if opts is None and found is not None:
            opts = found[1]
        if not opts:
            raise RecordError(rid, f"{fld}.options", "no options in the entry or the prompt")
        q = entry.get("question") if isinstance(entry, dict) else None
        if not isinstance(q, str) or not q.strip():
            if found is not None:
                q = found[0]
            else:
                q = key.replace("_", " ").capitalize()
            if tier == "T1":
                q = f"{q.rstrip(':?').strip()} of the main series ({main})?"
        gold = _gold(rid, fld, opts, _label_of(entry))
        out.append((str(key), q.strip(), opts, gold, {}))
    return out


# ---------------------------------------------------------------------------- rows


def _nodes(row: dict[str, Any], rownum: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(row id, tier, node) for each tier in a row of either shape."""
    raw_id = row.get("id", row.get("sample_id"))
    if raw_id is None or isinstance(raw_id, bool) or not isinstance(raw_id, int | str):
        raise RecordError(f"<row {rownum}>", "id", "missing or invalid id")
    row_id = str(raw_id)
    tasks = row.get("tasks")
    if isinstance(tasks, dict):
        return [(f"{row_id}:{t}", str(t), n) for t, n in tasks.items() if isinstance(n, dict)]
    tier = row.get("tier")
    if not isinstance(tier, str):
        raise RecordError(f"{SOURCE}:{row_id}", "tier", "missing or invalid tier")
    return [(row_id, tier, row)]


def _group(row: dict[str, Any]) -> str:
    for key in ("sample_id", "series_id"):
        v = row.get(key)
        if isinstance(v, int | str) and not isinstance(v, bool) and str(v):
            return f"{SOURCE}:{v}"
    return f"{SOURCE}:{_TIER_SUFFIX.sub('', str(row.get('id')))}"


def convert_node(
    row: dict[str, Any],
    node_id: str,
    tier: str,
    node: dict[str, Any],
    target: str | None,
) -> list[dict[str, Any]]:
    """Convert one (series, tier) node into one record per sub-question."""
    rid = f"{SOURCE}:{node_id}"
    tier = tier.upper().strip()
    if tier not in TIERS:
        raise RecordError(rid, "tier", f"unknown tier {tier!r}")
    prompt = node.get("prompt") or node.get("task") or ""
    if not isinstance(prompt, str):
        raise RecordError(rid, "prompt", f"expected a string, got {type(prompt).__name__}")
    series, main, covariates, note, span = _build_series(rid, node, row, prompt, target)
    context = _preamble(prompt, span, note)
    for key in ("context", "event", "upcoming_event"):
        ev = node.get(key)
        if isinstance(ev, str) and ev.strip() and ev.strip() not in context:
            context += f"\nUpcoming event (context): {ev.strip()}"
    subs = _subquestions(rid, tier, node, prompt, main)
    dataset = row.get("source_dataset") or (row.get("meta") or {}).get("dataset") or ""
    base_meta: dict[str, Any] = {"tier": tier, "row_id": node_id, "main_series": main}
    if dataset:
        base_meta["source_dataset"] = str(dataset)
    for key in ("history_end", "cluster_start"):
        if isinstance(node.get(key), str | int | float):
            base_meta[key] = node[key]
    group = _group(row)
    return [
        {
            "id": f"{rid}:{key}",
            "source": SOURCE,
            "task": f"TemporalBench {tier}",
            "subtask": key,
            "question": q,
            "context": context,
            "options": opts,
            "gold": gold,
            "group": group,
            "primary": [main],
            "covariates": covariates,
            "series": series,
            "metadata": {**base_meta, "key": key, **extra},
        }
        for key, q, opts, gold, extra in subs
    ]


def load_temporalbench(
    path: str | Path,
    *,
    lenient: bool = False,
    tiers: Sequence[str] = TIERS,
    target: str | None = None,
) -> tuple[Suite, SourceReport]:
    """Load TemporalBench T1-T4 multiple-choice sub-questions (never the forecast targets).

    Args:
        path: The labelled JSONL file (``task_merged_dev_with_labels_tiers.jsonl``), a JSON list
            of per-series rows (``task_modified.json``), or a folder of them.
        lenient: Collect malformed rows in the report instead of raising on the first.
        tiers: Tiers to keep; rows of other tiers are skipped and counted.
        target: Name of the main channel, overriding the per-row choice.

    Returns:
        The suite (tasks ``"TemporalBench T1"`` ... ``"TemporalBench T4"``) and a
        :class:`SourceReport`. A row that cannot be read counts as one rejected record.

    Raises:
        FileNotFoundError: When ``path`` does not exist or holds no JSON/JSONL file.
        RecordError: (strict) on the first malformed row, naming the row id and field.
    """
    wanted = {t.upper() for t in tiers}
    files = resolve_files(path, suffixes=(".jsonl", ".json"))
    col = Collector(SOURCE, lenient=lenient)
    for rownum, row in col.rows(files):
        for node_id, tier, node in col.attempt(_nodes, row, rownum) or ():
            if tier.upper().strip() not in wanted and tier.upper().strip() in TIERS:
                col.skip(f"tier {tier.upper().strip()} not requested")
                continue
            for rec in col.attempt(convert_node, row, node_id, tier, node, target) or ():
                col.add(rec)
    return col.finish(SOURCE)
