"""The base of every notebook config, and the glue: run folders, the run, metrics."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from tsevo.analysis import rounds_in
from tsevo.data import Suite
from tsevo.data.synthetic import make_suite
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.evolve.support import SupportConfig
from tsevo.roles import RoleSet
from tsevo.roles.builtin import MeasurementPlanner
from tsevo.roles.builtin.kindplan import KindPlanSettings
from tsevo.roles.llm.config import RoleConfigs
from tsevo.store import RunLayout, RunStore

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
    support_asks: bool = False
    """The few-examples regime's adaptations: grant the builtin planner's asks for more of a bucket
    as support (``support.planner_requests``), the builtin triage's bound on categories
    (``support.triage_bound``) and the builtin planner's pooling of kinds under a shared specific
    option set (``KindPlanSettings.pool_option_sets``); all on by default in ``tsevo evolve``. Off
    here: the stage notebooks narrate the paper's split."""

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
        return ProtocolConfig(
            rounds=self.rounds_to_run(),
            seed=self.seed,
            support=SupportConfig(
                planner_requests=self.support_asks, triage_bound=self.support_asks
            ),
        )

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
            kinds = KindPlanSettings(pool_option_sets=self.support_asks)
            return RoleSet.builtin(local_planner=MeasurementPlanner(kinds=kinds))
        return RoleSet.llm(
            self.llm_configs(),
            run_dir=run_dir if run_dir is not None else self.run_path(),
            max_attempts=self.protocol().max_synthesis_attempts,
        )


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
