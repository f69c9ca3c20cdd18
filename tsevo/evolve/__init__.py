"""The engine: one evolution loop for every backend (DESIGN.md §2).

:func:`evolve` runs rounds on a split suite with any :class:`~tsevo.roles.RoleSet`; a round is the
list of steps :data:`ROUND_STEPS` that :func:`run_steps` persists and resumes. The gate, the prune
and scope reconciliation are mechanical code here, not roles: they read per-question validation
records only.

The package is callable: ``tsevo.evolve(suite, ...)`` is :func:`evolve`, so the verb and the
package share one name whichever was imported first.
"""

import sys
import types
from typing import Any

from .baseline import PAPER_BASELINES, AnswerConfig, paper_baseline
from .baseline_eval import eval_baseline
from .config import ProtocolConfig
from .evaluate import (
    Evaluator,
    TestSplitLeak,
    answer_libraries,
    eval_library,
    gate_between,
    outcomes,
    paired_frame,
    records_frame,
    task_table,
)
from .gate import (
    ArmOutcome,
    GateDecision,
    PairedCounts,
    decide_gate,
    flip_class,
    paired_counts,
    paired_flips,
)
from .prune import (
    Attribution,
    AttributionSummary,
    PruneError,
    PrunePlan,
    PruneRecord,
    UpdateCounts,
    accept_pruned,
    attribute,
    clearly_harmful,
    plan_prune,
)
from .result import EvolutionResult, Funnel, RoundResult
from .round import ROUND_STEPS, run_round
from .run import evolve, report_test
from .steps import RoundContext, Step, StepResult, run_steps

__all__ = [
    "PAPER_BASELINES",
    "ROUND_STEPS",
    "AnswerConfig",
    "ArmOutcome",
    "Attribution",
    "AttributionSummary",
    "Evaluator",
    "EvolutionResult",
    "Funnel",
    "GateDecision",
    "PairedCounts",
    "ProtocolConfig",
    "PruneError",
    "PrunePlan",
    "PruneRecord",
    "RoundContext",
    "RoundResult",
    "Step",
    "StepResult",
    "TestSplitLeak",
    "UpdateCounts",
    "accept_pruned",
    "answer_libraries",
    "attribute",
    "clearly_harmful",
    "decide_gate",
    "eval_baseline",
    "eval_library",
    "evolve",
    "flip_class",
    "gate_between",
    "outcomes",
    "paired_counts",
    "paired_flips",
    "paired_frame",
    "paper_baseline",
    "plan_prune",
    "records_frame",
    "report_test",
    "run_round",
    "run_steps",
    "task_table",
]


class _Engine(types.ModuleType):
    """``tsevo.evolve``: the engine's package, and called, the engine itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> EvolutionResult:
        return evolve(*args, **kwargs)


sys.modules[__name__].__class__ = _Engine
