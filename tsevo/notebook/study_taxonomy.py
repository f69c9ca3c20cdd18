"""``98_study_taxonomy_coded``: the paired taxonomy study's config (issue 12, design taxonomy.md §5.5).

Per seed: one base run (the stage protocol, every taxonomy consumer off: the ``none`` arm), one
taxonomy induced and gated (builtin) on that run's train traces and pinned in it, then arms that
rerun the same round with the pinned taxonomy read by the consumers (:data:`TAXONOMY_ARMS`). A
study cell runs every arm of one seed, so "one taxonomy per seed, then pinned" needs no order
between cells: the cell induces it (or reuses its earlier pin) itself, deterministically.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from tsevo.analysis import (
    TAXONOMY_ARMS,
    taxonomy_answer_rows,
    taxonomy_arm_params,
    taxonomy_arm_row,
)
from tsevo.evolve import ProtocolConfig
from tsevo.taxonomy import runs as taxonomy_runs
from tsevo.taxonomy.jsonio import load_taxonomy
from tsevo.taxonomy.refine import load_pinned, pin, read_pins

from .base import NotebookConfig, ensure_run, resolve_run_dir
from .stages import TaxonomyNotebookConfig

__all__ = ["PIN_CONSUMER", "TaxonomyStudyConfig"]

PIN_CONSUMER = "taxonomy_study"
"""The consumer name the study pins its taxonomy under (``taxonomy/pins.json`` of the base run),
followed by its trace source and seed (:meth:`TaxonomyStudyConfig.pin_consumer`)."""


def _names(text: str) -> list[str]:
    return [m.strip() for m in text.split(",") if m.strip()]


@dataclass(frozen=True, kw_only=True)
class TaxonomyStudyConfig(NotebookConfig):
    """``98_study_taxonomy_coded``: arms that differ only in the taxonomy's consumers, paired.

    Run folders: the base run (``none``) is the run folder itself (the stage notebooks' run when
    ``run_dir`` is empty; a study cell's run otherwise); every other arm's run lies beside it,
    named by the arm and the pinned fingerprint (``<run>-taxonomy-<arm>-<fp8>``), so a run made
    with another taxonomy is never reused. The notebook's metrics go to the base run.
    """

    notebook: ClassVar[str] = "98_study_taxonomy_coded"
    arms: str = "none,coded"
    """Comma-separated arms: none (consumers off) | coded (diagnoses instead of free text) | beside
    (diagnoses beside it) | coded_triage (codes as triage categories too); none is the
    reference every other arm is paired with."""
    traces: str = "all"
    """Train traces of the base run the taxonomy is induced from: base | evolution | all."""
    taxonomy_seed: int = 0
    """Seeds the induction/gate pool split and the gate's trace sampler."""
    allow_unaccepted: bool = True
    """Let the arms read a taxonomy the gate did not accept (recorded in each arm's protocol and
    row). On by default: the study contrasts the consumers, and whether the gate accepts a
    taxonomy mined from one small run turns on a few traces (one code more or less decides whether
    Cohen's κ is defined). False: an arm refuses a taxonomy that is not ``accepted``."""
    taxonomy_path: str = ""
    """A taxonomy.json to pin instead of inducing one ("" = induce on the base run)."""
    taxonomy_fingerprint: str = ""
    """The fingerprint ``taxonomy_path`` must hold ("" = whatever it holds, recorded)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        arms = self.arm_list()
        if not arms or len(set(arms)) < len(arms) or set(arms) - set(TAXONOMY_ARMS):
            raise ValueError(
                f"arms must name distinct arms of {list(TAXONOMY_ARMS)}, got {self.arms!r}"
            )
        self.stage().induce_config()  # a bad trace source raises here, before any run
        if self.taxonomy_fingerprint and not self.taxonomy_path:
            raise ValueError("taxonomy_fingerprint is given without a taxonomy_path")
        if self.taxonomy_path:
            for arm in arms:  # a bad fingerprint raises here
                self.arm_protocol(arm, self.taxonomy_path, self.taxonomy_fingerprint)

    def arm_list(self) -> list[str]:
        """``arms`` as a list."""
        return _names(self.arms)

    def stage(self) -> TaxonomyNotebookConfig:
        """The taxonomy stage's config for the induction and the gate (its defaults otherwise)."""
        return TaxonomyNotebookConfig(traces=self.traces, taxonomy_seed=self.taxonomy_seed)

    def arm_protocol(self, arm: str, path: str = "", fingerprint: str = "") -> ProtocolConfig:
        """One arm's protocol: the stage protocol with the arm's consumers reading ``path``."""
        params = taxonomy_arm_params(arm, path, fingerprint, allow_unaccepted=self.allow_unaccepted)
        return ProtocolConfig.from_params(params, base=super().protocol())

    def protocol(self) -> ProtocolConfig:
        """The first arm's protocol on the configured taxonomy (the stage protocol for none)."""
        return self.arm_protocol(self.arm_list()[0], self.taxonomy_path, self.taxonomy_fingerprint)

    def base_path(self) -> Path:
        """The base run (the ``none`` arm, where the taxonomy is induced and pinned)."""
        return resolve_run_dir(self.run_dir)

    def arm_run_path(self, arm: str, fingerprint: str) -> Path:
        """An arm's run folder (see the class docstring)."""
        base = self.base_path()
        if arm == "none":
            return base
        return base.with_name(f"{base.name}-taxonomy-{arm}-{fingerprint[7:15]}")

    def base_config(self) -> TaxonomyStudyConfig:
        """The base run's config (the none arm in the base folder)."""
        return replace(
            self, arms="none", run_dir=str(self.base_path()), taxonomy_path="",
            taxonomy_fingerprint="",
        )  # fmt: skip

    def pin_consumer(self) -> str:
        """The pin's consumer name: ``taxonomy_study:<traces>:<taxonomy_seed>``.

        Another trace source or seed is another pin, so a rerun never reuses a taxonomy induced
        under other settings (re-inducing then meets the old pin: a pinned version file is never
        rewritten, and the run refuses loudly).
        """
        return f"{PIN_CONSUMER}:{self.traces}:{self.taxonomy_seed}"

    def pinned(self, log: Callable[[str], None] = print) -> dict[str, Any]:
        """The study's taxonomy: evolve the base run if needed, then induce, gate and pin it.

        With ``taxonomy_path`` that file is pinned as it is. Otherwise the base run's earlier pin
        (consumer :meth:`pin_consumer`) is reused, its version file checked against the pinned
        fingerprint; only without one is a taxonomy induced and gated (builtin, deterministic) on
        the base run's train traces and pinned. Returns ``path`` (absolute), ``fingerprint``,
        ``status``, ``codes``, ``version_n`` and ``source`` (given | reused | induced).
        """
        if self.taxonomy_path:
            tax = load_taxonomy(self.taxonomy_path)
            if self.taxonomy_fingerprint and tax.fingerprint != self.taxonomy_fingerprint:
                raise ValueError(
                    f"{self.taxonomy_path}: fingerprint {tax.fingerprint}, not the given "
                    f"{self.taxonomy_fingerprint}"
                )
            path, source = Path(self.taxonomy_path).resolve(), "given"
        else:
            base = ensure_run(self.base_config(), log=log)
            source = "reused"
            consumer = self.pin_consumer()
            if consumer not in read_pins(base):
                stage = self.stage()
                taxonomy_runs.induce_run(base, config=stage.induce_config(), source=self.traces)
                taxonomy_runs.gate_run(base, config=stage.gate_config())
                pin(base, consumer)
                source = "induced"
            tax = load_pinned(base, consumer)
            rec = read_pins(base)[consumer]
            path = (base / "taxonomy" / str(rec["path"])).resolve()
        return {
            "path": str(path),
            "fingerprint": tax.fingerprint,
            "status": tax.status,
            "codes": len(tax.codes),
            "version_n": tax.version_n,
            "source": source,
        }

    def arm_config(self, arm: str, pinned: dict[str, Any]) -> TaxonomyStudyConfig:
        """This config narrowed to one arm, its run folder and the pinned taxonomy."""
        fp = str(pinned["fingerprint"])
        return replace(
            self, arms=arm, run_dir=str(self.arm_run_path(arm, fp)),
            taxonomy_path=str(pinned["path"]), taxonomy_fingerprint=fp,
        )  # fmt: skip

    def arm_runs(
        self, pinned: dict[str, Any], log: Callable[[str], None] = print
    ) -> dict[str, Path]:
        """Every arm's run folder, each evolved first when it holds no finished round."""
        return {a: ensure_run(self.arm_config(a, pinned), log=log) for a in self.arm_list()}

    def arm_rows(self, runs: dict[str, Path]) -> list[dict[str, Any]]:
        """One row per arm (:func:`tsevo.analysis.taxonomy_arm_row`).

        Raises:
            ValueError: The runs answered different suites or seeds, or ran on different backends
                or labels (a reused builtin base run beside LLM arms): they would not pair.
        """
        rows = [taxonomy_arm_row(run, arm) for arm, run in runs.items()]
        seen = sorted({(r["seed"], r["suite"], r["backend"], r["label"]) for r in rows})
        if len(seen) > 1:
            raise ValueError(f"the arms' runs do not pair (seed, suite, backend, label): {seen}")
        return rows

    def answer_rows(self, runs: dict[str, Path]) -> list[dict[str, Any]]:
        """Every arm's report-only test answers (:func:`tsevo.analysis.taxonomy_answer_rows`)."""
        return [row for arm, run in runs.items() for row in taxonomy_answer_rows(run, arm)]
