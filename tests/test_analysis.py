"""Tidy frames: fixed schemas and consistency with the stored run."""

import json

import pytest

from tsevo import analysis
from tsevo.data.synthetic import make_suite
from tsevo.evolve.config import ProtocolConfig
from tsevo.evolve.run import evolve


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("analysis") / "run"
    evolve(make_suite("tiny", seed=5), config=ProtocolConfig(seed=5), out=out, log=lambda s: None)
    return out


def test_schemas(run_dir):
    assert list(analysis.flips_df(run_dir).columns) == analysis.FLIPS_COLUMNS
    assert list(analysis.flips_df(run_dir, split="val").columns) == analysis.FLIPS_COLUMNS
    assert list(analysis.tools_df(run_dir).columns) == analysis.TOOLS_COLUMNS
    assert list(analysis.funnel_df(run_dir).columns) == analysis.FUNNEL_COLUMNS
    assert list(analysis.gate_df(run_dir).columns) == analysis.GATE_COLUMNS
    assert list(analysis.failures_df(run_dir).columns) == analysis.FAILURES_COLUMNS
    assert list(analysis.measurements_df(run_dir).columns) == analysis.MEASUREMENTS_COLUMNS
    with pytest.raises(ValueError):
        analysis.flips_df(run_dir, split="train")


def test_flips_match_stored_test_report(run_dir):
    flips = analysis.flips_df(run_dir)
    test = json.loads((run_dir / "rounds/r1/test.json").read_text())
    allrow = test["tasks"][-1]
    assert len(flips) == allrow["n"]
    assert (flips.flip == "helped").sum() == allrow["helped"]
    assert (flips.flip == "harmed").sum() == allrow["harmed"]
    # flip ledger: helped - harmed equals the change in correct answers
    assert (flips.flip == "helped").sum() - (flips.flip == "harmed").sum() == int(
        flips.final_correct.sum() - flips.base_correct.sum()
    )
    changed = flips[flips.base_answer != flips.final_answer]
    assert all(len(r) > 0 for r in changed.replaced_by)
    assert set(flips.flip.dropna()) <= {"helped", "harmed", "unchanged-right", "unchanged-wrong"}


def test_gate_and_funnel_agree_with_round(run_dir):
    rd = json.loads((run_dir / "rounds/r1/round.json").read_text())
    g = analysis.gate_df(run_dir)
    first = g[g.decision == "gate"].iloc[0]
    assert (
        first.h == rd["gate"]["h"]
        and first.m == rd["gate"]["m"]
        and first.path == rd["gate"]["path"]
    )
    f = analysis.funnel_df(run_dir)
    assert dict(zip(f.step, f["count"], strict=True))["errors"] == rd["funnel"]["errors"]
    assert list(f.order) == sorted(f.order)


def test_tools_and_failures(run_dir):
    tools = analysis.tools_df(run_dir)
    rd = json.loads((run_dir / "rounds/r1/round.json").read_text())
    if rd["status"] == "accepted":
        assert set(rd["deployed"]) <= set(tools.id)
        assert all(src.startswith("def ") for src in tools.source)
        assert (tools.helped_test >= 0).all() and (tools.fired_val >= tools.helped_val).all()
    fails = analysis.failures_df(run_dir)
    assert len(fails) == rd["funnel"]["errors"]
    assert set(fails.role) <= {"support", "held_out", "other", "unassigned", "dropped"}
    sup = fails[fails.role == "support"].groupby("bucket").size()
    splits = json.loads((run_dir / "rounds/r1/splits.json").read_text())
    assert sup.to_dict() == {b["bucket_id"]: len(b["support"]) for b in splits if b["support"]}
    assert (sup <= 60).all()  # the protocol's 12, or a granted ask within support.max_rows
