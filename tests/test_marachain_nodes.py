"""Chain node ids never collide with direct attempt ids; the node record checks its own shape."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsevo.marachain import (
    BatchSpec,
    ChainNode,
    NodeScore,
    chain_id,
    chain_node_id,
    direct_node_id,
    is_chain_id,
    parse_node_id,
)

GROUPS = st.from_regex(r"[A-Za-z0-9_\-]{1,8}", fullmatch=True)
POS = st.integers(1, 200)


def test_direct_ids_are_the_ones_synthesis_stamps():
    # tsevo.evolve.synthesize._stamp: f"r{round_}.{group.id}.{suffix}", suffix a<K> or a<K>r
    assert direct_node_id(1, "g2", 3) == "r1.g2.a3"
    assert direct_node_id(4, "g12", 1, repaired=True) == "r4.g12.a1r"
    assert chain_id(1, "g2", 1) == "r1.g2.c1" and chain_id(1, "g2", 2, polish=True) == "r1.g2.p2"
    assert chain_node_id(1, "g2", 1, 3) == "r1.g2.c1.s3"


@given(GROUPS, GROUPS, POS, POS, POS, POS, POS, st.booleans(), st.booleans())
def test_chain_ids_never_collide_with_direct_ids(g1, g2, r1, r2, k, c, s, rep, polish):
    direct = direct_node_id(r1, g1, k, repaired=rep)
    node = chain_node_id(r2, g2, c, s, polish=polish)
    chain = chain_id(r2, g2, c, polish=polish)
    assert len({direct, node, chain}) == 3
    assert parse_node_id(direct).kind == "direct" and parse_node_id(node).kind == "chain"
    assert parse_node_id(direct).node_id == direct and parse_node_id(node).node_id == node
    assert parse_node_id(node).chain_id == chain and is_chain_id(chain)
    assert not is_chain_id(direct) and not is_chain_id(node)
    with pytest.raises(ValueError):
        parse_node_id(chain)


@given(GROUPS, POS, POS, POS, POS, POS, POS)
def test_distinct_positions_give_distinct_ids(g, r, c1, s1, c2, s2, k):
    a, b = chain_node_id(r, g, c1, s1), chain_node_id(r, g, c2, s2)
    assert (a == b) == ((c1, s1) == (c2, s2))
    assert chain_node_id(r, g, c1, s1) != chain_node_id(r, g, c1, s1, polish=True)


def test_bad_ids_and_parts_are_refused():
    for bad in ("draft.g1.a1", "r0.g1.a1", "r1.g1.a0", "r1.g1.c1.s0", "r1..a1", "g1.a1"):
        with pytest.raises(ValueError):
            parse_node_id(bad)
    with pytest.raises(ValueError, match="group id"):
        chain_node_id(1, "g.1", 1, 1)
    with pytest.raises(ValueError, match="step"):
        chain_node_id(1, "g1", 1, 0)
    with pytest.raises(ValueError, match="round"):
        direct_node_id(True, "g1", 1)


def test_chain_node_round_trips_and_checks_its_shape():
    batch = BatchSpec.build("g1", ["h1"], ["p1"], lambda q: "train")
    score = NodeScore.from_outcome(batch, repairs=["h1"], harms=[])
    node = ChainNode("r1.g1.c1.s2", "g1", "chain", 0, 2, "r1.g1.c1.s1", "r1.g1.c1", 5, "ab", score)
    assert ChainNode.from_dict(node.to_dict()) == node and node.valid
    direct = ChainNode("r1.g1.a2r", "g1", "direct", 2, 0, "", "", 1, "cd", score)
    assert ChainNode.from_dict(direct.to_dict()) == direct
    with pytest.raises(ValueError, match="depth 0"):
        ChainNode("r1.g1.a2", "g1", "direct", 2, 1, "", "", 1, "cd")
    with pytest.raises(ValueError, match="parent"):
        ChainNode("r1.g1.c1.s1", "g1", "chain", 0, 1, "", "r1.g1.c1", 3, "ef")
    with pytest.raises(ValueError, match="chain id"):
        ChainNode("r1.g1.c1.s1", "g1", "chain", 0, 1, "r1.g1.a1", "r1.g1.c2", 3, "ef")
    with pytest.raises(ValueError, match="kind/group"):
        ChainNode("r1.g1.c1.s1", "g2", "chain", 0, 1, "r1.g1.a1", "r1.g1.c1", 3, "ef")
    with pytest.raises(ValueError, match="no score"):
        ChainNode("r1.g1.c1.s1", "g1", "chain", 0, 1, "r1.g1.a1", "r1.g1.c1", 3, "ef", score, "bad")
