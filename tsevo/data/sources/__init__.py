"""Public-source loaders: convert downloaded benchmark files into :class:`~tsevo.data.Suite` s.

One module per source, each reading a local path (no hub access at run time) and returning
``(suite, report)``. Formats and conversion recipes: ``research/ts_qa_sources.md``; each module's
docstring says exactly what it reads and how it maps a row to a question.

======================  ===================================================  =====================
name                    task(s)                                              group (split unit)
======================  ===================================================  =====================
``timeseriesexam``      ``TimeSeriesExam``                                   question id
``merrill``             ``Merrill``                                          series uuid
``temporalbench``       ``TemporalBench T1`` ... ``TemporalBench T4``        series id
``timemqa``             ``TimeMQA anomaly``, ``TimeMQA classification``      hash of the series
``mmts``                ``MMTS match``                                       row id
``tsaqa``               ``TSAQA data transformation``                        hash of the input
======================  ===================================================  =====================

``task`` names the benchmark task only; finer labels (category, template id, sub-question key)
go to ``subtask`` and ``metadata``. Loaders do not split: call :meth:`Suite.split`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tsevo.data.suite import Suite

from ._common import SourceReport
from .merrill import load_merrill
from .mmts import load_mmts
from .temporalbench import load_temporalbench
from .timemqa import load_timemqa
from .timeseriesexam import load_timeseriesexam
from .tsaqa import load_tsaqa

__all__ = [
    "SOURCES",
    "SourceReport",
    "load_merrill",
    "load_mmts",
    "load_source",
    "load_temporalbench",
    "load_timemqa",
    "load_timeseriesexam",
    "load_tsaqa",
]

SOURCES: dict[str, Callable[..., tuple[Suite, SourceReport]]] = {
    "timeseriesexam": load_timeseriesexam,
    "merrill": load_merrill,
    "temporalbench": load_temporalbench,
    "timemqa": load_timemqa,
    "mmts": load_mmts,
    "tsaqa": load_tsaqa,
}


def load_source(
    name: str, path: str | Path, *, lenient: bool = False, **kw: Any
) -> tuple[Suite, SourceReport]:
    """Load a public source by name.

    Args:
        name: One of :data:`SOURCES` (case-insensitive; ``-``/``_`` ignored, e.g. ``"time-mqa"``).
        path: The downloaded file or a folder holding it.
        lenient: Collect malformed rows in the report instead of raising on the first.
        **kw: Source-specific options (e.g. ``tiers=`` for TemporalBench).

    Returns:
        The suite and a :class:`SourceReport` (kept, rejected, duplicates, skipped on purpose).

    Raises:
        ValueError: For an unknown source name (the message lists the known ones).
        FileNotFoundError: When ``path`` does not exist.
    """
    key = name.strip().lower().replace("-", "").replace("_", "")
    if key not in SOURCES:
        raise ValueError(f"unknown source {name!r}; known sources: {', '.join(SOURCES)}")
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file or folder: {p}")
    return SOURCES[key](p, lenient=lenient, **kw)
