"""The run folder as a type: every path of a run, named once.

Layout (DESIGN.md §3)::

    runs/<run_id>/
      config.json  manifest.json          protocol config; versions, backend, model ids (no credentials)
      events.jsonl                        append-only event log (one JSON object per line)
      suite.parquet                       the suite the run answers
      evals/<arm>.jsonl                   answer records per arm, appended as they are produced
      rounds/r<r>/...                     per-round artifacts (:class:`RoundPaths`)
      library/                            the deployed library (written once per accepted round)
      llm/config.json  llm/accounting.json   LLM role configs and accounting (LLM backend only)
      llm_cache.sqlite                    the LLM response cache (LLM backend only)
      notebook_metrics/<name>.json        small metrics a notebook records
      taxonomy/                           failure taxonomy: traces, drafts, agreement, versions, refinement, pins
                                          (:class:`TaxonomyPaths`)
      run.lock                            the writers' advisory lock (holder's PID; :class:`RunLock`)

Package code names a run's files only through :class:`RunLayout` and :class:`RoundPaths`; no other
module spells a run-relative path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CandidatePaths", "RoundPaths", "RunLayout", "TaxonomyPaths"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def _safe(name: str, what: str) -> str:
    if not _NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"bad {what} {name!r}: letters, digits, '_', '-' and '.' only")
    return name


@dataclass(frozen=True)
class CandidatePaths:
    """One synthesis candidate's folder: ``rounds/r<r>/candidates/<tool_id>/``."""

    dir: Path

    @property
    def source(self) -> Path:
        """The candidate's tool source (``tool.py``; absent for artifacts without source)."""
        return self.dir / "tool.py"

    @property
    def meta(self) -> Path:
        """The candidate's metadata and attempt record (``meta.json``)."""
        return self.dir / "meta.json"

    @property
    def context(self) -> Path:
        """What the LLM chain step that made this node saw (``context.md``; LLM chains only)."""
        return self.dir / "context.md"

    @property
    def analysis(self) -> Path:
        """The accepted analysis of the step that made this node (``analysis.json``; LLM chains)."""
        return self.dir / "analysis.json"


@dataclass(frozen=True)
class RoundPaths:
    """Every file of round ``r``: ``rounds/r<r>/``.

    Attributes:
        dir: The round folder.
        r: Round number (1-based).
    """

    dir: Path
    r: int

    # step artifacts, in the order a round writes them
    @property
    def base_pass(self) -> Path:
        """Answer records of the current library on train (parquet)."""
        return self.dir / "base_pass.parquet"

    @property
    def clustering_error(self) -> Path:
        """Why clustering failed (an invalid round)."""
        return self.dir / "clustering_error.json"

    @property
    def buckets(self) -> Path:
        """Failure buckets (members, categories, dropped errors)."""
        return self.dir / "buckets.json"

    @property
    def splits(self) -> Path:
        """Per bucket: support and held-out rows."""
        return self.dir / "splits.json"

    @property
    def contracts(self) -> Path:
        """Local planners' contract cards."""
        return self.dir / "contracts.json"

    @property
    def groups(self) -> Path:
        """Work groups after global coordination."""
        return self.dir / "groups.json"

    @property
    def synthesis(self) -> Path:
        """Per work group: attempts and the survivor."""
        return self.dir / "synthesis.json"

    @property
    def prefilter(self) -> Path:
        """Every synthesis attempt with its checks and prefilter outcome (parquet)."""
        return self.dir / "prefilter.parquet"

    @property
    def candidates(self) -> Path:
        """Folder of candidate folders."""
        return self.dir / "candidates"

    def candidate(self, tool_id: str) -> CandidatePaths:
        """One candidate's folder."""
        return CandidatePaths(self.candidates / _safe(tool_id, "tool id"))

    @property
    def chains(self) -> Path:
        """Folder of the round's Mara chains (only when chains are on)."""
        return self.dir / "chains"

    @property
    def chain_ledger(self) -> Path:
        """The append-only spend log of the round's Mara chains (JSONL)."""
        return self.chains / "ledger.jsonl"

    @property
    def gate(self) -> Path:
        """The first gate decision."""
        return self.dir / "gate.json"

    @property
    def val_paired(self) -> Path:
        """The gate's paired validation rows (parquet)."""
        return self.dir / "val_paired.parquet"

    @property
    def prune(self) -> Path:
        """The one-shot prune record."""
        return self.dir / "prune.json"

    @property
    def reconcile(self) -> Path:
        """Scope-reconciliation edits and the final gate."""
        return self.dir / "reconcile.json"

    @property
    def library(self) -> Path:
        """The library the round admitted (accepted rounds)."""
        return self.dir / "library"

    @property
    def candidate_library(self) -> Path:
        """The best candidate library of a round that was not accepted."""
        return self.dir / "candidate_library"

    @property
    def summary(self) -> Path:
        """The round's result (status, gates, funnel, arms): ``round.json``."""
        return self.dir / "round.json"

    @property
    def timings(self) -> Path:
        """Seconds per step (kept apart so every other artifact is reproducible byte for byte)."""
        return self.dir / "timings.json"

    @property
    def test_table(self) -> Path:
        """Report-only test rows (parquet)."""
        return self.dir / "test.parquet"

    @property
    def test(self) -> Path:
        """Report-only test summary."""
        return self.dir / "test.json"

    @property
    def llm_accounting(self) -> Path:
        """What the round cost on the LLM backend."""
        return self.dir / "llm_accounting.json"


@dataclass(frozen=True)
class TaxonomyPaths:
    """A run's failure taxonomy (issue 12): ``taxonomy/``."""

    dir: Path

    @property
    def taxonomy(self) -> Path:
        """The current taxonomy version (AdaMAST's flat ``taxonomy.json``)."""
        return self.dir / "taxonomy.json"

    @property
    def draft(self) -> Path:
        """The induced draft, before the gate."""
        return self.dir / "taxonomy.draft.json"

    @property
    def lineage(self) -> Path:
        """One line per edit batch."""
        return self.dir / "lineage.jsonl"

    @property
    def manifest(self) -> Path:
        """Thresholds, metric, models, status (no credentials)."""
        return self.dir / "manifest.json"

    def traces(self, split: str) -> Path:
        """Normalized traces of one split (AdaMAST's canonical JSONL)."""
        return self.dir / "traces" / f"{_safe(split, 'split')}.jsonl"

    def draft_step(self, name: str) -> Path:
        """One induction step's record (``draft/step3_A.json``)."""
        return self.dir / "draft" / f"{_safe(name, 'step name')}.json"

    @property
    def agreement_dir(self) -> Path:
        """Folder of the gate rounds, one subfolder per taxonomy fingerprint (12 hex)."""
        return self.dir / "agreement"

    def agreement_round(self, fp12: str, k: int) -> Path:
        """One gate round's labels and figures."""
        return self.agreement_dir / _safe(fp12, "fingerprint") / f"round_{int(k)}.json"

    @property
    def pins(self) -> Path:
        """Consumer name -> the fingerprint and version it pinned: ``pins.json``."""
        return self.dir / "pins.json"

    def refine_record(self, r: int) -> Path:
        """Round ``r``'s refinement record: ``refine/round_<r>.json``."""
        return self.dir / "refine" / f"round_{int(r)}.json"

    def refine_proposal(self, r: int) -> Path:
        """Round ``r``'s proposed edits: ``refine/round_<r>.proposal.json``."""
        return self.dir / "refine" / f"round_{int(r)}.proposal.json"

    def version(self, n: int) -> Path:
        """A saved version."""
        return self.dir / "versions" / f"v{int(n)}.json"


@dataclass(frozen=True)
class RunLayout:
    """Every path of one run folder.

    Every path it returns is absolute (a relative root is taken from the current directory when
    the layout is made), so a path from the layout can be handed to any reader or writer.

    Args:
        root: The run folder.

    Example:
        >>> lay = RunLayout("runs/demo")
        >>> lay.rel(lay.round(2).gate)
        'rounds/r2/gate.json'
        >>> lay.rel(lay.eval_log("val.ab12"))
        'evals/val.ab12.jsonl'
    """

    root: Path

    def __init__(self, root: str | Path) -> None:
        object.__setattr__(self, "root", Path(root).absolute())

    @property
    def config(self) -> Path:
        """The protocol config (a run's identity)."""
        return self.root / "config.json"

    @property
    def manifest(self) -> Path:
        """Versions, backend, model ids."""
        return self.root / "manifest.json"

    @property
    def events(self) -> Path:
        """The append-only event log."""
        return self.root / "events.jsonl"

    @property
    def suite(self) -> Path:
        """The suite the run answers."""
        return self.root / "suite.parquet"

    @property
    def library(self) -> Path:
        """The deployed library."""
        return self.root / "library"

    @property
    def evals(self) -> Path:
        """Folder of answer-record logs."""
        return self.root / "evals"

    def eval_log(self, arm: str) -> Path:
        """Answer records of one arm (``<split>.<library fingerprint>``)."""
        return self.evals / f"{_safe(arm, 'arm name')}.jsonl"

    @property
    def rounds_dir(self) -> Path:
        """Folder of round folders."""
        return self.root / "rounds"

    def round(self, r: int) -> RoundPaths:
        """Every file of round ``r``."""
        if int(r) < 1:
            raise ValueError(f"rounds are numbered from 1, got {r}")
        return RoundPaths(self.rounds_dir / f"r{int(r)}", int(r))

    def rounds(self) -> list[int]:
        """Rounds that finished (a ``round.json`` exists), counting up from 1 without gaps."""
        out = []
        r = 1
        while self.round(r).summary.exists():
            out.append(r)
            r += 1
        return out

    @property
    def llm_config(self) -> Path:
        """The LLM role configs a run was started with (no credentials)."""
        return self.root / "llm" / "config.json"

    @property
    def llm_accounting(self) -> Path:
        """LLM accounting per session and in total."""
        return self.root / "llm" / "accounting.json"

    @property
    def llm_cache(self) -> Path:
        """The LLM response cache."""
        return self.root / "llm_cache.sqlite"

    @property
    def lock(self) -> Path:
        """The advisory lock file a writer holds (its PID inside; see ``tsevo.store.RunLock``)."""
        return self.root / "run.lock"

    def notebook_metrics(self, name: str) -> Path:
        """Metrics a notebook recorded."""
        return self.root / "notebook_metrics" / f"{_safe(name, 'metrics name')}.json"

    @property
    def taxonomy(self) -> TaxonomyPaths:
        """The run's failure taxonomy folder."""
        return TaxonomyPaths(self.root / "taxonomy")

    def is_run(self) -> bool:
        """True when the folder holds a run (its config exists)."""
        return self.config.exists()

    def rel(self, path: str | Path) -> str:
        """A path inside the run, relative to its root (POSIX), e.g. for messages and events."""
        p = Path(path)
        try:
            return p.relative_to(self.root).as_posix()
        except ValueError:
            return p.as_posix()
