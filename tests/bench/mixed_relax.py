"""Votes that fell short of their quorum, answered by their plurality: a replay, as JSON.

``python -m tests.bench.mixed_relax runs/bench/X.json [Y.json ...] [--out FILE]``

A diagnostic for issue 11 (development seeds, or fresh seeds already reported; it chooses
nothing). A composite branch whose measurements disagree keeps the agent's answer where the
option they name most falls short of the branch's quorum. This bench reads every stored vote of a
round's composite tools again (the evidence each question's record holds, on validation and on
test) and asks what the branch would have done had it answered by its weighted plurality instead,
where its own measurement is in that plurality (ties at the top still abstain): on each question
the stage left alone, the relaxed answer ``helped`` (wrong before, right after), ``harmed`` (right
before) or went ``wrong_to_wrong``.

Branches are classed by their validation evidence, which a round could read after its gate (as the
reconcile step narrows branches that harmed): ``all`` branches; ``val_helped_no_harm`` (the branch
as deployed helped a validation question and its answers and relaxed answers there harmed none);
``val_relaxed_no_harm`` (its relaxed answers on validation harmed none). Each class counts the
relaxed test answers of its branches, summed over the runs of each seeds JSON given, and per JSON,
so a rule picked on one seed set can be read on another.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.bench import git_commit
from tests.bench.mixed_kinds import mixed_runs
from tsevo.analysis._runs import library_or_none, load_records, open_run, run_suite
from tsevo.analysis.kinds import _arm
from tsevo.library.reading import apply_rule, branch_reading
from tsevo.library.tool import ReadingRule

__all__ = ["CLASSES", "branch_classes", "plurality", "replay"]

OUTCOMES = ("helped", "harmed", "wrong_to_wrong")

#: Branch classes by validation evidence (counts of one branch on validation -> member or not).
CLASSES: dict[str, Callable[[Mapping[str, int]], bool]] = {
    "all": lambda v: True,
    "val_helped_no_harm": lambda v: (
        v["helped"] >= 1 and v["harmed"] == 0 and v["relaxed_harmed"] == 0
    ),
    "val_relaxed_no_harm": lambda v: v["relaxed_harmed"] == 0,
}


def plurality(
    rule: ReadingRule,
    outputs: Mapping[str, Any],
    options: Sequence[str],
    candidates: Sequence[str] = (),
    question: str = "",
) -> int | None:
    """The option a ``consensus`` rule's weighted plurality names, if its first rule is in it.

    ``None`` where no member names an option, two options tie at the top, or the branch's own
    measurement (the first rule) names another option.
    """
    reads = [
        apply_rule(r, outputs, options, candidates, question, explain=False).option
        for r in rule.branches
    ]
    weights = rule.weights or (1.0,) * len(reads)
    tally: Counter[int] = Counter()
    for o, w in zip(reads, weights, strict=True):
        if o is not None:
            tally[o] += w  # type: ignore[assignment]
    top = tally.most_common(2)
    if not top or (len(top) == 2 and abs(top[0][1] - top[1][1]) < 1e-9):
        return None
    return top[0][0] if reads[0] == top[0][0] else None


def replay(run: Path, split: str) -> dict[tuple[str, int], Counter[str]]:
    """Per composite branch (tool id, 0-based index): its answers and relaxed answers on ``split``.

    Counts ``helped`` / ``harmed`` (answers the stage took from the branch) and
    ``relaxed_helped`` / ``relaxed_harmed`` / ``relaxed_wrong_to_wrong`` (abstained votes, the stage
    left alone, whose plurality names another option than the incoming one).
    """
    store = open_run(run)
    paths = store.layout.round(store.layout.rounds()[-1])
    library = library_or_none(paths.library)
    arm = _arm(store, paths, split)
    out: dict[tuple[str, int], Counter[str]] = {}
    if library is None or arm is None:
        return out
    rules = {
        t.id: t.guidance.rule
        for stage in library.stages
        for t in stage.tools
        if t.guidance.rule is not None and t.guidance.rule.kind == "branches"
    }
    suite = run_suite(store)
    for qid, rec in sorted(load_records(store, arm).items()):
        q = suite[qid]
        for step in rec.steps:
            for tr in step.runs:
                rule = rules.get(tr.tool_id)
                if rule is None or tr.status != "ok" or not tr.outputs:
                    continue
                # the branch the stage read (the first present one naming an option; where all
                # abstain, the last present one), as analysis.branch_effects attributes it
                i, reading = branch_reading(
                    rule, tr.outputs, q.options, q.candidates, q.question, explain=False
                )
                if i is None:
                    continue
                option, sub = reading.option, rule.branches[i]
                if option is None and sub.kind != "consensus":
                    continue  # a single measurement's abstention has no vote to relax
                c = out.setdefault((tr.tool_id, i), Counter())
                if option is not None:
                    if step.answer_out == option != step.answer_in:
                        c["helped"] += int(option == q.gold)
                        c["harmed"] += int(step.answer_in == q.gold)
                    continue
                if step.answer_out != step.answer_in:
                    continue  # another tool of the stage answered
                top = plurality(sub, tr.outputs, q.options, q.candidates, q.question)
                if top is None or top == step.answer_in:
                    continue
                won = (
                    "helped"
                    if top == q.gold
                    else "harmed"
                    if step.answer_in == q.gold
                    else "wrong_to_wrong"
                )
                c["relaxed_" + won] += 1
    return out


def branch_classes(val: Mapping[str, int]) -> list[str]:
    """The classes of :data:`CLASSES` a branch with these validation counts belongs to."""
    v = Counter(val)
    return [name for name, member in CLASSES.items() if member(v)]


def tally(runs: Sequence[Path]) -> dict[str, dict[str, int]]:
    """Relaxed test answers per class, summed over ``runs`` (with each class's branch count)."""
    out = {name: Counter({"branches": 0, **dict.fromkeys(OUTCOMES, 0)}) for name in CLASSES}
    for run in runs:
        val, test = replay(run, "val"), replay(run, "test")
        for key in sorted(set(val) | set(test)):
            t = test.get(key, Counter())
            for name in branch_classes(val.get(key, Counter())):
                out[name]["branches"] += 1
                for o in OUTCOMES:
                    out[name][o] += t["relaxed_" + o]
    return {name: dict(c) for name, c in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "seeds_json", nargs="+", help="JSONs written by tests.bench.seeds --preset mixed"
    )
    ap.add_argument("--out", default="runs/bench/mixed-relax.json", help="JSON file")
    args = ap.parse_args(argv)
    sets: dict[str, Any] = {}
    for src in map(Path, args.seeds_json):
        doc, folder = mixed_runs(src)
        got = tally([folder / str(s) for s in doc["seeds"]])
        sets[str(src)] = {"label": doc.get("label", ""), "seeds": doc["seeds"], "classes": got}
        for name, c in got.items():
            print(f"{src.name} {name}: {c}")
    result = {"bench": "mixed_relax", "commit": git_commit(), "sets": sets}
    Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
