"""The agent: residual-chain answering (:class:`Agent`) and its trace (:class:`AnswerRecord`)."""

from .chain import Agent, EvidenceCache, ToolExecutor
from .records import (
    AnswerRecord,
    StageStep,
    ToolRun,
    accuracy,
    accuracy_by_task,
    records_by_id,
)

__all__ = [
    "Agent",
    "AnswerRecord",
    "EvidenceCache",
    "StageStep",
    "ToolExecutor",
    "ToolRun",
    "accuracy",
    "accuracy_by_task",
    "records_by_id",
]
