"""Buckets planned in forked workers: the same cards as planned one after another, and the planner
(with its warm measurement cache) is inherited by the workers, never pickled for each bucket."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tsevo.data import Question, QuestionView
from tsevo.evolve.plan import local_plans
from tsevo.procs import forked_map
from tsevo.roles.builtin import MeasurementPlanner
from tsevo.roles.protocols import Dossier, Example


@dataclass(frozen=True)
class _Rec:
    correct: bool = False
    final_answer: int | None = None


def _example(qid: str, kind: str, seed: int, phrasing: str = "") -> Example:
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, 120)
    gold = int(rng.integers(2))
    if kind == "trend":
        y = (3.0 if gold == 0 else -3.0) * t + 0.3 * rng.standard_normal(120)
        text, options = "Is the trend of X upward or downward?", ("upward", "downward")
    else:
        sd = 0.2 if gold == 0 else 2.0
        y = np.sin(12 * t) + sd * rng.standard_normal(120)
        text, options = "Is the noise in X weak or strong?", ("weak", "strong")
    q = Question(
        id=qid,
        source="test",
        task="t",
        question=phrasing or text,
        options=options,
        series={"X": y},
        primary=("X",),
        gold=gold,
    )
    return Example(QuestionView.of(q, "v" + qid), gold, _Rec(final_answer=1 - gold))


def _dossiers() -> list[Dossier]:
    out = []
    for b, kind in enumerate(("trend", "noise", "trend", "noise")):
        rows = tuple(_example(f"{b}-{i}", kind, 100 * b + i) for i in range(6 + 2 * b))
        out.append(Dossier(f"no_tool.c{b}", "no_tool", "t", "", rows, ()))
    return out


class _PidPlanner(MeasurementPlanner):
    """Writes the process that planned each bucket; holds a lock, which cannot be pickled."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log
        self.lock = threading.Lock()

    def plan(self, dossier, feedback=()):  # type: ignore[no-untyped-def]
        with self.log.open("a") as fh:
            fh.write(f"{os.getpid()}\n")
        return super().plan(dossier, feedback)


def test_forked_planning_gives_the_serial_cards(tmp_path: Path) -> None:
    dossiers = _dossiers()
    serial, skipped1 = local_plans(dossiers, MeasurementPlanner(), workers=1)
    log = tmp_path / "pids"
    planner = _PidPlanner(log)
    planner.prepare(dossiers, workers=1)  # a warm cache, as a round leaves it
    forked, skipped2 = local_plans(dossiers, planner, workers=2)
    assert len(serial) >= 2  # the buckets are planned, not skipped
    assert [c.bucket_id for c in forked] == [c.bucket_id for c in serial]
    assert forked == serial and skipped1 == skipped2
    pids = {int(x) for x in log.read_text().split()}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def _plan_in_daemon(out: Path) -> None:
    cards, _ = local_plans(_dossiers()[:2], MeasurementPlanner(), workers=2)
    out.write_text(str(len(cards)))


def test_a_daemonic_process_plans_in_itself(tmp_path: Path) -> None:
    """A daemonic process (a pool's or a Dask worker's) may not fork a pool: it plans serially."""
    import multiprocessing as mp

    out = tmp_path / "n"
    p = mp.get_context("fork").Process(target=_plan_in_daemon, args=(out,), daemon=True)
    p.start()
    p.join(120)
    assert p.exitcode == 0 and int(out.read_text()) >= 2


def test_forked_map_keeps_index_order_and_nests() -> None:
    """A worker may map jobs of its own (a bucket's kinds): each level gets its own results back,
    in index order whatever order the jobs were handed out in."""
    lock = threading.Lock()  # closed over: never pickled

    def inner(i: int) -> list[tuple[int, int, int]]:
        with lock:
            return forked_map(lambda j: (i, j, os.getpid()), 3, 2)

    out = forked_map(inner, 4, 2, order=[3, 2, 1, 0])
    assert [[x[:2] for x in r] for r in out] == [[(i, j) for j in range(3)] for i in range(4)]
    assert os.getpid() not in {x[2] for r in out for x in r}
    assert forked_map(lambda i: i * i, 3, 1) == [0, 1, 4]  # one worker: here, in order
