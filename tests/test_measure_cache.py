"""One computation per measurement: a grid variant at its primitive's default value and the spec
without parameters share their values (``Spec.computes``), in the cache and in the warm-up; and
``transform_signature``'s grid variants share the residuals they have in common."""

from __future__ import annotations

import numpy as np
import pytest

from tsevo.data import Question, QuestionView
from tsevo.library.primitives import transform as tr
from tsevo.roles.builtin import MeasurementPlanner, measure
from tsevo.roles.builtin.measure import Spec, SpecCache

from .test_plan_parallel import _dossiers


def _view(seed: int = 0) -> QuestionView:
    y = np.cumsum(np.random.default_rng(seed).normal(size=200))
    q = Question(
        id=f"q{seed}", source="t", task="t", question="Regimes?", options=("yes", "no"),
        series={"y": y}, primary=("y",), gold=0,
    )  # fmt: skip
    return QuestionView.of(q, f"v{seed}")


def test_specs_at_the_defaults_compute_the_same() -> None:
    plain = Spec("regime_switch")
    assert Spec("regime_switch", params=(("diff", False),)).computes == plain.computes
    assert Spec("regime_switch", params=(("diff", True),)).computes != plain.computes
    assert Spec("regime_switch", "dual_diff").computes != plain.computes
    assert Spec("regime_switch", per=0).computes != plain.computes
    # a width of 0.05 of the length is not 5 samples, nor is an int the same as a float
    assert Spec("motif_discord", params=(("m", 0.05),)).computes == Spec("motif_discord").computes
    assert Spec("motif_discord", params=(("m", 5),)).computes != Spec("motif_discord").computes
    assert (
        Spec("acf", params=(("lag", 1.0),)).computes != Spec("acf", params=(("lag", 1),)).computes
    )


def test_the_cache_computes_a_default_variant_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Spec] = []
    real = measure.spec_values

    def counted(spec: Spec, q: QuestionView) -> dict[str, float] | None:
        calls.append(spec)
        return real(spec, q)

    monkeypatch.setattr(measure, "spec_values", counted)
    q, cache = _view(), SpecCache()
    plain, same = Spec("regime_switch"), Spec("regime_switch", params=(("diff", False),))
    a = cache.get(plain, q)
    b = cache.get(same, q)
    assert a is not None and a == b and calls == [plain]
    b["persistence"] = -1.0  # each spec holds its own values
    assert cache.get(plain, q) == a and a["persistence"] != -1.0
    assert cache.get(Spec("regime_switch", params=(("diff", True),)), q) != a
    assert len(calls) == 2
    assert cache.get(same, _view(1)) == real(plain, _view(1))  # another question: computed anew
    assert len(calls) == 3


def test_the_warm_up_computes_each_computation_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from tsevo.roles.builtin.specs import enumerate_specs, modes_for, rows_kind

    dossiers = _dossiers()
    planner = MeasurementPlanner()
    n = planner.prepare(dossiers, workers=2)
    assert n == len(planner.cache.data) == len(planner.cache.computed)
    serial = MeasurementPlanner()
    assert serial.prepare(dossiers, workers=1) == n
    assert serial.cache.data == planner.cache.data
    calls: list[Spec] = []
    real = measure.spec_values
    monkeypatch.setattr(measure, "spec_values", lambda s, q: calls.append(s) or real(s, q))
    qs = {e.question.id: e.question for d in dossiers for e in d.support}
    every = [
        (s, q)
        for q in qs.values()
        for s in enumerate_specs(modes_for(rows_kind([q])[1], [q]))
        if s.per is None
    ]
    got = [planner.cache.get(s, q) for s, q in every]
    assert not calls and len(every) > n  # every variant read from the warm-up's values
    for (s, q), vals in list(zip(every, got, strict=True))[::89]:
        assert vals == real(s, q), s
    assert planner.prepare(dossiers, workers=2) == 0  # nothing left to compute


def test_transform_variants_share_residuals_in_any_order() -> None:
    g = np.random.default_rng(3)
    a = np.cumsum(g.normal(size=150))
    b = np.roll(a, 7) + 0.01 * g.normal(size=150)
    grid = [(w, s) for w in (2, 10, 20, 35) for s in (1, 10, 50, 120)]
    want = {}
    for w, s in grid:
        tr._memo().clear()
        want[w, s] = tr.transform_signature(a, b, max_window=w, max_shift=s)
    tr._memo().clear()
    for w, s in reversed(grid):
        assert tr.transform_signature(a, b, max_window=w, max_shift=s) == want[w, s]
    assert want[20, 10]["shift_k"] == 7 and want[20, 1]["shift_k"] in (1, -1)
    c = a.copy()
    tr.transform_signature(c, b)
    c[:] = 0.0  # the caller reuses its array: the memo holds its own copy
    tr._memo().clear()
    fresh = tr.transform_signature(a, b, max_shift=50)
    assert tr.transform_signature(a.copy(), b, max_shift=50) == fresh
    assert len(tr._memo()) <= tr._MEMO_SIZE
    for i in range(3 * tr._MEMO_SIZE):
        tr.transform_signature(a + i, b)
    assert len(tr._memo()) == tr._MEMO_SIZE


def test_defaults_are_read_from_the_registered_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """A primitive registered anew under its name (a test's, a user's) is read anew."""
    from dataclasses import replace

    from tsevo.library.primitives import CATALOG

    def lag1(y: np.ndarray, *, lag: int = 1) -> dict[str, float]:
        return {"v": float(lag)}

    def lag2(y: np.ndarray, *, lag: int = 2) -> dict[str, float]:
        return {"v": float(lag)}

    at1 = Spec("acf", params=(("lag", 1),))
    monkeypatch.setitem(CATALOG, "acf", replace(CATALOG["acf"], fn=lag1))
    assert at1.computes == Spec("acf").computes
    monkeypatch.setitem(CATALOG, "acf", replace(CATALOG["acf"], fn=lag2))
    assert at1.computes != Spec("acf").computes
    assert Spec("no_such_primitive").computes[2] == ()


def test_transform_memo_is_per_thread() -> None:
    """Threads extend their own residual lists: the same values as one thread computes alone."""
    from concurrent.futures import ThreadPoolExecutor

    g = np.random.default_rng(9)
    a = np.cumsum(g.normal(size=300))
    b = np.roll(a, 11)
    grid = [(w, s) for w in (5, 20, 60) for s in (3, 30, 120)]
    tr._memo().clear()
    want = [tr.transform_signature(a, b, max_window=w, max_shift=s) for w, s in grid]

    def run(order: int) -> list[object]:
        tr._memo().clear()
        idx = list(range(len(grid)))[:: 1 if order % 2 else -1]
        got = {
            i: tr.transform_signature(a, b, max_window=grid[i][0], max_shift=grid[i][1])
            for i in idx
        }
        return [got[i] for i in range(len(grid))]

    with ThreadPoolExecutor(4) as ex:
        for got in ex.map(run, range(8)):
            assert got == want
