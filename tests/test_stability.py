"""Weighted votes: a consensus rule's per-rule weights, and the planner weighting a branch's
measurements by how steadily they read noisy copies of the kind's train rows."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from tsevo.data import Question, QuestionView
from tsevo.library.reading import apply_rule
from tsevo.library.tool import ReadingRule, Scope
from tsevo.roles.builtin import MeasurementPlanner
from tsevo.roles.builtin.composite import Branch, Peer, branch_rule, within
from tsevo.roles.builtin.kindplan import KindPlanSettings, plan_kinds
from tsevo.roles.builtin.measure import Spec, SpecCache
from tsevo.roles.builtin.stability import noise_level, noisy_copy, stability
from tsevo.roles.protocols import Dossier, Example

UPDOWN = ("upward", "downward")
A = ReadingRule("label", key="a", bins=(0.0,), labels=("downward", "upward"))
B = replace(A, key="b")
C = replace(A, key="c")


def test_weights_decide_a_consensus_by_their_share_of_the_total():
    vote = ReadingRule("consensus", branches=(A, B, C), quorum=0.7, weights=(1.0, 0.2, 0.2))
    out = {"a": 1.0, "b": -1.0, "c": -1.0}  # the heavy rule against two light ones
    assert apply_rule(vote, out, UPDOWN).option == 0  # 1 / 1.4 = 0.71 of the weight
    plain = replace(vote, weights=())
    assert apply_rule(plain, out, UPDOWN).option is None  # one of three: no quorum
    heavy_two = replace(vote, weights=(0.2, 1.0, 1.0))
    assert apply_rule(heavy_two, out, UPDOWN).option == 1  # 2 / 2.2 of the weight
    # a weightless rule has no say, and an abstaining one still counts in the total
    mute = replace(vote, weights=(1.0, 1.0, 0.0))
    assert apply_rule(mute, {"a": 1.0, "b": 1.0, "c": -1.0}, UPDOWN).option == 0
    assert apply_rule(mute, {"a": 1.0, "b": -1.0, "c": -1.0}, UPDOWN).option is None  # 1 / 2
    away = replace(vote, weights=(0.5, 1.0, 1.0))
    assert apply_rule(away, {"a": 1.0, "b": 1.0}, UPDOWN).option is None  # 1.5 / 2.5 < 0.7
    both = apply_rule(vote, {"a": 1.0, "b": 1.0, "c": -1.0}, UPDOWN)
    assert both.option == 0 and "a" in both.reason and "b" in both.reason
    fast = apply_rule(vote, out, UPDOWN, explain=False)
    assert fast.option == 0 and fast.reason == ""


def test_weights_serialize_only_when_set_and_are_checked():
    vote = ReadingRule("consensus", branches=(A, B, C), quorum=0.7, weights=(1.0, 0.25, 0.5))
    d = vote.to_dict()
    assert d["weights"] == [1.0, 0.25, 0.5] and ReadingRule.from_dict(d) == vote
    assert "weights" not in replace(vote, weights=()).to_dict()  # unweighted rules as before
    assert "(weight 0.25)" in vote.describe() and "by weight" in vote.describe()
    assert "weight" not in replace(vote, weights=()).describe()
    for bad in [(1.0, 0.5), (1.0, -0.1, 0.5), (1.0, math.nan, 0.5), (0.0, 0.0, 0.0)]:
        with pytest.raises(ValueError, match="weights"):
            replace(vote, weights=bad)
    with pytest.raises(ValueError, match="weights"):
        replace(A, weights=(1.0,))  # only a consensus rule has weights


def _branch(weights: tuple[float, ...] = (1.0, 0.49, 0.09)) -> Branch:
    peers = tuple(Peer(Spec("trend"), (k,), replace(A, key=k)) for k in ("kendall_tau", "r2"))
    return Branch(
        ("k1",), ("trend",), (), Spec("trend"), ("slope",), replace(A, key="slope"),
        {"cv_acc": 1.0}, peers, 0.7, weights,
    )  # fmt: skip


def test_a_branch_carries_its_weights_into_its_consensus_and_drops_them_with_its_peers():
    b = _branch()
    d = b.to_dict()
    assert d["weights"] == [1.0, 0.49, 0.09] and Branch.from_dict(d) == b
    legacy = {k: v for k, v in d.items() if k != "weights"}  # plans written before weights
    assert Branch.from_dict(legacy).weights == ()
    sub = branch_rule([b]).branches[0]
    assert sub.kind == "consensus" and sub.weights == b.weights and sub.quorum == 0.7
    # a long composite cuts a branch's vote to two unanimous peers: its weights go with them
    big = replace(b, peers=b.peers * 3, weights=(1.0,) * 7)
    brs = [replace(big, kinds=(f"k{i}",)) for i in range(3)]
    size = lambda bs: sum(1 + len(x.peers) for x in bs)  # noqa: E731
    cut = within(brs, size, 2 * 7 + 3)
    assert [len(x.peers) for x in cut] == [6, 6, 2] and cut[2].weights == () == cut[
        2
    ].to_dict().get("weights", ())
    assert branch_rule(cut).branches[2].weights == ()


def test_a_mara_chain_genome_keeps_a_branchs_weights_through_a_rule_edit():
    from tsevo.marachain.moves import Genome, with_rule
    from tsevo.marachain.step import rule_variant

    g = Genome((_branch(),), True, Scope(tasks=("mixed",)))
    wide = rule_variant(g.rule, wider=True)
    assert wide.branches[0].weights == (1.0, 0.49, 0.09)
    back = with_rule(g, wide)
    assert back.branches[0].weights == (1.0, 0.49, 0.09) and back.rule == wide


def test_noise_level_is_the_noise_not_the_trend():
    rng = np.random.default_rng(0)
    e = rng.normal(0.0, 2.0, 5000)
    assert noise_level(e) == pytest.approx(2.0, rel=0.05)
    assert noise_level(e + np.linspace(0, 500, 5000)) == pytest.approx(2.0, rel=0.05)
    steps = np.repeat([0.0, 40.0, -10.0], 1000) + e[:3000]  # level shifts are not noise
    assert noise_level(steps) == pytest.approx(2.0, rel=0.08)
    assert noise_level(np.full(50, 3.0)) == 0.01  # flat: a token level, never zero
    gappy = e.copy()
    gappy[::7] = np.nan  # missing values are left out, not spread into the level
    assert noise_level(gappy) == pytest.approx(2.0, rel=0.08)
    assert noise_level(np.full(5, np.nan)) == 0.01 and noise_level([]) == 0.01


def _view(qid: str, y: np.ndarray, gold: int, text: str = "Which way does X trend?"):
    q = Question(
        id=qid, source="test", task="mixed", question=text, options=UPDOWN,
        series={"X": y}, primary=("X",), gold=gold,
    )  # fmt: skip
    return QuestionView.of(q, "v" + qid)


def test_a_noisy_copy_is_reproducible_and_noisy_at_the_asked_scale():
    rng = np.random.default_rng(1)
    y = np.cumsum(rng.normal(0.0, 1.0, 4000))
    v = _view("q", y, 0)
    c1 = noisy_copy(v, np.random.default_rng(5), 0.5)
    c2 = noisy_copy(v, np.random.default_rng(5), 0.5)
    added = np.asarray(c1.series["X"]) - y
    assert np.std(added) == pytest.approx(0.5 * noise_level(y), rel=0.05)
    assert np.array_equal(c1.series["X"], c2.series["X"]) and c1.fingerprint == c2.fingerprint
    assert c1.fingerprint != v.fingerprint and (c1.question, c1.options) == (v.question, v.options)
    assert np.array_equal(v.series["X"], y)  # the original is untouched


def test_a_measurement_of_the_asked_property_is_stable_and_a_fluke_is_not():
    rng = np.random.default_rng(2)
    rows = []
    for i in range(6):
        rising = i % 2 == 0
        y = np.linspace(0.0, 3.0 if rising else -3.0, 128) + 0.3 * rng.standard_normal(128)
        y[-1] = 0.01 if rising else -0.01  # the last value parts the rows by a hair
        rows.append(Example(_view(f"r{i}", y, 0 if rising else 1), 0 if rising else 1, None))

    class M:
        def __init__(self, key: str, spec: Spec) -> None:
            self.spec, self.rule = spec, replace(A, key=key)

    slope, last = M("slope", Spec("trend")), M("last", Spec("summary"))
    cache = SpecCache()
    for m in (slope, last):  # both read every train row right
        assert all(
            apply_rule(m.rule, cache.get(m.spec, e.question), UPDOWN).option == e.gold for e in rows
        )
    s_slope, s_last = stability(cache, [slope, last], rows, noise=0.5, copies=4)
    assert s_slope == 1.0 and 0.2 < s_last < 0.8
    assert stability(SpecCache(), [slope, last], rows, noise=0.5, copies=4) == [s_slope, s_last]
    assert stability(cache, [slope, last], [], copies=4) == [1.0, 1.0]


def _trend_dossier() -> Dossier:
    texts = ("Which way does the trend of X go?", "Is the spread of X constant over time?")
    rows = []
    for k, text in enumerate(texts):
        for i in range(4):
            rng = np.random.default_rng(10 * k + i)
            rising = i % 2 == 0
            # a weak trend: some of the measurements that read all 8 rows right waver on copies
            y = np.linspace(0.0, 0.3 if rising else -0.3, 96) + 0.2 * rng.standard_normal(96)
            v = _view(f"{k}{i}", y, 0 if rising else 1, text)

            class Rec:
                correct = False
                final_answer = 1 if rising else 0

            rows.append(Example(v, 0 if rising else 1, Rec()))
    return Dossier("no_tool.c1", "no_tool", "mixed", "", tuple(rows), ())


def test_the_planner_weights_a_branchs_votes_by_their_stability():
    settings = KindPlanSettings(max_kind_share=0.5)
    planner = MeasurementPlanner()
    branches, _ = plan_kinds(planner, _trend_dossier(), settings)
    assert branches
    for b in branches:
        assert len(b.weights) == 1 + len(b.peers) == 9
        assert all(0.0 <= w <= 1.0 for w in b.weights) and max(b.weights) == 1.0
        assert min(b.weights) < 1.0  # not every member is perfectly steady
        assert branch_rule([b]).branches[0].weights == b.weights
    # a member's weight is the share of copies it reads right, squared: 3 copies of 4 (or 8
    # pooled) rows make it a multiple of 1/12 or 1/24 before squaring
    for w in (w for b in branches for w in b.weights):
        assert any(abs(math.sqrt(w) * n - round(math.sqrt(w) * n)) < 1e-9 for n in (12, 24))
    off, _ = plan_kinds(planner, _trend_dossier(), replace(settings, stability_copies=0))
    assert [x.weights for x in off] == [()] * len(off)
    assert [x.members() for x in off] == [x.members() for x in branches]  # same members
    cubed, _ = plan_kinds(planner, _trend_dossier(), replace(settings, stability_power=3.0))
    for w2, w3 in zip(branches, cubed, strict=True):
        assert w3.weights == pytest.approx([w**1.5 for w in w2.weights])


def test_the_seeds_bench_sets_the_planners_settings_by_name_and_type():
    from tests.bench.seeds import kind_settings

    s = kind_settings({"stability_copies": "0", "quorum": "0.75", "pool": "false"})
    assert (s.stability_copies, s.quorum, s.pool) == (0, 0.75, False)
    assert kind_settings({}) == KindPlanSettings()
    with pytest.raises(ValueError, match="no planner setting 'stabilty_copies'"):
        kind_settings({"stabilty_copies": "0"})
    with pytest.raises(ValueError, match="stability_copies: 'three' is no int"):
        kind_settings({"stability_copies": "three"})
    with pytest.raises(ValueError, match="pool: 'maybe' is no bool"):
        kind_settings({"pool": "maybe"})
    for bad in (
        {"stability_copies": "-1"},
        {"stability_noise": "nan"},
        {"stability_power": "0"},
        {"min_rows": "1"},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            kind_settings(bad)
