"""A named, deduplicated collection of questions with deterministic splits by group.

Splits are a property of a suite, not of a question: ``Suite.split(...)`` assigns every *group*
(the sibling unit: a series, a template or a row) to train, val or test, so siblings never straddle
splits. The assignment depends only on the seed and the group ids, so it is reproducible.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .question import Question
from .report import LoadReport, RecordError
from .splitting import SPLITS, assign_splits
from .suite_files import read_suite_file, suite_rows, write_suite_file

__all__ = ["SPLITS", "SUMMARY_COLUMNS", "Suite", "load_suite"]

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
        assign = assign_splits(self.questions, fractions, seed=seed, stratify=stratify)
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
    def to_frame(self) -> pd.DataFrame:
        """One row per question (series as dicts of numpy arrays); inverse of :meth:`from_frame`."""
        rows = []
        for q, d in zip(self.questions, suite_rows(self.questions, self.splits), strict=True):
            d["series"] = {k: np.array(v) for k, v in q.series.items()}
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

    def summary(self) -> pd.DataFrame:
        """Per-task table of the suite.

        Returns:
            A DataFrame with one row per task (sorted) and the columns ``task``, ``questions``,
            ``groups``, ``mean_len`` (mean series length), ``series_per_q``, ``options`` (mean
            option count), ``labeled`` and one count per split (``train``, ``val``, ``test``).
            An empty suite gives an empty frame with the same columns.
        """
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
        return write_suite_file(path, self.name, self.questions, self.splits)

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


def _is_missing(v: Any) -> bool:
    """True for None and scalar missing markers (NaN, pandas NA/NaT); never for containers."""
    if v is None:
        return True
    if isinstance(v, float):
        return bool(np.isnan(v))
    return type(v).__name__ in ("NAType", "NaTType")


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
    name, labeled = read_suite_file(path)
    return Suite._from_labeled(labeled, name=name, lenient=lenient)
