"""TaxonomyBrowser as a state machine, on the planted taxonomy run (tests/taxonomy_fixtures.py).

The run is the constructed one the taxonomy run tests use (config, suite, round 1's base pass; a
planted tool timeout); ``tsevo.taxonomy.runs`` induces and gates it for real. A second copy gets
three more codes by the edit API and a ``<script>`` in one trace's rendering, so there are several
codes per axis with different frequencies and an excerpt that must be escaped. Expected
frequencies are counted here from the traces and the detectors, not from the browser's frames.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tsevo.widgets.flips import FlipExplorer
from tsevo.widgets.taxonomy import (
    AXES,
    EMPTY_MESSAGE,
    METRIC_NAMES,
    TaxonomyBrowser,
    badge_text,
    traces_explorer,
)

from tests.taxonomy_fixtures import planted_run
from tsevo.analysis import FLIPS_COLUMNS
from tsevo.analysis.taxonomy import (
    agreement_df,
    firings_df,
    gaps_df,
    trace_flips_df,
    versions_df,
)
from tsevo.store import RunLayout
from tsevo.taxonomy import Add, Code, Retire, apply_edits, load_taxonomy, save_taxonomy
from tsevo.taxonomy.gate import GateConfig
from tsevo.taxonomy.induce import fires
from tsevo.taxonomy.runs import gate_run, induce_run
from tsevo.taxonomy.traces import read_traces, write_traces

EVIL = "<script>alert('taxonomy')</script>"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted run before any taxonomy (copied before the gated fixture writes into it)."""
    run = planted_run(tmp_path_factory.mktemp("txb") / "run")
    bare = run.parent / "bare"
    shutil.copytree(run, bare)
    return bare


@pytest.fixture(scope="module")
def gated(fresh: Path) -> Path:
    run = fresh.parent / "gated"
    shutil.copytree(fresh, run)
    induce_run(run)
    gate_run(run)
    return run


def _code(axis: str, name: str, feature: str, role: str | None = None) -> Code:
    det = {"any": [{"all": [{"feature": feature, "op": "==", "value": True}]}]}
    return Code(
        id="",
        category=axis,
        name=name,
        description=f"Traces where {feature} == true <b>bold?</b>",
        applies_to_role=role,
        detector=det,
        outcome_blind=True,
        area="tool" if axis == "A" else role,
    )


@pytest.fixture(scope="module")
def edited(gated: Path) -> Path:
    """Three more codes (two A, one B) and a <script> at the head of one firing trace."""
    run = gated.parent / "edited"
    shutil.copytree(gated, run)
    tp = RunLayout(run).taxonomy
    tax = load_taxonomy(tp.taxonomy)
    adds = [
        Add(_code("A", "Tool_Timeout", "tool.error_timeout")),
        Add(_code("A", "Tool_Abstains", "tool.any_abstain")),
        Add(_code("B", "Reviewer_Makes_No_Decision", "review.no_decision", "reviewer")),
    ]
    save_taxonomy(apply_edits(tax, adds, trigger="test").taxonomy, tp.taxonomy)
    traces = read_traces(tp.traces("train"))
    timeout = next(i for i, t in enumerate(traces) if t.features["tool.error_timeout"])
    t = traces[timeout]
    traces[timeout] = type(t)(t.problem_id, t.task, EVIL + "\n" + t.raw_trajectory, t.metadata)
    write_traces(traces, tp.traces("train"))
    return run


def _counts(run: Path) -> dict[str, int]:
    """Per code of taxonomy.json: on how many train traces its detector fires (counted here)."""
    tp = RunLayout(run).taxonomy
    tax = load_taxonomy(tp.taxonomy)
    traces = read_traces(tp.traces("train"))
    return {c.id: sum(fires(c.detector, t.features) for t in traces) for c in tax.codes}


# --------------------------------------------------------------------------------------- tests
def test_empty_state_names_the_command(fresh: Path) -> None:
    b = TaxonomyBrowser.from_run(fresh)
    assert b.empty and b.current is None and b.selected is None
    assert "tsevo taxonomy induce" in repr(b)
    assert "tsevo taxonomy induce RUN" in b._repr_html_()
    assert "tsevo taxonomy gate RUN" in b._repr_html_()
    w, links = b.static_view()
    assert links == [] and EMPTY_MESSAGE.split(".")[0] in w.children[1].value
    assert all(len(g) == 0 for g in b.by_axis().values())


def test_codes_by_axis_in_frequency_order(edited: Path) -> None:
    counts = _counts(edited)
    b = TaxonomyBrowser.from_run(edited)
    groups = b.by_axis()
    listed = {a: list(groups[a]["code_id"]) for a in AXES}
    assert sorted(i for ids in listed.values() for i in ids) == sorted(counts)
    assert len(listed["A"]) == 3 and len(listed["B"]) == 1
    for axis, ids in listed.items():
        assert all(i.startswith(axis + ".") for i in ids)
        freq = [counts[i] for i in ids]
        assert freq == sorted(freq, reverse=True)
        assert list(groups[axis]["firings"]) == freq
    a_freq = [counts[i] for i in listed["A"]]
    assert len(set(a_freq)) > 1  # a real ordering, not ties
    b.axis.value = "A"
    assert [v for _, v in b.codes_list.options] == listed["A"]
    assert b.selected == listed["A"][0]
    b.axis.value = "B"
    assert b.selected == listed["B"][0] and "[reviewer]" in b.codes_list.options[0][0]
    b.select(listed["A"][-1])
    assert b.axis.value == "A" and b.selected == listed["A"][-1]
    assert f"<b>{listed['A'][-1]}</b>" in b.detail.value
    assert "&lt;b&gt;bold?&lt;/b&gt;" in b.detail.value  # code prose is escaped too


def test_badge_names_the_gating_metric_and_its_kappa(gated: Path) -> None:
    tax = load_taxonomy(RunLayout(gated).taxonomy.taxonomy)
    agr = tax.generation["agreement"]
    b = TaxonomyBrowser.from_run(gated)
    text = badge_text(b.current, b.agreement)
    assert text.startswith(tax.status)
    assert (
        f"gated by {METRIC_NAMES['cohen_area']} (cohen_area): κ = {agr['final_kappa']:.3f}" in text
    )
    assert f"coverage {agr['final_coverage']:.3f}" in text
    assert f"{METRIC_NAMES['fleiss_code_macro']} (fleiss_code_macro, reported)" in text
    a = agreement_df(gated)
    last = a[(a["round"] == a["round"].max()) & a["gating"]].iloc[0]
    assert last["metric"] == "cohen_area" and f"κ = {float(last['value']):.3f}" in text
    assert text in repr(b)
    assert tax.status in b.badge.value
    draft = [k for _, k in b.version.options if k.endswith("|draft")]
    assert len(b.version.options) == 2 and draft
    b.version.value = draft[0]
    assert "before the gate" in badge_text(b.current, b.agreement)
    assert "not gated yet" in badge_text(b.current)  # no agreement rounds at all


def test_retired_toggle_and_version_switch(edited: Path, tmp_path: Path) -> None:
    run = tmp_path / "retired"
    shutil.copytree(edited, run)
    tp = RunLayout(run).taxonomy
    tax = load_taxonomy(tp.taxonomy)
    gone = tax.axis("A")[-1].id
    save_taxonomy(apply_edits(tax, [Retire(gone)], trigger="test").taxonomy, tp.taxonomy)
    b = TaxonomyBrowser.from_run(run)
    assert "not gated yet" in badge_text(b.current, b.agreement)  # an edit drops the gate
    assert gone not in [v for _, v in b.codes_list.options]
    b.show_retired.value = True
    labels = dict((v, lab) for lab, v in b.codes_list.options)
    assert gone in labels and labels[gone].endswith("· retired")
    b.show_retired.value = False
    draft = load_taxonomy(tp.draft)
    b.version.value = next(k for _, k in b.version.options if k.endswith("|draft"))
    assert [v for _, v in b.codes_list.options] == [c.id for c in draft.axis("A")]
    assert b.current is not None and b.current["status"] == "draft"


def test_badge_follows_a_gate_by_fleiss(gated: Path) -> None:
    run = gated.parent / "fleiss"
    shutil.copytree(gated, run)
    gate_run(run, config=GateConfig(metric="fleiss_code_macro"))
    v = versions_df(run)
    gated_row = v[v["stage"] == "gated"].iloc[0]
    assert gated_row["metric"] == "fleiss_code_macro"
    text = badge_text(TaxonomyBrowser.from_run(run).current)
    kappa = gated_row["kappa"]
    shown = "undefined" if kappa is None or kappa != kappa else f"{float(kappa):.3f}"
    assert f"gated by {METRIC_NAMES['fleiss_code_macro']} (fleiss_code_macro): κ = {shown}" in text
    assert "(cohen_area, reported)" in text


def test_gaps_are_shown_as_gaps(gated: Path) -> None:
    gaps = gaps_df(gated)
    tax = load_taxonomy(RunLayout(gated).taxonomy.taxonomy)
    mine = gaps[gaps["status"] == tax.status]
    assert len(mine) == len(tax.coverage_gaps) > 0
    b = TaxonomyBrowser.from_run(gated)
    for axis in sorted(set(mine["axis"])):
        b.axis.value = axis
        assert f"gap {axis}" in b.gaps_html.value
        for reason in mine[mine["axis"] == axis]["reason"]:
            assert str(reason) in b.gaps_html.value
        if not tax.axis(axis):
            assert b.selected is None and "no code on this axis" in b.detail.value
    assert "not filled with filler codes" in b.summary_html()


def test_evidence_excerpts_are_escaped(edited: Path) -> None:
    b = TaxonomyBrowser.from_run(edited)
    fired = firings_df(edited)
    evil = fired[fired["evidence"].str.contains("<script>", regex=False)]
    assert len(evil) >= 1  # the frame carries the raw text; the browser must escape it
    code = str(evil["code_id"].iloc[0])
    b.select(code)
    html = b.detail.value
    assert "&lt;script&gt;alert(&#x27;taxonomy&#x27;)&lt;/script&gt;" in html
    assert "<script>" not in html
    w, _ = b.static_view()
    assert all("<script>" not in c.value for c in w.children[2].children[1].children)


def test_linked_questions_select_in_the_flip_explorer(edited: Path) -> None:
    tp = RunLayout(edited).taxonomy
    tax = load_taxonomy(tp.taxonomy)
    traces = {t.problem_id: t for t in read_traces(tp.traces("train"))}
    b = TaxonomyBrowser.from_run(edited)
    code = b.by_axis()["B"]["code_id"].iloc[0]
    fired = firings_df(edited)
    tids = {tid for tid, t in traces.items() if fires(tax[code].detector, t.features)}
    expected = sorted(set(fired[fired["trace_id"].isin(tids)]["question_id"]))
    assert b.questions_for(code) == expected and len(expected) >= 2
    explorer = traces_explorer(edited)
    assert set(expected) <= set(explorer.flips["qid"])
    seen: list[str | None] = []
    b.on_question(seen.append)
    b.link(explorer)
    b.select(code)
    assert list(b.questions.options) == expected
    b.select_question(expected[1])
    assert explorer.selected == expected[1] and seen[-1] == expected[1]
    hidden = next(f for f in ("helped", "harmed", "unchanged-right", "unchanged-wrong")
                  if expected[0] not in set(explorer.flips[explorer.flips["flip"] == f]["qid"]))  # fmt: skip
    explorer.flip.value = hidden  # a filter that hides the next question
    b.select_question(expected[0])
    assert explorer.selected == expected[0] and explorer.flip.value == "(all)"
    with pytest.raises(KeyError):
        b.select_question("not-a-question")
    # an explorer without the question (e.g. a test-split one): reported, selection kept
    other = FlipExplorer(explorer.flips[explorer.flips["qid"] != expected[1]].copy())
    b.link(other)  # forwards the current pick at once
    before = other.selected
    assert before == expected[0]
    b.select_question(expected[1])
    assert other.selected == before and "not in the linked explorer" in b.link_note.value


def test_trace_flips_frame_covers_the_firings(gated: Path) -> None:
    flips = trace_flips_df(gated)
    assert list(flips.columns) == FLIPS_COLUMNS and set(flips["split"]) == {"train"}
    assert set(firings_df(gated)["question_id"]) <= set(flips["qid"])
    wrong = flips[flips["final_correct"] == False]  # noqa: E712
    assert set(wrong["flip"]) <= {"harmed", "unchanged-wrong"}


def test_static_export_content(edited: Path) -> None:
    from ipywidgets.embed import dependency_state, embed_data

    b = TaxonomyBrowser.from_run(edited)
    w, links = b.static_view()
    _, summary, body = w.children
    select, stack = body.children
    ordered = [r for a in AXES for r in b.by_axis()[a].to_dict("records")]
    assert [o.split(" · ")[0] for o in select.options] == [r["code_id"] for r in ordered]
    assert len(stack.children) == len(ordered) and len(links) == 1
    assert badge_text(b.current, b.agreement).split(" · ")[0] in summary.value
    assert "gap C" in summary.value
    state = dependency_state([w, *links], drop_defaults=False)
    data = embed_data([w], drop_defaults=False, state=state)
    text = json.dumps(data["manager_state"])
    for r in ordered:
        assert str(r["name"]) in text
    assert "<script>alert" not in text and "&lt;script&gt;" in text
    for x in [*links, w]:
        x.close()
