"""A named, deduplicated collection of questions with deterministic splits by group.

Splits are a property of a suite, not of a question: ``Suite.split(...)`` assigns every *group*
(the sibling unit: a series, a template or a row) to train, val or test, so siblings never straddle
splits. The assignment depends only on the seed and the group ids, so it is reproducible.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .question import LoadReport, Question, RecordError

__all__ = ["SPLITS", "Suite", "load_suite"]

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


class Suite:
    """A named collection of :class:`Question` s with optional train/val/test assignment.

    Args:
        name: Suite name (shown in summaries and run manifests).
        questions: The questions; ids must be unique.
        splits: Optional mapping question id -> "train" | "val" | "test".
        dedup: Drop later questions whose fingerprint repeats an earlier one.
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

        Args:
            fractions: Train, val and test fractions (normalized to sum to 1).
            seed: Split seed; same seed and groups give the same assignment.
            stratify: Cut per task rather than over the whole suite.
        """
        fr = np.asarray(fractions, dtype=float)
        if fr.shape != (3,) or (fr < 0).any() or fr.sum() <= 0:
            raise ValueError(f"fractions must be three non-negative numbers, got {fractions}")
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
            total = sum(len(groups[g]) for g in glist)
            bounds = np.cumsum(fr) * total
            done = 0
            for g in glist:
                mid = done + len(groups[g]) / 2.0
                idx = int(np.searchsorted(bounds, mid, side="right"))
                sp = SPLITS[min(idx, 2)]
                for q in groups[g]:
                    assign[q.id] = sp
                done += len(groups[g])
        return Suite(self.name, self.questions, assign, dedup=False)

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
        """Build a suite from a frame shaped like :meth:`to_frame` output."""
        records = []
        for rec in df.to_dict(orient="records"):
            rec = {k: v for k, v in rec.items() if not _is_missing(v) or k in ("gold",)}
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
            The suite and a :class:`LoadReport` (every rejected record is listed, none vanish).
        """
        report = LoadReport()
        qs: list[Question] = []
        splits: dict[str, str] = {}
        seen: set[str] = set()
        for i, rec in enumerate(records):
            report.n_read += 1
            try:
                r = dict(rec) if isinstance(rec, Mapping) else rec
                sp = r.pop("split", None) if isinstance(r, dict) else None
                if _is_missing(sp):
                    sp = None
                q = Question.from_dict(
                    r, index=i, strict_candidate_lengths=strict_candidate_lengths
                )
                if q.id in seen:
                    raise RecordError(q.id, "id", "duplicate id")
                if sp is not None and sp not in SPLITS:
                    raise RecordError(q.id, "split", f"unknown split {sp!r}")
            except RecordError as err:
                if not lenient:
                    raise
                report.add(err)
                continue
            seen.add(q.id)
            qs.append(q)
            if sp is not None:
                splits[q.id] = sp
        suite = cls(name, qs, splits or None)
        report.duplicates = list(suite.duplicates)
        report.n_kept = len(suite)
        return suite, report

    def summary(self) -> Any:
        """Per-task table: questions, groups, series per question, options and split sizes."""
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
        return pd.DataFrame(rows)

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Write the suite as ``.parquet`` or ``.jsonl`` (by suffix). Writes atomically."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        if p.suffix == ".jsonl":
            with tmp.open("w", encoding="utf-8") as fh:
                fh.write(
                    json.dumps({"__suite__": self.name, "schema_version": SCHEMA_VERSION}) + "\n"
                )
                for q in self.questions:
                    d = q.to_dict()
                    d["split"] = self.splits.get(q.id)
                    fh.write(json.dumps(d, ensure_ascii=False) + "\n")
        elif p.suffix == ".parquet":
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
            pq.write_table(table, tmp)
        else:
            raise ValueError(f"unsupported suite file {p.name!r}: use .parquet or .jsonl")
        tmp.replace(p)
        return p

    @classmethod
    def load(cls, path: str | Path, *, lenient: bool = False) -> Suite:
        """Read a suite written by :meth:`save` (see :func:`load_suite` for the report)."""
        return load_suite(path, lenient=lenient)[0]


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
    if v is None:
        return True
    return bool(isinstance(v, float) and np.isnan(v))


def load_suite(path: str | Path, *, lenient: bool = False) -> tuple[Suite, LoadReport]:
    """Read a ``.parquet`` or ``.jsonl`` suite file, validating every record.

    Args:
        path: The file.
        lenient: Collect bad records into the report instead of raising.

    Returns:
        The suite and its :class:`LoadReport`.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no suite file at {p}")
    name = p.stem
    records: list[Any] = []
    if p.suffix == ".jsonl":
        with p.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    err = RecordError(f"<line {lineno}>", "<json>", f"invalid JSON: {exc.msg}")
                    if not lenient:
                        raise err from None
                    records.append(_BadLine(err))
                    continue
                if isinstance(obj, dict) and "__suite__" in obj:
                    name = str(obj["__suite__"])
                    continue
                records.append(obj)
    elif p.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(p)
        meta = table.schema.metadata or {}
        name = meta.get(b"tsevo.suite", name.encode()).decode()
        for row in table.to_pylist():
            row["series"] = {s["name"]: s["values"] for s in row.get("series") or []}
            with contextlib.suppress(json.JSONDecodeError):
                row["metadata"] = json.loads(row.get("metadata") or "{}")
            records.append(row)
    else:
        raise ValueError(f"unsupported suite file {p.name!r}: use .parquet or .jsonl")
    report_pre = LoadReport()
    good: list[Mapping[str, Any]] = []
    for r in records:
        if isinstance(r, _BadLine):
            report_pre.add(r.err)
            report_pre.n_read += 1
        else:
            good.append(r)
    suite, report = Suite.from_records(good, name=name, lenient=lenient)
    report.n_read += report_pre.n_read
    report.errors = report_pre.errors + report.errors
    return suite, report


class _BadLine:
    def __init__(self, err: RecordError) -> None:
        self.err = err
