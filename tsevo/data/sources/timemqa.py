"""Time-MQA / TSQA (Kong et al. 2025): anomaly-detection and classification rows, series in text.

Read shape (``research/ts_qa_sources.md`` §4; the data is gated and was not seen, so this follows
public loader code): CSV (or JSONL/JSON/Parquet) rows with ``QA_list`` (a JSON-ish
``"question": ..., "answer": ...`` fragment, sometimes without braces, sometimes a list of such
pairs), ``application_domain`` and ``task_type``; or plain ``question``/``answer`` columns.

Conversion:

- **Task.** ``task_type`` (or, when absent, the file name) containing "anomal" gives
  ``"TimeMQA anomaly"``, "classif" gives ``"TimeMQA classification"``; forecasting, imputation and
  open-ended rows are skipped on purpose and counted in the report. A folder is searched for files
  whose names mention anomaly or classification only.
- **Series.** Bracketed numeric arrays of at least ``min_length`` values are cut out of the
  question text and replaced by placeholders ``[series]`` (``[series1]``, ``[series2]`` for two
  arrays). A nested array is multichannel: channels are the outer lists when there are no more
  of them than time steps (else the array is read time-major and transposed). One channel gives
  the primary ``"series"``; two give two primaries; more give the primary ``"channel1"`` and
  covariates ``"channel2"``, ... Values must be finite (no filling). Group = hash of the series.
- **Options.** Lettered options in the text (``A) ...``/``A. ...``), an ``Options:``/``Choices:``
  list, or a bracketed list of quoted strings. Otherwise: anomaly rows use ``Yes``/``No`` when the
  answer opens with yes/no/true/false, else ``Normal``/``Anomalous`` from the answer's wording;
  classification rows use the label vocabulary (the distinct short answers of rows with the same
  domain and question template, else the same domain), sorted, 2-10 labels.
- **Gold.** A letter, an option equal to the answer, or the one option named in the answer.
- subtask = ``application_domain``; the raw answer text and task_type go to metadata.
"""

from __future__ import annotations

import ast
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from tsevo.data.report import RecordError
from tsevo.data.suite import Suite
from tsevo.data.validation import MAX_OPTIONS
from tsevo.hashing import series_hash

from ._common import (
    LETTERS,
    Collector,
    SourceReport,
    find_arrays,
    is_missing,
    iter_rows,
    letter_index,
    match_option,
    norm_text,
    resolve_files,
    to_float_list,
)

__all__ = ["load_timemqa"]

SOURCE = "timemqa"
TASK_ANOMALY = "TimeMQA anomaly"
TASK_CLASSIFICATION = "TimeMQA classification"
_QA_RE = re.compile(
    r"""^\s*\{?\s*["']question["']\s*:\s*["'](?P<q>.*)["']\s*,\s*["']answer["']\s*:\s*["'](?P<a>.*?)["']\s*\}?\s*$""",
    re.DOTALL,
)
_LETTER_MARK = re.compile(r"(?:^|(?<=\s))\(?([A-J])[).:]\s+", re.MULTILINE)
_LIST_INTRO = re.compile(
    r"(?:options|choices|categories|classes|labels|candidates)\s*(?:are|include|is)?\s*[:\-]\s*"
    r"(?P<body>[^\n?]+)",
    re.IGNORECASE,
)
_YES = re.compile(r"^\W*(yes|true)\b", re.IGNORECASE)
_NO = re.compile(r"^\W*(no|false)\b", re.IGNORECASE)
_NEG_ANOM = re.compile(
    r"\b(no|not|without|absence of|free of|none|doesn'?t|does not|isn'?t|is not)\b[^.]{0,40}"
    r"\b(anomal\w*|abnormal\w*|outliers?)",
    re.IGNORECASE,
)
_ANOM = re.compile(r"\b(anomal\w*|abnormal\w*|outliers?)\b", re.IGNORECASE)
_NORMAL = re.compile(r"(?<!ab)\bnormal\b", re.IGNORECASE)
_ANSWER_PREFIX = re.compile(
    r"^\s*(?:the\s+)?(?:answer|label|class|category|activity|result)\s*(?:is|:)\s*", re.IGNORECASE
)
_MAX_LABEL_WORDS = 6


# ---------------------------------------------------------------------------- QA parsing


def parse_qa(rid: str, raw: Any) -> list[tuple[str, str]]:
    """Parse a ``QA_list`` cell into ``(question, answer)`` pairs."""
    obj: Any = raw
    if isinstance(raw, str):
        s = raw.strip()
        obj = None
        for cand in (s, "{" + s + "}"):
            try:
                obj = json.loads(cand)
                break
            except json.JSONDecodeError:
                pass
        if obj is None:
            try:
                obj = ast.literal_eval(s)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                m = _QA_RE.match(s)
                if not m:
                    raise RecordError(
                        rid, "QA_list", "unparsable question/answer fragment"
                    ) from None
                obj = {"question": m.group("q"), "answer": m.group("a")}
    items = obj if isinstance(obj, list) else [obj]
    out = []
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise RecordError(rid, f"QA_list[{i}]", "not a question/answer object")
        q, a = it.get("question"), it.get("answer")
        if not isinstance(q, str) or not q.strip():
            raise RecordError(rid, f"QA_list[{i}].question", "missing question")
        if not isinstance(a, str | int | float) or isinstance(a, bool) or is_missing(a):
            raise RecordError(rid, f"QA_list[{i}].answer", "missing answer")
        out.append((q, str(a)))
    if not out:
        raise RecordError(rid, "QA_list", "no question/answer pair")
    return out


# ---------------------------------------------------------------------------- series


def extract_series(
    rid: str, text: str, min_length: int
) -> tuple[str, dict[str, list[float]], list[str], list[str]]:
    """Cut numeric arrays out of ``text``: (text with placeholders, series, primary, covariates)."""
    spans = find_arrays(text)
    big = [(s, e, v) for s, e, v in spans if v is not None and _size(v) >= min_length]
    if not big:
        if any(v is None and e == len(text) for s, e, v in spans):
            raise RecordError(rid, "question", "unbalanced brackets around the series")
        raise RecordError(rid, "question", f"no numeric array of >= {min_length} values")
    if len(big) > 2:
        raise RecordError(rid, "question", f"{len(big)} series arrays; at most 2 supported")
    series: dict[str, list[float]] = {}
    primary: list[str] = []
    covariates: list[str] = []
    if len(big) == 1 and not _is_nested(big[0][2]):
        names = ["series"]
    elif len(big) == 1:
        chans = _channels(rid, big[0][2])
        for i, ch in enumerate(chans, 1):
            name = "series" if len(chans) == 1 else f"channel{i}"
            series[name] = ch
            (primary if len(chans) <= 2 or i == 1 else covariates).append(name)
        names = ["series"]
    else:
        names = ["series1", "series2"]
    if not series:
        for name, (_, _, v) in zip(names, big, strict=True):
            if _is_nested(v):
                raise RecordError(rid, "question", "nested array next to another series")
            series[name] = to_float_list(rid, f"question.{name}", v)
            primary.append(name)
    if len(big) == 1 and _is_nested(big[0][2]):
        names = [", ".join(series)]
    out = text
    for (s, e, _), name in reversed(list(zip(big, names, strict=True))):
        out = out[:s] + f"[{name}]" + out[e:]
    return out, series, primary, covariates


def _size(v: Any) -> int:
    return sum(_size(x) for x in v) if isinstance(v, list) else 1


def _is_nested(v: Any) -> bool:
    return isinstance(v, list) and any(isinstance(x, list) for x in v)


def _channels(rid: str, v: list[Any]) -> list[list[float]]:
    if not all(isinstance(x, list) for x in v) or any(_is_nested(x) for x in v):
        raise RecordError(rid, "question", "ragged or more than 2-D series array")
    lengths = {len(x) for x in v}
    if len(lengths) != 1:
        raise RecordError(rid, "question", f"multichannel rows of unequal lengths {lengths}")
    n_outer, n_inner = len(v), lengths.pop()
    rows = v if n_outer <= n_inner else [list(col) for col in zip(*v, strict=True)]
    return [to_float_list(rid, f"question.channel{i + 1}", r) for i, r in enumerate(rows)]


# ---------------------------------------------------------------------------- options


def options_from_text(text: str) -> tuple[list[str], tuple[int, int]] | None:
    """Options written in the text and the span they occupy, or None."""
    marks = list(_LETTER_MARK.finditer(text))
    # longest run A, B, C, ... of markers in order
    for start in range(len(marks)):
        if marks[start].group(1) != "A":
            continue
        run = [marks[start]]
        for m in marks[start + 1 :]:
            if m.group(1) == LETTERS[len(run)]:
                run.append(m)
        if len(run) >= 2:
            opts = []
            for k, m in enumerate(run):
                end = run[k + 1].start() if k + 1 < len(run) else len(text)
                seg = text[m.end() : end]
                if k + 1 == len(run):
                    seg = seg.split("\n")[0]
                opts.append(seg.strip().rstrip(",;").strip())
            if all(opts):
                return opts, (run[0].start(), run[-1].end() + len(opts[-1]))
    intro = _LIST_INTRO.search(text)
    if intro:
        opts = _split_list(intro.group("body"))
        if len(opts) >= 2:
            return opts, intro.span()
    for s, e, v in find_arrays(text):
        if v is None:
            try:
                lit = ast.literal_eval(text[s:e])
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(lit, list) and len(lit) >= 2 and all(isinstance(x, str) for x in lit):
                return [x.strip() for x in lit], (s, e)
    return None


def _split_list(body: str) -> list[str]:
    body = body.strip().rstrip(".")
    parts = re.split(r",\s*(?:or\s+)?|\s+or\s+|;\s*|/", body)
    return [p.strip().strip("\"'").strip() for p in parts if p.strip().strip("\"'").strip()]


def gold_in(options: list[str], answer: str) -> int | None:
    """The option the answer picks: a letter, an equal option, or the one option it names."""
    first = re.match(r"\s*(?:answer\s*:?\s*)?\(?([A-J])\)?(?:[).:\s]|$)", answer, re.IGNORECASE)
    if first and (len(answer.strip()) <= 3 or answer.strip()[1:2] in ").:"):
        k = letter_index(first.group(1).upper(), len(options))
        if k is not None:
            return k
    g = match_option(options, _ANSWER_PREFIX.sub("", answer).strip().rstrip("."))
    if g is not None:
        return g
    na = norm_text(answer)
    hits = [
        i
        for i, o in enumerate(options)
        if re.search(r"(?<![\w])" + re.escape(norm_text(o)) + r"(?![\w])", na)
    ]
    # drop options contained in a longer hit ("walking" inside "walking upstairs")
    hits = [
        i
        for i in hits
        if not any(j != i and norm_text(options[i]) in norm_text(options[j]) for j in hits)
    ]
    return hits[0] if len(hits) == 1 else None


def anomaly_verdict(answer: str) -> tuple[list[str], int] | None:
    """Options and gold for an anomaly row without written options, from the answer's verdict."""
    if _YES.match(answer):
        return ["Yes", "No"], 0
    if _NO.match(answer):
        return ["Yes", "No"], 1
    if _NEG_ANOM.search(answer) or (_NORMAL.search(answer) and not _ANOM.search(answer)):
        return ["Normal", "Anomalous"], 0
    if _ANOM.search(answer):
        return ["Normal", "Anomalous"], 1
    return None


def _label(answer: str) -> str | None:
    lab = _ANSWER_PREFIX.sub("", answer).strip().strip(".\"'").strip()
    if not lab or len(lab.split()) > _MAX_LABEL_WORDS:
        return None
    return lab


def _template(text: str) -> str:
    return re.sub(r"\d+(?:\.\d+)?", "#", norm_text(text))


# ---------------------------------------------------------------------------- loader


def _task_of(row: dict[str, Any], file: Path) -> tuple[str | None, str]:
    raw = row.get("task_type")
    label = str(raw) if not is_missing(raw) else file.stem
    low = label.lower()
    if "anomal" in low:
        return TASK_ANOMALY, label
    if "classif" in low:
        return TASK_CLASSIFICATION, label
    return None, label


def load_timemqa(
    path: str | Path, *, lenient: bool = False, min_length: int = 8
) -> tuple[Suite, SourceReport]:
    """Load Time-MQA anomaly-detection and classification questions.

    Args:
        path: A CSV/JSONL/JSON/Parquet file, or a folder (files naming anomaly or classification
            are read, e.g. ``Anomaly_Detection/anomaly_detection.csv``).
        lenient: Collect malformed rows in the report instead of raising on the first.
        min_length: Shortest bracketed numeric array read as a series (shorter ones stay text).

    Returns:
        The suite (tasks ``"TimeMQA anomaly"``, ``"TimeMQA classification"``) and a
        :class:`SourceReport`; other tasks' rows are counted in ``skipped``.

    Raises:
        FileNotFoundError: When ``path`` does not exist or holds no readable table.
        RecordError: (strict) on the first malformed row, naming the row id and field.
    """
    files = resolve_files(path, name_hint=r"anomal|classif")
    col = Collector(SOURCE, lenient=lenient)
    done: list[tuple[int, dict[str, Any]]] = []
    pending: list[tuple[int, dict[str, Any], str]] = []  # classification rows needing a vocab
    order = 0
    for f in files:
        col.files.append(str(f))
        for rownum, row in iter_rows(f):
            order += 1
            if isinstance(row, RecordError):
                col.fail(row)
                continue
            task, task_label = _task_of(row, f)
            if task is None:
                col.skip(f"task_type={task_label}")
                continue
            raw_id = row.get("id")
            base = f"{SOURCE}:{f.stem}:{raw_id if not is_missing(raw_id) else rownum}"
            try:
                if "QA_list" in row:
                    pairs = parse_qa(base, row["QA_list"])
                else:
                    q = row.get("question")
                    a = row.get("answer")
                    if not isinstance(q, str) or is_missing(q):
                        raise RecordError(base, "question", "missing required field")
                    if is_missing(a):
                        raise RecordError(base, "answer", "missing required field")
                    pairs = [(q, str(a))]
            except RecordError as err:
                col.fail(err)
                continue
            domain = row.get("application_domain")
            domain = str(domain) if not is_missing(domain) else ""
            for k, (question, answer) in enumerate(pairs):
                rid = base if len(pairs) == 1 else f"{base}:{k}"
                try:
                    text, series, primary, covs = extract_series(rid, question, min_length)
                    rec: dict[str, Any] = {
                        "id": rid,
                        "source": SOURCE,
                        "task": task,
                        "subtask": domain,
                        "question": text.strip(),
                        "context": "",
                        "group": f"{SOURCE}:{series_hash(*series.values(), framing='separator', n=12)}",
                        "primary": primary,
                        "covariates": covs,
                        "series": series,
                        "metadata": {
                            "domain": domain,
                            "task_type": task_label,
                            "file": f.name,
                            "row": rownum,
                            "answer_text": answer,
                        },
                    }
                    found = options_from_text(text)
                    if found is not None:
                        opts = found[0]
                        gold = gold_in(opts, answer)
                        if gold is None:
                            raise RecordError(rid, "answer", f"{answer!r:.60} names no option")
                    elif task == TASK_ANOMALY:
                        verdict = anomaly_verdict(answer)
                        if verdict is None:
                            raise RecordError(rid, "answer", f"no verdict in {answer!r:.60}")
                        opts, gold = verdict
                    else:
                        if _label(answer) is None:
                            raise RecordError(
                                rid, "answer", "free-text answer and no options in the question"
                            )
                        pending.append((order * 1000 + k, rec, answer))
                        continue
                    rec["options"] = opts
                    rec["gold"] = gold
                except RecordError as err:
                    col.fail(err)
                    continue
                done.append((order * 1000 + k, rec))

    # classification rows without written options: the label vocabulary of their sub-dataset
    spelling: dict[str, str] = {}  # one spelling per label, the first seen
    by_tpl: dict[tuple[str, str], set[str]] = defaultdict(set)
    by_dom: dict[str, set[str]] = defaultdict(set)
    labels: list[str] = []
    for _, rec, answer in pending:
        lab = _label(answer) or ""
        lab = spelling.setdefault(norm_text(lab), lab)
        labels.append(lab)
        by_tpl[(rec["subtask"], _template(rec["question"]))].add(lab)
        by_dom[rec["subtask"]].add(lab)
    for (pos, rec, _), lab in zip(pending, labels, strict=True):
        vocab = by_tpl[(rec["subtask"], _template(rec["question"]))]
        if len(vocab) < 2:
            vocab = by_dom[rec["subtask"]]
        opts = sorted(vocab, key=str.casefold)
        try:
            if len(opts) < 2:
                raise RecordError(rec["id"], "answer", f"label vocabulary {opts} has < 2 labels")
            if len(opts) > MAX_OPTIONS:
                raise RecordError(
                    rec["id"], "answer", f"label vocabulary of {len(opts)} labels > {MAX_OPTIONS}"
                )
        except RecordError as err:
            col.fail(err)
            continue
        rec["options"] = opts
        rec["gold"] = opts.index(lab)
        rec["metadata"]["options_from"] = "label_vocabulary"
        done.append((pos, rec))
    for _, rec in sorted(done, key=lambda t: t[0]):
        col.add(rec)
    return col.finish(SOURCE)
