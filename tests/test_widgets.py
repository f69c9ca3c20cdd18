"""Widgets as state machines: no browser, no kernel. Set traits, assert state and rendered HTML.

Fixtures come from one tiny REAL round (synthetic tiny preset, seed 5: accepted via the
single-round path), evolved once per session.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tsevo.widgets import (
    FLIP_CLASSES,
    FlipExplorer,
    GateView,
    LibraryBrowser,
    calibration_tree_html,
    calibration_tree_text,
    draw_calibration_tree,
    export_html,
    filter_flips,
)
from tsevo.widgets.export import default_assets_dir

from tsevo.analysis import FLIPS_COLUMNS, PRUNE_COLUMNS, TOOLS_COLUMNS, flips_df, tools_df
from tsevo.library.calibration import fit_calibration
from tsevo.store import RunStore

PNG = b"\x89PNG\r\n\x1a\n"
EVIL = "<script>alert('x')</script>"


@pytest.fixture(scope="session")
def test_json(tiny_run: Path) -> dict:
    return RunStore.open(tiny_run).read_json("rounds/r1/test.json")


@pytest.fixture(scope="session")
def calibration() -> dict:
    """A real accepted calibration record: two classes separated by a threshold on 'level'."""
    rng = np.random.default_rng(0)
    n = 80
    level = np.concatenate([rng.normal(0, 1, n // 2), rng.normal(4, 1, n // 2)])
    noise = rng.normal(0, 1, n)
    y = ["flat"] * (n // 2) + ["rising <fast>"] * (n // 2)
    ids = [f"q{i}" for i in range(n)]
    res = fit_calibration(
        np.column_stack([level, noise]), y, ids, feature_names=["level", "noise"], ids=ids
    )
    assert res.accepted, res.reason
    return res.to_dict()


# --------------------------------------------------------------------------------------- flips
def test_flip_explorer_initial_state_matches_the_report(tiny_run: Path, test_json: dict) -> None:
    w = FlipExplorer.from_run(tiny_run)
    counts = test_json["counts"]
    assert w.counts() == {
        "helped": counts["helped"],
        "harmed": counts["harmed"],
        "unchanged-right": counts["unchanged_right"],
        "unchanged-wrong": counts["unchanged_wrong"],
    }
    assert len(w.questions.options) == counts["n"]
    # helped questions come first, and the first one is selected and drawn
    first = w.questions.options[0][1]
    assert w.selected == first
    assert first in counts["helped_ids"]
    assert bytes(w.plot.value).startswith(PNG)
    assert first in w.detail.value and "gold" in w.detail.value
    assert "FlipExplorer(72 questions" in repr(w)
    assert "<table" in w._repr_html_()
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_flip_filters_drive_the_list_and_the_detail(tiny_run: Path, test_json: dict) -> None:
    w = FlipExplorer.from_run(tiny_run)
    # a flip class the round produced (harmed when there is one)
    cls = "harmed" if test_json["counts"]["harmed_ids"] else "helped"
    w.flip.value = cls
    ids = [q for _, q in w.questions.options]
    assert ids and ids == sorted(test_json["counts"][f"{cls}_ids"])
    assert w.selected == ids[0]
    assert cls in w.detail.value
    row = w.flips[w.flips["qid"] == ids[0]].iloc[0]
    assert bool(row["base_correct"]) == (cls == "harmed")
    assert bool(row["final_correct"]) == (cls == "helped")
    # a task with no harmed question empties the list and says so
    other = next(t for t in w.task.options[1:] if t != row["task"])
    w.task.value = other
    assert w.questions.options == () and w.selected is None
    assert "no question matches" in w.detail.value and bytes(w.plot.value) == b""
    # back to all flips in that task: every row belongs to it
    w.flip.value = "(all)"
    assert len(w.questions.options) == int((w.flips["task"] == other).sum())
    assert all(other in label for label, _ in w.questions.options)


def test_flip_tool_filter_and_select(tiny_run: Path) -> None:
    w = FlipExplorer.from_run(tiny_run)
    tool = w.tool.options[1]
    w.tool.value = tool
    shown = w.shown
    assert len(shown) > 0 and all(tool in list(r) for r in shown["tools_run"])
    target = shown["qid"].iloc[-1]
    w.select(target)
    assert w.selected == target
    assert tool in w.detail.value  # the tools that ran are listed with their evidence
    ev = json.loads(shown[shown["qid"] == target]["evidence_json"].iloc[0])
    for key in ev.get(tool, {}):
        assert key in w.detail.value
    outside = w.flips[~w.flips["qid"].isin(shown["qid"])]["qid"].iloc[0]
    with pytest.raises(KeyError):
        w.select(outside)


def test_filter_flips_is_pure() -> None:
    df = pd.DataFrame(
        {
            "qid": ["a", "b", "c"],
            "task": ["t1", "t1", "t2"],
            "flip": ["helped", "harmed", "helped"],
            "tools_run": [["x"], [], ["x", "y"]],
        }
    )
    assert list(filter_flips(df, flip="helped")["qid"]) == ["a", "c"]
    assert list(filter_flips(df, task="t1", flip="helped")["qid"]) == ["a"]
    assert list(filter_flips(df, tool="y")["qid"]) == ["c"]
    assert list(filter_flips(df)["qid"]) == ["a", "b", "c"]
    assert len(df) == 3


def _evil_flips() -> pd.DataFrame:
    row = {
        "round": 1,
        "split": "test",
        "qid": "q<1>",
        "task": "t&1",
        "subtask": EVIL,
        "question": f"What {EVIL} happens?",
        "options": [EVIL, "b & c"],
        "gold": 0,
        "base_answer": 1,
        "final_answer": 0,
        "base_correct": False,
        "final_correct": True,
        "flip": "helped",
        "tools_run": ["tool<x>"],
        "tools_ok": ["tool<x>"],
        "replaced_by": ["tool<x>"],
        "decision": "replace",
        "reason": EVIL,
        "evidence_json": json.dumps({"tool<x>": {"k<b>": 1.5}}),
    }
    return pd.DataFrame([row], columns=FLIPS_COLUMNS)


def test_flip_explorer_escapes_llm_and_tool_text() -> None:
    w = FlipExplorer(_evil_flips(), {"q<1>": ({"s": [1.0, 2.0, 3.0]}, {"s": "primary"})})
    html = w.detail.value
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "tool&lt;x&gt;" in html and "k&lt;b&gt;" in html and "b &amp; c" in html
    assert bytes(w.plot.value).startswith(PNG)
    assert "<script>" not in w._repr_html_()
    view, links = w.static_view()
    assert len(links) == 1
    assert "<script>" not in view.children[1].children[1].children[0].value


def test_flip_static_view_links_list_to_panels(tiny_run: Path) -> None:
    w = FlipExplorer.from_run(tiny_run)
    view, (link,) = w.static_view(max_questions=5)
    select, stack = view.children[1].children
    assert len(select.options) == 5 and len(stack.children) == 5
    assert link.source == (select, "index") and link.target == (stack, "selected_index")
    for label, panel in zip(select.options, stack.children, strict=True):
        qid = label.split(" · ")[1]
        assert qid in panel.value and "data:image/png;base64," in panel.value


# --------------------------------------------------------------------------------------- library
def test_library_browser_lists_the_deployed_artifacts(tiny_run: Path) -> None:
    deployed = RunStore.open(tiny_run).read_json("rounds/r1/round.json")["deployed"]
    w = LibraryBrowser.from_run(tiny_run)
    assert sorted(i for _, i in w.artifacts.options) == sorted(deployed)
    for tid in deployed:
        w.select(tid)
        html = w.detail.value
        assert tid in html and "usage" in html and "guidance" in html
        assert "<span style=" in html  # pygments inline-styled source
        assert ">def<" in html
    assert list(w.stage.options) == ["(all)", 1]  # the empty root stage has no artifact
    w.stage.value = 1
    assert len(w.artifacts.options) == len(deployed)
    # a composite's label names its branches in brief, not its whole branch list
    labels = [label for label, _ in w.artifacts.options]
    assert any(" · composite of " in label for label in labels)
    assert not any("composite(" in label for label in labels)
    assert repr(w) == f"LibraryBrowser({len(deployed)} artifacts in 1 stage(s))"


def test_library_filters_by_stage_and_kind(calibration: dict) -> None:
    tools = pd.DataFrame(
        [
            _tool_row(calibration),
            _tool_row(calibration, id="r2.g1.a1", stage=2, round=2, calibrated=False),
            _tool_row(calibration, id="r2.u1", stage=2, round=2, kind="usage_guidance", source=""),
        ],
        columns=TOOLS_COLUMNS,
    )
    w = LibraryBrowser(tools)
    assert w.selected == "r1.g1.a1"
    w.stage.value = 2
    assert [i for _, i in w.artifacts.options] == ["r2.g1.a1", "r2.u1"]
    assert w.selected == "r2.g1.a1" and "calibration</b> <i>none" in w.detail.value
    w.kind.value = "usage_guidance"
    assert w.selected == "r2.u1" and "no source" in w.detail.value
    w.stage.value = 1
    assert w.artifacts.options == () and "no artifact" in w.detail.value


def _tool_row(calibration: dict, **over: object) -> dict:
    row = {c: "" for c in TOOLS_COLUMNS}
    row.update(
        stage=1,
        round=1,
        id="r1.g1.a1",
        kind="tool",
        name="measure_level",
        description=f"measures {EVIL}",
        measurement="level.mean",
        tasks=["t"],
        outputs=["level", "noise"],
        calibrated=True,
        calibration_json=json.dumps(calibration),
        source="def measure_level():\n    return {'level': 1.0, 'noise': 0.0}\n",
        guidance=f"read it {EVIL}",
        attempt=1,
        fired_val=3,
        helped_val=2,
        harmed_val=1,
        fired_test=4,
        helped_test=1,
        harmed_test=0,
    )
    row.update(over)
    return row


def test_library_browser_draws_calibration_and_escapes(calibration: dict) -> None:
    tools = pd.DataFrame([_tool_row(calibration)], columns=TOOLS_COLUMNS)
    w = LibraryBrowser(tools)
    html = w.detail.value
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "level" in html and "rising &lt;fast&gt;" in html  # tree leaves, escaped
    assert "data:image/png;base64," in html  # the drawn tree
    assert ">3<" in html and ">2<" in html  # usage counts in the table
    _, (link,) = w.static_view()
    assert link.target[1] == "selected_index"


def test_calibration_tree_renderings_agree(calibration: dict) -> None:
    text = calibration_tree_text(calibration)
    tree = calibration["tree"]

    def nodes(n: dict) -> int:
        return 1 if "class" in n else 1 + nodes(n["left"]) + nodes(n["right"])

    def leaves(n: dict) -> int:
        return 1 if "class" in n else leaves(n["left"]) + leaves(n["right"])

    assert text.startswith("binary_decision_tree_v1: accepted")
    assert len(text.splitlines()) == 1 + nodes(tree)
    assert text.count("→") == leaves(tree)
    assert "level" in text
    assert calibration_tree_html(calibration).count("<li>") == nodes(tree)
    ax = draw_calibration_tree(json.dumps(calibration))
    assert len(ax.texts) >= nodes(tree)
    assert calibration_tree_text(None) == "no calibration"


# --------------------------------------------------------------------------------------- gate
def test_gate_view_shows_counts_delta_and_path(tiny_run: Path) -> None:
    gate = RunStore.open(tiny_run).read_json("rounds/r1/gate.json")
    w = GateView.from_run(tiny_run)
    html = w.summary.value
    assert gate["path"] in html
    assert f">{gate['h']}<" in html and f">{gate['m']}<" in html and f">{gate['n']}<" in html
    assert "prune</b>: not run" in html
    assert bytes(w.plot.value).startswith(PNG)
    assert f"h={gate['h']} m={gate['m']} n={gate['n']}" in repr(w)
    assert "verdict" in html  # the decision path, line by line


def test_gate_view_prune_steps() -> None:
    gate = pd.DataFrame(
        [
            {
                "round": 1,
                "decision": "gate",
                "path": "rejected",
                "passed": False,
                "invalid": False,
                "n": 50,
                "n_attempted": 50,
                "h": 3,
                "m": 4,
                "delta": -0.02,
                "delta_lb": -0.12,
                "error_rate": 0.0,
                "reasons": "strict fail\nverdict: rejected",
            },
            {
                "round": 1,
                "decision": "retest",
                "path": "strict",
                "passed": True,
                "invalid": False,
                "n": 50,
                "n_attempted": 50,
                "h": 3,
                "m": 0,
                "delta": 0.06,
                "delta_lb": 0.0261,
                "error_rate": 0.0,
                "reasons": "verdict: admitted",
            },
        ]
    )
    prune = pd.DataFrame(
        [
            {
                "round": 1,
                "update": "r1.g1.a1",
                "helped": 0,
                "harmed": 4,
                "harmful": True,
                "removed": True,
                "reason": f"removed: clearly harmful {EVIL}",
                "outcome": "pruned 1 update; retest passed",
                "accepted": True,
            }
        ],
        columns=PRUNE_COLUMNS,
    )
    w = GateView(gate, prune)
    html = w.summary.value
    assert "retest gate, path strict" in html and "admitted</th><td" in html
    assert "r1.g1.a1" in html and "pruned library deployed: yes" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    view, links = w.static_view()
    assert len(links) == 1
    assert view.children[2].children[0].value.count("data:image/png;base64,") == 1


# --------------------------------------------------------------------------------------- export
def test_export_needs_the_vendor_assets(tiny_run: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="fetch_widget_assets"):
        export_html(tiny_run, tmp_path / "x.html", assets_dir=tmp_path / "none")


def test_export_html_is_offline_and_embeds_links(tiny_run: Path, tmp_path: Path) -> None:
    vendor = default_assets_dir()
    if not (vendor / "html-manager" / "dist" / "embed-amd.js").is_file():
        pytest.skip(f"widget assets not fetched into {vendor} (.ci/fetch_widget_assets.sh)")
    out = export_html(tiny_run, tmp_path / "page.html", max_questions=6)
    text = out.read_text(encoding="utf-8")
    assert (tmp_path / "page_files" / "require.js").is_file()
    assert (tmp_path / "page_files" / "embed-amd.js").is_file()
    assert '<script src="page_files/require.js">' in text
    assert "cdn" not in text.split("<body>")[0] and "https://" not in text.split("<body>")[0]
    state_txt = text.split('widget-state+json">', 1)[1].split("</script>", 1)[0]
    state = json.loads(state_txt)["state"]
    models = [m["model_name"] for m in state.values()]
    assert models.count("LinkModel") == 3 and "TabModel" in models and "StackModel" in models
    # drop_defaults=False: default-valued traits are present in the state
    html_models = [m["state"] for m in state.values() if m["model_name"] == "HTMLModel"]
    assert all("_dom_classes" in s for s in html_models)
    flips = flips_df(tiny_run)
    helped = sorted(flips[flips["flip"] == "helped"]["qid"])
    assert helped  # the tiny round helps questions: helped ones are rendered first, up to the cap
    assert sum(q in text for q in helped) == min(len(helped), 6)
    assert "<script>alert" not in text
    assert all(t in state_txt for t in tools_df(tiny_run)["id"])
    assert FLIP_CLASSES[0] in text
