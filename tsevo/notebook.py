"""The notebooks' configs and thin glue: run folders, the run, metrics.

Every notebook in ``notebooks/`` has a cell tagged ``parameters`` whose names map one-to-one onto
the fields of its config class here (``XConfig.from_params(dict(...))`` raises :class:`TypeError`
on an unknown name). All configs share one base, :class:`NotebookConfig`: the run folder, the
synthetic preset and seed, and the backend with its LLM settings, from which it builds the
:class:`~tsevo.evolve.ProtocolConfig` (:meth:`NotebookConfig.protocol`) and the
:class:`~tsevo.roles.RoleSet` (:meth:`NotebookConfig.roles`), so every notebook runs on either
backend from its parameters cell. The API key of the LLM backend is never a parameter: it comes
from the environment only (``TSEVO_LLM_API_KEY`` or ``OPENAI_API_KEY``).

The notebooks narrate and show; tables come from :mod:`tsevo.analysis`, figures and inspectors from
:mod:`tsevo.widgets`, notebook execution and the study's library comparison from
:mod:`tsevo.studies`.

Run folders: a notebook reads the previous stage's artifacts from a run folder (DESIGN.md §3), so
any stage can be rerun alone. ``run_dir=""`` means ``$TSEVO_RUN_DIR`` when set (how the tests
share one prepared run) and otherwise ``runs/notebooks`` below the working directory;
:func:`ensure_run` creates the run there with the configured preset, seed and backend when it holds
no finished round yet, and otherwise reuses it as it is.

Metrics: the last cell of every notebook calls :func:`record_metrics`, which writes the notebook's
metrics file in the run folder (:meth:`tsevo.store.RunLayout.notebook_metrics`; read back with
:func:`read_metrics`).
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from tsevo.analysis import rounds_in, run_suite
from tsevo.data import Suite
from tsevo.data.synthetic import make_suite
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.evolve.ablation import paper_ablation
from tsevo.roles import RoleSet
from tsevo.roles.llm.config import RoleConfigs
from tsevo.store import RunLayout, RunStore

__all__ = [
    "BACKENDS",
    "CONFIGS",
    "DEFAULT_RUN_DIR",
    "RUN_DIR_ENV",
    "AblationStudyConfig",
    "BasePassConfig",
    "DataConfig",
    "DeploymentConfig",
    "FunnelConfig",
    "GateCalibrationConfig",
    "GateConfig",
    "MainTableConfig",
    "MultiRoundConfig",
    "NotebookConfig",
    "PlanningConfig",
    "QuickstartConfig",
    "StudyConfig",
    "TransferConfig",
    "ensure_run",
    "make_synthetic_suite",
    "read_metrics",
    "record_metrics",
    "resolve_run_dir",
    "run_suite",
]

RUN_DIR_ENV = "TSEVO_RUN_DIR"
"""Environment variable naming a prepared run folder (the default of every ``run_dir``)."""
DEFAULT_RUN_DIR = "runs/notebooks"
BACKENDS = ("builtin", "llm")
"""The backends a notebook's roles run on."""

C = TypeVar("C", bound="NotebookConfig")


# --------------------------------------------------------------------------------------- configs
@dataclass(frozen=True, kw_only=True)
class NotebookConfig:
    """The parameters every notebook shares: run folder, preset, seed, backend and LLM settings.

    Strict construction from a parameters mapping (:meth:`from_params`), JSON form, the run folder,
    and the protocol config and role set a run is evolved with.
    """

    notebook: ClassVar[str] = ""

    run_dir: str = ""
    """Run folder ("" = $TSEVO_RUN_DIR or runs/notebooks); reused when it holds a finished run."""
    size: str = "tiny"
    """Synthetic suite preset (tiny | default | large) or a count per family; used only when the
    run has to be created."""
    seed: int = 5
    """Suite, split and protocol seed (5 gives a tiny round that the gate accepts); used only when
    the run has to be created."""
    backend: str = "builtin"
    """Roles of a run created here: builtin (offline, deterministic) | llm (an OpenAI-compatible
    endpoint; the API key from the environment only)."""
    base_url: str = ""
    """LLM endpoint ("" = $TSEVO_LLM_BASE_URL or the OpenAI API); llm backend only."""
    model: str = ""
    """LLM model id ("" = $TSEVO_LLM_MODEL); llm backend only."""
    temperature: float = 0.0
    """LLM sampling temperature; llm backend only."""
    concurrency: int = 4
    """LLM requests in flight; llm backend only."""
    cache_mode: str = "read_write"
    """LLM response cache in the run folder: read_write | replay | off; llm backend only."""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")

    @classmethod
    def from_params(cls: type[C], params: Mapping[str, Any]) -> C:
        """Build the config from a notebook's parameters.

        Raises:
            TypeError: A name that is not a field of the config (a typo fails loudly), or a value
                of the wrong type.
            ValueError: An unknown backend.
        """
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - names)
        if unknown:
            raise TypeError(f"{cls.__name__}: unknown parameters {unknown}; known: {sorted(names)}")
        defaults = cls()
        for f in fields(cls):
            if f.name not in params:
                continue
            v, want = params[f.name], type(getattr(defaults, f.name))
            if not isinstance(v, want) or (want is int and isinstance(v, bool)):
                raise TypeError(
                    f"{cls.__name__}.{f.name} must be {want.__name__}, got {type(v).__name__}"
                )
        return cls(**dict(params))

    def to_dict(self) -> dict[str, Any]:
        """The parameters as a JSON-friendly dict."""
        return asdict(self)

    def run_path(self) -> Path:
        """The run folder this notebook reads (see :func:`resolve_run_dir`).

        A study config whose protocol differs from the stage notebooks' (:meth:`variant`) keeps its
        run beside the default folder (``<folder>-<variant>``) unless ``run_dir`` names one, so the
        shared run is never asked to resume under another config.
        """
        path = resolve_run_dir(self.run_dir)
        if self.variant() and not self.run_dir:
            path = path.with_name(f"{path.name}-{self.variant()}")
        return path

    def variant(self) -> str:
        """A short name for a protocol other than the stage notebooks' ("" when it is the same)."""
        return ""

    def rounds_to_run(self) -> int:
        """Evolution rounds a run created for this notebook gets."""
        return 1

    def protocol(self) -> ProtocolConfig:
        """The protocol config a run created for this notebook is evolved with."""
        return ProtocolConfig(rounds=self.rounds_to_run(), seed=self.seed)

    def suite(self) -> Suite:
        """The synthetic suite a run created for this notebook answers."""
        return make_synthetic_suite(self.size, self.seed)

    @property
    def suite_ref(self) -> str:
        """How the suite is specified (recorded in the run's config)."""
        return f"synthetic:{self.size}:seed={self.seed}"

    def llm_configs(self) -> RoleConfigs:
        """The LLM role configs: defaults < ``$TSEVO_LLM_*`` < this config's non-empty settings."""
        return RoleConfigs.load(
            base_url=self.base_url or None,
            model=self.model or None,
            temperature=self.temperature,
            concurrency=self.concurrency,
            cache_mode=self.cache_mode,
        )

    def roles(self, run_dir: str | Path | None = None) -> RoleSet:
        """The role set of the configured backend; close it when done (it is a context manager).

        Args:
            run_dir: The run folder (the LLM response cache lives in it); default :meth:`run_path`.
        """
        if self.backend == "builtin":
            return RoleSet.builtin()
        return RoleSet.llm(
            self.llm_configs(),
            run_dir=run_dir if run_dir is not None else self.run_path(),
            max_attempts=self.protocol().max_synthesis_attempts,
        )


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


CONFIGS: dict[str, type[NotebookConfig]] = {
    c.notebook: c
    for c in (
        QuickstartConfig,
        DataConfig,
        BasePassConfig,
        PlanningConfig,
        GateConfig,
        DeploymentConfig,
        StudyConfig,
        MainTableConfig,
        TransferConfig,
        AblationStudyConfig,
        GateCalibrationConfig,
        MultiRoundConfig,
        FunnelConfig,
    )
}
"""Notebook stem -> its config class."""


# --------------------------------------------------------------------------------------- runs
def resolve_run_dir(run_dir: str = "", default: str = DEFAULT_RUN_DIR) -> Path:
    """``run_dir`` if given, else ``$TSEVO_RUN_DIR`` if set, else ``default`` (relative to cwd)."""
    if run_dir:
        return Path(run_dir)
    env = os.environ.get(RUN_DIR_ENV, "")
    return Path(env) if env else Path(default)


def make_synthetic_suite(size: str = "tiny", seed: int = 5) -> Suite:
    """The synthetic suite preset, split train/val/test by ``seed``."""
    return make_suite(size=size, seed=seed)


def ensure_run(
    cfg: NotebookConfig,
    suite: Suite | None = None,
    *,
    log: Callable[[str], None] = print,
) -> Path:
    """The notebook's run folder, evolved first when it holds no finished round yet.

    A folder with enough finished rounds is reused as it is (its own config decides; ``size``,
    ``seed`` and the backend are then ignored). Otherwise :meth:`NotebookConfig.roles` (closed
    afterwards) run :meth:`NotebookConfig.rounds_to_run` rounds of :meth:`NotebookConfig.protocol`
    on ``suite`` (default: the synthetic preset of ``cfg``).

    Returns:
        The run folder.
    """
    path = cfg.run_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # One writer at a time: notebooks executed in parallel may all ask for the same run folder.
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if RunLayout(path).is_run() and len(rounds_in(path)) >= cfg.rounds_to_run():
            log(f"reusing the finished run in {path}")
            return path
        suite = suite if suite is not None else cfg.suite()
        with cfg.roles(path) as roles:
            evolve(
                suite,
                roles=roles,
                config=cfg.protocol(),
                out=path,
                suite_ref=cfg.suite_ref,
                log=log,
            )
    return path


# --------------------------------------------------------------------------------------- metrics
def record_metrics(run: str | Path, name: str, metrics: Mapping[str, Any]) -> Path:
    """Write a notebook's metrics as small JSON in the run folder.

    Args:
        run: Run folder.
        name: Notebook stem (letters, digits, ``_``, ``-`` and ``.``).
        metrics: JSON-friendly numbers and short strings.

    Returns:
        The written file.

    Raises:
        ValueError: A name that is not a plain file name.
    """
    store = RunStore.open(run)
    return store.write_json(store.layout.notebook_metrics(name), dict(metrics))


def read_metrics(run: str | Path, name: str) -> dict[str, Any]:
    """Metrics written by :func:`record_metrics`."""
    store = RunStore.open(run)
    out: dict[str, Any] = store.read_json(store.layout.notebook_metrics(name))
    return out


@dataclass(frozen=True, kw_only=True)
class MaraChainsConfig(NotebookConfig):
    """``35_mara_chains``: rejected candidates refined along Mara chains, node by node."""

    notebook: ClassVar[str] = "35_mara_chains"
    depth: int = 3
    """Chain steps after v0 (0: chains off, the shared run; the view then says so)."""
    acceptance: str = "paper"
    """Acceptance variant: paper (a node clears the prefilter bar) | code (beats the root's sum)."""
    round: int = 1
    """Round whose chains are shown."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.protocol()  # a bad depth or variant raises here, before any run

    def protocol(self) -> ProtocolConfig:
        """The stage protocol with Mara chains of ``depth`` steps under ``acceptance``."""
        from dataclasses import replace

        from tsevo.marachain import MaraConfig

        mara = MaraConfig(depth=self.depth, acceptance=self.acceptance)
        return replace(super().protocol(), marachain=mara)

    def variant(self) -> str:
        """``marachain-d<depth>`` (``-code`` for that variant) unless chains are off."""
        if self.depth == 0:
            return ""
        return f"marachain-d{self.depth}" + ("-code" if self.acceptance == "code" else "")


@dataclass(frozen=True, kw_only=True)
class TaxonomyNotebookConfig(NotebookConfig):
    """``25_taxonomy``: failure codes induced from the train traces, gated by agreement, browsed."""

    notebook: ClassVar[str] = "25_taxonomy"
    round: int = 0
    """Base pass round the traces come from (0: the latest round with a base pass)."""
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

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.metric not in ("cohen_area", "fleiss_code_macro"):
            raise ValueError(f"metric must be cohen_area or fleiss_code_macro, got {self.metric!r}")

    def source_round(self) -> int | None:
        """``round``, or None for the latest base pass."""
        return self.round or None

    def induce_config(self) -> Any:
        """The builtin induction's config (:class:`tsevo.taxonomy.induce.InduceConfig`)."""
        from tsevo.taxonomy.induce import InduceConfig

        return InduceConfig(seed=self.taxonomy_seed)

    def gate_config(self) -> Any:
        """The builtin gate's config (:class:`tsevo.taxonomy.gate.GateConfig`)."""
        from tsevo.taxonomy.gate import GateConfig as TaxonomyGateConfig

        return TaxonomyGateConfig(
            seed=self.taxonomy_seed,
            metric=self.metric,
            kappa_target=self.kappa_target,
            coverage_floor=self.coverage_floor,
            max_rounds=self.max_rounds,
        )
