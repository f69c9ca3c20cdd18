"""Question kinds and composite branches of one round, for inspection.

The builtin planner recovers question kinds from the wording of a bucket's train questions and
searches one measurement and reading rule per kind; the kinds it serves become the branches of one
composite tool (:mod:`tsevo.roles.builtin.kindplan`). :func:`kinds_table` lists every kind with its
outcome (served by a branch, or why not), from the contract cards. :func:`branch_effects` reads
each composite tool's evidence on a split's questions again with the tool's own reading rule and
counts, per branch, where it abstained, kept the incoming answer or replaced it, and whether the
replacement helped or harmed (``test`` is report-only: read it, never choose by it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from tsevo.library.reading import branch_reading
from tsevo.library.tool import Tool
from tsevo.roles.builtin.composite import Branch

from ._runs import Run, library_or_none, load_records, open_run, run_suite

__all__ = ["BRANCH_EFFECTS_COLUMNS", "KINDS_COLUMNS", "branch_effects", "kinds_table"]

KINDS_COLUMNS = [
    "bucket", "kind", "template", "rows", "errors", "agent_right", "pooled_rows", "served",
    "outcome", "measurement", "votes", "source", "cv_acc",
]  # fmt: skip
BRANCH_EFFECTS_COLUMNS = [
    "tool_id", "branch", "template", "measurement", "votes", "source", "questions", "abstained",
    "kept", "replaced", "helped", "harmed",
]  # fmt: skip


def _cards(run: Run, round_: int) -> list[dict[str, Any]]:
    store = open_run(run)
    cards: list[dict[str, Any]] = store.read_json_or(
        store.layout.round(round_).contracts, {"cards": []}
    )["cards"]
    return cards


def _branch_fields(b: Mapping[str, Any] | None) -> dict[str, Any]:
    if b is None:
        return {"measurement": "", "votes": 0, "source": "", "cv_acc": float("nan")}
    branch = Branch.from_dict(b)
    return {
        "measurement": branch.describe(),
        "votes": len(branch.members()),
        "source": str(branch.stats.get("source", "")),
        "cv_acc": float(branch.stats.get("cv_acc", float("nan"))),
    }


def kinds_table(run: Run, round_: int = 1) -> pd.DataFrame:
    """Every question kind the planner recovered in a bucket, and what it did with it.

    Columns: ``bucket, kind`` (an opaque id), ``template`` (the wording with numbers and series
    names masked, and the option set), ``rows`` (the kind's train rows the planner saw),
    ``errors`` (of them, the agent's errors), ``agent_right``, ``pooled_rows`` (with the kinds it
    pooled with: its own where it pooled with none), ``served`` (a branch reads it), ``outcome``
    (the planner's words: the branch, or why there is none, e.g. too few rows), and for served
    kinds the branch's ``measurement`` (its vote's members joined by ``~``), ``votes`` (members),
    ``source`` (``options``, ``concepts``, ``tests`` or ``catalog``; ``+pooled`` where fitted on
    pooled rows) and ``cv_acc`` (its cross-validated accuracy). Empty where no bucket mixed
    enough kinds for a composite plan.
    """
    rows = []
    for card in _cards(run, round_):
        plan = card.get("plan") or {}
        served = {k: b for b in plan.get("branches") or () for k in b.get("kinds", ())}
        for kid, e in sorted((plan.get("kinds") or {}).items()):
            b = served.get(kid)
            rows.append(
                {
                    "bucket": card.get("bucket_id", ""),
                    "kind": kid,
                    "template": e.get("template", ""),
                    "rows": int(e.get("rows", 0)),
                    "errors": int(e.get("errors", 0)),
                    "agent_right": int(e.get("current_correct", 0)),
                    "pooled_rows": int(e.get("pooled_rows", e.get("rows", 0))),
                    "served": b is not None,
                    "outcome": str(e.get("outcome", "")),
                    **_branch_fields(b),
                }
            )
    return pd.DataFrame(rows, columns=KINDS_COLUMNS)


def _plan_branch(
    tool: Tool, i: int, plans: Sequence[tuple[str, Mapping[str, Any]]]
) -> Mapping[str, Any] | None:
    """The planned branch behind a tool's i-th branch: its bucket's, with the same kind matcher."""
    if i >= len(tool.scope.kinds):
        return None
    m = tool.scope.kinds[i]
    buckets = set(tool.provenance.bucket.split(","))
    for bucket, b in plans:
        same = tuple(b.get("require", ())) == m.require and tuple(b.get("forbid", ())) == m.forbid
        if bucket in buckets and same:
            return b
    return None


def branch_effects(run: Run, round_: int | None = None, split: str = "test") -> pd.DataFrame:
    """Per branch of each composite tool the round deployed: what it read on a split's questions.

    Each question's stored evidence is read again with the tool's rule (the reviewer's own
    reading), against the answer the question came into that stage with. ``split``: ``test``
    (report-only) or ``val``.

    Columns: ``tool_id, branch`` (1-based, in the tool's order), ``template`` (of the kinds it
    serves, ``; ``-joined), ``measurement, votes, source`` (as in :func:`kinds_table`),
    ``questions`` (where its outputs were present), ``abstained`` (it named no option: a vote short
    of its quorum, a value in the abstain band), ``kept`` (it named the incoming answer),
    ``replaced`` (another option), ``helped`` (replaced a wrong answer by the right one) and
    ``harmed`` (replaced a right one).
    """
    if split not in ("test", "val"):
        raise ValueError(f"split must be 'test' or 'val', not {split!r}")
    store = open_run(run)
    rounds = store.layout.rounds()
    if not rounds:
        return pd.DataFrame(columns=BRANCH_EFFECTS_COLUMNS)
    r = round_ if round_ is not None else rounds[-1]
    paths = store.layout.round(r)
    library = library_or_none(paths.library)
    if library is None:
        return pd.DataFrame(columns=BRANCH_EFFECTS_COLUMNS)
    composites = {
        t.id: t
        for t in library.all_artifacts()
        if t.guidance.rule is not None and t.guidance.rule.kind == "branches"
    }
    arm = _arm(store, paths, split)
    if not composites or arm is None:
        return pd.DataFrame(columns=BRANCH_EFFECTS_COLUMNS)
    suite = run_suite(store)
    counts: dict[tuple[str, int], dict[str, int]] = {}
    for qid, rec in sorted(load_records(store, arm).items()):
        if qid not in suite:
            continue
        q = suite[qid]
        for step in rec.steps:
            for tr in step.runs:
                tool = composites.get(tr.tool_id)
                if tool is None or tr.status != "ok" or not tr.outputs:
                    continue
                rule = tool.guidance.rule
                assert rule is not None
                i, reading = branch_reading(
                    rule, tr.outputs, q.options, q.candidates, q.question, explain=False
                )
                if i is None:
                    continue
                c = counts.setdefault((tool.id, i), dict.fromkeys(_COUNTS, 0))
                c["questions"] += 1
                if reading.option is None:
                    c["abstained"] += 1
                elif reading.option == step.answer_in:
                    c["kept"] += 1
                else:
                    c["replaced"] += 1
                    c["helped"] += int(reading.option == q.gold)
                    c["harmed"] += int(step.answer_in == q.gold)
    plans = [
        (card.get("bucket_id", ""), b)
        for card in _cards(store, r)
        for b in (card.get("plan") or {}).get("branches") or ()
    ]
    rows = []
    for (tid, i), c in sorted(counts.items()):
        b = _plan_branch(composites[tid], i, plans)
        template = (b or {}).get("stats", {}).get("template", "")
        fields = _branch_fields(b)
        del fields["cv_acc"]
        rows.append({"tool_id": tid, "branch": i + 1, "template": template, **fields, **c})
    return pd.DataFrame(rows, columns=BRANCH_EFFECTS_COLUMNS)


_COUNTS = ("questions", "abstained", "kept", "replaced", "helped", "harmed")


def _arm(store: Any, paths: Any, split: str) -> str | None:
    """The stored arm holding the split's answers with the round's library."""
    if split == "test":
        test = store.read_json_or(paths.test, {})
        return str(test["arms"]["after"]) if "arms" in test else None
    arms = store.read_json_or(paths.summary, {}).get("arms", {})
    arm = arms.get("val_final", arms.get("val_candidate"))
    return None if arm is None else str(arm)
