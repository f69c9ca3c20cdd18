"""The paired taxonomy study (issue 12): arm parameters, labels, the paired frame, the pinned taxonomy.

The frame is checked on hand-counted answer rows and on the tiny seed-5 round (``tiny_run``): its
answers against the round's own report-only test table. The pin is checked on a copy of that run
(builtin induction + gate, about a second): induced once, reused after, refused when tampered with.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tsevo import analysis
from tsevo import notebook as nb
from tsevo.evolve import ProtocolConfig
from tsevo.taxonomy import TaxonomyError
from tsevo.taxonomy.config import TaxonomyConfig
from tsevo.taxonomy.jsonio import load_taxonomy
from tsevo.testing import SCRIPTED_MODEL


def _row(seed: int, arm: str, qid: str, task: str, base: bool, final: bool) -> dict[str, Any]:
    return {
        "seed": seed, "arm": arm, "label": "mechanism test", "qid": qid, "task": task,
        "base_correct": base, "final_correct": final,
    }  # fmt: skip


def test_arm_params_switch_only_the_consumers() -> None:
    assert analysis.taxonomy_arm_params("none", "t.json") == {}
    assert ProtocolConfig.from_params({}) == ProtocolConfig()  # none: the protocol's bytes
    fp = "sha256:" + "a" * 64
    coded = ProtocolConfig.from_params(analysis.taxonomy_arm_params("coded", "t.json", fp))
    assert coded.taxonomy == TaxonomyConfig(path="t.json", fingerprint=fp, diagnoses="instead")
    both = ProtocolConfig.from_params(
        analysis.taxonomy_arm_params("coded_triage", "t.json", allow_unaccepted=True)
    )
    assert both.taxonomy == TaxonomyConfig(
        path="t.json", allow_unaccepted=True, triage=True, diagnoses="instead"
    )
    beside = ProtocolConfig.from_params(analysis.taxonomy_arm_params("beside", "t.json"))
    assert (beside.taxonomy.diagnoses, beside.taxonomy.triage) == ("beside", False)
    with pytest.raises(ValueError, match="unknown taxonomy arm"):
        analysis.taxonomy_arm_params("free_text", "t.json")
    with pytest.raises(ValueError, match="give its path"):
        analysis.taxonomy_arm_params("coded")


def test_labels_say_what_the_contrast_can_show() -> None:
    from tsevo.analysis.taxonomy_arms import SCRIPTED_MODEL_ID

    assert SCRIPTED_MODEL_ID == SCRIPTED_MODEL
    assert analysis.arm_label("builtin") == "mechanism test"
    assert analysis.arm_label("llm", [SCRIPTED_MODEL, SCRIPTED_MODEL]) == "scripted"
    assert analysis.arm_label("llm", [SCRIPTED_MODEL, "gpt-x"]) == "llm"
    assert analysis.arm_label("llm", []) == "llm"


def test_paired_frame_hand_counted() -> None:
    rows = [
        _row(1, "none", "q1", "a", False, True),
        _row(1, "none", "q2", "a", False, False),
        _row(1, "none", "q3", "b", True, True),
        _row(1, "coded", "q1", "a", False, False),  # harmed against none
        _row(1, "coded", "q2", "a", False, True),  # helped against none
        _row(1, "coded", "q3", "b", True, True),
        _row(2, "none", "q1", "a", True, True),
        _row(2, "coded", "q1", "a", False, True),  # another base answer: not shared
        _row(3, "coded", "q1", "a", False, True),  # no reference arm: no pair
    ]
    f = analysis.taxonomy_arms_df(rows)
    assert list(f.columns) == analysis.TAXONOMY_ARMS_COLUMNS
    assert [(r.seed, r.task) for r in f.itertuples()] == [(1, "a"), (1, "b"), (1, "ALL"),
                                                          (2, "a"), (2, "ALL")]  # fmt: skip
    a = f.iloc[0].to_dict()
    assert (a["n"], a["reference_acc"], a["arm_acc"], a["delta_pp"]) == (2, 50.0, 50.0, 0.0)
    assert (a["helped"], a["harmed"], a["reference_gain_pp"], a["arm_gain_pp"]) == (
        1,
        1,
        50.0,
        50.0,
    )
    total = f.iloc[2].to_dict()
    assert (total["n"], total["reference_acc"], total["helped"], total["harmed"]) == (
        3,
        66.67,
        1,
        1,
    )
    assert bool(total["base_shared"]) and not bool(f.iloc[4]["base_shared"])
    assert f.iloc[4]["arm_gain_pp"] == 100.0 and f.iloc[4]["delta_pp"] == 0.0
    with pytest.raises(ValueError, match="two answers"):
        analysis.taxonomy_arms_df([*rows, rows[0]])
    assert analysis.taxonomy_arms_df([]).empty
    with pytest.raises(ValueError, match="different labels"):
        analysis.taxonomy_arms_df([*rows[:3], *[dict(r, label="scripted") for r in rows[3:6]]])


def test_answer_rows_and_arm_row_of_the_tiny_round(tiny_run: Path) -> None:
    rows = analysis.taxonomy_answer_rows(tiny_run, "none")
    test = json.loads((tiny_run / "rounds" / "r1" / "test.json").read_text())
    assert test["status"] == "accepted" and len(rows) == test["tasks"][-1]["n"]
    paired = analysis.taxonomy_arms_df([*rows, *[dict(r, arm="coded") for r in rows]])
    by_task = paired.set_index("task")
    for t in test["tasks"]:  # the round's own table, accuracy in %
        got = by_task.loc[t["task"]]
        assert got["n"] == t["n"] and got["arm_acc"] == pytest.approx(100 * t["after"], abs=0.01)
        assert got["arm_gain_pp"] == pytest.approx(100 * t["delta"], abs=0.02)
        assert (got["helped"], got["harmed"], got["delta_pp"]) == (0, 0, 0.0)
    assert paired["base_shared"].all()
    arm = analysis.taxonomy_arm_row(tiny_run, "none")
    assert tuple(arm) == analysis.TAXONOMY_ARM_KEYS
    assert (arm["seed"], arm["label"], arm["triage"], arm["diagnoses"]) == (
        5, "mechanism test", "off", "off"
    )  # fmt: skip
    assert arm["fingerprint"] == "" and arm["coded_buckets"] == 0 and arm["tokens"] is None
    buckets = analysis.taxonomy_buckets_df({"none": tiny_run, "coded": tiny_run})
    assert (
        list(buckets.columns) == analysis.TAXONOMY_BUCKETS_COLUMNS and buckets["same_errors"].all()
    )
    held = analysis.failures_df(tiny_run).query("role == 'held_out'")["bucket"].value_counts()
    assert dict(zip(buckets["bucket"], buckets["held_out"], strict=True)) == held.to_dict()
    assert (buckets["repair_rate"] == buckets["reference_repair_rate"]).all()
    assert buckets["admitted"].sum() == arm["n_admitted"]  # one bucket per group on this round
    chain = analysis.chain_arm_row(tiny_run)
    assert all(arm[k] == chain[k] for k in ("status", "n_admitted", "gain", "helped", "tools"))


def test_the_study_pins_one_taxonomy_per_base_run(tiny_run: Path, tmp_path: Path) -> None:
    base = tmp_path / "run"
    shutil.copytree(tiny_run, base, ignore=shutil.ignore_patterns("taxonomy", "notebook_metrics"))
    cfg = nb.TaxonomyStudyConfig(run_dir=str(base))
    first = cfg.pinned(log=lambda _: None)
    # the gate's verdict on one tiny run turns on a few traces; the pin works either way
    assert first["source"] == "induced" and first["codes"] >= 1
    assert first["status"] in ("accepted", "review_required")
    pins = json.loads((base / "taxonomy" / "pins.json").read_text())
    assert pins["taxonomy_study:all:0"]["fingerprint"] == first["fingerprint"]
    path = Path(first["path"])
    assert path.parent == (base / "taxonomy" / "versions").resolve()
    assert load_taxonomy(path).fingerprint == first["fingerprint"]
    again = cfg.pinned(log=lambda _: None)
    assert {**again, "source": "induced"} == first and again["source"] == "reused"
    coded = cfg.arm_config("coded", first)
    assert coded.protocol().taxonomy == TaxonomyConfig(
        path=str(path), fingerprint=first["fingerprint"], diagnoses="instead",
        allow_unaccepted=True,
    )  # fmt: skip
    strict = replace(cfg, allow_unaccepted=False).arm_config("coded", first)
    assert not strict.protocol().taxonomy.allow_unaccepted
    if first["status"] != "accepted":  # a strict arm refuses what the gate did not accept
        with pytest.raises(TaxonomyError, match="allow_unaccepted"):
            strict.protocol().taxonomy.load()
    assert coded.run_path() == tmp_path / f"run-taxonomy-coded-{first['fingerprint'][7:15]}"
    assert cfg.arm_config("none", first).protocol() == nb.QuickstartConfig().protocol()
    given = nb.TaxonomyStudyConfig(
        run_dir=str(tmp_path / "elsewhere"), taxonomy_path=str(path),
        taxonomy_fingerprint=first["fingerprint"],
    )  # fmt: skip
    assert given.pinned()["source"] == "given"  # no run needed: the file is pinned as it is
    tax = json.loads(path.read_text())
    tax["codes"][0]["name"] = "Relabelled"
    path.write_text(json.dumps(tax))
    with pytest.raises(TaxonomyError):
        cfg.pinned(log=lambda _: None)


def test_arm_row_reads_the_llm_rounds_tokens_and_scripted_label(
    tiny_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("taxonomy", "notebook_metrics"))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(backend="llm", llm={"models": {"answerer": SCRIPTED_MODEL}})
    (run / "manifest.json").write_text(json.dumps(manifest))
    counters = {"prompt_tokens": 100, "completion_tokens": 7, "calls": 2}
    acc = {"answerer": {"base": counters}, "synthesizer": {"synthesize": dict(counters)}}
    (run / "rounds" / "r1" / "llm_accounting.json").write_text(json.dumps({"accounting": acc}))
    row = analysis.taxonomy_arm_row(run, "coded")
    assert (row["label"], row["backend"], row["tokens"]) == ("scripted", "llm", 214)
    assert {r["label"] for r in analysis.taxonomy_answer_rows(run, "coded")} == {"scripted"}
    with pytest.raises(ValueError, match="do not pair"):  # a builtin base beside an llm arm
        nb.TaxonomyStudyConfig().arm_rows({"none": tiny_run, "coded": run})
