"""The stage notebooks' configs (``00``–``50``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from tsevo.evolve import ProtocolConfig
from tsevo.marachain import MaraConfig
from tsevo.taxonomy.gate import GateConfig as TaxonomyGateConfig
from tsevo.taxonomy.induce import InduceConfig

from .base import NotebookConfig


@dataclass(frozen=True, kw_only=True)
class QuickstartConfig(NotebookConfig):
    """``00_quickstart``: synthetic suite → one round → summary → flips → library."""

    notebook: ClassVar[str] = "00_quickstart"
    rounds: int = 1
    """Evolution rounds."""
    split: str = "test"
    """Flips shown: test (report-only, before vs after) or val (the gate's arms)."""

    def rounds_to_run(self) -> int:
        """``rounds``."""
        return self.rounds


@dataclass(frozen=True, kw_only=True)
class DataConfig(NotebookConfig):
    """``10_data``: the suite, its splits and a few example questions drawn."""

    notebook: ClassVar[str] = "10_data"
    n_examples: int = 4
    """Example questions drawn (one per task, in task order)."""
    example_split: str = "train"
    """Split the examples come from."""


@dataclass(frozen=True, kw_only=True)
class BasePassConfig(NotebookConfig):
    """``20_base_pass_and_failures``: accuracy per task, error partition, buckets."""

    notebook: ClassVar[str] = "20_base_pass_and_failures"
    round: int = 1
    """Round to inspect."""
    max_members: int = 6
    """Bucket members listed per bucket."""


@dataclass(frozen=True, kw_only=True)
class PlanningConfig(NotebookConfig):
    """``30_planning_and_synthesis``: contracts, attempts, generated source, calibration trees."""

    notebook: ClassVar[str] = "30_planning_and_synthesis"
    round: int = 1
    """Round to inspect."""
    show_sources: int = 2
    """Generated sources printed (the first surviving candidates)."""


@dataclass(frozen=True, kw_only=True)
class GateConfig(NotebookConfig):
    """``40_prefilter_and_gate``: attributable repairs, the paired table, δ and δ_lb, prune."""

    notebook: ClassVar[str] = "40_prefilter_and_gate"
    round: int = 1
    """Round to inspect."""


@dataclass(frozen=True, kw_only=True)
class DeploymentConfig(NotebookConfig):
    """``50_deployment_and_test``: the chain, report-only deltas per task, flips."""

    notebook: ClassVar[str] = "50_deployment_and_test"
    round: int = 1
    """Round whose report-only test is shown."""


@dataclass(frozen=True, kw_only=True)
class MaraChainsConfig(NotebookConfig):
    """``35_mara_chains``: rejected candidates refined along Mara chains, node by node."""

    notebook: ClassVar[str] = "35_mara_chains"
    depth: int = 3
    """Chain steps after v0 (0: chains off, the shared run; the view then says so)."""
    acceptance: str = "paper"
    """Acceptance variant: paper (a node clears the prefilter bar) | code (beats the root's sum)."""
    start: str = "last"
    """Which rejected attempt a chain starts from: last (the Mara paper's) | strongest."""
    round: int = 1
    """Round whose chains are shown."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.protocol()  # a bad depth or variant raises here, before any run

    def protocol(self) -> ProtocolConfig:
        """The stage protocol with Mara chains of ``depth`` steps under ``acceptance``."""
        mara = MaraConfig(depth=self.depth, acceptance=self.acceptance, start=self.start)
        return replace(super().protocol(), marachain=mara)

    def variant(self) -> str:
        """``marachain-d<depth>`` (``-strongest``, ``-code`` for those variants) unless chains are off."""
        if self.depth == 0:
            return ""
        return (
            f"marachain-d{self.depth}"
            + ("-strongest" if self.start == "strongest" else "")
            + ("-code" if self.acceptance == "code" else "")
        )


@dataclass(frozen=True, kw_only=True)
class TaxonomyNotebookConfig(NotebookConfig):
    """``25_taxonomy``: failure codes induced from the train traces, gated by agreement, browsed."""

    notebook: ClassVar[str] = "25_taxonomy"
    round: int = 0
    """Base pass round the traces come from (0: the latest round with a base pass)."""
    traces: str = "all"
    """Train traces: base (the base pass) | evolution (the round's candidate arms) | all (both)."""
    taxonomy_seed: int = 0
    """Seeds the induction/gate pool split and the gate's trace sampler."""
    metric: str = "cohen_area"
    """Gating metric: cohen_area (mean pairwise Cohen κ at area level, the paper) |
    fleiss_code_macro (macro per-code Fleiss κ, the released code); both are reported."""
    kappa_target: float = 0.75
    """κ a gate round must reach (the paper: 0.75)."""
    coverage_floor: float = 0.70
    """Share of confirmed errors with a consolidated code a gate round must reach (0.70)."""
    max_rounds: int = 5
    """Gate rounds of 5 stratified gate-pool traces at most."""
    gate_unit: str = "event"
    """What the gate's annotators label: event (the five phases per trace: discovery, vote,
    typing, assignment, deliberation) | trace (each failed trace is one error, codes only)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.traces not in ("base", "evolution", "all"):
            raise ValueError(f"traces must be base, evolution or all, got {self.traces!r}")
        if self.metric not in ("cohen_area", "fleiss_code_macro"):
            raise ValueError(f"metric must be cohen_area or fleiss_code_macro, got {self.metric!r}")
        if self.gate_unit not in ("event", "trace"):
            raise ValueError(f"gate_unit must be event or trace, got {self.gate_unit!r}")

    def source_round(self) -> int | None:
        """``round``, or None for the latest base pass."""
        return self.round or None

    def induce_config(self) -> InduceConfig:
        """The builtin induction's config (:class:`tsevo.taxonomy.induce.InduceConfig`)."""
        return InduceConfig(seed=self.taxonomy_seed)

    def gate_config(self) -> TaxonomyGateConfig:
        """The builtin gate's config (:class:`tsevo.taxonomy.gate.GateConfig`)."""
        return TaxonomyGateConfig(
            seed=self.taxonomy_seed,
            metric=self.metric,
            kappa_target=self.kappa_target,
            coverage_floor=self.coverage_floor,
            max_rounds=self.max_rounds,
            unit=self.gate_unit,
        )
