"""The builtin backend: deterministic, offline, fast implementations of every role."""

from .answerer import GlobalSummaryAnswerer, series_summary
from .reviewer import RuleReviewer

__all__ = ["GlobalSummaryAnswerer", "RuleReviewer", "series_summary"]
