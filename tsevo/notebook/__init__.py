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

from tsevo.analysis import run_suite

from .base import (
    BACKENDS,
    DEFAULT_RUN_DIR,
    RUN_DIR_ENV,
    NotebookConfig,
    ensure_run,
    make_synthetic_suite,
    read_metrics,
    record_metrics,
    resolve_run_dir,
)
from .stages import (
    BasePassConfig,
    DataConfig,
    DeploymentConfig,
    GateConfig,
    MaraChainsConfig,
    PlanningConfig,
    QuickstartConfig,
    TaxonomyNotebookConfig,
)
from .studies import (
    AblationStudyConfig,
    FunnelConfig,
    GateCalibrationConfig,
    MainTableConfig,
    MaraChainStudyConfig,
    MultiRoundConfig,
    StudyConfig,
    TransferConfig,
)
from .study_taxonomy import TaxonomyStudyConfig

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
    "MaraChainStudyConfig",
    "MaraChainsConfig",
    "MultiRoundConfig",
    "NotebookConfig",
    "PlanningConfig",
    "QuickstartConfig",
    "StudyConfig",
    "TaxonomyNotebookConfig",
    "TaxonomyStudyConfig",
    "TransferConfig",
    "ensure_run",
    "make_synthetic_suite",
    "read_metrics",
    "record_metrics",
    "resolve_run_dir",
    "run_suite",
]

CONFIGS: dict[str, type[NotebookConfig]] = {
    c.notebook: c
    for c in (
        QuickstartConfig,
        DataConfig,
        BasePassConfig,
        TaxonomyNotebookConfig,
        PlanningConfig,
        MaraChainsConfig,
        GateConfig,
        DeploymentConfig,
        StudyConfig,
        MainTableConfig,
        TransferConfig,
        AblationStudyConfig,
        GateCalibrationConfig,
        MultiRoundConfig,
        FunnelConfig,
        MaraChainStudyConfig,
        TaxonomyStudyConfig,
    )
}
"""Notebook stem -> its config class."""
