"""Library roots: ``empty``, ``chronos`` and the hand-written ``expert`` library."""

from __future__ import annotations

import math
import zipfile
from importlib import resources
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest

import tsevo.library
from tsevo.agent import Agent
from tsevo.data import Question
from tsevo.library.context import ToolInput
from tsevo.library.library import Library
from tsevo.library.roots import (
    ROOT_NAMES,
    ROOTS_DATA,
    chronos_tools,
    expert_tools,
    make_root,
    root_folder,
)
from tsevo.library.sandbox import Sandbox, SandboxLimits, check_source

N = 160
T = np.arange(N, dtype=float)


def _q(qid, text, options, series, primary, gold=0, **kw):
    return Question(
        id=qid,
        source="test",
        task=kw.pop("task", "handmade"),
        question=text,
        options=tuple(options),
        series={k: np.asarray(v, dtype=float) for k, v in series.items()},
        primary=tuple(primary),
        gold=gold,
        **kw,
    )


def _questions() -> list[Question]:
    rng = np.random.default_rng(7)
    noise = rng.normal(0.0, 1.0, N)
    sine = 3.0 * np.sin(2 * np.pi * T / 16.0) + 0.3 * rng.normal(0.0, 1.0, N)
    walk_a = np.cumsum(rng.normal(0.0, 1.0, N))
    walk_b = np.roll(walk_a, 5) + 0.2 * rng.normal(0.0, 1.0, N)
    ref = np.sin(T / 9.0)
    return [
        _q(
            "trend-up",
            "Is the overall trend of the series upward, downward or is there no trend?",
            ["downward", "upward", "no trend"],
            {"y": 0.08 * T + noise},
            ["y"],
            gold=1,
        ),
        _q(
            "seasonal-yes",
            "Does the given time series show seasonality?",
            ["No", "Yes"],
            {"y": sine},
            ["y"],
            gold=1,
        ),
        _q(
            "period-16",
            "What is the most likely period of the seasonal cycle?",
            ["8", "16", "40"],
            {"y": sine},
            ["y"],
            gold=1,
        ),
        _q(
            "pair-corr",
            "Are the two series correlated?",
            ["Negative correlation", "No correlation", "Positive correlation"],
            {"a": walk_a, "b": walk_b},
            ["a", "b"],
            gold=2,
        ),
        _q(
            "pair-lag",
            "By how many steps does the second series lag the first?",
            ["1", "5", "20"],
            {"a": walk_a, "b": walk_b},
            ["a", "b"],
            gold=1,
        ),
        _q(
            "match",
            "Which candidate series has the same pattern as the reference?",
            ["A", "B", "C"],
            {
                "ref": ref,
                "A": np.cos(T / 4.0),
                "B": ref + 0.1 * rng.normal(0.0, 1.0, N),
                "C": rng.normal(0.0, 1.0, N),
            },
            ["ref"],
            gold=1,
            candidates=("A", "B", "C"),
        ),
        _q(
            "future",
            "Over the next 20 steps, will the values be higher, lower or similar to now?",
            ["higher", "lower", "similar"],
            {"y": 0.2 * T + 0.5 * noise},
            ["y"],
            gold=0,
        ),
        _q(
            "max-window",
            "What is the maximum value between t=20 and t=60?",
            ["3.0", "60.0", "-40.0"],
            {"y": T},
            ["y"],
            gold=1,
        ),
        _q(
            "covariate",
            "Did the level shift after the promotion started at t=80?",
            ["Yes", "No"],
            {
                "y": np.r_[np.zeros(80), np.full(80, 5.0)] + noise,
                "promo": np.r_[np.zeros(80), np.ones(80)],
            },
            ["y"],
            gold=0,
            covariates=("promo",),
        ),
    ]


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxLimits(cpu_s_per_item=5.0, wall_s_per_item=10.0)) as sb:
        yield sb


def test_make_root_names_and_unknown():
    assert ROOT_NAMES == ("empty", "chronos", "expert")
    assert make_root() == make_root("empty")
    assert list(make_root("empty").all_artifacts()) == []
    assert [t.id for t in make_root("chronos").all_artifacts()] == ["root.chronos_forecast"]
    for name in ROOT_NAMES:
        lib = make_root(name)
        assert lib.root == name and lib.n_rounds == 0 and lib.stages[0].round == 0
    with pytest.raises(ValueError, match="empty, chronos, expert"):
        make_root("bogus")


def test_expert_root_shape_and_metadata():
    tools = expert_tools()
    ids = [t.id for t in tools]
    assert len(tools) >= 18 and len(set(ids)) == len(ids)
    assert len({t.hash for t in tools}) == len(tools)
    for t in [*tools, *chronos_tools()]:
        assert t.id.startswith("root.") and t.kind == "tool" and t.round == 0
        assert t.provenance.action == "root" and t.provenance.author == "human"
        assert t.contract.measurement and t.contract.success_criterion
        assert t.guidance.text and t.description and t.outputs
        assert t.scope.evidence
        # a hand-written scope says where it applies: a text matcher or a structural restriction
        assert not t.scope.matcher.is_trivial or t.scope.arity == "candidates"
        if t.guidance.rule is not None and t.guidance.rule.kind != "extremum":
            assert t.guidance.rule.key in t.outputs
    # every group of the TimeART list is represented
    for slug in (
        "summary_stats",
        "autocorr",
        "volatility",
        "trend_classifier",
        "seasonality_detector",
        "change_point_count",
        "stationarity_test",
        "spike_count",
        "channel_correlation",
        "cross_correlation",
        "dtw_distance",
        "granger_causality",
        "anomaly_location",
        "forecaster",
    ):
        assert f"root.{slug}" in ids
    # the catalog an LLM reviewer reads mentions every tool
    catalog = make_root("expert").scope_catalog()
    assert all(i in catalog for i in ids)


@pytest.mark.parametrize("name", ROOT_NAMES)
def test_roots_save_load_byte_identical(tmp_path, name):
    lib = make_root(name)
    a = lib.save(tmp_path / "a")
    loaded = Library.load(a)
    assert loaded == lib and loaded.fingerprint() == lib.fingerprint()
    b = loaded.save(tmp_path / "b")
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


#: The roots' fingerprints when their tools were still Python literals (before they became package
#: data): the data folders must reproduce them exactly.
PINNED_FINGERPRINTS = {
    "empty": "818badba1c71c4ab",
    "chronos": "c67531e3844fc74f",
    "expert": "4d0825894b3e7d12",
}


@pytest.mark.parametrize("name", ROOT_NAMES)
def test_root_fingerprints_are_pinned(name):
    lib = make_root(name)
    assert lib.fingerprint() == PINNED_FINGERPRINTS[name]
    assert len(lib.ids) == {"empty": 0, "chronos": 1, "expert": 29}[name]


@pytest.mark.parametrize("name", ["chronos", "expert"])
def test_saving_a_data_root_reproduces_its_package_data(tmp_path, name):
    with root_folder(name) as shipped:
        assert Path(shipped).is_relative_to(Path(tsevo.library.__file__).parent / ROOTS_DATA)
        out = make_root(name).save(tmp_path / name)
        want = sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
        got = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
        assert got == want
        for rel in want:
            assert (out / rel).read_bytes() == (shipped / rel).read_bytes(), rel


def test_data_root_loads_from_a_zipped_package(tmp_path):
    """Without a file-system path (a zipped package) the folder is copied out and loaded."""
    archive = tmp_path / "roots.zip"
    with root_folder("expert") as shipped, zipfile.ZipFile(archive, "w") as zf:
        for p in sorted(shipped.rglob("*")):
            if p.is_file():
                zf.write(p, f"{ROOTS_DATA}/expert/{p.relative_to(shipped).as_posix()}")
    with (
        zipfile.ZipFile(archive) as zf,
        patch.object(resources, "files", lambda _pkg: zipfile.Path(zf)),
    ):
        with root_folder("expert") as folder:
            assert not folder.is_relative_to(Path(tsevo.library.__file__).parent)
            assert Library.load(folder) == make_root("expert")
        assert not folder.exists()
    with pytest.raises(ValueError, match="not a data root"), root_folder("empty"):
        pass


def test_every_root_tool_passes_gate_and_runs(sandbox):
    qs = _questions()
    inputs = [ToolInput.from_question(q) for q in qs]
    tools = [*expert_tools(), *chronos_tools()]
    ran_ok: dict[str, int] = {}
    for tool in tools:
        report = check_source(tool.source)
        assert report.ok, (tool.id, report.reasons)
        assert report.function_name == tool.name
        results = sandbox.run(tool.source, inputs, check_determinism=True)
        for q, r in zip(qs, results, strict=True):
            assert r.status in ("ok", "abstain"), (tool.id, q.id, r.error_kind, r.error)
            if r.status == "ok":
                assert r.outputs
                for k, v in r.outputs.items():
                    assert isinstance(v, bool) or math.isfinite(v)
                    prefixed = [o[: -len("<candidate>")] for o in tool.outputs if o.endswith(">")]
                    assert k in tool.outputs or any(k.startswith(p) for p in prefixed), (
                        tool.id,
                        k,
                    )
        ran_ok[tool.id] = sum(r.status == "ok" for r in results)
    # every tool produces evidence on at least one of the hand-made questions
    assert all(v > 0 for v in ran_ok.values()), {k: v for k, v in ran_ok.items() if v == 0}


def test_expert_agent_answers_through_residual_chain(sandbox):
    qs = _questions()
    expert = Agent(make_root("expert"), executor=sandbox)
    recs = expert.answer_many(qs)
    assert [r.qid for r in recs] == [q.id for q in qs]
    assert all(r.completed and r.final_answer is not None for r in recs)
    fired = [r for r in recs if r.tool_fired]
    assert len(fired) >= len(qs) // 2
    assert all(r.tool_errors == 0 for r in recs)
    # no question runs more than three tools over the chain
    assert all(len(r.tools_run) <= 3 for r in recs)
    by = {r.qid: r for r in recs}
    # out-of-scope tools never run: a single-series question never runs a pair tool, and the
    # candidate tools run only on the matching question
    assert not any(t.startswith("root.dtw") for t in by["trend-up"].tools_run)
    assert set(by["match"].tools_run) <= {"root.dtw_distance", "root.shape_similarity"}
    assert "root.channel_correlation" in by["pair-corr"].tools_ok
    assert "root.forecaster" in by["future"].tools_ok
    # a replacement happens only when a tool ran ok and the review said so
    for r in recs:
        for s in r.steps:
            if s.answer_out != s.answer_in:
                assert s.decision == "replace" and any(x.status == "ok" for x in s.runs)
    # clear-cut questions are answered right with the expert's evidence
    for qid in ("seasonal-yes", "period-16", "pair-corr", "match", "max-window"):
        assert by[qid].correct, (qid, by[qid].steps)
    # the empty root never fires a tool and answers exactly like the base answerer
    bare = Agent(make_root("empty"), executor=sandbox).answer_many(qs)
    assert not any(r.tools_run or r.steps for r in bare)
    assert all(b.final_answer == b.base_answer for b in bare)
    assert [b.base_answer for b in bare] == [r.base_answer for r in recs]


def test_chronos_root_scope_and_horizon(sandbox):
    qs = _questions()
    recs = Agent(make_root("chronos"), executor=sandbox).answer_many(qs)
    by = {r.qid: r for r in recs}
    assert by["future"].tools_ok == ("root.chronos_forecast",)
    assert all(not r.tools_run for r in recs if r.qid != "future")
    run = by["future"].steps[0].runs[0]
    assert run.outputs is not None
    assert run.outputs["h"] == 20  # the horizon stated in the question
    # a steady upward trend is forecast to continue upward
    assert run.outputs["delta"] > 0 and run.outputs["frac_above_level"] > 0.5
