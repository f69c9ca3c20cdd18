"""Interop with the PyPI ``adamast`` package (a light dev dependency: pure Python, needs openai).

Our ``taxonomy.json`` loads in AdaMAST's own loader (``load_candidate`` + ``Taxonomy.from_flat``)
with the same ids, in the same order, the same count and the same next id per axis; AdaMAST's
packaged sample, its layered output and its ``mast.json`` load in ours. Skipped where ``adamast``
is not installed. (Trace validation waits for the normalized traces of issue 12.)
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tsevo.taxonomy import (
    Add,
    Code,
    Merge,
    Retire,
    Taxonomy,
    apply_edits,
    load_mast,
    load_taxonomy,
    mast_id,
    save_taxonomy,
    taxonomy_from_dict,
)

adamast_tax = pytest.importorskip("adamast.core.taxonomy_data")
register = pytest.importorskip("adamast.learning.register_taxonomy")


def _ours() -> Taxonomy:
    codes = [
        Code(id="", category="A", name="Tool_Timeout", description="A tool ran out of time."),
        Code(id="", category="A", name="Tool_Retry_Loop", description="Retries without change."),
        Code(id="", category="A", name="Tool_Contract_Error", description="Output off contract."),
        Code(
            id="",
            category="B",
            name="Reviewer_Keeps_Against_Evidence",
            description="Keeps the answer although confident evidence disagrees.",
            applies_to_role="reviewer",
            detection_heuristics=["review.decision == keep AND review.rule_disagrees == true"],
            severity="major",
        ),
        Code(id="", category="C", name="Ratio_Inverted", description="Reads a ratio upside down."),
        Code(id="", category="C", name="Ratio_Doubled", description="Off by a factor of two."),
    ]
    t = Taxonomy.create(list(load_mast().codes[:2]) + codes, display_name="interop")
    t = apply_edits(t, [Merge("C.1", ("C.2",)), Retire("A.3")], trigger="test").taxonomy
    new = Code(id="", category="A", name="Tool_Nonfinite", description="NaN readings.")
    return apply_edits(t, [Add(new)], trigger="test").taxonomy


def test_adamast_loads_our_taxonomy_json_with_the_same_ids(tmp_path):
    ours = _ours()
    assert ours.ids == ("FM-1.1", "FM-1.2", "A.1", "A.2", "B.1", "C.1", "A.4")
    path = save_taxonomy(ours, tmp_path / "taxonomy.json")
    theirs = adamast_tax.Taxonomy.from_flat(register.load_candidate(path))
    assert [c.code for c in theirs.codes] == list(ours.ids)
    assert len(theirs.codes) == len(ours)
    assert [c.category for c in theirs.codes] == [c.category for c in ours]
    assert theirs.metadata["id_high_water"] == {"A": 4, "B": 1, "C": 2}
    assert theirs.b_codes_by_role().keys() == {"reviewer"}
    # a code AdaMAST adds gets the id we would mint: retired A.3 and C.2 are not reused
    uid = theirs.add("A", {"name": "X", "definition": "y"})
    assert theirs.by_uid(uid).code == ours.next_id("A") == "A.5"
    uid = theirs.add("C", {"name": "Z", "definition": "w"})
    assert theirs.by_uid(uid).code == ours.next_id("C") == "C.3"


def test_adamast_sample_and_mast_json_load_in_ours(tmp_path):
    sample_path = resources.files("adamast") / "examples" / "taxonomy.sample.json"
    sample = json.loads(sample_path.read_text(encoding="utf-8"))
    ours = taxonomy_from_dict(sample)
    theirs = adamast_tax.Taxonomy.from_flat(sample)
    assert list(ours.ids) == [c.code for c in theirs.codes] and len(ours) == len(sample["codes"])
    assert ours.status == sample["status"]
    # and back: our file of their sample reads in theirs with the same ids
    back = register.load_candidate(save_taxonomy(ours, tmp_path / "t.json"))
    assert [c["id"] for c in back["codes"]] == list(ours.ids)
    assert load_taxonomy(tmp_path / "t.json") == ours

    mast = json.loads((resources.files("adamast") / "core" / "mast.json").read_text("utf-8"))
    m = taxonomy_from_dict(mast)
    assert len(m) == 14 and m.status == "baseline" and {c.category for c in m} == {"A"}
    paired = {mast_id(i) for i in m.ids} - {None}
    assert len(paired) == 13 and paired == set(load_mast().ids) - {"FM-2.6"}


def test_adamast_layered_output_loads_in_ours():
    flat = {
        "codes": [
            {"id": "A.1", "name": "Loop", "description": "d", "category": "A"},
            {
                "id": "B.3",
                "name": "Guess",
                "description": "d",
                "category": "B",
                "applies_to_role": "solver",
            },
        ],
        "id_high_water": {"A": 2, "B": 3},
    }
    layered = adamast_tax.Taxonomy.from_flat(flat).to_dict()
    ours = taxonomy_from_dict(layered)
    assert ours.ids == ("A.1", "B.3") and ours.id_high_water == {"A": 2, "B": 3, "C": 0}
    assert ours["B.3"].applies_to_role == "solver"
