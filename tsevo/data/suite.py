"""A named, deduplicated collection of questions with deterministic splits by group.

Splits are a property of a suite, not of a question: ``Suite.split(...)`` assigns every *group*
(the sibling unit: a series, a template or a row) to train, val or test, so siblings never straddle
splits. The assignment depends only on the seed and the group ids, so it is reproducible.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .question import LoadReport, Question, RecordError

__all__ = ["SPLITS", "SUMMARY_COLUMNS", "Suite", "load_suite"]

SPLITS = ("train", "val", "test")
SCHEMA_VERSION = 1

_FRAME_COLUMNS = [
    "id",
    "source",
    "task",
    "subtask",
    "question",
    "context",
    "options",
    "gold",
    "group",
    "primary",
    "covariates",
    "candidates",
    "series",
    "metadata",
    "fingerprint",
    "split",
]


def _unit_hash(seed: int, key: str) -> float:
    h = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _cut(sizes: Sequence[int], fr: npt.NDArray[np.float64]) -> list[int]:
    """Assign groups (in hash order, with these question counts) to split indices 0/1/2.

    Each group goes to the split whose cumulative-fraction interval holds the group's midpoint,
    so every split gets about its fraction of questions. Then, if a split with a positive
    fraction got no group although there are enough groups, the most populous split hands over
    its group nearest to it in hash order.
    """
    bounds = np.cumsum(fr) * sum(sizes)
    out: list[int] = []
    done = 0.0
    for n in sizes:
        out.append(min(int(np.searchsorted(bounds, done + n / 2.0, side="right")), 2))
        done += n
    positive = [k for k in range(3) if fr[k] > 0]
    if len(sizes) >= len(positive):
        for k in positive:
            if k in out:
                continue
            counts = Counter(out)
            donor = max((c for c in positive if counts[c] >= 2), key=lambda c: (counts[c], -c))
            members = [i for i, c in enumerate(out) if c == donor]
            out[members[-1] if k > donor else members[0]] = k
    return out


class Suite:
    """A named collection of :class:`Question` s with optional train/val/test assignment.

    Args:
        name: Suite name (shown in summaries and run manifests).
        questions: The questions; ids must be unique.
        splits: Optional mapping question id -> "train" | "val" | "test". Ids that are not in
            the suite (e.g. dropped duplicates) are ignored; an unknown label raises.
        dedup: Drop later questions whose fingerprint repeats an earlier one (their ids are
            listed in ``duplicates``).

    Raises:
        RecordError: On a duplicate id (field ``id``) or an unknown split label (field ``split``).
    """

    def __init__(
        self,
        name: str,
        questions: Iterable[Question],
        splits: Mapping[str, str] | None = None,
        *,
        dedup: bool = True,
    ) -> None:
        self.name = name
        qs: list[Question] = []
        seen_ids: set[str] = set()
        seen_fp: dict[str, str] = {}
        self.duplicates: list[str] = []
        for q in questions:
            if not isinstance(q, Question):
                raise TypeError(f"Suite holds Question objects, got {type(q).__name__}")
            if q.id in seen_ids:
                raise RecordError(q.id, "id", "duplicate id in suite")
            if dedup and q.fingerprint in seen_fp:
                self.duplicates.append(q.id)
                continue
            seen_ids.add(q.id)
            seen_fp[q.fingerprint] = q.id
            qs.append(q)
        self.questions: tuple[Question, ...] = tuple(qs)
        self._by_id = {q.id: q for q in qs}
        self.splits: dict[str, str] = {}
        if splits is not None:
            for qid, sp in splits.items():
                if qid not in self._by_id:
                    continue
                if sp not in SPLITS:
                    raise RecordError(
                        qid, "split", f"unknown split {sp!r}; expected one of {SPLITS}"
                    )
                self.splits[qid] = sp

    # ------------------------------------------------------------------ container protocol
    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)

    def __getitem__(self, qid: str) -> Question:
        return self._by_id[qid]

    def __contains__(self, qid: object) -> bool:
        return qid in self._by_id

    def __repr__(self) -> str:
        sp = Counter(self.splits.values())
        parts = ", ".join(f"{k}={sp[k]}" for k in SPLITS if sp[k])
        return f"Suite({self.name!r}, {len(self)} questions{', ' + parts if parts else ''})"

    @property
    def ids(self) -> list[str]:
        """Question ids in suite order."""
        return [q.id for q in self.questions]

    @property
    def tasks(self) -> list[str]:
        """Sorted distinct tasks."""
        return sorted({q.task for q in self.questions})

    # ------------------------------------------------------------------ splits
    def split(
        self,
        fractions: Sequence[float] = (0.5, 0.25, 0.25),
        *,
        seed: int = 0,
        stratify: bool = True,
    ) -> Suite:
        """Return a copy with a deterministic train/val/test assignment by group id.

        Groups are ordered by a seeded hash and cut so each split gets about its fraction of
        *questions*; with ``stratify`` this happens separately per task (a group's stratum is its
        most common task), so every task is represented in every split where it has enough groups.
        Whenever a stratum has at least as many groups as there are splits with a positive
        fraction, each of those splits receives at least one group (small strata would otherwise
        leave a split empty). Siblings (questions sharing a group) always land in one split.

        Args:
            fractions: Train, val and test fractions (normalized to sum to 1).
            seed: Split seed; same seed and groups give the same assignment.
            stratify: Cut per task rather than over the whole suite.

        Returns:
            A new suite with the same questions and the split assignment.

        Raises:
            ValueError: If ``fractions`` is not three finite non-negative numbers with a positive
                sum.
        """
        fr = np.asarray(fractions, dtype=float)
        if fr.shape != (3,) or not np.isfinite(fr).all() or (fr < 0).any() or fr.sum() <= 0:
            raise ValueError(
                f"fractions must be three finite non-negative numbers (train, val, test) with a "
                f"positive sum, got {fractions!r}"
            )
        fr = fr / fr.sum()
        groups: dict[str, list[Question]] = defaultdict(list)
        for q in self.questions:
            groups[q.group].append(q)
        strata: dict[str, list[str]] = defaultdict(list)
        for g, members in groups.items():
            key = Counter(q.task for q in members).most_common(1)[0][0] if stratify else ""
            strata[key].append(g)
        assign: dict[str, str] = {}
        for key in sorted(strata):
            glist = sorted(strata[key], key=lambda g: (_unit_hash(seed, g), g))
            cut = _cut([len(groups[g]) for g in glist], fr)
            for g, k in zip(glist, cut, strict=True):
                for q in groups[g]:
                    assign[q.id] = SPLITS[k]
        out = Suite(self.name, self.questions, assign, dedup=False)
        out.duplicates = list(self.duplicates)
        return out

    def subset(self, split: str) -> Suite:
        """Return the questions of one split as a suite (split labels kept)."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
        if not self.splits:
            raise ValueError(f"suite {self.name!r} has no split assignment; call .split() first")
        qs = [q for q in self.questions if self.splits.get(q.id) == split]
        return Suite(f"{self.name}/{split}", qs, {q.id: split for q in qs}, dedup=False)

    @property
    def train(self) -> Suite:
        """The train split."""
        return self.subset("train")

    @property
    def val(self) -> Suite:
        """The validation split."""
        return self.subset("val")

    @property
    def test(self) -> Suite:
        """The test split (report-only)."""
        return self.subset("test")

    def filter(self, predicate: Any, name: str | None = None) -> Suite:
        """Return the questions for which ``predicate(q)`` is true (split labels kept)."""
        qs = [q for q in self.questions if predicate(q)]
        return Suite(
            name or self.name,
            qs,
            {q.id: self.splits[q.id] for q in qs if q.id in self.splits},
            dedup=False,
        )

    # ------------------------------------------------------------------ tables
    def to_frame(self) -> Any:
        """One row per question (series as dicts of numpy arrays); inverse of :meth:`from_frame`."""
        import pandas as pd

        rows = []
        for q in self.questions:
            d = q.to_dict()
            d["series"] = {k: np.array(v) for k, v in q.series.items()}
            d["split"] = self.splits.get(q.id)
            rows.append(d)
        return pd.DataFrame(rows, columns=_FRAME_COLUMNS)

    @classmethod
    def from_frame(cls, df: Any, name: str = "suite", *, lenient: bool = False) -> Suite:
        """Build a suite from a frame shaped like :meth:`to_frame` output.

        Missing cells (None/NaN/NA) mean "absent". A ``gold`` column that pandas turned into floats
        (because some questions are unlabeled) is read back as integers.

        Args:
            df: The frame, one row per question.
            name: Suite name.
            lenient: Skip bad rows instead of raising (use :meth:`from_records` for the report).

        Returns:
            The suite.
        """
        records = []
        for rec in df.to_dict(orient="records"):
            rec = {k: v for k, v in rec.items() if not _is_missing(v)}
            g = rec.get("gold")
            if isinstance(g, float) and g.is_integer():
                rec["gold"] = int(g)
            records.append(rec)
        return cls.from_records(records, name=name, lenient=lenient)[0]

    @classmethod
    def from_records(
        cls,
        records: Iterable[Mapping[str, Any]],
        *,
        name: str = "suite",
        lenient: bool = False,
        strict_candidate_lengths: bool = False,
    ) -> tuple[Suite, LoadReport]:
        """Validate records into a suite.

        Args:
            records: Dicts shaped like :meth:`Question.to_dict` (plus an optional ``split``).
            name: Suite name.
            lenient: Collect bad records into the report instead of raising on the first one.
            strict_candidate_lengths: Require equal candidate lengths.

        Returns:
            The suite and a :class:`LoadReport` (every rejected record is listed, none vanish:
            ``n_read == n_kept + len(errors) + len(duplicates)``).

        Raises:
            RecordError: On the first bad record, unless ``lenient``.
        """
        return cls._from_labeled(
            ((None, r) for r in records),
            name=name,
            lenient=lenient,
            strict_candidate_lengths=strict_candidate_lengths,
        )

    @classmethod
    def _from_labeled(
        cls,
        records: Iterable[tuple[str | None, Any]],
        *,
        name: str,
        lenient: bool,
        strict_candidate_lengths: bool = False,
    ) -> tuple[Suite, LoadReport]:
        """Validate ``(label, record)`` pairs; a label names a record that has no usable id."""
        report = LoadReport()
        qs: list[Question] = []
        splits: dict[str, str] = {}
        first_seen: dict[str, str] = {}
        for i, (label, rec) in enumerate(records):
            report.n_read += 1
            where = label or f"<record {i}>"
            try:
                if isinstance(rec, RecordError):  # a line that could not even be parsed
                    raise rec
                r = dict(rec) if isinstance(rec, Mapping) else rec
                sp = r.pop("split", None) if isinstance(r, dict) else None
                if _is_missing(sp):
                    sp = None
                q = Question.from_dict(
                    r, where=where, strict_candidate_lengths=strict_candidate_lengths
                )
                if q.id in first_seen:
                    raise RecordError(
                        q.id, "id", f"duplicate id (first used by {first_seen[q.id]})"
                    )
                if sp is not None and sp not in SPLITS:
                    raise RecordError(
                        q.id, "split", f"unknown split {sp!r}; expected one of {SPLITS} or null"
                    )
            except RecordError as err:
                if not lenient:
                    raise
                report.add(err)
                continue
            first_seen[q.id] = where
            qs.append(q)
            if sp is not None:
                splits[q.id] = sp
        suite = cls(name, qs, splits or None)
        report.duplicates = list(suite.duplicates)
        report.n_kept = len(suite)
        return suite, report

    def summary(self) -> Any:
        """Per-task table of the suite.

        Returns:
            A DataFrame with one row per task (sorted) and the columns ``task``, ``questions``,
            ``groups``, ``mean_len`` (mean series length), ``series_per_q``, ``options`` (mean
            option count), ``labeled`` and one count per split (``train``, ``val``, ``test``).
            An empty suite gives an empty frame with the same columns.
        """
        import pandas as pd

        rows = []
        by_task: dict[str, list[Question]] = defaultdict(list)
        for q in self.questions:
            by_task[q.task].append(q)
        for task in sorted(by_task):
            qs = by_task[task]
            row: dict[str, Any] = {
                "task": task,
                "questions": len(qs),
                "groups": len({q.group for q in qs}),
                "mean_len": float(
                    np.mean([np.mean([s.size for s in q.series.values()]) for q in qs])
                ),
                "series_per_q": float(np.mean([len(q.series) for q in qs])),
                "options": float(np.mean([q.n_options for q in qs])),
                "labeled": sum(q.gold is not None for q in qs),
            }
            for sp in SPLITS:
                row[sp] = sum(self.splits.get(q.id) == sp for q in qs)
            rows.append(row)
        return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Write the suite as ``.parquet`` or ``.jsonl`` (by suffix), atomically.

        The file is written to a temporary sibling and renamed into place, so a failed save
        leaves any existing file untouched and no partial file behind.

        Args:
            path: Target file; its suffix picks the format.

        Returns:
            The path written.

        Raises:
            ValueError: For a suffix other than ``.parquet`` or ``.jsonl``.
        """
        p = Path(path)
        fmt = p.suffix.lower()
        if fmt not in (".jsonl", ".parquet"):
            raise ValueError(f"unsupported suite file {p.name!r}: use .parquet or .jsonl")
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
        tmp = Path(tmp_name)
        try:
            # mkstemp makes the file private (0600); keep an existing file's mode, else 0644.
            os.fchmod(fd, p.stat().st_mode & 0o777 if p.exists() else 0o644)
            with os.fdopen(fd, "wb") as fh:
                if fmt == ".jsonl":
                    self._write_jsonl(fh)
                else:
                    self._write_parquet(fh)
                fh.flush()
                os.fsync(fh.fileno())
            tmp.replace(p)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return p

    def _write_jsonl(self, fh: Any) -> None:
        header = {"__suite__": self.name, "schema_version": SCHEMA_VERSION}
        fh.write((json.dumps(header) + "\n").encode())
        for q in self.questions:
            d = q.to_dict()
            d["split"] = self.splits.get(q.id)
            fh.write((json.dumps(d, ensure_ascii=False, allow_nan=False) + "\n").encode())

    def _write_parquet(self, fh: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = []
        for q in self.questions:
            d = q.to_dict()
            d["series"] = [{"name": k, "values": v} for k, v in d["series"].items()]
            d["metadata"] = json.dumps(d["metadata"], sort_keys=True)
            d["split"] = self.splits.get(q.id)
            rows.append(d)
        table = pa.Table.from_pylist(rows, schema=_arrow_schema())
        table = table.replace_schema_metadata(
            {"tsevo.suite": self.name, "tsevo.schema_version": str(SCHEMA_VERSION)}
        )
        pq.write_table(table, fh)

    @classmethod
    def load(cls, path: str | Path, *, lenient: bool = False) -> Suite:
        """Read a suite written by :meth:`save` (see :func:`load_suite` for the report).

        Args:
            path: A ``.parquet`` or ``.jsonl`` suite file.
            lenient: Skip bad records instead of raising.

        Returns:
            The suite.
        """
        return load_suite(path, lenient=lenient)[0]


SUMMARY_COLUMNS = [
    "task",
    "questions",
    "groups",
    "mean_len",
    "series_per_q",
    "options",
    "labeled",
    *SPLITS,
]


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
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


def _is_missing(v: Any) -> bool:
    """True for None and scalar missing markers (NaN, pandas NA/NaT); never for containers."""
    if v is None:
        return True
    if isinstance(v, float):
        return bool(np.isnan(v))
    return type(v).__name__ in ("NAType", "NaTType")


def _check_schema_version(path: Path, version: Any) -> None:
    try:
        v = int(version)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: unreadable schema_version {version!r}") from None
    if v > SCHEMA_VERSION:
        raise ValueError(
            f"{path} was written with suite schema {v}; this tsevo reads up to {SCHEMA_VERSION}"
        )


def load_suite(path: str | Path, *, lenient: bool = False) -> tuple[Suite, LoadReport]:
    """Read a ``.parquet`` or ``.jsonl`` suite file, validating every record.

    Records without a usable id are named by position (``<line N>`` in a JSONL file, ``<row N>``
    in a parquet file, both counted from 1), so every error points at its record.

    Args:
        path: The file.
        lenient: Collect bad records (including unparseable JSON lines) into the report instead
            of raising on the first one.

    Returns:
        The suite (named by the file's header, else its stem) and its :class:`LoadReport`.

    Raises:
        FileNotFoundError: If there is no file at ``path``.
        ValueError: For an unsupported suffix or a file from a newer schema version.
        RecordError: On the first bad record, unless ``lenient``.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no suite file at {p}")
    name = p.stem
    labeled: list[tuple[str | None, Any]] = []
    fmt = p.suffix.lower()
    if fmt == ".jsonl":
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
    elif fmt == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(p)
        meta = table.schema.metadata or {}
        name = meta.get(b"tsevo.suite", name.encode()).decode()
        _check_schema_version(p, meta.get(b"tsevo.schema_version", SCHEMA_VERSION))
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
                    labeled.append(
                        (where, RecordError(rid, "metadata", f"invalid JSON: {exc.msg}"))
                    )
                    continue
            labeled.append((where, row))
    else:
        raise ValueError(f"unsupported suite file {p.name!r}: use .parquet or .jsonl")
    return Suite._from_labeled(labeled, name=name, lenient=lenient)
