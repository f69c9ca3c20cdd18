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

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from tsevo.agent import StageStep
from tsevo.library.reading import branch_reading
from tsevo.library.tool import ReadingRule, Tool
from tsevo.roles.builtin.composite import Branch

from ._runs import Run, library_or_none, load_records, open_run, run_suite

__all__ = [
    "BRANCH_EFFECTS_COLUMNS",
    "KINDS_COLUMNS",
    "branch_effects",
    "kinds_table",
    "stage_effect",
]

_BRANCH_PREFIX = re.compile(r"^b\d+(p\d+)?_")
KINDS_COLUMNS = [
    "bucket", "kind", "template", "concepts", "rows", "errors", "agent_right", "pooled_rows",
    "served", "outcome", "measurement", "votes", "source", "cv_acc",
]  # fmt: skip
BRANCH_EFFECTS_COLUMNS = [
    "tool_id", "branch", "template", "measurement", "votes", "source", "questions", "abstained",
    "kept", "replaced", "overruled", "helped", "harmed",
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
    names masked, and the option set), ``concepts`` (the concept lexicon's stems its words hit,
    joined by commas: the planner searches the catalog groups they point at first; empty: the
    whole catalog at the strict bar, or a run planned before the report kept them, so a kind the
    lexicon has no word for shows here), ``rows`` (the kind's train rows the planner saw),
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
                    "concepts": ", ".join(e.get("concepts") or ()),
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


def _own(rule: ReadingRule) -> dict[str, Any]:
    """A composite branch's own reading rule (its vote's first member), its branch prefix removed."""
    own = rule.branches[0] if rule.kind == "consensus" and rule.branches else rule
    d = own.to_dict()
    for field in ("key", "prefix"):
        d[field] = _BRANCH_PREFIX.sub("", str(d.get(field, "")), count=1)
    d.pop("confidence", None)
    return d


def _planned(
    tool: Tool, plans: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[Mapping[str, Any] | None]:
    """The planned branch behind each branch of a composite tool (``None`` where none is found).

    The synthesizer keeps a subsequence of its work group's planned branches, in plan order
    (the buckets' cards in turn), each read on keys prefixed with its place in the tool; so the
    tool's branches are matched in order to the planned branches of its buckets whose own reading
    rule they carry.
    """
    order = {bkt: n for n, bkt in enumerate(tool.provenance.bucket.split(","))}
    mine = sorted(
        ((order[bkt], k, b) for k, (bkt, b) in enumerate(plans) if bkt in order),
        key=lambda x: (x[0], x[1]),
    )
    out: list[Mapping[str, Any] | None] = []
    at = 0
    for sub in tool.guidance.rule.branches if tool.guidance.rule else ():
        want = _own(sub)
        found = None
        for j in range(at, len(mine)):
            planned = dict(mine[j][2]["rule"])
            planned.pop("confidence", None)
            if planned == want:
                found, at = mine[j][2], j + 1
                break
        out.append(found)
    return out


def stage_effect(step: StageStep, option: int | None) -> str:
    """What a stage made of one reading that named ``option`` (``None``: the reading abstained).

    ``abstained``: it named no option; ``overruled``: the stage's outgoing answer is another one
    (a more confident tool's reading, or equally confident tools that disagreed, which keeps the
    incoming answer); ``kept``: it named the incoming answer and the stage kept it; ``replaced``:
    the stage replaced the incoming answer by the option it named.
    """
    if option is None:
        return "abstained"
    if step.answer_out != option:
        return "overruled"
    return "kept" if option == step.answer_in else "replaced"


def branch_effects(run: Run, round_: int | None = None, split: str = "test") -> pd.DataFrame:
    """Per branch of each composite tool in the library after the round: what it read on a split.

    Each question's stored evidence is read again with the tool's rule (the reviewer's own
    reading), against the answer the question came into that stage with. ``split``: ``test``
    (report-only: the answers after the round) or ``val`` (the gate's final arm).

    Columns: ``tool_id, branch`` (1-based, in the tool's order), ``template`` (of the kind it was
    planned for), ``measurement`` and ``source`` (as planned, see :func:`kinds_table`), ``votes``
    (the measurements its deployed rule counts: a long composite's votes may be cut),
    ``questions`` (where its outputs were present), and what the stage made of its reading
    (:func:`stage_effect`): ``abstained`` (it named no option: a vote short of its quorum, a value
    in the abstain band), ``kept`` (it named the incoming answer, which the stage kept),
    ``replaced`` (the stage answered the other option it named), ``overruled`` (the stage answered
    otherwise: another tool in the same stage read more confidently, or equally confident tools
    disagreed), ``helped`` (a replacement of a wrong answer by the right one) and ``harmed`` (of a
    right one).
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
        t.id: (stage.round, t)
        for stage in library.stages
        for t in stage.tools
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
                if tr.tool_id not in composites or tr.status != "ok" or not tr.outputs:
                    continue
                tool = composites[tr.tool_id][1]
                rule = tool.guidance.rule
                assert rule is not None
                i, reading = branch_reading(
                    rule, tr.outputs, q.options, q.candidates, q.question, explain=False
                )
                if i is None:
                    continue
                c = counts.setdefault((tool.id, i), dict.fromkeys(_COUNTS, 0))
                c["questions"] += 1
                effect = stage_effect(step, reading.option)
                c[effect] += 1
                if effect == "replaced":
                    c["helped"] += int(reading.option == q.gold)
                    c["harmed"] += int(step.answer_in == q.gold)
    plans = {
        k: [
            (card.get("bucket_id", ""), b)
            for card in _cards(store, k)
            for b in (card.get("plan") or {}).get("branches") or ()
        ]
        for k in sorted({k for k, _ in composites.values()})
    }
    rows = []
    matched = {tid: _planned(tool, plans[k]) for tid, (k, tool) in composites.items()}
    for (tid, i), c in sorted(counts.items()):
        tool = composites[tid][1]
        b = matched[tid][i]
        sub = tool.guidance.rule.branches[i]  # type: ignore[union-attr]
        fields = _branch_fields(b)
        rows.append(
            {
                "tool_id": tid,
                "branch": i + 1,
                "template": str((b or {}).get("stats", {}).get("template", "")),
                "measurement": fields["measurement"],
                "votes": len(sub.branches) if sub.kind == "consensus" else 1,
                "source": fields["source"],
                **c,
            }
        )
    return pd.DataFrame(rows, columns=BRANCH_EFFECTS_COLUMNS)


_COUNTS = ("questions", "abstained", "kept", "replaced", "overruled", "helped", "harmed")


def _arm(store: Any, paths: Any, split: str) -> str | None:
    """The stored arm holding the split's answers with the round's library."""
    if split == "test":
        test = store.read_json_or(paths.test, {})
        return str(test["arms"]["after"]) if "arms" in test else None
    arms = store.read_json_or(paths.summary, {}).get("arms", {})
    arm = arms.get("val_final", arms.get("val_candidate"))
    return None if arm is None else str(arm)
