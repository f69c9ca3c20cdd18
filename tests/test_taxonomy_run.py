"""Taxonomy on a run folder: artifacts under taxonomy/ via the store, the CLI, byte-identical reruns."""

from __future__ import annotations

import pytest

from tests.taxonomy_fixtures import SENTINEL, planted_run
from tsevo.cli import main
from tsevo.store import RunLayout
from tsevo.taxonomy import load_taxonomy, read_lineage


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
