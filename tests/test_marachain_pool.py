"""The Pareto-filtered top-N pool (design §5.1, §8.5) and its seeded samplers (§5.2, §8.6)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsevo.marachain import PoolMember, sample, sampler_weights, update_pool, weakly_dominates

GRID = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])


@st.composite
def pools(draw, evolving: bool = False):
    width = draw(st.integers(1, 6))
    n = draw(st.integers(1, 9))
    vecs = draw(st.lists(st.tuples(*[GRID] * width), min_size=n, max_size=n))
    depths = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    states = (
        draw(st.lists(st.sampled_from(["pooled", "evolving"]), min_size=n, max_size=n))
        if evolving
        else ["pooled"] * n
    )
    return [
        PoolMember(f"r1.g1.c1.s{i + 1}", v, d, i, s)
        for i, (v, d, s) in enumerate(zip(vecs, depths, states, strict=True))
    ]


@given(pools(), st.integers(1, 4))
def test_pool_keeps_a_non_dominated_top_n(members, n):
    up = update_pool(members, n)
    kept = {m.node_id: m for m in up.kept}
    retired = dict(up.retired)
    assert set(kept) | set(retired) == {m.node_id for m in members}
    assert not set(kept) & set(retired)
    # no kept vector is weakly dominated by another kept one (identical vectors included)
    for a in up.kept:
        for b in up.kept:
            assert a is b or not weakly_dominates(a.vector, b.vector)
    # every vector dropped as dominated is weakly dominated by a member of the Pareto front
    front = [m for m in members if m.node_id in kept or retired[m.node_id] == "top-N"]
    for m in members:
        if m.node_id in retired and retired[m.node_id].startswith("dominated"):
            assert any(weakly_dominates(f.vector, m.vector) for f in front)
    # top-N: at most N, ordered by (mean, depth, local_seq)
    assert len(up.kept) <= n
    keys = [(m.mean, m.depth, m.local_seq) for m in up.kept]
    assert keys == sorted(keys, reverse=True)
    # every dropped vector is weakly dominated by a kept one or ranks below every kept one
    for m in members:
        if m.node_id in retired:
            assert any(weakly_dominates(k.vector, m.vector) for k in up.kept) or (
                (m.mean, m.depth, m.local_seq) < keys[-1]
            )
        if retired.get(m.node_id) == "top-N":
            assert (m.mean, m.depth, m.local_seq) < keys[-1]
    # a best-mean member survives, with positive mass under the default sampler
    best = max(m.mean for m in members)
    assert max(m.mean for m in up.kept) == best
    weights = sampler_weights(up.kept)
    assert all(w > 0 for m, w in zip(up.kept, weights, strict=True) if m.mean == best)


@given(pools(evolving=True), st.integers(1, 3))
def test_evolving_members_never_retire_and_bound_the_size(members, n):
    up = update_pool(members, n)
    evolving = {m.node_id for m in members if m.state == "evolving"}
    assert evolving <= {m.node_id for m in up.kept}
    assert len(up.kept) <= n + len(evolving)
    pooled = [m for m in up.kept if m.state == "pooled"]
    for a in up.kept:
        for b in pooled:
            assert a is b or not weakly_dominates(a.vector, b.vector)


@given(pools(), st.integers(1, 4), st.randoms(use_true_random=False))
def test_pool_update_ignores_input_order(members, n, rnd):
    shuffled = list(members)
    rnd.shuffle(shuffled)
    assert update_pool(shuffled, n) == update_pool(members, n)


def test_identical_vectors_keep_the_newer_and_dominance_needs_equal_lengths():
    old = PoolMember("r1.g1.c1.s1", (1.0, 0.0), 1, 3)
    new = PoolMember("r1.g1.c1.s2", (1.0, 0.0), 2, 4)
    up = update_pool([old, new], 3)
    assert [m.node_id for m in up.kept] == [new.node_id]
    assert up.retired == ((old.node_id, f"dominated by {new.node_id}"),)
    assert not weakly_dominates((), ()) and not weakly_dominates((1.0,), (0.0, 0.0))
    assert weakly_dominates((0.5 - 1e-9,), (0.5,))
    with pytest.raises(ValueError, match="twice"):
        update_pool([old, old], 3)


@given(
    pools(),
    st.integers(1, 3),
    st.integers(0, 2**31),
    st.sampled_from(["leadership", "leadership_raw", "lexicase"]),
)
def test_sampler_is_deterministic_and_order_free(members, k, seed, sampler):
    kw = {"sampler": sampler, "seed": seed, "round_": 2, "group_id": "g3", "event": "chain:2"}
    a = sample(members, k, **kw)
    assert a == sample(list(reversed(members)), k, **kw)
    assert len(a) == min(k, len(members)) and len(set(a)) == len(a)
    w = sampler_weights(members, "leadership") if sampler != "lexicase" else ()
    assert all(x >= 1 for x in w)  # leadership never gives zero mass


def test_uninformative_rows_change_no_leadership_weight():
    base = [
        PoolMember("a", (1.0, 0.0, 0.0), 1, 1),
        PoolMember("b", (0.0, 1.0, 1.0), 1, 2),
        PoolMember("c", (1.0, 1.0, 0.0), 1, 3),
    ]
    padded = [PoolMember(m.node_id, (*m.vector, 0.0, 1.0), 1, m.local_seq) for m in base]
    assert sampler_weights(base) == sampler_weights(padded) == (2.0, 3.0, 3.0)
    assert sampler_weights(base, "leadership_raw") == (1.0, 2.0, 2.0)
    zero = [PoolMember("a", (), 0, 1), PoolMember("b", (), 0, 2)]
    assert sampler_weights(zero, "leadership_raw") == (1.0, 1.0)  # zero weights never raise
    assert (
        len(sample(zero, 1, sampler="leadership_raw", seed=0, round_=1, group_id="g1", event=0))
        == 1
    )


def test_sampler_frequencies_match_the_weights_within_tv_002():
    members = [
        PoolMember("a", (1.0, 0.0, 0.0, 1.0), 1, 1),
        PoolMember("b", (0.0, 1.0, 0.0, 1.0), 1, 2),
        PoolMember("c", (0.0, 1.0, 1.0, 1.0), 1, 3),
    ]
    w = dict(zip("abc", sampler_weights(members), strict=True))
    draws = 20_000
    got = Counter(
        sample(members, 1, sampler="leadership", seed=7, round_=1, group_id="g1", event=i)[0]
        for i in range(draws)
    )
    total = sum(w.values())
    tv = 0.5 * sum(abs(got[k] / draws - w[k] / total) for k in w)
    assert tv < 0.02, (got, w)


def test_evolving_members_are_not_drawn():
    members = [PoolMember("a", (1.0,), 1, 1, "evolving"), PoolMember("b", (0.0,), 1, 2)]
    assert sample(members, 2, sampler="lexicase", seed=1, round_=1, group_id="g1", event="x") == (
        "b",
    )
