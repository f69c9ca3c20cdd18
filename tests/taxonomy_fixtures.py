"""Small constructed trace sets for the taxonomy tests (no run, no sandbox: built in memory).

:func:`planted` answers ``n`` train questions with a one-tool library; on a planted set of
questions (a seeded hash picks them) the tool times out and the answer fails far more often. Val
and test questions carry a sentinel in their text, for the canary.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from tsevo.agent import AnswerRecord, StageStep, ToolRun
from tsevo.data import Question, Suite
from tsevo.store import RunStore
from tsevo.taxonomy.induce import induce
from tsevo.taxonomy.model import Taxonomy
from tsevo.taxonomy.traces import Trace, normalize, trace_id

SENTINEL = "ZQXSENTINEL"
TEMPLATES = (
    ("What is the period of the repeating pattern, in steps?", ("5 steps", "12 steps", "33 steps")),
    ("Does the series trend upward or downward over time?", ("upward", "downward", "flat")),
    ("Which candidate series matches the reference copy?", ("Series A", "Series B", "Series C")),
)


def _u(*parts: object) -> float:
    h = hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()
    return int(h[:12], 16) / 16**12


def planted(n: int = 240, seed: int = 0, rate: float = 0.2) -> tuple[list[Trace], set[str]]:
    """Traces of ``n`` train questions (plus val/test ones left out) and the planted trace ids."""
    questions, records, splits, planted_q = planted_parts(n, seed, rate)
    traces = normalize(records, questions, splits, round_=1, library="lib0", seed=seed)
    return traces, {trace_id(questions[q].fingerprint, 1, "train", "lib0") for q in planted_q}


@functools.cache
def planted_draft(n: int = 240, seed: int = 1) -> tuple[list[Trace], Taxonomy]:
    """The planted traces and the builtin draft induced on them (shared by the gate tests)."""
    traces, _ = planted(n=n, seed=seed)
    return traces, induce(traces).taxonomy


def planted_run(root: Path, n: int = 160, seed: int = 0) -> Path:
    """A run folder holding only what taxonomy needs: config, suite and round 1's base pass."""
    questions, records, splits, _ = planted_parts(n, seed, 0.2)
    store = RunStore.create(root, {"seed": seed, "purpose": "taxonomy test"})
    Suite("planted", list(questions.values()), splits).save(store.layout.suite)
    rows = pd.DataFrame([records[q].to_row(timings=False) for q in sorted(records)])
    store.write_parquet(store.layout.round(1).base_pass, rows)
    return root


def planted_parts(
    n: int, seed: int, rate: float
) -> tuple[dict[str, Question], dict[str, AnswerRecord], dict[str, str], set[str]]:
    """The questions, records, splits and planted question ids behind :func:`planted`."""
    questions: dict[str, Question] = {}
    records: dict[str, AnswerRecord] = {}
    splits: dict[str, str] = {}
    planted_q: set[str] = set()
    for i in range(n + 20):
        split = "train" if i < n else ("val" if i % 2 else "test")
        text, options = TEMPLATES[i % 3]
        if split != "train":
            text = f"{text} {SENTINEL}"
            options = (*options[:2], f"{SENTINEL} option")
        qid = f"src-{i:04d}"
        series = {"x": np.sin(np.arange(40 + (i % 7) * 30) * (1 + i / 7))}
        gold = int(_u("gold", seed, i) * 3)
        q = Question(id=qid, source="synthetic", task=f"synthetic/task{i % 3}", question=text,
                     options=options, series=series, primary=("x",), gold=gold,
                     group=f"grp-{i}", subtask=f"sub{i % 3}")  # fmt: skip
        bad = _u("plant", seed, i) < rate
        if bad and split == "train":
            planted_q.add(qid)
            run = ToolRun("period_probe", "error", error="timed out", error_kind="timeout")
            step = StageStep(
                1, ("period_probe",), (run,), "no_tool", "period_probe timed out", 0, 0
            )
            fail = _u("fail", seed, i) < 0.9
        else:
            ok = _u("abst", seed, i) < 0.8
            run = ToolRun("period_probe", "ok" if ok else "abstain", outputs={"period": 12.0})
            decision = "keep" if ok else "no_decision"
            step = StageStep(1, ("period_probe",), (run,), decision, "evidence agrees", 0, 0)
            fail = _u("fail", seed, i) < 0.35
        answer = gold if not fail else (gold + 1) % 3
        base = answer
        step = replace(step, answer_in=base, answer_out=answer)
        records[qid] = AnswerRecord(qid=qid, fingerprint=q.fingerprint, task=q.task,
                                    base_answer=base, base_reason="period rule: lag 12",
                                    steps=(step,), final_answer=answer, correct=not fail)  # fmt: skip
        questions[qid] = q
        splits[qid] = split
    return questions, records, splits, planted_q


def permuted(traces: list[Trace], seed: int) -> list[Trace]:
    """The same traces with their outcomes permuted (a seeded shuffle)."""
    outs = [t.outcome for t in traces]
    order = np.random.default_rng(seed).permutation(len(outs))
    return [
        Trace(t.problem_id, t.task, t.raw_trajectory, {**t.metadata, "outcome": outs[j]})
        for t, j in zip(traces, order, strict=True)
    ]


#: Failure modes a round of :func:`rounds_run` can switch on, each on its own planted questions.
MODES: tuple[str, ...] = ("timeout", "replace", "abstain", "rlimit", "short")


def mode_of(i: int, seed: int, rate: float = 0.15) -> str | None:
    """The failure mode planted on question ``i`` (one of :data:`MODES`) or ``None``.

    ``timeout``, ``replace``, ``abstain`` and ``rlimit`` take seeded shares ``rate`` of the
    questions; ``short`` is every question on the shortest series (40 points, every seventh)
    whose planted mode is not active in the round (:func:`round_records`).
    """
    k = int(_u("plant-mode", seed, i) / rate)
    return MODES[k] if k < 4 else None


def active_mode(i: int, seed: int, modes: tuple[str, ...]) -> str | None:
    """The mode failing question ``i`` in a round whose active modes are ``modes``."""
    mode = mode_of(i, seed)
    if mode in modes:
        return mode
    return "short" if i % 7 == 0 and "short" in modes else None


def round_records(
    questions: dict[str, Question], modes: tuple[str, ...], seed: int, background: float
) -> dict[str, AnswerRecord]:
    """One round's base-pass records: the active modes fail 90% of their questions.

    ``timeout``: the tool times out and no decision is taken. ``replace``: the tool runs and the
    reviewer replaces the answer (wrong 90% of the time). ``abstain``: the answerer gives no
    answer and no tool is shortlisted. ``rlimit``: one tool hits its memory limit, a second runs
    and the reviewer keeps the (wrong) answer. ``short``: the tool runs, the reviewer keeps the
    answer, and the answer is wrong (a domain failure: questions on short series). Elsewhere the tool runs (or abstains)
    and the answer fails with probability ``background``.
    """
    records: dict[str, AnswerRecord] = {}
    for i, qid in enumerate(sorted(questions)):
        q = questions[qid]
        gold = int(q.gold or 0)
        mode = active_mode(i, seed, modes)
        hit = _u("mode-fail", seed, i) < 0.9
        base = answer = gold if not hit else (gold + 1) % 3
        if mode == "timeout":
            run = ToolRun("period_probe", "error", error="timed out", error_kind="timeout")
            step = StageStep(1, ("period_probe",), (run,), "no_decision", "period_probe timed out",
                             0, 0)  # fmt: skip
        elif mode == "replace":
            run = ToolRun("period_probe", "ok", outputs={"period": 12.0})
            step = StageStep(1, ("period_probe",), (run,), "replace", "evidence disagrees", 0, 0)
            base, answer = ((gold + 1) % 3, gold) if not hit else (gold, (gold + 1) % 3)
        elif mode == "abstain" and hit:
            records[qid] = AnswerRecord(qid=qid, fingerprint=q.fingerprint, task=q.task,
                                        base_answer=None, base_reason="no rule applies", steps=(),
                                        final_answer=None, correct=False)  # fmt: skip
            continue
        elif mode == "rlimit":
            runs = (
                ToolRun("period_probe", "error", error="memory limit", error_kind="rlimit"),
                ToolRun("trend_probe", "ok", outputs={"slope": 0.5}),
            )
            step = StageStep(1, ("period_probe", "trend_probe"), runs, "keep", "evidence agrees",
                             0, 0)  # fmt: skip
        elif mode == "short":
            run = ToolRun("period_probe", "ok", outputs={"period": 12.0})
            step = StageStep(1, ("period_probe",), (run,), "keep", "evidence agrees", 0, 0)
        else:
            ok = _u("abst", seed, i) < 0.8
            run = ToolRun("period_probe", "ok" if ok else "abstain", outputs={"period": 12.0})
            step = StageStep(1, ("period_probe",), (run,), "keep" if ok else "no_decision",
                             "evidence agrees", 0, 0)  # fmt: skip
            base = answer = gold if _u("bg-fail", seed, i) >= background else (gold + 1) % 3
        step = replace(step, answer_in=base, answer_out=answer)
        records[qid] = AnswerRecord(qid=qid, fingerprint=q.fingerprint, task=q.task,
                                    base_answer=base, base_reason="period rule: lag 12",
                                    steps=(step,), final_answer=answer,
                                    correct=answer == gold)  # fmt: skip
    return records


def rounds_run(
    root: Path,
    rounds: tuple[tuple[str, ...], ...],
    n: int = 200,
    seed: int = 0,
    background: float = 0.0,
) -> Path:
    """A run folder with one base pass per round; ``rounds[r-1]`` names round r's active modes.

    The questions are :func:`planted_parts`' (val/test ones carry the sentinel); only the records
    change between rounds, so a mode appearing or vanishing is the only difference.
    """
    questions, _, splits, _ = planted_parts(n, seed, 0.0)
    store = RunStore.create(root, {"seed": seed, "purpose": "taxonomy refinement test"})
    Suite("planted", list(questions.values()), splits).save(store.layout.suite)
    for r, modes in enumerate(rounds, start=1):
        recs = round_records(questions, tuple(modes), seed, background)
        rows = pd.DataFrame([recs[q].to_row(timings=False) for q in sorted(recs)])
        store.write_parquet(store.layout.round(r).base_pass, rows)
    return root


def add_round(root: Path, modes: tuple[str, ...], n: int = 200, seed: int = 0,
              background: float = 0.0) -> int:  # fmt: skip
    """Append the next round's base pass to a :func:`rounds_run` folder; returns its number."""
    questions, _, _, _ = planted_parts(n, seed, 0.0)
    store = RunStore.open(root)
    r = 1
    while store.layout.round(r).base_pass.exists():
        r += 1
    recs = round_records(questions, tuple(modes), seed, background)
    rows = pd.DataFrame([recs[q].to_row(timings=False) for q in sorted(recs)])
    store.write_parquet(store.layout.round(r).base_pass, rows)
    return r
