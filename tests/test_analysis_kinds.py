"""Question kinds and composite branches as tidy frames: what the planner did per kind, what each branch read."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tsevo import analysis
from tsevo.agent import StageStep
from tsevo.analysis._runs import open_run
from tsevo.library.library import Library
from tsevo.library.reading import apply_rule, branch_reading
from tsevo.library.tool import ReadingRule
from tsevo.roles.builtin.composite import composite_branches
from tsevo.roles.builtin.concepts import CONCEPTS


def _label(key: str) -> ReadingRule:
    return ReadingRule("label", key, (0.0,), ("low", "high"), margin=0.5)


def test_branch_reading_names_the_branch_that_read() -> None:
    """The first present branch naming an option reads; all abstaining, the last present one."""
    rule = ReadingRule("branches", branches=(_label("a"), _label("b"), _label("c")))
    opts = ("low", "high")
    cases = [
        ({"a": 2.0, "b": 2.0}, 0, 1),  # the first reads
        ({"a": 0.1, "b": -2.0, "c": 2.0}, 1, 0),  # a abstains (in its band), b reads
        ({"a": 0.1, "c": 0.2}, 2, None),  # every present branch abstains: the last one's
        ({"z": 1.0}, None, None),  # no branch's outputs
    ]
    for outputs, which, option in cases:
        i, reading = branch_reading(rule, outputs, opts)
        assert (i, reading.option) == (which, option)
        assert reading == apply_rule(rule, outputs, opts)


def _step(decision: str, answer_in: int, answer_out: int) -> StageStep:
    return StageStep(1, ("t1", "t2"), (), decision, "", answer_in, answer_out, ("t1",))


def test_stage_effect_counts_what_the_stage_made_of_a_reading() -> None:
    """A reading the stage did not follow is overruled, whatever it named."""
    cases = [
        (_step("replace", 0, 2), None, "abstained"),
        (_step("replace", 0, 2), 2, "replaced"),
        (_step("keep", 1, 1), 1, "kept"),
        (_step("replace", 0, 2), 1, "overruled"),  # a more confident tool named option 2
        (_step("replace", 0, 2), 0, "overruled"),  # it kept option 0; another tool replaced it
        (_step("no_decision", 0, 0), 1, "overruled"),  # equally confident tools disagreed
        (_step("no_decision", 0, 0), 0, "kept"),  # ... the incoming answer stays, as it said
    ]
    for step, option, effect in cases:
        assert analysis.stage_effect(step, option) == effect


def test_kinds_table_lists_the_planned_kinds(tiny_run: Path) -> None:
    k = analysis.kinds_table(tiny_run)
    assert list(k.columns) == analysis.KINDS_COLUMNS
    store = open_run(tiny_run)
    cards = json.loads(store.layout.round(1).contracts.read_text())["cards"]
    planned = sum(len((c.get("plan") or {}).get("kinds") or {}) for c in cards)
    assert len(k) == planned > 0
    assert k["served"].any() and not k["served"].all()
    assert (k["served"] == k["outcome"].str.startswith("branch b")).all()
    served = k[k["served"]]
    assert (served["votes"] >= 1).all() and served["source"].str.len().gt(0).all()
    for _, r in served.iterrows():
        assert f": {r['measurement']} (" in r["outcome"]  # the planner's own words name it
    assert (k.loc[~k["served"], "measurement"] == "").all()
    assert (k["errors"] + k["agent_right"] <= k["rows"]).all()
    assert (k["pooled_rows"] >= k["rows"]).all()
    # the stems each kind's words hit, from the planner's report: every one a lexicon stem
    stems = [s for c in k["concepts"] if c for s in c.split(", ")]
    assert stems and set(stems) <= set(CONCEPTS)


@pytest.mark.parametrize("split", ["test", "val"])
def test_branch_effects_count_what_the_reviewer_decided(tiny_run: Path, split: str) -> None:
    """Per branch counts add up to the stages where a composite tool alone gave evidence."""
    b = analysis.branch_effects(tiny_run, split=split)
    assert list(b.columns) == analysis.BRANCH_EFFECTS_COLUMNS
    assert len(b) > 0
    assert (b["questions"] == b[["abstained", "kept", "replaced", "overruled"]].sum(axis=1)).all()
    assert (b["helped"] + b["harmed"] <= b["replaced"]).all()
    assert b["template"].str.len().gt(0).all() and (b["votes"] >= 1).all()
    # each branch is the planned branch of a served kind: its template and its measurement
    k = analysis.kinds_table(tiny_run)
    planned = set(
        zip(k.loc[k["served"], "template"], k.loc[k["served"], "measurement"], strict=True)
    )
    assert set(zip(b["template"], b["measurement"], strict=True)) <= planned

    store = open_run(tiny_run)
    paths = store.layout.round(1)
    if split == "test":
        arm = store.read_json(paths.test)["arms"]["after"]
    else:
        arms = store.read_json(paths.summary)["arms"]
        arm = arms.get("val_final", arms["val_candidate"])
    library = Library.load(paths.library)
    composite = {
        t.id
        for t in library.all_artifacts()
        if t.guidance.rule and t.guidance.rule.kind == "branches"
    }
    suite = analysis.run_suite(tiny_run)
    decided: Counter[str] = Counter()
    for qid, rec in analysis.load_records(tiny_run, arm).items():
        for step in rec.steps:
            ran = [r.tool_id for r in step.runs if r.status == "ok" and r.outputs]
            if not composite.intersection(ran):
                continue
            assert len(ran) == 1, "tiny seed 5: every composite tool gives evidence alone"
            decided[step.decision] += 1
            gold = suite[qid].gold
            if step.decision == "replace":
                decided["helped"] += int(step.answer_out == gold)
                decided["harmed"] += int(step.answer_in == gold)
    got = b[["abstained", "kept", "replaced", "overruled", "helped", "harmed"]].sum()
    assert got.to_dict() == {
        "abstained": decided["no_decision"],
        "kept": decided["keep"],
        "replaced": decided["replace"],
        "overruled": 0,  # alone in its stage, a tool is never overruled
        "helped": decided["helped"],
        "harmed": decided["harmed"],
    }


def test_branch_effects_rejects_an_unknown_split(tiny_run: Path) -> None:
    with pytest.raises(ValueError, match="split"):
        analysis.branch_effects(tiny_run, split="train")


def test_a_round_with_no_plans_gives_empty_frames(tiny_run: Path) -> None:
    """A round that never ran (or planned no composite) gives the columns and no rows."""
    k = analysis.kinds_table(tiny_run, 2)
    assert list(k.columns) == analysis.KINDS_COLUMNS and k.empty
    b = analysis.branch_effects(tiny_run, 2, split="val")
    assert list(b.columns) == analysis.BRANCH_EFFECTS_COLUMNS and b.empty


def test_brief_measurement_names_the_branches_and_counts_the_rest() -> None:
    """A composite's branch list is split outside brackets (parameters hold "; " too)."""
    m = (
        "composite(granger.p[pair; lag=2] ~ granger.p[pair]; acf.acf1; "
        "xcorr.best_lag[pair; max_lag=0.1] ~ a.b ~ c.d; spikes.n[k=6.0])"
    )
    assert analysis.brief_measurement(m) == (
        "composite of 4 branches: granger.p[pair; lag=2] (+1 peer); acf.acf1; "
        "xcorr.best_lag[pair; max_lag=0.1] (+2 peers); … 1 more"
    )
    assert analysis.brief_measurement(m, branches=4).endswith("; spikes.n[k=6.0]")
    assert analysis.brief_measurement("composite(acf.acf1)") == "composite of 1 branch: acf.acf1"
    plain = "band_ratio.log_excess[qnum; fs=#0,hi1=#2]"
    assert analysis.brief_measurement(plain) == plain


def test_the_report_shows_composites_briefly(tiny_run: Path) -> None:
    """The end-of-run text names each composite's branches in one short line."""
    summary = analysis.run_summary(tiny_run)
    text = analysis.summary_text(summary)
    full = [t["measurement"] for rd in summary["rounds"] for t in rd["deployed"]]
    composites = [m for m in full if m.startswith("composite(")]
    assert composites, "tiny seed 5 deploys a composite tool"
    for m in composites:  # the branch list reads back into the string it came from
        parts = composite_branches(m)
        assert parts is not None and len(parts) >= 1
        assert "composite(" + "; ".join(" ~ ".join(b) for b in parts) + ")" == m
    assert text.count("composite of ") == len(composites)
    assert not any(m in text for m in composites)
    assert max(len(line) for line in text.splitlines()) < 400
    k = analysis.kinds_table(tiny_run)
    recovered, served = k["template"].nunique(), k.loc[k["served"], "template"].nunique()
    assert summary["rounds"][0]["kinds"] == {"recovered": recovered, "served": served}
    assert 0 < served < recovered
    assert (
        f"question kinds in composite plans: {recovered} recovered from wording, {served} given "
        "a branch by the planner" in text
    )
