"""The near-miss family (Mara chains, design §8.14) and the chain's support-row lead.

The family is built so that the separating measurement (``xcorr`` of first differences searched out
to half the series) is two template moves from the builtin planner's defaults for ``k = 2`` and one
move for ``k = 1``. A builtin chain step whose parent holds one of the two moves must make the other
one even when the batch categories ask for the reading rule first: the support rows (train, never
the batch) say the measurement itself is improvable.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest

from tsevo.data import QuestionView
from tsevo.data.synthetic import FAMILIES, make_suite, oracle_answer, solver_report
from tsevo.data.synthetic._base import nearest_option_log, option_number
from tsevo.data.synthetic.nearmiss import DIRECTION, LAGS, QUARTER, near_miss_family
from tsevo.library.primitives import CATALOG
from tsevo.library.tool import (
    Contract,
    Guidance,
    Matcher,
    Provenance,
    ReadingRule,
    Scope,
    Tool,
)
from tsevo.marachain import Bar, BatchSpec, NodeScore, ScoreHistory
from tsevo.marachain.moves import categories, family_order
from tsevo.marachain.step import Parent, artifact_key, choose_move
from tsevo.roles.builtin.measure import Spec
from tsevo.roles.builtin.specs import enumerate_specs
from tsevo.roles.builtin.specsource import spec_source
from tsevo.roles.protocols import Example

XCORR = CATALOG["xcorr"].fn


@functools.cache
def _suite(preset: str, seed: int = 101):  # type: ignore[no-untyped-def]
    return make_suite(preset, seed)


def _direction_right(q, lag: int) -> bool:  # type: ignore[no-untyped-def]
    # xcorr(target, covariate): a positive lag is the covariate lagging the target
    want = DIRECTION[1] if lag > 0 else DIRECTION[0]
    return q.options[q.gold] == want


def _accuracy(qs, **kw) -> float:  # type: ignore[no-untyped-def]
    hits = []
    for q in qs:
        r = XCORR(q.series[q.primary[0]], q.series[q.covariates[0]], **kw)
        hits.append(_direction_right(q, r["best_lag"]))
    return float(np.mean(hits))


def test_the_presets_hold_one_opt_in_family_with_an_exact_oracle() -> None:
    s = _suite("nearmiss")
    assert s.name == "synthetic-nearmiss-s101" and len(s) == 400
    assert {q.task for q in s} == {"synthetic/nearmiss"}
    assert "nearmiss" not in FAMILIES  # never in a default suite
    assert "nearmiss" not in {q.metadata["family"] for q in make_suite("tiny", 0)}
    assert all(oracle_answer(q) == q.gold for q in s)
    assert solver_report(s)["oracle"].min() == 1.0
    again = make_suite("nearmiss", 101)
    assert [q.fingerprint for q in again] == [q.fingerprint for q in s]
    with pytest.raises(ValueError, match="no families"):
        make_suite("nearmiss", 1, families=["trend"])
    with pytest.raises(ValueError, match="near_miss k"):
        near_miss_family(3)


@pytest.mark.parametrize("preset", ["nearmiss", "nearmiss1"])
def test_the_separating_measurement_is_k_moves_from_the_planners_reach(preset: str) -> None:
    """k = 2: no spec one grid move from the defaults separates, both moves together do;
    k = 1: the ``diff`` move alone separates (the control)."""
    qs = [q for q in _suite(preset) if q.subtask == "direction"]
    both = _accuracy(qs, diff=True, max_lag=0.5)
    diff_only = _accuracy(qs, diff=True)
    window_only = _accuracy(qs, max_lag=0.5)
    default = _accuracy(qs)
    assert both == 1.0
    assert window_only < 0.75 and default < 0.75
    if preset == "nearmiss":
        assert diff_only < 0.85
        assert max(q.metadata["latent"]["lag"] for q in qs) > QUARTER
    else:
        assert diff_only == 1.0
        assert max(q.metadata["latent"]["lag"] for q in qs) <= LAGS[1][1]
    # the planner's specs: defaults plus one grid alternative at a time, never both moves
    specs = {s for s in enumerate_specs(["covariate"]) if s.primitive == "xcorr"}
    assert Spec("xcorr", "covariate", (("diff", True),)) in specs
    assert Spec("xcorr", "covariate", (("max_lag", 0.5),)) in specs
    assert not any(dict(s.params) == {"diff": True, "max_lag": 0.5} for s in specs)


def _roughness(z: np.ndarray) -> float:
    t = np.arange(len(z))
    z = z - np.polyval(np.polyfit(t, z, 1), t)
    return float(np.std(np.diff(z)) / np.std(z))


@pytest.mark.parametrize("preset", ["nearmiss", "nearmiss1"])
def test_no_fixed_number_answers_the_lag_items(preset: str) -> None:
    """The options are a ladder inside the lag range with the right rung drawn uniformly: the option
    nearest any one number is right about a third of the time (version 2, whose distractors ranged
    from 5 to 160 around lags of 25 to 95, gave the option nearest 60 ~70%)."""
    qs = [q for q in _suite(preset) if q.subtask == "lag"]
    lo, hi = LAGS[2 if preset == "nearmiss" else 1]
    assert len(qs) >= 150 and all(len(q.options) == 3 for q in qs)
    assert all(lo <= (option_number(o) or 0) <= hi for q in qs for o in q.options)
    best = max(np.mean([nearest_option_log(q, c) == q.gold for q in qs]) for c in range(lo, hi + 1))
    assert best < 0.45
    if preset == "nearmiss":  # most leads lie beyond the default quarter-series search
        assert np.mean([q.metadata["latent"]["lag"] > QUARTER for q in qs]) > 0.65


@pytest.mark.parametrize("preset", ["nearmiss", "nearmiss1"])
def test_the_direction_is_not_readable_from_which_series_is_noisier(preset: str) -> None:
    """Only timing separates: a median split of the roughness difference, in its better
    orientation, stays near chance (it read ~85% when only the follower carried noise)."""
    qs = [q for q in _suite(preset) if q.subtask == "direction"]
    gap = np.array(
        [
            _roughness(np.asarray(q.series[q.covariates[0]]))
            - _roughness(np.asarray(q.series[q.primary[0]]))
            for q in qs
        ]
    )
    leads = np.array([q.options[q.gold] == DIRECTION[0] for q in qs])
    acc = float(np.mean((gap > np.median(gap)) == leads))
    assert len(qs) >= 150 and max(acc, 1 - acc) < 0.68


def _tool(spec: Spec, key: str = "lag_sign") -> Tool:
    m = spec.describe(key)
    rule = ReadingRule("label", key=key, bins=(0.0,), labels=(DIRECTION[0], DIRECTION[1]))
    return Tool(
        id="r1.g2.a1",
        kind="tool",
        name="measure_x",
        description=f"measures {m}",
        source=spec_source([(spec, [key])], name="measure_x", doc=f"Evidence: {m}."),
        scope=Scope(tasks=("synthetic/nearmiss",), arity="single", options_kind="label"),
        contract=Contract(
            measurement=m, signature=("primary", "covariate"), success_criterion="", params={}
        ),
        guidance=Guidance(f"Computes {m}. How to read it: {rule.describe()}.", rule),
        outputs=(key,),
        provenance=Provenance(bucket="b1", attempt=1, action="create"),
    )


class _NoIdea:
    def synthesize(self, *args: object) -> None:
        return None


def _step(spec: Spec, matcher: Matcher | None = None, batch_qs=(), key: str = "lag_sign"):  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    from tsevo.marachain.genome import genome_of

    train = [q for q in _suite("nearmiss").train if q.subtask == "direction"]
    ex = [Example(QuestionView.of(q, q.id), q.gold, None) for q in train]
    t = _tool(spec, key)
    if matcher is not None:
        t = replace(t, scope=replace(t.scope, matcher=matcher))
    g = genome_of(t, [], [])
    assert g is not None
    batch = BatchSpec.build(
        "g2", ["h1", "h2", "h3", "h4"], ["p1", "p2", "p3", "p4"], lambda q: "train"
    )
    # a harmful parent: the categories alone ask for the scope and the reading rule first
    score = NodeScore.from_outcome(
        batch,
        repairs=["h1", "h2"],
        harms=["p1", "p2", "p3"],
        facts={"h1": "R", "h2": "R", "h3": "K", "h4": "K", "p1": "R", "p2": "R", "p3": "R"},
    )
    par = Parent(t, score, g, {})
    inp = SimpleNamespace(
        examples=ex, tries=[], synthesizer=_NoIdea(), group=SimpleNamespace(cards=()), held_qs=[]
    )
    history = ScoreHistory.start(batch).extend(t.id, score)
    return choose_move(par, Bar(), inp, [], {artifact_key(t)}, history, [], {}, batch_qs), score


def test_a_step_makes_the_missing_move_when_support_rows_say_one_edit_separates() -> None:
    (move, lead, cats, order), score = _step(Spec("xcorr", "covariate", (("diff", True),)))
    assert Bar().check(score).outcome == "harmful"
    plain, plain_lead = family_order(
        categories(score, []), [], harmful=True
    )  # what the categories alone ask for
    assert plain[:2] == ["scope", "reading_rule"] and plain_lead == "B"
    assert move is not None and move.axis == "window" and order[0] == "window"
    assert dict(move.genome.branches[0].spec.params) == {"diff": True, "max_lag": 0.5}
    assert move.draft.contract.signature == ("primary", "covariate")
    # recorded as the categories say: the one-move measurement reads the support rows at chance,
    # so a kept wrong answer is a wrong measurement (B), not a weak mechanism (I)
    assert lead == "B" and cats["B"] == 5 and cats["I"] == 0


def test_a_window_edit_also_rereads_which_output_carries_the_answer() -> None:
    """From the differenced peak's height (the near miss's partial cue), widening the search makes
    the peak's location the evidence: the window move reads a lag output out to half the series."""
    (move, _lead, _cats, order), _ = _step(
        Spec("xcorr", "covariate", (("diff", True),)), key="peak_corr"
    )
    assert move is not None and move.axis == "window" and order[0] == "window"
    b = move.genome.branches[0]
    assert dict(b.spec.params) == {"diff": True, "max_lag": 0.5}
    assert b.keys[0] in ("lag_sign", "best_lag", "abs_best_lag")
    assert move.draft.outputs == b.keys


def test_no_lead_when_the_measurement_is_already_the_best_one_edit_can_reach() -> None:
    (move, _lead, _cats, order), _ = _step(
        Spec("xcorr", "covariate", (("diff", True), ("max_lag", 0.5)))
    )
    assert move is not None and move.axis in ("scope", "reading_rule")
    assert order[:2] == ["scope", "reading_rule"]


def test_a_scope_edit_that_reaches_the_same_batch_questions_is_not_a_move() -> None:
    """Every direction question names the output: a matcher on that word matches them all at
    any threshold, so raising, halving or dropping it cannot change a batch score."""
    best = Spec("xcorr", "covariate", (("diff", True), ("max_lag", 0.5)))
    m = Matcher(terms={"output": 1.0}, threshold=0.5)
    (plain, *_), _ = _step(best, m)
    assert plain is not None and plain.axis == "scope"
    batch = [q for q in _suite("nearmiss").train if q.subtask == "direction"][:8]
    (move, _lead, _cats, order), _ = _step(best, m, batch)
    assert order[0] == "scope" and move is not None and move.axis != "scope"
