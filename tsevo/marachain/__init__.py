"""Mara chains: rejected synthesis candidates refined along bounded, history-conditioned chains.

The foundation of issue 13 (design: ``shared/design/marachain.md``), independent of the round
engine, which sits above this package and will call it after a group's direct attempts:

* :mod:`~tsevo.marachain.config`: :class:`MaraConfig`, the frozen knobs (``depth = 0``: off).
* :mod:`~tsevo.marachain.score`: the batch ``B = H ∪ P``, per-question node scores, the
  prefilter :class:`Bar` and the strength key.
* :mod:`~tsevo.marachain.acceptance`: the ``paper`` and ``code`` acceptance variants.
* :mod:`~tsevo.marachain.pool`: the Pareto-filtered top-N pool and its seeded samplers.
* :mod:`~tsevo.marachain.nodes`: node ids that never collide with direct attempts' and the
  :class:`ChainNode` record.
* :mod:`~tsevo.marachain.ledger`: the one append-only ledger every chain spend goes through.
* :mod:`~tsevo.marachain.history`: the per-question score history and changelog a step sees.
* :mod:`~tsevo.marachain.genome`, :mod:`~tsevo.marachain.moves`, :mod:`~tsevo.marachain.step`:
  the builtin chain's template genomes (fitted on support rows), move families with the
  categories that order them, and one step's choice of move (the engine's loop is
  :mod:`tsevo.evolve.chain`).
"""

from .acceptance import (
    ACCEPTANCE_VARIANTS,
    START_RULES,
    Decision,
    accept,
    chain_start,
    decisions,
    early_stop,
    winner,
)
from .config import MARA_PRESETS, Caps, MaraConfig, mara_params, mara_preset
from .history import ChangeEntry, HistoryNode, ScoreHistory
from .ledger import AXES, ChainLedger, LedgerEntry, Spend, read_ledger_lines
from .nodes import (
    ChainNode,
    NodeRef,
    chain_id,
    chain_node_id,
    direct_node_id,
    is_chain_id,
    parse_node_id,
)
from .pool import (
    SAMPLERS,
    PoolMember,
    PoolUpdate,
    draw_rng,
    sample,
    sampler_weights,
    update_pool,
    weakly_dominates,
)
from .score import (
    FACTS,
    Bar,
    BarCheck,
    BatchSpec,
    NodeScore,
    RootMismatchError,
    check_root,
    strength_key,
)

__all__ = [
    "ACCEPTANCE_VARIANTS",
    "AXES",
    "FACTS",
    "MARA_PRESETS",
    "SAMPLERS",
    "START_RULES",
    "Bar",
    "BarCheck",
    "BatchSpec",
    "Caps",
    "ChainLedger",
    "ChainNode",
    "ChangeEntry",
    "Decision",
    "HistoryNode",
    "LedgerEntry",
    "MaraConfig",
    "NodeRef",
    "NodeScore",
    "PoolMember",
    "PoolUpdate",
    "RootMismatchError",
    "ScoreHistory",
    "Spend",
    "accept",
    "chain_id",
    "chain_node_id",
    "chain_start",
    "check_root",
    "decisions",
    "direct_node_id",
    "draw_rng",
    "early_stop",
    "is_chain_id",
    "mara_params",
    "mara_preset",
    "parse_node_id",
    "read_ledger_lines",
    "sample",
    "sampler_weights",
    "strength_key",
    "update_pool",
    "weakly_dominates",
    "winner",
]
