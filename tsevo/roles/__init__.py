"""Role protocols (answer, review, and later triage, plan, synthesize) and their backends."""

from .protocols import Answerer, BaseAnswer, Evidence, Review, Reviewer

__all__ = ["Answerer", "BaseAnswer", "Evidence", "Review", "Reviewer"]
