"""The builtin backend: deterministic, offline, fast implementations of every role."""

from .answerer import GlobalSummaryAnswerer, series_summary
from .coordinator import MergeCoordinator
from .planner import MeasurementPlanner
from .reviewer import RuleReviewer
from .synthesizer import TemplateSynthesizer
from .triage import ClusterTriage

__all__ = [
    "ClusterTriage",
    "GlobalSummaryAnswerer",
    "MeasurementPlanner",
    "MergeCoordinator",
    "RuleReviewer",
    "TemplateSynthesizer",
    "series_summary",
]
