"""Agreement statistics and the gate's status (design §4.5–4.6, §7.4–7.6).

Hand-computed Cohen and Fleiss cases exactly as the design gives them, random matrices against
scikit-learn's ``cohen_kappa_score`` and statsmodels' ``fleiss_kappa``, and the status edges
(0.75 / 0.70 accepted, 0.7499 review_required, undefined review_required).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from tsevo.taxonomy import (
    Code,
    Taxonomy,
    agreement,
    area_matrix,
    cohen_area,
    cohen_kappa,
    coverage,
    fleiss_code_macro,
    fleiss_kappa,
    gate_status,
    load_mast,
)

A = [1, 1, 1, 0, 0, 0, 0, 0, 1, 0]  # 1110000010
B = [1, 1, 0, 0, 0, 0, 0, 1, 1, 0]  # 1100000110


def _one_area_tax() -> Taxonomy:
    return Taxonomy.create(
        [
            Code(id="", category="A", name="Tool_Timeout"),
            Code(id="", category="A", name="Tool_Loop"),
        ]
    )


def _labels(rows, code="A.1"):
    """One annotator per row: error ``e{i}`` gets ``code`` where the row has a 1."""
    return [{f"e{i}": {code} if v else set() for i, v in enumerate(row)} for row in rows]


ERRORS = [f"e{i}" for i in range(10)]


# -- Cohen ------------------------------------------------------------------------------------


def test_cohen_by_hand():
    # p_o = 8/10 (positions 3 and 8 differ); both raters say 1 on 4/10: p_e = .4*.4 + .6*.6 = .52
    p_o, p_e = Fraction(8, 10), Fraction(4, 10) ** 2 + Fraction(6, 10) ** 2
    assert p_e == Fraction(52, 100)
    assert (p_o - p_e) / (1 - p_e) == Fraction(7, 12)
    assert cohen_kappa(A, B) == pytest.approx(7 / 12, abs=1e-15)


def test_cohen_pair_with_chance_agreement_one_is_excluded():
    zeros = [0] * 10
    assert cohen_kappa(zeros, zeros) is None  # p_e = 1: undefined
    assert cohen_kappa([1] * 10, [1] * 10) is None
    assert cohen_kappa(zeros, A) == 0.0  # one constant rater: p_e < 1, kappa 0
    value, pairs = cohen_area(_labels([A, B, zeros, zeros]), ERRORS, _one_area_tax())
    by_pair = {(p.a, p.b): p.kappa for p in pairs}
    assert by_pair[(2, 3)] is None and len(pairs) == 6
    # mean of the five defined pairs: 7/12, 0, 0, 0, 0
    assert value == pytest.approx((7 / 12) / 5)


def test_six_pair_mean_of_a_4x10_matrix_by_hand():
    C = list(A)  # identical to A
    D = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]  # 0000011111
    # (A,B) 7/12; (A,C) 1; (B,C) 7/12;
    # (A,D): p_o 3/10, p_e .4*.5 + .6*.5 = 1/2 -> -2/5; (B,D): p_o 5/10, p_e 1/2 -> 0; (C,D) -2/5
    by_hand = {
        (0, 1): Fraction(7, 12),
        (0, 2): Fraction(1),
        (0, 3): Fraction(-2, 5),
        (1, 2): Fraction(7, 12),
        (1, 3): Fraction(0),
        (2, 3): Fraction(-2, 5),
    }
    mean = sum(by_hand.values()) / 6
    assert mean == Fraction(41, 180)
    value, pairs = cohen_area(_labels([A, B, C, D]), ERRORS, _one_area_tax())
    assert {(p.a, p.b): p.kappa for p in pairs} == pytest.approx(
        {k: float(v) for k, v in by_hand.items()}
    )
    assert value == pytest.approx(41 / 180)


def test_labels_collapse_to_areas():
    tax = Taxonomy.create(
        [
            Code(id="", category="B", name="Keeps", applies_to_role="reviewer"),
            Code(id="", category="B", name="Tie_Break", applies_to_role="reviewer"),
            Code(id="", category="C", name="Ratio", area="ratios"),
        ]
    )
    # two annotators: different reviewer codes on every error, the same area
    labels = [{"e0": {"B.1"}, "e1": {"B.1", "C.1"}}, {"e0": {"B.2"}, "e1": {"B.2"}}]
    mat, cells = area_matrix(labels, ["e0", "e1"], tax)
    assert cells == [
        ("e0", "B:reviewer"),
        ("e0", "C:ratios"),
        ("e1", "B:reviewer"),
        ("e1", "C:ratios"),
    ]
    assert mat.tolist() == [[1, 0, 1, 1], [1, 0, 1, 0]]
    # MAST collapses to its three categories
    mat, cells = area_matrix([{"x": {"FM-1.1"}}], ["x"], load_mast())
    assert [a for _, a in cells] == [
        "A:inter_agent_misalignment",
        "A:specification",
        "A:verification",
    ]
    assert mat.tolist() == [[0, 1, 0]]


@pytest.mark.parametrize("seed", range(40))
def test_cohen_matches_scikit_learn_on_random_labels(seed):
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(2, 40)), int(rng.integers(2, 5))
    a, b = rng.integers(0, k, n).tolist(), rng.integers(0, k, n).tolist()
    if seed % 4 == 0:  # binary, correlated
        b = [x if rng.random() < 0.7 else 1 - x for x in (np.array(a) % 2).tolist()]
        a = (np.array(a) % 2).tolist()
    ours = cohen_kappa(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = sk.cohen_kappa_score(a, b)
    if ours is None:
        assert math.isnan(theirs)
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)


# -- Fleiss -----------------------------------------------------------------------------------


def test_fleiss_by_hand():
    # 4 raters, ones per error (4, 0, 2, 4, 0): P_i = 1, 1, 1/3, 1, 1 -> P-bar = 13/15;
    # p(1) = 10/20 -> P_e = 1/2; kappa = (13/15 - 1/2) / (1/2) = 11/15
    ones = [4, 0, 2, 4, 0]
    p_i = [Fraction(o * (o - 1) + (4 - o) * (3 - o), 12) for o in ones]
    p_bar, p_e = sum(p_i) / 5, Fraction(1, 2)
    assert p_bar == Fraction(13, 15) and (p_bar - p_e) / (1 - p_e) == Fraction(11, 15)
    assert fleiss_kappa([[4 - o, o] for o in ones]) == pytest.approx(11 / 15, abs=1e-15)

    tax = _one_area_tax()  # A.1 used, A.2 never: skipped
    errors = [f"e{i}" for i in range(5)]
    labels = [
        {e: ({"A.1"} if r < o else set()) for e, o in zip(errors, ones, strict=True)}
        for r in range(4)
    ]
    value, per_code = fleiss_code_macro(labels, errors, tax)
    assert per_code == pytest.approx({"A.1": 11 / 15}) and value == pytest.approx(11 / 15)


def test_fleiss_macro_edges():
    tax = _one_area_tax()
    errors = ["e0", "e1"]
    nothing = [{e: set() for e in errors} for _ in range(4)]
    assert fleiss_code_macro(nothing, errors, tax) == (None, {})  # no used code: undefined
    everyone = [{e: {"A.2"} for e in errors} for _ in range(4)]
    assert fleiss_code_macro(everyone, errors, tax) == (
        1.0,
        {"A.2": 1.0},
    )  # P_e = 1, full agreement
    assert fleiss_kappa(np.zeros((0, 2))) is None
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 1], [1, 1]])


@pytest.mark.parametrize("seed", range(40))
def test_fleiss_matches_statsmodels_on_random_tables(seed):
    irr = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = np.random.default_rng(1000 + seed)
    subjects, raters, k = int(rng.integers(2, 30)), int(rng.integers(2, 7)), int(rng.integers(2, 5))
    ratings = rng.integers(0, k, (subjects, raters))
    if seed % 3 == 0:  # agreeing raters: copy rater 0 most of the time
        mask = rng.random((subjects, raters)) < 0.7
        ratings = np.where(mask, ratings[:, :1], ratings)
    table, _ = irr.aggregate_raters(ratings, n_cat=k)
    ours = fleiss_kappa(table)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = irr.fleiss_kappa(table, method="fleiss")
    if ours is None:
        assert not math.isfinite(theirs)
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)


# -- status -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kappa", "cov", "status"),
    [
        (0.75, 0.70, "accepted"),
        (0.75 - 1e-15, 0.70 - 1e-15, "accepted"),  # rounded to 12 decimals first
        (0.7499, 0.95, "review_required"),
        (0.95, 0.6999, "review_required"),
        (None, 0.95, "review_required"),
        (float("nan"), 0.95, "review_required"),
        (0.95, None, "review_required"),
        (1.0, 1.0, "accepted"),
    ],
)
def test_status_edges(kappa, cov, status):
    d = gate_status(kappa, cov)
    assert d.status == status
    assert d.metric == "cohen_area" and d.reason.startswith("cohen_area")


def test_status_reasons_and_degenerate_panel():
    assert gate_status(0.7499, 0.9).reason == "cohen_area 0.7499 < 0.75"
    assert "undefined" in gate_status(None, 0.9, metric="fleiss_code_macro").reason
    d = gate_status(0.9, 0.9, degenerate=True)
    assert d.status == "review_required" and "degenerate" in d.reason
    with pytest.raises(ValueError, match="unknown metric"):
        gate_status(0.9, 0.9, metric="kappa")


def test_agreement_reports_both_and_names_the_gating_metric():
    tax = _one_area_tax()
    labels = _labels([A, A, A, B])
    res = agreement(labels, ERRORS, tax)
    assert res.metric == "cohen_area" and res.fleiss_code_macro is not None
    # pairs: three identical (1), three (A,B) = 7/12 -> mean 19/24
    assert res.cohen_area == pytest.approx(19 / 24)
    # consolidated (>= 2 votes): A's four errors -> coverage 4/10
    assert res.coverage == pytest.approx(0.4)
    assert res.status == "review_required" and "coverage 0.4000 < 0.7" in res.decision.reason
    full = agreement(labels, ["e0", "e1", "e2", "e8"], tax)  # only the errors A coded
    assert full.coverage == 1.0
    by_fleiss = agreement(labels, ERRORS, tax, metric="fleiss_code_macro", coverage_floor=0.3)
    assert by_fleiss.metric == "fleiss_code_macro"
    assert by_fleiss.decision.kappa == by_fleiss.fleiss_code_macro
    gen = by_fleiss.as_generation(rounds_completed=2)
    assert (
        gen["metric"] == "fleiss_code_macro" and gen["final_kappa"] == by_fleiss.fleiss_code_macro
    )
    assert gen["cohen_area"] == by_fleiss.cohen_area and gen["rounds_completed"] == 2


def test_constant_labels_are_undefined_and_unknown_ids_dropped_with_a_warning():
    tax = _one_area_tax()
    labels = [{e: set() for e in ERRORS} for _ in range(4)]
    labels[0]["e0"] = {"Z.9"}
    with pytest.warns(UserWarning, match=r"not in the taxonomy: \['Z.9'\]"):
        res = agreement(labels, ERRORS, tax)
    assert res.cohen_area is None and res.fleiss_code_macro is None
    assert res.status == "review_required" and "cohen_area undefined" in res.decision.reason
    assert res.dropped == ((0, "e0", "Z.9"),)


def test_coverage_and_annotator_count():
    assert coverage({"a": {"A.1"}, "b": set()}, ["a", "b"]) == 0.5
    assert coverage({}, []) is None
    with pytest.raises(ValueError, match="at least two annotators"):
        agreement(_labels([A]), ERRORS, _one_area_tax())
