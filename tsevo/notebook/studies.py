"""The study notebooks' configs (``90``–``97``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from tsevo.analysis import CHAIN_ARMS, chain_arm_params, chain_arm_row
from tsevo.evolve import ProtocolConfig
from tsevo.evolve.ablation import paper_ablation
from tsevo.store import RunStore

from .base import BACKENDS, NotebookConfig, ensure_run, resolve_run_dir


@dataclass(frozen=True, kw_only=True)
class StudyConfig(NotebookConfig):
    """``90_study_base_vs_evolved_vs_expert``: three agents on one split, per family."""

    notebook: ClassVar[str] = "90_study_base_vs_evolved_vs_expert"
    split: str = "test"
    """Split answered (test: report only, used in no decision)."""
    reference_root: str = "expert"
    """The hand-written library compared against (a root name: expert | chronos)."""


def _methods(text: str) -> list[str]:
    return [m.strip() for m in text.split(",") if m.strip()]


@dataclass(frozen=True, kw_only=True)
class MainTableConfig(NotebookConfig):
    """``91_study_main_table``: tasks x methods on one backbone (the paper's Table 1)."""

    notebook: ClassVar[str] = "91_study_main_table"
    split: str = "test"
    """Split answered (test: report only)."""
    methods: str = "base,evolved,expert,chronos"
    """Comma-separated methods: base, evolved, expert, chronos (every backend); self-consistency,
    self-refine, 4-shot ICL (llm backend only: the builtin answerer has no analogue)."""

    def method_list(self) -> list[str]:
        """``methods`` as a list."""
        return _methods(self.methods)


@dataclass(frozen=True, kw_only=True)
class TransferConfig(NotebookConfig):
    """``92_study_transfer``: a library evolved on one role set installed into another."""

    notebook: ClassVar[str] = "92_study_transfer"
    split: str = "test"
    """Split answered (test: report only)."""
    target_backend: str = "builtin"
    """Roles the library is installed into: builtin | llm."""
    target_base_url: str = ""
    """Target LLM endpoint ("" = $TSEVO_LLM_BASE_URL); llm target only."""
    target_model: str = ""
    """Target LLM model id ("" = $TSEVO_LLM_MODEL); llm target only."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.target_backend not in BACKENDS:
            raise ValueError(
                f"target_backend must be one of {BACKENDS}, got {self.target_backend!r}"
            )

    def target(self) -> NotebookConfig:
        """The target's settings as a plain config (its :meth:`~NotebookConfig.roles`)."""
        return NotebookConfig(
            run_dir=self.run_dir,
            backend=self.target_backend,
            base_url=self.target_base_url,
            model=self.target_model,
            temperature=self.temperature,
            concurrency=self.concurrency,
            cache_mode=self.cache_mode,
        )


@dataclass(frozen=True, kw_only=True)
class AblationStudyConfig(NotebookConfig):
    """``93_study_ablations``: one of the paper's six ablations, or the full method."""

    notebook: ClassVar[str] = "93_study_ablations"
    ablation: str = "full"
    """full | w/o cali. | w/o gate | w/o scope | w/ chronos | w/ expert | w/o residual chain."""

    def __post_init__(self) -> None:
        super().__post_init__()
        paper_ablation(self.ablation)  # an unknown name raises here, before any run

    def protocol(self) -> ProtocolConfig:
        """The protocol under the ablation."""
        return super().protocol().ablated(self.ablation)

    def variant(self) -> str:
        """``ablation-<name>`` unless the full method."""
        name = self.protocol().ablation_name
        return "" if name == "full" else "ablation-" + re.sub(r"[^a-z0-9]+", "-", name).strip("-")


@dataclass(frozen=True, kw_only=True)
class GateCalibrationConfig(NotebookConfig):
    """``94_study_gate_calibration``: the gate's validation evidence against the report-only test."""

    notebook: ClassVar[str] = "94_study_gate_calibration"


@dataclass(frozen=True, kw_only=True)
class MultiRoundConfig(NotebookConfig):
    """``95_study_multi_round``: what each of several rounds admits (the paper's Fig. 5c)."""

    notebook: ClassVar[str] = "95_study_multi_round"
    rounds: int = 2
    """Evolution rounds (the paper's figure: 3; its spec sets them)."""

    def rounds_to_run(self) -> int:
        """``rounds``."""
        return self.rounds

    def variant(self) -> str:
        """``rounds<N>`` unless one round."""
        return "" if self.rounds == 1 else f"rounds{self.rounds}"


@dataclass(frozen=True, kw_only=True)
class FunnelConfig(NotebookConfig):
    """``96_study_funnel``: the attrition funnel from train errors to deployed tools."""

    notebook: ClassVar[str] = "96_study_funnel"


@dataclass(frozen=True, kw_only=True)
class MaraChainStudyConfig(NotebookConfig):
    """``97_study_marachain``: discard vs Mara chain vs discard with K + d attempts, paired by seed.

    Each arm is one round of its own run on the same suite, split and seed; the arms differ only
    in synthesis (:func:`tsevo.analysis.chain_arm_params`). Run folders: with one arm and an
    explicit ``run_dir`` (a study cell), the arm's run is ``run_dir``; otherwise every arm's run is
    the run folder with the arm's protocol as a suffix (:meth:`arm_suffix`; none for K-discard at
    the stage default, so the stage notebooks' run is reused, and ``marachain-d<d>`` for a chain
    from the last attempt, the chain notebook's run). The notebook's metrics go to the first arm's
    run.
    """

    notebook: ClassVar[str] = "97_study_marachain"
    arms: str = ",".join(CHAIN_ARMS)
    """Comma-separated arms: discard (K attempts), chain (K attempts, then a chain of depth d),
    discard_k_plus_d (K + d attempts); a study grid runs one per cell and pairs them by seed."""
    attempts: int = 3
    """K: direct synthesis attempts per work group (``max_synthesis_attempts``)."""
    depth: int = 3
    """d: chain steps after the direct attempts (``marachain.depth``), and the extra attempts of
    discard_k_plus_d."""
    start: str = "last"
    """The rejected attempt a chain starts from (``marachain.start``): last (the Mara paper's; the
    chain notebook's run) | strongest (the chain's default, the benchmark's)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        arms = self.arm_list()
        if not arms or len(set(arms)) < len(arms):
            raise ValueError(
                f"arms must name distinct arms of {list(CHAIN_ARMS)}, got {self.arms!r}"
            )
        for arm in arms:
            self.arm_protocol(arm)  # an unknown arm or a bad knob raises here, before any run

    def arm_list(self) -> list[str]:
        """``arms`` as a list."""
        return _methods(self.arms)

    def arm_protocol(self, arm: str) -> ProtocolConfig:
        """The protocol of one arm: the stage protocol with the arm's synthesis parameters."""
        params = chain_arm_params(arm, self.attempts, self.depth, self.start)
        return ProtocolConfig.from_params(params, base=super().protocol())

    def protocol(self) -> ProtocolConfig:
        """The first arm's protocol (each arm's run is created from :meth:`arm_config`)."""
        return self.arm_protocol(self.arm_list()[0])

    def arm_suffix(self, arm: str) -> str:
        """The arm's protocol as a folder suffix ("" for the stage protocol).

        ``attempts<n>`` when the direct attempts differ from the stage default, then
        ``marachain-d<d>`` for a chain (``-<start>`` unless it starts from the last attempt).
        """
        p = self.arm_protocol(arm)
        parts = []
        if p.max_synthesis_attempts != ProtocolConfig().max_synthesis_attempts:
            parts.append(f"attempts{p.max_synthesis_attempts}")
        if p.marachain.depth > 0:
            start = "" if p.marachain.start == "last" else f"-{p.marachain.start}"
            parts.append(f"marachain-d{p.marachain.depth}{start}")
        return "-".join(parts)

    def variant(self) -> str:
        """The first arm's :meth:`arm_suffix`."""
        return self.arm_suffix(self.arm_list()[0])

    def arm_run_path(self, arm: str) -> Path:
        """The run folder of one arm (see the class docstring)."""
        base = resolve_run_dir(self.run_dir)
        if self.run_dir and len(self.arm_list()) == 1:
            return base
        suffix = self.arm_suffix(arm)
        return base.with_name(f"{base.name}-{suffix}") if suffix else base

    def run_path(self) -> Path:
        """The first arm's run folder (where the notebook records its metrics)."""
        return self.arm_run_path(self.arm_list()[0])

    def arm_config(self, arm: str) -> MaraChainStudyConfig:
        """This config narrowed to one arm and its run folder (what :func:`ensure_run` takes)."""
        return replace(self, arms=arm, run_dir=str(self.arm_run_path(arm)))

    def arm_runs(self, log: Callable[[str], None] = print) -> dict[str, Path]:
        """Every arm's run folder, each evolved first when it holds no finished round."""
        return {arm: ensure_run(self.arm_config(arm), log=log) for arm in self.arm_list()}

    def arm_rows(self, runs: dict[str, Path]) -> list[dict[str, Any]]:
        """One row per arm (:func:`tsevo.analysis.chain_arm_row` with its run's ``seed``).

        Raises:
            ValueError: The runs answered different suites or seeds (they would not pair).
        """
        rows, seen = [], set()
        for arm, run in runs.items():
            cfg = RunStore.open(run).config
            seed, suite = int(cfg["protocol"]["seed"]), str(cfg["suite"]["name"])
            seen.add((seed, suite))
            rows.append({"seed": seed, "arm": arm, **chain_arm_row(run)})
        if len(seen) > 1:
            raise ValueError(f"the arms' runs do not pair (seed, suite): {sorted(seen)}")
        return rows
