"""Where a round leaves the test errors of ``mixed``: each question the agent got wrong, by what happened to it.

``python -m tests.bench.mixed_errors runs/bench/mixed-dev8.json [--out FILE]``

A diagnosis for **development seeds**: it reads a round's report-only test table question by
question, next to the generator's kind of each question (``subtask``), so run it on seeds you
develop on, never to choose anything on seeds you report. For every seed's run folder beside a JSON
of :mod:`tests.bench.seeds` (``--preset mixed``), each test question the agent answered wrong before
the round falls in one class:

- ``fixed``: right after the round;
- ``replaced_wrong``: a tool replaced the answer by another wrong option;
- ``kept``: a tool ran and its reading named the agent's (wrong) answer;
- ``abstained``: a tool ran and its reading decided nothing (a vote short of its quorum, a value
  in a rule's abstain band);
- no tool took the question, and its kind was
  ``reached_elsewhere`` (a tool ran on another test question of the kind: another phrasing), or never
  reached because the kind's train questions were all answered right (``no_train_errors``), its train
  errors were all held out for the prefilter (``held_out_only``), no planned branch takes its train
  questions (``no_branch``: too few rows, no rule clears the bar, or no more rows recovered than the
  agent's), a branch does but only in a group whose every attempt the prefilter dropped
  (``dropped_tool``), or a branch does in a deployed tool whose scope no longer takes them
  (``narrowed``: validation narrowed the branch away, or it was cut for the sandbox's source size),
  or a deployed tool takes the wording of its train questions but not that of its test questions
  (``unserved_phrasing``).

The classes are also counted per generator kind (``by_kind``) and listed per question
(``by_question``). And every test question, right or wrong before, is put by what the train split
held of its own phrasing (``by_phrasing``: the generator's template within its kind; recovered
kinds follow phrasings): train errors in some bucket's support (``support_errors``), errors all held
out (``held_out_errors``), train rows but no error (``no_errors``: nothing is planned for it), no
train row at all (``unseen``); each by whether a tool ran on it and what it did.

Also per seed: the planner's outcome for each recovered kind (``plan_outcomes``), the planned
branches that repeat an earlier branch of their group exactly (``repeated_branches``: same
measurements, rules and vote, e.g. pooled phrasings of one kind), the prefilter's
for each attempt (``prefilter``), and every test question a composite branch answered (right or
wrong before), by how many measurements the branch's vote holds (``replaced_by_members``: helped,
harmed, or wrong to wrong). Counts, summed over seeds, and per seed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tests.bench.mixed_kinds import mixed_runs
from tests.bench.seeds import ONE_WORDING, one_wording
from tsevo.data.synthetic import make_suite
from tsevo.library._scope import Matcher, question_tokens
from tsevo.library.library import Library, scope_matches
from tsevo.roles.builtin.composite import Branch
from tsevo.store import RunLayout

CLASSES = (
    "fixed",
    "replaced_wrong",
    "kept",
    "abstained",
    "reached_elsewhere",
    "no_train_errors",
    "held_out_only",
    "no_branch",
    "dropped_tool",
    "narrowed",
    "unserved_phrasing",
)


def _records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["qid"]: r for r in map(json.loads, path.read_text().splitlines()) if r}


def _final_test(run: Path, after: pd.Series) -> dict[str, dict[str, Any]]:
    """The test answers of the deployed library: the eval file whose answers are the table's."""
    best: dict[str, dict[str, Any]] = {}
    for f in sorted((run / "evals").glob("test.*.jsonl")):
        recs = _records(f)
        same = all(recs.get(q, {}).get("final_answer") == a for q, a in after.items())
        steps = sum(bool(r["steps"]) for r in recs.values())
        if same and steps >= sum(bool(r["steps"]) for r in best.values()):
            best = recs
    if not best:
        raise ValueError(f"{run}: no test eval file matches the round's test table")
    return best


def _base_train(run: Path) -> dict[str, bool]:
    """Right / wrong of the base pass on the whole train split (the largest train eval without tools)."""
    best: dict[str, dict[str, Any]] = {}
    for f in (run / "evals").glob("train.*.jsonl"):
        recs = _records(f)
        if len(recs) > len(best) and not any(r["steps"] for r in recs.values()):
            best = recs
    return {q: bool(r["correct"]) for q, r in best.items()}


def _decision(rec: dict[str, Any]) -> str | None:
    ds = {s["decision"] for s in rec["steps"]}
    for d, name in (("replace", "replaced_wrong"), ("keep", "kept"), ("no_decision", "abstained")):
        if d in ds:
            return name
    return None


_BRANCH = re.compile(r": b(\d+)_")


def _members(tool: Any, reason: str) -> str | None:
    """How many measurements vote in the composite branch a replacement's reason names."""
    m = _BRANCH.search(reason)
    rule = tool.guidance.rule if tool is not None else None
    if m is None or rule is None or rule.kind != "branches" or int(m.group(1)) > len(rule.branches):
        return None
    sub = rule.branches[int(m.group(1)) - 1]
    return str(len(sub.branches) if sub.kind == "consensus" else 1)


def _flip(row: pd.Series) -> str:
    if bool(row["after_correct"]) and not bool(row["before_correct"]):
        return "helped"
    if bool(row["before_correct"]) and not bool(row["after_correct"]):
        return "harmed"
    return "right_to_right" if bool(row["after_correct"]) else "wrong_to_wrong"


def errors_of_seed(seed: int, run: Path, one_word: bool = False) -> dict[str, Any]:
    """The classes of one seed's wrong-before test questions, and the plan and prefilter outcomes.

    ``one_word``: the run answered the seed's questions worded one way per kind
    (:func:`tests.bench.seeds.one_wording`), whose phrasings are then the first ones.
    """
    suite = make_suite("mixed", seed=seed)
    if one_word:
        suite = one_wording(suite)
    qs = {q.id: q for q in suite}
    r1 = RunLayout(run).round(1)
    test = pd.read_parquet(r1.test_table).set_index("qid")
    final = _final_test(run, test["after_answer"])
    train_ok = _base_train(run)
    role = {
        q: part
        for b in json.loads(r1.splits.read_text())
        for part in ("support", "held_out")
        for q in b[part]
    }
    lib = Library.load(run / "library")
    deployed = [a for a in lib.all_artifacts() if a.kind == "tool" and a.id.startswith("r1.")]
    kept_groups = {a.id.split(".")[1] for a in deployed}
    groups = json.loads(r1.groups.read_text())["groups"]
    plans: list[tuple[bool, Branch]] = []
    outcomes: Counter[str] = Counter()
    for g in groups:
        for card in g["cards"]:
            plan = card.get("plan") or {}
            plans += [
                (g["id"] in kept_groups, Branch.from_dict(b)) for b in plan.get("branches", [])
            ]
            for entry in (plan.get("kinds") or {}).values():
                o = str(entry.get("outcome", ""))
                outcomes["branch" if o.startswith("branch") else re.sub(r"\d+", "N", o)] += 1
    prefilter = Counter(pd.read_parquet(r1.prefilter)["outcome"].astype(str))
    repeats = 0  # branches that repeat an earlier branch of their group (same members and rules)
    for g in groups:
        seen: set[str] = set()
        for card in g["cards"]:
            for b in (card.get("plan") or {}).get("branches", []):
                sig = json.dumps(
                    {k: b.get(k) for k in ("spec", "keys", "rule", "peers", "quorum", "weights")}
                )
                repeats += sig in seen
                seen.add(sig)
    by_kind: dict[str, list[str]] = {}
    for q in suite:
        by_kind.setdefault(q.subtask, []).append(q.id)
    reached = Counter(qs[i].subtask for i in test.index if final[i]["steps"])
    tools = {a.id: a for a in deployed}
    members: dict[str, Counter[str]] = {}
    for qid, row in test.iterrows():
        for step in final[str(qid)]["steps"]:
            if step["decision"] == "replace" and step["responsible"]:
                n = _members(tools.get(step["responsible"][0]), step["reason"])
                if n is not None:
                    members.setdefault(n, Counter())[_flip(row)] += 1
    classes: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    of_question: dict[str, str] = {}
    for qid, row in test.iterrows():
        if bool(row["before_correct"]):
            continue
        q, rec = qs[str(qid)], final[str(qid)]
        if bool(row["after_correct"]):
            cls = "fixed"
        elif rec["steps"]:
            cls = _decision(rec) or "abstained"
        elif reached[q.subtask]:
            cls = "reached_elsewhere"
        else:
            cls = _unreached(q.subtask, by_kind, qs, train_ok, role, plans, deployed)
        classes[cls] += 1
        of_question[str(qid)] = cls
        kinds.setdefault(q.subtask, Counter())[cls] += 1
    return {
        "wrong_before": sum(classes.values()),
        "by_phrasing": _by_phrasing(test, final, qs, train_ok, role),
        "classes": {c: classes.get(c, 0) for c in CLASSES},
        "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(kinds.items())},
        "by_question": dict(sorted(of_question.items())),
        "plan_outcomes": dict(sorted(outcomes.items())),
        "planned_branches": len(plans),
        "repeated_branches": repeats,
        "prefilter": dict(sorted(prefilter.items())),
        "replaced_by_members": {
            k: dict(v) for k, v in sorted(members.items(), key=lambda x: int(x[0]))
        },
    }


PHRASINGS = ("support_errors", "held_out_errors", "no_errors", "unseen")


def _train_held(rows: Sequence[tuple[bool, str | None]]) -> str:
    """What train held of a group of questions (a kind or a phrasing): one of :data:`PHRASINGS`.

    ``rows`` are the group's train questions as (answered right before, bucket role or None).
    """
    if not rows:
        return "unseen"
    if all(ok for ok, _ in rows):
        return "no_errors"
    return (
        "support_errors" if any(not ok and r == "support" for ok, r in rows) else "held_out_errors"
    )


#: A flip's name in the phrasing table (no question changes between two right or two wrong answers).
_OUTCOME = {"right_to_right": "right", "wrong_to_wrong": "wrong"}


def _by_phrasing(
    test: pd.DataFrame,
    final: dict[str, dict[str, Any]],
    qs: dict[str, Any],
    train_ok: dict[str, bool],
    role: dict[str, str],
) -> dict[str, dict[str, int]]:
    """Every test question by what train held of its phrasing, and whether a tool ran and flipped it.

    The phrasing is the generator's (``metadata["template"]`` within the kind): recovered kinds
    follow phrasings, so a phrasing whose train rows held no error, or none in any bucket's support,
    is one the planner never planned for. Outcomes: ``served_`` or ``unserved_`` (a tool ran on the
    question or not) and ``helped`` / ``harmed`` / ``wrong`` / ``right``.
    """
    rows: dict[tuple[str, Any], list[tuple[bool, str | None]]] = {}
    for qid, ok in train_ok.items():
        q = qs[qid]
        rows.setdefault((q.subtask, q.metadata.get("template")), []).append((ok, role.get(qid)))
    out: dict[str, Counter[str]] = {c: Counter() for c in PHRASINGS}
    for qid, row in test.iterrows():
        q = qs[str(qid)]
        cls = _train_held(rows.get((q.subtask, q.metadata.get("template")), []))
        served = "served_" if final[str(qid)]["steps"] else "unserved_"
        flip = _flip(row)
        out[cls][served + _OUTCOME.get(flip, flip)] += 1
    return {c: dict(sorted(v.items())) for c, v in out.items()}


def served_everywhere(by_phrasing: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """Gain and harm if more test questions were served as the served ones are now (a projection).

    Unserved questions are helped (wrong before) and harmed (right before) at the rates that served
    questions of ``support_errors`` phrasings were; ``with_errors`` serves every question of a
    phrasing with train errors (``support_errors``, ``held_out_errors``), ``all`` every question.
    It bounds what serving more phrasings can add while the branches read as they do now.
    """
    sup = by_phrasing["support_errors"]
    helped, harmed = sup.get("served_helped", 0), sup.get("served_harmed", 0)
    help_rate = helped / max(1, helped + sup.get("served_wrong", 0))
    harm_rate = harmed / max(1, harmed + sup.get("served_right", 0))
    pct = 100.0 / max(1, sum(sum(v.values()) for v in by_phrasing.values()))
    now_help = sum(v.get("served_helped", 0) for v in by_phrasing.values())
    now_harm = sum(v.get("served_harmed", 0) for v in by_phrasing.values())

    def served(classes: Sequence[str]) -> dict[str, float]:
        add_help = help_rate * sum(by_phrasing[c].get("unserved_wrong", 0) for c in classes)
        add_harm = harm_rate * sum(by_phrasing[c].get("unserved_right", 0) for c in classes)
        return {
            "gain_pp": round((now_help + add_help - now_harm - add_harm) * pct, 2),
            "harmed_pct": round((now_harm + add_harm) * pct, 2),
        }

    return {
        "help_rate": round(help_rate, 4),
        "harm_rate": round(harm_rate, 4),
        "now": {
            "gain_pp": round((now_help - now_harm) * pct, 2),
            "harmed_pct": round(now_harm * pct, 2),
        },
        "with_errors": served(("support_errors", "held_out_errors")),
        "all": served(PHRASINGS),
        "bar_all": _bar_rates(by_phrasing),
    }


def _bar_rates(
    by_phrasing: Mapping[str, Mapping[str, int]], gain: float = 0.25, harm: float = 0.02
) -> dict[str, float]:
    """The rates every question served would need for issue 11's bar (gain +25 pp, harm <= 2%)."""
    right = sum(
        v.get(k, 0)
        for v in by_phrasing.values()
        for k in ("served_right", "served_harmed", "unserved_right")
    )
    wrong = sum(
        v.get(k, 0)
        for v in by_phrasing.values()
        for k in ("served_wrong", "served_helped", "unserved_wrong")
    )
    total = right + wrong
    return {
        "harm_rate_at_most": round(harm * total / max(1, right), 4),
        "help_rate_at_least": round((gain + harm) * total / max(1, wrong), 4),
    }


def _unreached(
    kind: str,
    by_kind: dict[str, list[str]],
    qs: dict[str, Any],
    train_ok: dict[str, bool],
    role: dict[str, str],
    plans: list[tuple[bool, Branch]],
    deployed: list[Any],
) -> str:
    train = [qs[i] for i in by_kind[kind] if i in train_ok]
    held = _train_held([(train_ok[q.id], role.get(q.id)) for q in train])
    if held in ("unseen", "no_errors"):
        return "no_train_errors"
    if held == "held_out_errors":
        return "held_out_only"

    def takes(b: Branch) -> bool:
        m = Matcher(require=b.require, forbid=b.forbid)
        return any(m.matches(question_tokens(q.question)) for q in train)

    taking = [kept for kept, b in plans if takes(b)]
    if not taking:
        return "no_branch"
    if not any(taking):
        return "dropped_tool"
    if any(scope_matches(t.scope, q) for t in deployed for q in train):
        return "unserved_phrasing"  # a deployed tool takes its train wording, not its test wording
    return "narrowed"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seeds_json", help="a JSON written by tests.bench.seeds --preset mixed")
    ap.add_argument("--out", default="", help="JSON file (default: <seeds_json>-errors.json)")
    args = ap.parse_args(argv)
    src = Path(args.seeds_json)
    doc, runs = mixed_runs(src)
    if doc.get("label") != "development":
        print(f"warning: {src} is labelled {doc.get('label')!r}: read it, do not tune on it")
    one_word = doc.get("preset") == "mixed" + ONE_WORDING
    seeds = {str(s): errors_of_seed(int(s), runs / str(s), one_word) for s in doc["seeds"]}
    total: Counter[str] = Counter()
    for sd in seeds.values():
        total.update(sd["classes"])
    plan: Counter[str] = Counter()
    pre: Counter[str] = Counter()
    members: dict[str, Counter[str]] = {}
    kinds: dict[str, Counter[str]] = {}
    phrasings: dict[str, Counter[str]] = {c: Counter() for c in PHRASINGS}
    for sd in seeds.values():
        for k, v in sd["by_phrasing"].items():
            phrasings[k].update(v)
        for k, v in sd["by_kind"].items():
            kinds.setdefault(k, Counter()).update(v)
        plan.update(sd["plan_outcomes"])
        pre.update(sd["prefilter"])
        for k, v in sd["replaced_by_members"].items():
            members.setdefault(k, Counter()).update(v)
    result = {
        "source": str(src),
        "label": doc.get("label", ""),
        "commit": doc.get("commit", ""),
        "wrong_before": sum(sd["wrong_before"] for sd in seeds.values()),
        "classes": {c: total.get(c, 0) for c in CLASSES},
        "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(kinds.items())},
        "by_phrasing": {c: dict(sorted(v.items())) for c, v in phrasings.items()},
        "served_everywhere": served_everywhere(phrasings),
        "plan_outcomes": dict(sorted(plan.items())),
        "planned_branches": sum(sd["planned_branches"] for sd in seeds.values()),
        "repeated_branches": sum(sd["repeated_branches"] for sd in seeds.values()),
        "prefilter": dict(sorted(pre.items())),
        "replaced_by_members": {
            k: dict(v) for k, v in sorted(members.items(), key=lambda x: int(x[0]))
        },
        "seeds": seeds,
    }
    out = Path(args.out) if args.out else src.with_name(src.stem + "-errors.json")
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"{result['wrong_before']} test questions wrong before, over {len(seeds)} seeds:")
    for c in CLASSES:
        print(f"  {c:18s} {result['classes'][c]}")
    print(
        f"planned branches {result['planned_branches']}, repeating another: {result['repeated_branches']}"
    )
    print("every test question by what train held of its phrasing:")
    for c in PHRASINGS:
        print(f"  {c:16s} {result['by_phrasing'][c]}")
    print(f"served everywhere at the served rates (a projection): {result['served_everywhere']}")
    print(f"answered by a composite branch, by its vote's size: {result['replaced_by_members']}")
    print(f"plan outcomes {result['plan_outcomes']}; prefilter {result['prefilter']} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
