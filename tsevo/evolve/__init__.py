"""Evolution rounds: the frozen protocol config, paired statistics and the gate, the one-shot prune."""

from tsevo.evolve.config import ProtocolConfig
from tsevo.evolve.gate import (
    ArmOutcome,
    GateDecision,
    PairedCounts,
    decide_gate,
    flip_class,
    paired_counts,
    paired_flips,
)
from tsevo.evolve.prune import (
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

__all__ = [
    "ArmOutcome",
    "Attribution",
    "AttributionSummary",
    "GateDecision",
    "PairedCounts",
    "ProtocolConfig",
    "PruneError",
    "PrunePlan",
    "PruneRecord",
    "UpdateCounts",
    "accept_pruned",
    "attribute",
    "clearly_harmful",
    "decide_gate",
    "flip_class",
    "paired_counts",
    "paired_flips",
    "plan_prune",
]
