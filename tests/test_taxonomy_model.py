"""tsevo.taxonomy's data model: ids as identities, edits with lineage, fingerprint, JSON, MAST.

Design §1 and §7.1–7.3: random edit sequences never change an existing id, never re-mint a retired
one and keep marks monotone; duplicate and recycled ids raise; merge and split keep lineage; the
fingerprint ignores order and status and follows content; AdaMAST's flat file, layered draft and
``mast.json`` shapes load keeping unknown fields; MAST ships 14 modes with 13 aliases.
"""

from __future__ import annotations

import doctest
import importlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tsevo.taxonomy import (
    MAST_ALIASES,
    Add,
    Code,
    Merge,
    Relabel,
    Retire,
    Retired,
    Split,
    Taxonomy,
    TaxonomyError,
    append_lineage,
    apply_edits,
    load_mast,
    load_taxonomy,
    mast_id,
    read_lineage,
    require_usable,
    save_taxonomy,
    taxonomy_from_dict,
    taxonomy_to_dict,
)

DET_TIMEOUT = {"any": [{"all": [{"feature": "tool.n_error", "op": ">=", "value": 1}]}]}
DET_RETRY = {"any": [{"all": [{"feature": "tool.n_retry", "op": ">", "value": 2}]}]}


def _code(name: str, axis: str = "A", **kw) -> Code:
    if axis == "B":
        kw.setdefault("applies_to_role", "reviewer")
    return Code(id="", category=axis, name=name, description=f"{name} happens.", **kw)


@pytest.fixture
def tax() -> Taxonomy:
    return Taxonomy.create(
        [
            _code("Tool_Timeout", detector=DET_TIMEOUT, examples=["q17 timed out"]),
            _code("Tool_Retry_Loop", detector=DET_RETRY),
            _code("Tool_Contract_Error"),
            _code("Reviewer_Keeps_Against_Evidence", "B"),
            _code("Reviewer_Default_Tie_Break", "B"),
            _code("Answerer_Picks_Outside_Options", "B", applies_to_role="answerer"),
            _code("Ratio_Confusion", "C", area="ratios"),
        ],
        display_name="fixture",
        domain="time-series QA",
        generation={"provider": "builtin", "agreement": {"final_kappa": 0.8}},
    )


# -- ids ----------------------------------------------------------------------------------------


def test_create_mints_per_axis_in_order(tax):
    assert tax.ids == ("A.1", "A.2", "A.3", "B.1", "B.2", "B.3", "C.1")
    assert tax.id_high_water == {"A": 3, "B": 3, "C": 1}
    assert tax.next_id("A") == "A.4" and tax.version_n == 1 and tax.status == "draft"


def test_present_ids_raise_marks_before_minting_and_foreign_ids_move_none():
    t = Taxonomy.create(
        [
            _code("X"),
            Code(id="A.5", category="A", name="Y"),
            Code(id="FM-2.6", category="A", name="Z"),
        ],
        id_high_water={"B": 7},
    )
    assert t.ids == ("A.6", "A.5", "FM-2.6")
    assert t.id_high_water == {"A": 6, "B": 7, "C": 0}


def test_duplicate_recycled_and_misfiled_ids_raise():
    x, y = Code(id="A.1", category="A", name="x"), Code(id="A.1", category="A", name="y")
    with pytest.raises(TaxonomyError, match=r"duplicate code id 'A.1'"):
        Taxonomy(codes=(x, y))
    with pytest.raises(TaxonomyError, match=r"recycled id\(s\) \['A.1'\]"):
        Taxonomy(codes=(x,), retired=(Retired(id="A.1", version_n=1),))
    with pytest.raises(TaxonomyError, match="id axis B does not match category A"):
        Code(id="B.1", category="A", name="x")
    with pytest.raises(TaxonomyError, match="a B code needs applies_to_role"):
        Code(id="B.1", category="B", name="x")


def test_retire_then_add_never_reuses_an_id(tax):
    t = apply_edits(tax, [Retire("A.3")], trigger="manual").taxonomy
    assert "A.3" not in t and "A.3" in t.retired_ids
    batch = apply_edits(t, [Add(_code("Tool_Nonfinite_Output"))], trigger="manual")
    assert batch.minted == ("A.4",)
    assert batch.taxonomy["A.4"].name == "Tool_Nonfinite_Output"
    assert batch.taxonomy.id_high_water["A"] == 4
    # the retired id stays retired through a save/load
    assert taxonomy_from_dict(taxonomy_to_dict(batch.taxonomy)).retired_ids == {"A.3"}


def test_edits_on_retired_or_missing_codes_raise(tax):
    t = apply_edits(tax, [Retire("A.2")], trigger="manual").taxonomy
    with pytest.raises(TaxonomyError, match=r"'A.2' is retired"):
        apply_edits(t, [Relabel("A.2", {"name": "Again"})], trigger="manual")
    with pytest.raises(TaxonomyError, match=r"no code 'A.9'"):
        apply_edits(t, [Retire("A.9")], trigger="manual")
    with pytest.raises(TaxonomyError, match="ids are minted"):
        apply_edits(t, [Add(Code(id="A.2", category="A", name="Sneaky"))], trigger="manual")
    with pytest.raises(TaxonomyError, match="at least one edit"):
        apply_edits(t, [], trigger="manual")


@pytest.mark.parametrize(
    "field", ["id", "category", "applies_to_role", "origin", "parent", "detector"]
)
def test_relabel_refuses_identity_fields(tax, field):
    with pytest.raises(TaxonomyError, match=f"\\['{field}'\\] cannot be relabelled"):
        apply_edits(tax, [Relabel("B.1", {field: "x"})], trigger="manual")


def test_relabel_bumps_revision_and_fingerprint_noop_keeps_both(tax):
    batch = apply_edits(
        tax, [Relabel("A.1", {"when_not_to_use": "Use A.2 for retries."})], trigger="r"
    )
    assert batch.taxonomy["A.1"].revision == 2
    assert batch.taxonomy.fingerprint != tax.fingerprint
    assert batch.entry.edits[0]["changed"] == ["when_not_to_use"]
    same = apply_edits(tax, [Relabel("A.1", {"name": "Tool_Timeout"})], trigger="r").taxonomy
    assert same["A.1"].revision == 1 and same.fingerprint == tax.fingerprint


# -- merge / split lineage --------------------------------------------------------------------


def test_merge_retires_absorbed_with_lineage(tax):
    batch = apply_edits(tax, [Merge("A.1", ("A.2",))], trigger="gate_round_1")
    new = batch.taxonomy
    assert new.ids == ("A.1", "A.3", "B.1", "B.2", "B.3", "C.1")
    (r,) = new.retired
    assert (r.id, r.reason, r.merged_into, r.version_n) == ("A.2", "merge", "A.1", 2)
    kept = new["A.1"]
    assert kept.detector == {"any": DET_TIMEOUT["any"] + DET_RETRY["any"]}  # OR-ed
    assert kept.revision == 2 and kept.origin == "induced"
    assert new.version_n == 2 and new.parent == tax.fingerprint and new.status == "draft"
    assert "agreement" not in new.generation and new.generation["provider"] == "builtin"
    e = batch.entry
    assert (e.version_n, e.parent_fp, e.fp, e.trigger) == (
        2,
        tax.fingerprint,
        new.fingerprint,
        "gate_round_1",
    )
    assert e.edits == ({"op": "merge", "keep": "A.1", "absorb": ["A.2"]},)
    assert tax.ids[1] == "A.2"  # the old version is untouched


@pytest.mark.parametrize(
    ("keep", "absorb", "match"),
    [
        ("A.1", ("B.1",), "on axis B"),
        ("B.1", ("B.3",), "applies to 'answerer'"),
        ("A.1", ("A.1",), "repeats an id or names keep"),
        ("A.1", (), "nothing to absorb"),
    ],
)
def test_bad_merges_raise(tax, keep, absorb, match):
    with pytest.raises(TaxonomyError, match=match):
        apply_edits(tax, [Merge(keep, absorb)], trigger="manual")


def test_split_keeps_parent_id_and_mints_children_after_it(tax):
    batch = apply_edits(
        tax,
        [
            Split(
                "B.1",
                ({"name": "Reviewer_Keeps_Against_Tool"}, {"name": "Reviewer_Keeps_Against_Rule"}),
            )
        ],
        trigger="refine",
    )
    new = batch.taxonomy
    assert batch.minted == ("B.4", "B.5")
    assert new.ids == ("A.1", "A.2", "A.3", "B.1", "B.4", "B.5", "B.2", "B.3", "C.1")
    for cid in ("B.4", "B.5"):
        c = new[cid]
        assert (c.parent, c.origin, c.category, c.applies_to_role) == (
            "B.1",
            "split",
            "B",
            "reviewer",
        )
    assert new["B.1"] == tax["B.1"]
    assert batch.entry.edits == ({"op": "split", "parent": "B.1", "children": ["B.4", "B.5"]},)
    with pytest.raises(TaxonomyError, match="category 'C' differs"):
        apply_edits(tax, [Split("B.1", ({"name": "X", "category": "C"},))], trigger="r")


def test_lineage_jsonl_round_trip(tax, tmp_path):
    b1 = apply_edits(tax, [Merge("A.1", ("A.2",))], trigger="gate_round_1")
    b2 = apply_edits(
        b1.taxonomy, [Add(_code("Tool_Rlimit")), Retire("C.1")], trigger="gate_round_2"
    )
    path = tmp_path / "lineage.jsonl"
    append_lineage(path, b1.entry)
    append_lineage(path, [b2.entry])
    assert read_lineage(path) == [b1.entry, b2.entry]
    assert b2.entry.parent_fp == b1.entry.fp and b2.taxonomy.version_n == 3


_EDIT_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "retire", "relabel", "merge", "split"]),
        st.integers(0, 50),
        st.integers(0, 50),
    ),
    min_size=1,
    max_size=12,
)


def _edit(t: Taxonomy, op: str, i: int, j: int):
    ids = t.ids
    if op == "add" or not ids:
        return Add(_code(f"New_{i}", "ABC"[i % 3]))
    a = ids[i % len(ids)]
    if op == "retire":
        return Retire(a)
    if op == "relabel":
        return Relabel(a, {"description": f"rewritten {j}"})
    if op == "split":
        return Split(a, ({"name": f"Child_{j}"},))
    same = [
        c.id
        for c in t.codes
        if c.id != a and c.category == t[a].category and c.applies_to_role == t[a].applies_to_role
    ]
    return Merge(a, (same[j % len(same)],)) if same else Retire(a)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_EDIT_OPS)
def test_random_edit_sequences_keep_ids_identities(tax, ops):
    t = tax
    ever_retired: set[str] = set()
    for op, i, j in ops:
        before = {c.id: c for c in t.codes}
        marks = dict(t.id_high_water)
        batch = apply_edits(t, [_edit(t, op, i, j)], trigger="prop")
        t = batch.taxonomy
        for c in t.codes:  # an existing id keeps its identity fields
            if c.id in before:
                old = before[c.id]
                assert (c.category, c.applies_to_role, c.origin, c.parent) == (
                    old.category,
                    old.applies_to_role,
                    old.origin,
                    old.parent,
                )
        assert all(m not in before and m not in ever_retired for m in batch.minted)
        assert all(t.id_high_water[a] >= marks[a] for a in "ABC")
        assert ever_retired <= t.retired_ids
        ever_retired = set(t.retired_ids)
        assert not set(t.ids) & ever_retired
    assert taxonomy_from_dict(json.loads(json.dumps(taxonomy_to_dict(t)))) == t


# -- fingerprint --------------------------------------------------------------------------------


def test_fingerprint_ignores_order_status_and_examples_but_follows_content(tax):
    fp = tax.fingerprint
    assert fp.startswith("sha256:") and len(fp) == 7 + 64
    d = taxonomy_to_dict(tax)
    shuffled = dict(reversed(list(d.items())))
    shuffled["codes"] = [dict(reversed(list(c.items()))) for c in reversed(d["codes"])]
    assert taxonomy_from_dict(shuffled).fingerprint == fp
    assert tax.with_status("accepted", agreement={"final_kappa": 0.9}).fingerprint == fp
    no_examples = Relabel("A.1", {"examples": []})
    assert apply_edits(tax, [no_examples], trigger="x").taxonomy.fingerprint == fp
    for field, value in [
        ("description", "Changed."),
        ("name", "Tool_Hang"),
        ("detection_heuristics", ["t > 5"]),
    ]:
        assert (
            apply_edits(tax, [Relabel("A.3", {field: value})], trigger="x").taxonomy.fingerprint
            != fp
        )
    assert apply_edits(tax, [Retire("C.1")], trigger="x").taxonomy.fingerprint != fp


# -- JSON -------------------------------------------------------------------------------------


def test_save_load_round_trip_is_byte_identical(tax, tmp_path):
    t = apply_edits(
        tax, [Merge("A.1", ("A.2",)), Split("C.1", ({"name": "Ratio_Inverted"},))], trigger="x"
    ).taxonomy
    t = t.with_status("accepted", agreement={"final_kappa": 0.81, "metric": "cohen_area"})
    p1, p2 = save_taxonomy(t, tmp_path / "a.json"), tmp_path / "b.json"
    back = load_taxonomy(p1)
    assert back == t
    save_taxonomy(back, p2)
    assert p1.read_bytes() == p2.read_bytes()
    raw = json.loads(p1.read_text())
    assert raw["schema_version"] == 1 and raw["id_high_water"] == {"A": 3, "B": 3, "C": 2}
    assert raw["tsevo"]["retired"] == [
        {"id": "A.2", "version_n": 2, "reason": "merge", "merged_into": "A.1"}
    ]
    assert (
        raw["tsevo"]["fingerprint"] == t.fingerprint and raw["tsevo"]["parent"] == tax.fingerprint
    )


#: A file in the shape of AdaMAST's public flat ``taxonomy.json`` (its own fields only, plus one
#: field nobody knows), written for this test.
ADAMAST_FLAT = {
    "schema_version": 1,
    "strategy": "baseline",
    "status": "accepted",
    "display_name": "Forecasting agent failures",
    "domain": "Time-series QA",
    "summary": "A short field guide.",
    "codes": [
        {
            "id": "A.1",
            "name": "Tool output dropped",
            "description": "A tool ran but its output is lost.",
            "category": "A",
            "when_to_use": "The trace shows a run with no reading.",
        },
        {
            "id": "A.2",
            "name": "Budget exhausted",
            "description": "Calls run out before a decision.",
            "category": "A",
            "severity": "high",
        },
        {
            "id": "B.1",
            "name": "Checker rubber-stamps",
            "description": "The checker approves without evidence.",
            "category": "B",
            "applies_to_role": "checker",
        },
        {
            "id": "C.1",
            "name": "Seasonality taken for trend",
            "description": "A seasonal swing is read as a trend.",
            "category": "C",
            "examples": ["December peak called growth"],
            "x_note": {"kept": True},
        },
    ],
    "generation": {
        "provider": "p",
        "model": "m",
        "trace_count": 24,
        "agreement": {"final_kappa": 0.82, "final_coverage": 0.91, "rounds_completed": 3},
    },
}


def test_adamast_flat_file_round_trips_keeping_unknown_fields():
    t = taxonomy_from_dict(ADAMAST_FLAT)
    assert t.ids == ("A.1", "A.2", "B.1", "C.1") and t.status == "accepted"
    assert t["A.2"].severity == "high" and t["A.1"].origin == "foreign"
    out = taxonomy_to_dict(t)
    for key, value in ADAMAST_FLAT.items():
        if key != "codes":
            assert out[key] == value, key
    for theirs, ours in zip(ADAMAST_FLAT["codes"], out["codes"], strict=True):
        assert {k: ours[k] for k in theirs} == theirs
    assert out["id_high_water"] == {"A": 2, "B": 1, "C": 1}
    assert taxonomy_from_dict(out) == t


def test_definition_is_read_as_description_and_a_missing_id_is_minted():
    raw = {
        "codes": [
            {"name": "X", "definition": "d", "category": "A"},
            {"id": "A.4", "name": "Y", "description": "e", "category": "A"},
        ]
    }
    t = taxonomy_from_dict(raw)
    assert t.ids == ("A.5", "A.4") and t["A.5"].description == "d"


def test_adamast_layered_draft_loads():
    layered = {
        "metadata": {"version_n": 1, "id_high_water": {"A": 3}, "counts": {"total": 3}},
        "role_definitions": {"solver": {"type": "solver"}},
        "annotation_layer": {
            "category_c": [
                {"code": "C.1", "name": "Unit slip", "definition": "Units mixed."},
                {"code": "C.?", "name": "Sign flip", "definition": "Sign read backwards."},
            ]
        },
        "full_layer": {
            "domain_info": {"domain": {"name": " forecasting "}},
            "category_a": {
                "A.1": {
                    "code": "A.1",
                    "name": "Loop",
                    "definition": "Repeats.",
                    "origin": "seed",
                    "severity": "major",
                }
            },
            "category_b": {
                "B.2": {
                    "code": "B.2",
                    "name": "Solver guesses",
                    "definition": "Guesses.",
                    "applies_to_role": "solver",
                    "origin": "added",
                }
            },
        },
    }
    t = taxonomy_from_dict(layered)
    assert t.ids == ("A.1", "B.2", "C.1", "C.2") and t.domain == "forecasting"
    assert (
        t["A.1"].origin == "induced"
        and t["B.2"].origin == "added"
        and t["C.1"].description == "Units mixed."
    )
    assert t.id_high_water == {"A": 3, "B": 2, "C": 2} and t.next_id("A") == "A.4"
    assert t.extras["role_definitions"] == {"solver": {"type": "solver"}}
    assert taxonomy_from_dict(taxonomy_to_dict(t)) == t


def test_mast_json_shape_loads_as_baseline_on_axis_a():
    raw = {
        "taxonomy_id": "mast",
        "repo": "(built-in)",
        "domain": "general",
        "codes": [
            {"id": f"MAST-{n}", "name": f"mode {n}", "description": "…", "category": cat}
            for n, cat in zip(
                range(1, 15),
                ["Specification"] * 5 + ["Coordination"] * 5 + ["Verification"] * 4,
                strict=True,
            )
        ],
    }
    t = taxonomy_from_dict(raw)
    assert len(t) == 14 and t.status == "baseline" and t.id_high_water == {"A": 0, "B": 0, "C": 0}
    assert {c.category for c in t} == {"A"} and t["MAST-6"].area == "coordination"
    assert taxonomy_to_dict(t)["taxonomy_id"] == "mast"
    assert sum(mast_id(i) is not None for i in t.ids) == 13


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(schema_version=2), "schema_version: 2 is not supported"),
        (lambda d: d.update(status="approved"), "status: 'approved' is not one of"),
        (lambda d: d["codes"][1].pop("name"), r"codes\[1\] \(A.2\).name: a non-empty string"),
        (
            lambda d: d["codes"][2].pop("applies_to_role"),
            r"codes\[2\] \(B.1\).applies_to_role: required",
        ),
        (lambda d: d["codes"][0].update(category="D"), r"codes\[0\] \(A.1\).category: 'D'"),
        (lambda d: d["codes"][0].update(id=7), r"codes\[0\].id: expected a string"),
        (lambda d: d["codes"][1].update(id="A.1"), "duplicate code id 'A.1'"),
        (lambda d: d["codes"][3].update(id="A.7"), r"codes\[3\] \(A.7\).id: axis A does not match"),
        (lambda d: d.update(id_high_water={"D": 1}), r"id_high_water.D: unknown axis"),
        (
            lambda d: d["codes"][0].update(
                detector={"any": [{"all": [{"feature": "f", "op": "~", "value": 1}]}]}
            ),
            r"detector.any\[0\].all\[0\].op",
        ),
        (lambda d: d.update(codes={}), "codes: a list"),
    ],
)
def test_bad_input_names_the_field(mutate, match):
    d = json.loads(json.dumps(ADAMAST_FLAT))
    mutate(d)
    with pytest.raises(TaxonomyError, match=match):
        taxonomy_from_dict(d)


def test_stale_fingerprint_and_recycled_file_ids_raise(tax, tmp_path):
    d = taxonomy_to_dict(apply_edits(tax, [Retire("A.3")], trigger="x").taxonomy)
    d["codes"][0]["description"] = "edited by hand"
    with pytest.raises(TaxonomyError, match=r"tsevo.fingerprint: the file says"):
        taxonomy_from_dict(d)
    assert taxonomy_from_dict(d, verify_fingerprint=False)["A.1"].description == "edited by hand"
    d["codes"][1]["id"] = "A.3"
    with pytest.raises(TaxonomyError, match=r"recycled id\(s\) \['A.3'\]"):
        taxonomy_from_dict(d, verify_fingerprint=False)
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(TaxonomyError, match=r"bad.json: not JSON"):
        load_taxonomy(p)


# -- MAST and status ---------------------------------------------------------------------------


def test_mast_baseline_has_fourteen_modes_and_thirteen_aliases():
    m = load_mast()
    assert len(m) == 14 and m.status == "baseline" and m.usable
    assert m.ids[:2] == ("FM-1.1", "FM-1.2") and m.ids[-1] == "FM-3.3"
    areas = [c.area for c in m]
    assert (
        areas.count("specification"),
        areas.count("inter_agent_misalignment"),
        areas.count("verification"),
    ) == (5, 6, 3)
    assert {c.category for c in m} == {"A"} and {c.origin for c in m} == {"mast"}
    assert m["FM-2.6"].name == "Reasoning-action mismatch"
    assert len(MAST_ALIASES) == 13 and set(MAST_ALIASES.values()) == set(m.ids) - {"FM-2.6"}
    assert mast_id("MAST-13") is None and mast_id("MAST-14") == "FM-3.3"
    assert m.id_high_water == {"A": 0, "B": 0, "C": 0} and m.next_id("A") == "A.1"
    assert taxonomy_from_dict(taxonomy_to_dict(m)) == m


def test_consumers_take_accepted_or_baseline_only(tax):
    with pytest.raises(TaxonomyError, match=r"is 'draft'.*allow_unaccepted=True"):
        require_usable(tax)
    assert require_usable(tax, allow_unaccepted=True) is tax
    assert require_usable(tax.with_status("accepted")).status == "accepted"
    with pytest.raises(TaxonomyError, match="review_required"):
        require_usable(tax.with_status("review_required"))


@pytest.mark.parametrize(
    "module", ["", ".codes", ".model", ".edits", ".jsonio", ".mast", ".agreement"]
)
def test_docstring_examples_run(module):
    res = doctest.testmod(importlib.import_module("tsevo.taxonomy" + module))
    assert res.failed == 0
