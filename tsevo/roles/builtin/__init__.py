"""The builtin backend: deterministic, offline, fast implementations of every role."""

from .answerer import GlobalSummaryAnswerer, series_summary
from .reviewer import RuleReviewer
from .triage import ClusterTriage

__all__ = ["ClusterTriage", "GlobalSummaryAnswerer", "RuleReviewer", "series_summary"]
