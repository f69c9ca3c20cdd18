"""Where a run's traces come from: the base pass, and (opt-in) train-side evolution traces.

A round's base pass answers every train question with the round's input library; on a first round
from an empty root no tool runs, so those traces cannot show a system- or tool-level failure. The
round's synthesis, though, already answered train questions with every candidate library (the
group's held-out errors and harm probe, stored as ``evals/train.<fingerprint>.jsonl`` arms): those
records show the candidate tools being shortlisted, running, erring, timing out, abstaining and
being kept or overruled by the reviewer. :func:`evolution_arms` reads them back.

Sources (:data:`SOURCES`):

* ``base``: the round's base pass (the default; what earlier versions read).
* ``evolution``: the round's candidate arms, keeping a record only when a candidate of that round
  (tool id ``r<round>.…``: a direct attempt or a chain node) was shortlisted for the question.
  The other records of a candidate arm repeat the base pass and add nothing.
* ``all``: both, normalized together (one tool naming, one subdomain fit).

Every arm read here is a ``train`` arm, and :func:`tsevo.taxonomy.traces.normalize_arms` keeps only
train questions, so no validation or test record can become a trace.
"""

from __future__ import annotations

from pathlib import Path

from tsevo.agent import AnswerRecord
from tsevo.store import RunStore

__all__ = ["SOURCES", "base_arms", "evolution_arms", "source_arms"]

#: Trace sources.
SOURCES: tuple[str, ...] = ("base", "evolution", "all")

Arm = tuple[str, str, dict[str, AnswerRecord]]


def _base_arm_names(store: RunStore) -> dict[int, str]:
    """Each round's base-pass arm name (``train.<fingerprint>``), from the round summaries."""
    out: dict[int, str] = {}
    r = 1
    while store.layout.round(r).base_pass.exists():
        summary = store.read_json_or(store.layout.round(r).summary, {}) or {}
        arm = str((summary.get("arms") or {}).get("train_base", ""))
        if arm:
            out[r] = arm
        r += 1
    return out


def _fingerprint(arm: str) -> str:
    return arm.split(".", 1)[1] if "." in arm else ""


def base_arms(store: RunStore, round_: int) -> list[Arm]:
    """The round's base pass as one arm ``(library fingerprint, "answer", records)``."""
    df = store.read_parquet(store.layout.round(round_).base_pass)
    records = {str(row["qid"]): AnswerRecord.from_row(row) for row in df.to_dict("records")}
    return [(_fingerprint(_base_arm_names(store).get(round_, "")), "answer", records)]


def _shortlists(rec: AnswerRecord, prefix: str) -> bool:
    return any(t.startswith(prefix) for s in rec.steps for t in s.shortlisted)


def evolution_arms(store: RunStore, round_: int) -> list[Arm]:
    """The round's candidate arms ``(library fingerprint, "candidate", records)``, sorted by name.

    An arm counts when it is a train arm, is no round's base pass, and shortlists a tool of this
    round (``r<round>.``) for at least one question; only those questions' records are kept.
    """
    skip = set(_base_arm_names(store).values())
    prefix = f"r{int(round_)}."
    out: list[Arm] = []
    evals: Path = store.layout.evals
    for path in sorted(evals.glob("train.*.jsonl")):
        name = path.name[: -len(".jsonl")]
        if name in skip:
            continue
        try:
            raw = store.records(name).load()
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: cannot read the evolution arm's records: {e}") from e
        kept = {}
        for qid, d in raw.items():
            rec = AnswerRecord.from_dict(d)
            if _shortlists(rec, prefix):
                kept[str(qid)] = rec
        if kept:
            out.append((_fingerprint(name), "candidate", kept))
    return out


def source_arms(store: RunStore, round_: int, source: str = "base") -> list[Arm]:
    """The arms a trace source reads for one round (see the module docstring)."""
    if source not in SOURCES:
        raise ValueError(f"unknown trace source {source!r}; use one of {SOURCES}")
    arms: list[Arm] = []
    if source in ("base", "all"):
        arms += base_arms(store, round_)
    if source in ("evolution", "all"):
        arms += evolution_arms(store, round_)
    return arms
