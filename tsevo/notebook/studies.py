"""The study notebooks' configs (``90``–``96``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from tsevo.evolve import ProtocolConfig
from tsevo.evolve.ablation import paper_ablation

from .base import BACKENDS, NotebookConfig


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
