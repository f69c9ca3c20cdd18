"""Shared, cached evolution runs for the round, resume and CLI tests (and a kill driver).

A tiny round takes seconds, so the test modules share a few runs instead of each running its own.
Runs are cached per process (``functools.cache``) in one temporary folder that is removed at exit:

* :func:`main_run` — ``evolve`` in-process on ``make_suite("tiny", seed=SEED)`` with recording
  wrappers around the triage, planner and synthesizer roles (they delegate to the builtin roles, so
  the run is the same as an unwrapped one);
* :func:`cli_run` — the same round through ``python -m tsevo evolve`` as a real subprocess.

``python -m tests.round_fixtures ARGV...`` runs the ``tsevo`` command line with optional kill hooks
(read from the ``TSEVO_TEST_KILL`` environment variable, a JSON object) that SIGKILL the process at a
precise point: right after a ``step_done`` event of a step is written, or on the ``nth`` append to an
evaluation log whose name starts with a prefix (optionally leaving a torn half line behind).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsevo.evolve.support import request_support

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable

#: Tiny-suite seed whose single round is ACCEPTED (strict path), so library comparisons mean something.
SEED = 6

#: Artifacts that must be byte-identical across reruns of the same seed (timings live elsewhere).
COMPARED_TABLES = (
    "rounds/r1/base_pass.parquet",
    "rounds/r1/val_paired.parquet",
    "rounds/r1/buckets.json",
    "rounds/r1/contracts.json",
    "rounds/r1/splits.json",
    "rounds/r1/groups.json",
    "rounds/r1/synthesis.json",
    "rounds/r1/prefilter.parquet",
    "rounds/r1/gate.json",
    "rounds/r1/reconcile.json",
    "rounds/r1/round.json",
    "rounds/r1/test.json",
    "rounds/r1/test.parquet",
)

_TMP: Path | None = None


def tmp_root() -> Path:
    """A process-wide temporary folder for the shared runs (removed at interpreter exit)."""
    global _TMP
    if _TMP is None:
        _TMP = Path(tempfile.mkdtemp(prefix="tsevo-round-tests-"))
        atexit.register(shutil.rmtree, _TMP, True)
    return _TMP


def env() -> dict[str, str]:
    """Environment for subprocesses: offline, the repo importable, no kill hook unless asked."""
    e = dict(os.environ)
    e["HF_HUB_OFFLINE"] = "1"
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("TSEVO_TEST_KILL", None)
    return e


# --------------------------------------------------------------------------- recording roles
class _Clock:
    """The round a run is in, read from the run's log lines (``round <r>: ...``)."""

    def __init__(self) -> None:
        self.round = 0

    def log(self, sink: list[str]) -> Any:
        def log(line: str) -> None:
            sink.append(line)
            head = line.split(":", 1)[0]
            if head.startswith("round ") and head[6:].isdigit():
                self.round = int(head[6:])

        return log


class RecordingTriage:
    """Delegates to a triage role and records what every define / assign call was given."""

    def __init__(self, inner: Any, clock: _Clock) -> None:
        self.inner = inner
        self.name = inner.name
        self.clock = clock
        self.defines: list[dict[str, Any]] = []
        self.assigns: list[dict[str, Any]] = []

    def define(self, errors: Sequence[Any], max_categories: int) -> Any:
        """Record the sample and delegate."""
        cats = self.inner.define(errors, max_categories)
        self.defines.append(
            {
                "round": self.clock.round,
                "qids": [e.qid for e in errors],
                "k": max_categories,
                "n_categories": len(cats),
                "fields": sorted(vars(errors[0])) if errors else [],
            }
        )
        return cats

    def assign(self, categories: Sequence[Any], batch: Sequence[Any]) -> Any:
        """Record the batch and delegate."""
        self.assigns.append(
            {
                "round": self.clock.round,
                "qids": [e.qid for e in batch],
                "n_categories": len(categories),
            }
        )
        return self.inner.assign(categories, batch)


class RecordingPlanner:
    """Delegates to a local planner and records every dossier's question ids."""

    def __init__(self, inner: Any, clock: _Clock) -> None:
        self.inner = inner
        self.name = inner.name
        self.clock = clock
        self.seen: list[dict[str, Any]] = []

    def plan(self, dossier: Any, feedback: Sequence[str] = ()) -> Any:
        """Record the dossier and delegate."""
        self.seen.append(
            {
                "round": self.clock.round,
                "bucket": dossier.bucket_id,
                "support": [e.question.id for e in dossier.support],
                "background": [e.question.id for e in dossier.background],
            }
        )
        return self.inner.plan(dossier, feedback)

    def support_request(self, members: Sequence[Any], train: Sequence[Any] = ()) -> Any:
        """Delegate, so the recorded run splits its buckets as the plain planner does."""
        return request_support(self.inner, members, train)


class RecordingSynthesizer:
    """Delegates to a synthesizer and records the example rows each call was shown."""

    def __init__(self, inner: Any, clock: _Clock) -> None:
        self.inner = inner
        self.name = inner.name
        self.clock = clock
        self.shown: list[tuple[int, str]] = []

    def synthesize(self, group: Any, attempt: int, history: Any, examples: Sequence[Any]) -> Any:
        """Record the examples and delegate."""
        self.shown.extend((self.clock.round, e.question.id) for e in examples)
        return self.inner.synthesize(group, attempt, history, examples)

    def repair(self, group: Any, draft: Any, violation: str, examples: Sequence[Any]) -> Any:
        """Record the examples and delegate."""
        self.shown.extend((self.clock.round, e.question.id) for e in examples)
        return self.inner.repair(group, draft, violation, examples)


# --------------------------------------------------------------------------- runs
@dataclass
class Run:
    """A finished run folder plus what the in-process run could observe."""

    path: Path
    result: Any = None
    suite: Any = None
    roles: Any = None
    stdout: str = ""
    stderr: str = ""
    logs: list[str] = field(default_factory=list)


@functools.cache
def tiny_suite(seed: int = SEED) -> Any:
    """The tiny synthetic suite (cached)."""
    from tsevo.data.synthetic import make_suite

    return make_suite("tiny", seed=seed)


def recording_roles(clock: _Clock) -> Any:
    """Builtin roles with recording wrappers on triage, local planner and synthesizer."""
    from tsevo.roles import RoleSet

    rs = RoleSet.builtin()
    rs.triage = RecordingTriage(rs.triage, clock)  # type: ignore[assignment]
    rs.local_planner = RecordingPlanner(rs.local_planner, clock)  # type: ignore[assignment]
    rs.synthesizer = RecordingSynthesizer(rs.synthesizer, clock)  # type: ignore[assignment]
    return rs


def run_inprocess(
    name: str,
    seed: int = SEED,
    *,
    rounds: int = 1,
    roles: Any = None,
    suite: Any = None,
    **cfg_kw: Any,
) -> Run:
    """Run ``evolve`` in this process into ``tmp_root()/name`` (same config as the CLI would write)."""
    from tsevo.evolve.config import ProtocolConfig
    from tsevo.evolve.run import evolve
    from tsevo.evolve.support import SupportConfig

    suite = suite if suite is not None else tiny_suite(seed)
    clock = _Clock()
    roles = roles if roles is not None else recording_roles(clock)
    out = tmp_root() / name
    logs: list[str] = []
    # the pinned tiny stories were found under the paper's split (asks: tests/test_support.py)
    cfg_kw.setdefault("support", SupportConfig(planner_requests=False, triage_bound=False))
    cfg = ProtocolConfig(rounds=rounds, seed=seed, root="empty", **cfg_kw)
    res = evolve(
        suite,
        config=cfg,
        out=out,
        roles=roles,
        suite_ref=f"synthetic:tiny:seed={seed}",
        log=clock.log(logs),
    )
    return Run(out, res, suite, roles, logs=logs)


def view_ids(run: Run) -> Any:
    """The opaque ids the run's roles saw (its suite under its protocol seed), to map them back."""
    from tsevo.evolve.views import ViewIds

    seed = json.loads((run.path / "config.json").read_text())["protocol"]["seed"]
    return ViewIds(run.suite, str(seed))


@functools.cache
def main_run() -> Run:
    """The shared three-round tiny run (in process, recording roles); round 1 is accepted."""
    return run_inprocess("main", rounds=3)


def tsevo_cmd(out: Path, seed: int = SEED, rounds: int = 1) -> list[str]:
    """The ``tsevo evolve`` argument vector of the shared CLI run."""
    return [
        "evolve",
        "--suite",
        "synthetic:tiny",
        "--seed",
        str(seed),
        "--rounds",
        str(rounds),
        "--out",
        str(out),
        "--set",
        "support.planner_requests=false",
        "--set",
        "support.triage_bound=false",
        "--quiet",
    ]


def run_cli(
    argv: Sequence[str], *, kill: Mapping[str, Any] | None = None, timeout: float = 300
) -> Any:
    """Run the command line in a subprocess (through this module's kill driver when ``kill`` is set)."""
    e = env()
    if kill is not None:
        e["TSEVO_TEST_KILL"] = json.dumps(dict(kill))
        cmd = [PY, "-m", "tests.round_fixtures", *argv]
    else:
        cmd = [PY, "-m", "tsevo", *argv]
    return subprocess.run(
        cmd, cwd=REPO, env=e, capture_output=True, text=True, timeout=timeout, check=False
    )


@functools.cache
def cli_run() -> Run:
    """The shared round through ``python -m tsevo evolve`` (an uninterrupted real subprocess)."""
    out = tmp_root() / "cli"
    p = run_cli(tsevo_cmd(out))
    if p.returncode != 0:
        raise RuntimeError(f"tsevo evolve failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return Run(out, stdout=p.stdout, stderr=p.stderr)


# --------------------------------------------------------------------------- comparisons
def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path (for byte-for-byte comparisons)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def digest(data: bytes) -> str:
    """Short sha256 of bytes (readable assertion messages)."""
    return hashlib.sha256(data).hexdigest()[:12]


def jsonl_lines(path: Path) -> list[str]:
    """Complete lines of a JSONL file (a torn last line without newline is left out)."""
    data = path.read_bytes().decode("utf-8")
    lines = data.split("\n")
    return [ln for ln in lines[:-1] if ln.strip()]


def eval_logs(run: Path) -> dict[str, list[str]]:
    """Complete lines of every ``evals/*.jsonl`` log, by arm name."""
    return {
        p.name[: -len(".jsonl")]: jsonl_lines(p) for p in sorted((run / "evals").glob("*.jsonl"))
    }


def qids(lines: Iterable[str]) -> list[str]:
    """The ``qid`` of each JSON line."""
    return [json.loads(ln)["qid"] for ln in lines]


def summary_without_timings(run: Path) -> dict[str, Any]:
    """``run_summary`` with the timings and the run path removed (what reruns must reproduce)."""
    from tsevo.analysis import run_summary

    s = run_summary(run)
    s.pop("run", None)
    for rd in s["rounds"]:
        rd.pop("timings", None)
    return s


# --------------------------------------------------------------------------- kill driver
def _install_kill_hooks(spec: Mapping[str, Any]) -> None:
    """Patch the run store's append path so this process SIGKILLs itself at the point ``spec`` names.

    ``{"event": "plan"}``: right after the ``step_done`` event of step ``plan`` is on disk.
    ``{"append": "val.", "nth": 1, "torn": true}``: on the ``nth`` append (in this process) to an
    evaluation log whose file name starts with ``val.``; with ``torn`` only the first half of the
    first record is written (no newline), as a writer killed mid-line would leave it.
    """
    from tsevo import store

    original = store.RecordLog.append
    count = {"n": 0}

    def die() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def append(self: Any, records: Iterable[Mapping[str, Any]]) -> None:
        recs = list(records)
        path: Path = self.path
        if "event" in spec and path.name == "events.jsonl":
            original(self, recs)
            if any(r.get("kind") == "step_done" and r.get("step") == spec["event"] for r in recs):
                die()
            return
        if (
            "append" in spec
            and path.parent.name == "evals"
            and path.name.startswith(spec["append"])
        ):
            count["n"] += 1
            if count["n"] == int(spec.get("nth", 1)):
                if spec.get("torn") and recs:
                    line = json.dumps(dict(recs[0]), sort_keys=True, default=str)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with path.open("a", encoding="utf-8") as fh:
                        fh.write(line[: len(line) // 2])
                        fh.flush()
                        os.fsync(fh.fileno())
                else:
                    original(self, recs)
                die()
        original(self, recs)

    store.RecordLog.append = append  # type: ignore[method-assign]


def _main(argv: Sequence[str]) -> int:
    spec = os.environ.get("TSEVO_TEST_KILL")
    if spec:
        _install_kill_hooks(json.loads(spec))
    from tsevo.cli import main

    return main(list(argv))


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
