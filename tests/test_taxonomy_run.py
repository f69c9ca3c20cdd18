"""Taxonomy on a run folder: artifacts under taxonomy/ via the store, the CLI, byte-identical reruns."""

from __future__ import annotations

import json

import pytest

from tests.taxonomy_fixtures import SENTINEL, planted_run
from tsevo.analysis.taxonomy import (
    AGREEMENT_COLUMNS,
    CODES_COLUMNS,
    FIRINGS_COLUMNS,
    PHASES_COLUMNS,
    agreement_df,
    codes_df,
    firings_df,
    gate_phases_df,
)
from tsevo.cli import main
from tsevo.store import RunLayout
from tsevo.taxonomy import load_taxonomy, read_lineage
from tsevo.taxonomy.runs import gate_run, induce_run


def _files(lay: RunLayout) -> dict[str, bytes]:
    root = lay.taxonomy.dir
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return planted_run(tmp_path_factory.mktemp("tx") / "run")


def test_cli_induce_gate_show_and_byte_identical_reruns(run, capsys):
    lay = RunLayout(run)
    assert main(["taxonomy", "induce", str(run)]) == 0
    assert lay.taxonomy.draft.exists() and lay.taxonomy.traces("train").exists()
    assert lay.taxonomy.draft_step("step3_A").exists()
    assert main(["taxonomy", "gate", str(run)]) == 0
    out = capsys.readouterr().out
    assert "cohen_area" in out and "coverage" in out
    tax = load_taxonomy(lay.taxonomy.taxonomy)
    assert tax.status in ("accepted", "review_required")
    assert tax.generation["agreement"]["metric"] == "cohen_area"
    assert tax.axis("A")
    for axis in "BC":  # codes, or a recorded gap (never filler)
        assert tax.axis(axis) or any(g["axis"] == axis for g in tax.coverage_gaps)
    rounds = list((lay.taxonomy.dir / "agreement").rglob("round_*.json"))
    assert rounds
    read_lineage(lay.taxonomy.lineage)
    first = _files(lay)
    assert all(SENTINEL.encode() not in b for b in first.values())
    assert main(["taxonomy", "induce", str(run)]) == 0
    assert main(["taxonomy", "gate", str(run)]) == 0
    assert _files(lay) == first
    assert main(["taxonomy", "show", str(run)]) == 0
    assert "status" in capsys.readouterr().out


def test_frames(run):
    lay = RunLayout(run)
    if not lay.taxonomy.taxonomy.exists():
        induce_run(run)
        gate_run(run)
    codes, fired, agr = codes_df(run), firings_df(run), agreement_df(run)
    assert list(codes.columns) == list(CODES_COLUMNS) and len(codes)
    assert set(codes["axis"].dropna()) <= {"A", "B", "C"}
    assert list(fired.columns) == list(FIRINGS_COLUMNS) and len(fired)
    assert fired["question_id"].notna().all()  # mapped back for grouping
    assert set(fired["code_id"]) <= set(codes["code_id"])
    assert list(agr.columns) == list(AGREEMENT_COLUMNS) and len(agr)
    assert agr.groupby("round")["gating"].sum().eq(1).all()
    assert str(codes["code_id"].dtype) == "string" and str(agr["value"].dtype) == "Float64"
    ph = gate_phases_df(run)  # the event-level gate's five phases, per round and annotator
    assert list(ph.columns) == list(PHASES_COLUMNS) and len(ph)
    assert ph.groupby("round")["annotator"].nunique().eq(4).all()
    n_err = agr.drop_duplicates("round").set_index("round")["n_errors"]
    assert (ph.set_index("round")["confirmed"] == n_err.reindex(ph["round"]).to_numpy()).all()
    assert (ph["proposed_confirmed"] <= ph["proposed"]).all()
    assert (ph["votes_confirm"] <= ph["voted"]).all() and (ph["labelled"] <= ph["confirmed"]).all()
    assert (ph[["typed_A", "typed_B", "typed_C"]].sum(axis=1) <= ph["confirmed"]).all()
    rnd = json.loads(next((lay.taxonomy.dir / "agreement").rglob("round_1.json")).read_text())
    first = ph[ph["round"] == 1].set_index("annotator")
    for name, props in rnd["phases"]["proposals"].items():  # counted from the record by hand
        assert first.loc[name, "proposed"] == len({(p["trace_id"], p["event_seq"]) for p in props})


def test_adamast_loads_the_induced_taxonomy(run):
    adamast_tax = pytest.importorskip("adamast.core.taxonomy_data")
    register = pytest.importorskip("adamast.learning.register_taxonomy")
    lay = RunLayout(run)
    if not lay.taxonomy.taxonomy.exists():
        induce_run(run)
        gate_run(run)
    ours = load_taxonomy(lay.taxonomy.taxonomy)
    theirs = adamast_tax.Taxonomy.from_flat(register.load_candidate(lay.taxonomy.taxonomy))
    assert [c.code for c in theirs.codes] == list(ours.ids)


def test_cli_gate_unit_chooses_event_phases_or_trace_errors(run):
    """``--unit trace`` gates each failed trace as one error (no phases); the default runs the
    five phases, whose record each round carries. The default gate is rerun last, byte-identical."""
    lay = RunLayout(run)
    assert main(["taxonomy", "induce", str(run)]) == 0

    def rounds() -> list[dict]:
        tax = load_taxonomy(lay.taxonomy.taxonomy)
        n = tax.generation["agreement"]["rounds_completed"]
        folder = next(p for p in (lay.taxonomy.dir / "agreement").iterdir() if p.is_dir())
        assert len(list((lay.taxonomy.dir / "agreement").iterdir())) == 1  # one draft, one fp
        return [
            json.loads((folder / f"round_{k}.json").read_text("utf-8")) for k in range(1, n + 1)
        ]

    assert main(["taxonomy", "gate", str(run)]) == 0
    event = _files(lay)
    assert all(r["unit"] == "event" and "phases" in r and "consolidated" in r for r in rounds())
    assert main(["taxonomy", "gate", str(run), "--unit", "trace"]) == 0
    trace = rounds()
    assert trace and all("phases" not in r for r in trace)
    assert all(e.split("#")[0] in r["traces"] for r in trace for e in r["errors"])
    assert main(["taxonomy", "gate", str(run)]) == 0
    assert _files(lay) == event
