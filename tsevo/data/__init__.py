"""Questions, suites, the synthetic suite and public-source loaders."""

from .question import LoadReport, Question, RecordError
from .suite import SPLITS, Suite, load_suite

__all__ = ["SPLITS", "LoadReport", "Question", "RecordError", "Suite", "load_suite"]
