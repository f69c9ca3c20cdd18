"""ChainView and the Mara chain inspection frames, from one real run with chains (no kernel).

The run is the tiny preset, seed 5, with ``marachain.depth = 3`` (``MaraChainsConfig``, the
stage notebook's config): work group ``g3`` misses the bar with every direct attempt, so a builtin
chain of three nodes runs from v0. It is evolved once per session into the shared temporary
folder (a file lock lets xdist workers share it). The empty state reads the shared chain-off run.
"""

from __future__ import annotations

import json
from pathlib import Path

import ipywidgets as ipw
import pandas as pd
import pytest
from tsevo.widgets.chains import ChainView, grid_html, lineage_html

from tsevo.analysis import CHAIN_SCORES_COLUMNS, chain_nodes_df, chain_scores_df
from tsevo.analysis.marachain import (
    CHAIN_DIFFS_COLUMNS,
    CHAIN_LINEAGE_COLUMNS,
    CHAIN_RECORDS_COLUMNS,
    CHAINS_COLUMNS,
    chain_depth,
    chain_diffs_df,
    chain_lineage_df,
    chain_records_df,
    chains_df,
)
from tsevo.store import RunLayout

EVIL = "<script>alert('x')</script>"

slow = pytest.mark.slow  # the session's chain run takes ~50 s on the shared machine


@pytest.fixture(scope="session")
def synthesis(chain_run: Path) -> list[dict]:
    data: list[dict] = json.loads(RunLayout(chain_run).round(1).synthesis.read_text())
    return data


def _html_of(w: ipw.Widget) -> str:
    """Every HTML value under a widget tree, concatenated (what a static page would carry)."""
    out = [w.value] if isinstance(w, ipw.HTML) else []
    for child in getattr(w, "children", ()) or ():
        out.append(_html_of(child))
    return "\n".join(out)


# --------------------------------------------------------------------------------------- frames
@slow
def test_inspection_frames_follow_the_stored_chain(chain_run: Path, synthesis: list[dict]) -> None:
    chained = [g for g in synthesis if "chain" in g]
    assert chained, "seed 5 at depth 3: g3's direct attempts miss the bar, so a chain runs"
    assert chain_depth(chain_run) == 3
    chains = chains_df(chain_run)
    assert list(chains.columns) == CHAINS_COLUMNS
    assert list(chains["chain_id"]) == [g["chain"]["chain_id"] for g in chained]
    assert (chains["val_runs"] == 0).all()
    assert (chains["steps"] <= chains["bound_steps"]).all()

    lineage = chain_lineage_df(chain_run)
    assert list(lineage.columns) == CHAIN_LINEAGE_COLUMNS
    for g in chained:
        rows = lineage[lineage["group"] == g["group_id"]]
        direct = rows[rows["kind"] == "direct"]
        assert list(direct["node_id"]) == [a["tool_id"] for a in g["attempts"]]
        steps = rows[rows["kind"] == "chain"]
        assert list(steps["node_id"]) == [n["node_id"] for n in g["chain"]["nodes"]]
        assert list(steps["parent_id"]) == [n["parent_id"] for n in g["chain"]["nodes"]]
        (v0,) = rows[rows["is_start"]]["node_id"]
        assert v0 == g["chain"]["v0"]["node_id"]
        assert (rows["net"] == rows["repairs"] - rows["harms"]).all()
    # the chain-node rows agree with chain_nodes_df (same run, same record)
    nodes = chain_nodes_df(chain_run).set_index("node_id")
    steps = lineage[lineage["kind"] == "chain"].set_index("node_id")
    for col in ("repairs", "harms", "axis", "measurement", "winner", "survivor"):
        assert steps[col].tolist() == nodes.loc[steps.index, col].tolist(), col
    # Σ d_prev per node is the frame's d_prev summed over the batch
    scores = chain_scores_df(chain_run)
    sums = scores.groupby("node_id")["d_prev"].sum()
    scored = lineage[lineage["scored_on"] == "batch"].set_index("node_id")["sum_d_prev"]
    assert scored.astype(int).to_dict() == sums.loc[scored.index].to_dict()


@slow
def test_node_records_are_the_arms_the_prefilter_scored(chain_run: Path) -> None:
    records = chain_records_df(chain_run)
    assert list(records.columns) == CHAIN_RECORDS_COLUMNS
    scores = chain_scores_df(chain_run)
    assert list(scores.columns) == CHAIN_SCORES_COLUMNS
    # one stored record per scored node and batch question, and its correctness is the raw score
    merged = scores.merge(records, on=["chain_id", "node_id", "qid"], suffixes=("", "_rec"))
    assert len(merged) == len(scores) > 0
    assert (merged["final_correct"].astype(int) == merged["raw"]).all()
    assert (merged["part"] == merged["part_rec"]).all()
    # the base arm is L_0: wrong on every held-out error, right on every probe row
    assert (merged["base_correct"].astype(int) == (merged["part"] == "P")).all()
    # facts: a credited held-out row is a replacement by the node; an unshortlisted row changes
    # nothing, so its answer is the base answer
    assert set(merged["fact"]) <= set("OSAEKR")
    assert (merged.loc[(merged["part"] == "H") & (merged["credited"] == 1), "fact"] == "R").all()
    o = merged[merged["fact"] == "O"]
    assert (o["final_answer"] == o["base_answer"]).all()
    assert records["question"].str.len().gt(0).all()


@slow
def test_diffs_are_taken_against_the_lineage_parent(chain_run: Path) -> None:
    diffs = chain_diffs_df(chain_run)
    assert list(diffs.columns) == CHAIN_DIFFS_COLUMNS
    lineage = chain_lineage_df(chain_run)
    assert list(diffs["node_id"]) == list(lineage["node_id"])
    src = dict(zip(diffs["node_id"], diffs["source"], strict=True))
    assert all(src.values()), "every node of the builtin chain saved its source"
    for row in diffs.to_dict("records"):
        if not row["parent_id"]:
            assert row["source_diff"] == row["spec_diff"] == ""
            continue
        assert row["parent_source"] == src[row["parent_id"]]
        assert (row["source_diff"] == "") == (row["source"] == row["parent_source"])
        if row["source_diff"]:
            assert row["source_diff"].startswith(f"--- {row['parent_id']}\n+++ {row['node_id']}")
    # a step never repeats its parent's artifact: every chain node changed its source or its spec
    steps = diffs[diffs["node_id"].isin(lineage[lineage["kind"] == "chain"]["node_id"])]
    assert len(steps) > 0
    assert ((steps["source_diff"] != "") | (steps["spec_diff"] != "")).all()


# --------------------------------------------------------------------------------------- widget
@slow
def test_chainview_state_machine_over_group_node_question(chain_run: Path) -> None:
    w = ChainView.from_run(chain_run)
    lineage = chain_lineage_df(chain_run)
    scores = chain_scores_df(chain_run)
    chains = chains_df(chain_run)
    keys = [f"r{r} · {g}" for r, g in zip(chains["round"], chains["group"], strict=True)]
    assert list(w.group.options) == keys
    g3 = lineage[lineage["chain_id"] == chains["chain_id"][0]]
    v0 = str(g3[g3["is_start"]]["node_id"].iloc[0])
    first_q = str(scores["qid"].iloc[0])
    assert w.selected == (v0, first_q)
    # the tree holds every node of the group, root first, the selected node highlighted
    for nid in g3["node_id"]:
        assert f"<code>{nid}</code>" in w.tree.value
    assert f"data-node='{v0}' style='background:#fff3c4" in w.tree.value
    assert "L<sub>0</sub>" in w.tree.value and "v0" in w.tree.value
    listed = [v for _, v in w.nodes.options]
    assert sorted(listed) == sorted(g3["node_id"])
    parents = dict(zip(g3["node_id"], g3["parent_id"], strict=True))
    assert all(not parents[n] or listed.index(parents[n]) < listed.index(n) for n in listed)
    # the grid: one button per (batch question, scored node), the cell of v0 × first question outlined
    n_scored = scores["node_id"].nunique()
    assert len(w.cells.children) == len(scores) == n_scored * scores["qid"].nunique()
    assert f"data-cell='{first_q}|{v0}' title=" in w.grid.value
    assert "outline:2px solid" in w.grid.value
    # clicking a cell opens that question's record under that node
    last = scores.iloc[-1]
    w.cell(str(last["qid"]), str(last["node_id"])).click()
    assert w.selected == (str(last["node_id"]), str(last["qid"]))
    assert str(last["qid"]) in w.record.value and str(last["node_id"]) in w.record.value
    part = "P (harm probe)" if last["part"] == "P" else "H (held-out error)"
    assert part in w.record.value and "fact" in w.record.value
    # and the diff pane shows that node against its parent
    parent = str(g3.set_index("node_id").loc[str(last["node_id"]), "parent_id"])
    assert f"against its parent <b>{parent}</b>" in w.diff.value
    assert "source diff" in w.diff.value
    # selecting a direct attempt shows its source (its parent is the root library)
    w.select(v0)
    src = chain_diffs_df(chain_run).set_index("node_id").loc[v0, "source"]
    name = src.split("def ", 1)[1].split("(", 1)[0]
    assert "a direct attempt" in w.diff.value and name in w.diff.value
    with pytest.raises(KeyError):
        w.select("r9.g9.a1")
    with pytest.raises(KeyError):
        w.cell("nope", v0)
    n_steps = int((lineage["kind"] == "chain").sum())
    assert repr(w).startswith(f"ChainView({len(chains)} chain(s), {n_steps} chain node(s)")
    assert "<table" in w._repr_html_()
    assert "application/vnd.jupyter.widget-view+json" in w._repr_mimebundle_()


@slow
def test_records_are_left_out_when_the_node_arm_cannot_be_rebuilt(
    chain_run: Path, tmp_path: Path
) -> None:
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(chain_run, copy)
    summary = RunLayout(copy).round(1).summary
    data = json.loads(summary.read_text())
    data["arms"]["train_base"] = "train.0000000000000000"  # not L_0's fingerprint
    summary.write_text(json.dumps(data))
    assert chain_records_df(copy).empty
    w = ChainView.from_run(copy)
    assert "no stored record of" in w.record.value
    assert len(w.cells.children) == len(chain_scores_df(copy))  # the grid still shows the scores
    # a round without chains in a run with chains on says so
    later = ChainView.from_run(chain_run, round=2)
    assert "no chains in this run: depth 3, but no work group started one" in later.summary.value


@slow
def test_switching_the_chain_switches_tree_grid_and_selection(chain_run: Path) -> None:
    frames = [
        chains_df(chain_run),
        chain_lineage_df(chain_run),
        chain_scores_df(chain_run),
        chain_records_df(chain_run),
        chain_diffs_df(chain_run),
    ]
    gid = str(frames[0]["group"].iloc[0])

    def other(df: pd.DataFrame) -> pd.DataFrame:
        """The same chain relabelled as group g99 (every id column renamed)."""
        out = df.copy()
        for col in ("group", "chain_id", "node_id", "parent_id", "start_node", "winner"):
            if col in out:
                out[col] = out[col].astype(str).str.replace(f".{gid}.", ".g99.", regex=False)
        if "group" in out:
            out["group"] = "g99"
        return out

    both = [pd.concat([f, other(f)], ignore_index=True) for f in frames]
    w = ChainView(*both)
    assert list(w.group.options) == [f"r1 · {gid}", "r1 · g99"]
    first_tree = w.tree.value
    w.group.value = "r1 · g99"
    node, qid = w.selected
    assert node is not None and ".g99." in node and qid == str(frames[2]["qid"].iloc[0])
    assert "lineage of group g99" in w.tree.value and f".{gid}." not in w.tree.value
    assert w.tree.value != first_tree
    assert all(".g99." in b.tsevo_cell[1] for b in w.cells.children)
    assert "r1.g99." in w.summary.value
    _, links = w.static_view()
    assert len(links) == 2 * 2 + 1 and w.group.value == "r1 · g99"  # static export keeps state


@slow
def test_chainview_escapes_every_text_it_shows(chain_run: Path) -> None:
    lineage = chain_lineage_df(chain_run)
    records = chain_records_df(chain_run)
    diffs = chain_diffs_df(chain_run)
    chains = chains_df(chain_run)
    lineage["subject"] = EVIL
    lineage["invalid_reason"] = EVIL
    lineage["valid"] = False
    lineage["categories"] = EVIL
    records["question"] = EVIL
    records["reason"] = EVIL
    records["options"] = [[EVIL, "b"]] * len(records)
    diffs["source_diff"] = diffs["source_diff"].where(diffs["parent_id"] == "", f"+{EVIL}\n")
    diffs["source"] = EVIL
    chains["stopped"] = EVIL
    w = ChainView(chains, lineage, chain_scores_df(chain_run), records, diffs)
    step = str(lineage[lineage["kind"] == "chain"]["node_id"].iloc[0])
    w.select(step)
    shown = [w.tree.value, w.grid.value, w.record.value, w.diff.value, w.summary.value]
    w.select(str(lineage["node_id"].iloc[0]))
    shown += [w.diff.value, w._repr_html_()]
    view, _ = w.static_view()
    shown.append(_html_of(view))
    text = "\n".join(shown)
    assert "<script>" not in text
    # shown[2]: the chain node's record (a direct attempt other than v0 has none stored)
    assert "&lt;script&gt;" in w.tree.value and "&lt;script&gt;" in shown[2]
    assert "&lt;script&gt;" in w.summary.value and "&lt;script&gt;" in shown[3]


def test_chainview_says_honestly_when_there_is_no_chain(tiny_run: Path) -> None:
    w = ChainView.from_run(tiny_run)
    assert "no chains in this run: depth 0" in w.summary.value
    assert repr(w) == "ChainView(no chains: depth 0)"
    assert "no chains in this run: depth 0" in w._repr_html_()
    view, links = w.static_view()
    assert links == [] and "no chains in this run: depth 0" in _html_of(view)


@slow
def test_static_view_carries_lineage_grid_records_and_diffs(chain_run: Path) -> None:
    from ipywidgets.embed import dependency_state, embed_data

    w = ChainView.from_run(chain_run)
    view, links = w.static_view()
    html = _html_of(view)
    lineage = chain_lineage_df(chain_run)
    scores = chain_scores_df(chain_run)
    assert "tsevo-chain-lineage" in html and "tsevo-chain-grid" in html
    assert all(f"<code>{n}</code>" in html for n in lineage["node_id"])
    cells = zip(scores["qid"], scores["node_id"], strict=True)
    assert all(f"data-cell='{q}|{n}'" in html for q, n in cells)
    # one record panel per grid cell, one diff panel per node, each list linked to its stack
    stacks = [c for c in _walk(view) if isinstance(c, ipw.Stack)]
    sizes = sorted(len(s.children) for s in stacks)
    assert sizes == sorted([len(w.chains), len(lineage), len(scores)])
    assert len(links) == 2 * len(w.chains) + 1
    # the page state (what the offline export embeds) carries the panels and the links
    state = dependency_state([view, *links], drop_defaults=False)
    data = embed_data([view], drop_defaults=False, state=state)
    text = json.dumps(data["manager_state"])
    assert "LinkModel" in text and "tsevo-chain-grid" in text
    assert str(scores["qid"].iloc[-1]) in text


def _walk(w: ipw.Widget) -> list[ipw.Widget]:
    out = [w]
    for c in getattr(w, "children", ()) or ():
        out += _walk(c)
    return out


def test_grid_and_lineage_renderers_are_pure() -> None:
    lineage = pd.DataFrame(
        [
            {
                "round": 1, "group": "g1", "chain_id": "r1.g1.c1", "node_id": "r1.g1.a1",
                "kind": "direct", "parent_id": "", "depth": 0, "attempt": 1, "measurement": "m",
                "axis": "start", "subject": "v0", "outcome": "no_repair", "valid": True,
                "invalid_reason": "", "scored_on": "batch", "repairs": 0, "harms": 0, "net": 0,
                "sum_d_prev": 0, "n_fixed": 0, "n_broke": 0, "categories": "", "is_start": True,
                "kept_parent": False, "winner": False, "survivor": False,
            },
            {
                "round": 1, "group": "g1", "chain_id": "r1.g1.c1", "node_id": "r1.g1.c1.s1",
                "kind": "chain", "parent_id": "r1.g1.a1", "depth": 1, "attempt": 0,
                "measurement": "m2", "axis": "reading_rule", "subject": "narrow",
                "outcome": "passed", "valid": True, "invalid_reason": "", "scored_on": "batch",
                "repairs": 1, "harms": 0, "net": 1, "sum_d_prev": 1, "n_fixed": 1, "n_broke": 0,
                "categories": "H, B", "is_start": False, "kept_parent": False, "winner": True,
                "survivor": True,
            },
        ],
        columns=CHAIN_LINEAGE_COLUMNS,
    )  # fmt: skip
    tree = lineage_html(lineage, selected="r1.g1.c1.s1")
    # the chain node is nested under v0, with its badges
    assert tree.index("r1.g1.a1") < tree.index("r1.g1.c1.s1")
    assert tree.count("<ul") == 3
    for text in ("repairs 1", "net +1", "Σd_prev 1", "move: reading_rule", "categories: H, B"):
        assert text in tree
    assert "★ accepted (winner)" in tree and "sent to the gate" in tree
    scores = pd.DataFrame(
        [
            ("r1.g1.a1", 0, "q1", "H", 0, 0, 0),
            ("r1.g1.a1", 0, "q2", "P", 1, 1, 0),
            ("r1.g1.c1.s1", 1, "q1", "H", 1, 1, 1),
            ("r1.g1.c1.s1", 1, "q2", "P", 0, 0, -1),
        ],
        columns=["node_id", "step", "qid", "part", "raw", "credited", "d_prev"],
    )
    grid = grid_html(scores, selected=("q1", "r1.g1.c1.s1"))
    assert grid.count("<tr>") == 3  # header + two questions
    cells = {c.split("'", 1)[0]: c for c in grid.split("data-cell='")[1:]}
    assert cells["q1|r1.g1.c1.s1"].split("</td>")[0].endswith("↑")
    assert cells["q2|r1.g1.c1.s1"].split("</td>")[0].endswith("↓")
    assert not cells["q1|r1.g1.a1"].split("</td>")[0].endswith(("↑", "↓"))
    assert "<b>1</b>" in cells["q1|r1.g1.c1.s1"] and "<b>0</b>" in cells["q2|r1.g1.c1.s1"]
    assert "data-cell='q1|r1.g1.c1.s1' title='' style='border" in grid
    assert grid.count("outline:2px solid") == 1
