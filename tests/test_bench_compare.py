"""``tests.bench.compare``: paired differences and pooled sets from stored seeds JSONs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bench.compare import load_rows, main, paired
from tests.bench.seeds import KEYS


def _doc(path: Path, commit: str, gains: dict[int, float], harm: dict[int, float]) -> Path:
    rows = []
    for s, g in gains.items():
        r: dict[str, Any] = {k: 0.5 for k in KEYS}
        r.update(seed=s, gain=g, harmed_pct=harm[s])
        rows.append(r)
    path.write_text(json.dumps({"preset": "mixed", "commit": commit, "label": "x", "rows": rows}))
    return path


def test_paired_differences_are_per_seed_with_the_standard_error(tmp_path: Path) -> None:
    a = _doc(tmp_path / "a.json", "c1", {1: 0.20, 2: 0.22, 3: 0.18}, {1: 0.02, 2: 0.01, 3: 0.0})
    b = _doc(
        tmp_path / "b.json",
        "c2",
        {1: 0.21, 2: 0.22, 3: 0.20, 4: 0.9},
        {1: 0.01, 2: 0.01, 3: 0.0, 4: 0.0},
    )
    got = paired(load_rows([a])[0], load_rows([b])[0])
    assert got["seeds"] == [1, 2, 3]  # seed 4 has no partner
    g = got["gain"]
    assert g["per_seed"] == pytest.approx([1.0, 0.0, 2.0])
    assert g["diff_mean"] == pytest.approx(1.0) and g["diff_se"] == pytest.approx(
        1 / 3**0.5, abs=1e-3
    )
    assert (g["up"], g["down"]) == (2, 0)
    assert got["harmed_pct"]["per_seed"] == pytest.approx([-1.0, 0.0, 0.0])
    out = tmp_path / "p.json"
    assert main(["paired", str(a), str(b), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["gain"]["diff_mean"] == pytest.approx(1.0)


def test_a_pool_is_one_set_and_refuses_a_seed_twice_or_mixed_commits(tmp_path: Path) -> None:
    a = _doc(tmp_path / "a.json", "c1", {1: 0.20, 2: 0.30}, {1: 0.03, 2: 0.01})
    b = _doc(tmp_path / "b.json", "c1", {3: 0.25}, {3: 0.02})
    out = tmp_path / "pool.json"
    assert main(["pool", f"{a},{b}", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["seeds"] == [1, 2, 3] and doc["above_2pct_harm"] == 1
    assert doc["aggregate"]["gain"]["mean"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="seed 1"):
        load_rows([a, a])
    c = _doc(tmp_path / "c.json", "c2", {4: 0.1}, {4: 0.0})
    with pytest.raises(SystemExit):
        main(["pool", f"{a},{c}", "--out", str(out)])
    assert main(["pool", f"{a},{c}", "--mixed-commits", "--out", str(out)]) == 0


def test_paired_takes_a_variant_of_the_preset_but_not_another_preset(tmp_path: Path) -> None:
    a = _doc(tmp_path / "a.json", "c1", {1: 0.20, 2: 0.22}, {1: 0.02, 2: 0.01})
    b = _doc(tmp_path / "b.json", "c1", {1: 0.25, 2: 0.26}, {1: 0.03, 2: 0.01})
    doc = json.loads(b.read_text())
    b.write_text(json.dumps({**doc, "preset": "mixed:one-wording"}))
    out = tmp_path / "p.json"
    assert main(["paired", str(a), str(b), "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["after"]["preset"] == "mixed:one-wording"
    assert got["gain"]["diff_mean"] == pytest.approx(4.5)
    c = tmp_path / "c.json"
    c.write_text(json.dumps({**doc, "preset": "default"}))
    with pytest.raises(SystemExit):
        main(["paired", str(a), str(c), "--out", str(out)])
