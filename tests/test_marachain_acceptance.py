"""Mara chain acceptance: the batch, node scores, the prefilter bar, and design §8.7's hand cases."""

from __future__ import annotations

import pytest

from tsevo.evolve.config import ProtocolConfig
from tsevo.evolve.support import SupportConfig
from tsevo.marachain import (
    Bar,
    BatchSpec,
    ChainNode,
    NodeScore,
    RootMismatchError,
    accept,
    chain_node_id,
    chain_start,
    check_root,
    decisions,
    direct_node_id,
    early_stop,
    strength_key,
    winner,
)

H = [f"h{i:02d}" for i in range(32)]
P = [f"p{i:02d}" for i in range(32)]


def _train(q: str) -> str:
    return "train"


BATCH = BatchSpec.build("g1", H, P, _train)
ROOT = BATCH.root_score()
BAR = Bar()


def _score(repairs: int, harms: int, **kw) -> NodeScore:
    return NodeScore.from_outcome(BATCH, repairs=H[:repairs], harms=P[:harms], **kw)


def _chain(step: int, seq: int, score: NodeScore | None, parent: str) -> ChainNode:
    return ChainNode(
        chain_node_id(1, "g1", 1, step),
        "g1",
        "chain",
        0,
        step,
        parent,
        "r1.g1.c1",
        seq,
        f"hash{seq}",
        score,
        "" if score is not None else "static check failed",
    )


def _direct(k: int, score: NodeScore) -> ChainNode:
    return ChainNode(
        direct_node_id(1, "g1", k), "g1", "direct", k, 0, "", "", k - 1, f"d{k}", score
    )


# ---- design §8.7, exactly as given (|P| = 32) ---------------------------------------------------
def test_five_repairs_four_harms_code_accepts_paper_rejects():
    s = _score(5, 4)
    assert s.raw_sum == 5 + 28 and ROOT.raw_sum == 32
    paper, code = accept(s, ROOT, "paper", BAR), accept(s, ROOT, "code", BAR)
    assert not paper.yes and "harmful" in paper.reason and "cap 3.2" in paper.reason
    assert code.yes and "raw sum 33 beats the parent's 32" in code.reason


def test_one_repair_one_harm_paper_accepts_code_rejects():
    s = _score(1, 1)
    paper, code = accept(s, ROOT, "paper", BAR), accept(s, ROOT, "code", BAR)
    assert paper.yes and paper.reason.startswith("clears the bar")
    assert not code.yes and "32 does not beat the parent's 32" in code.reason


def test_mid_chain_node_with_positive_net_missing_the_bar_only_code_returns_it():
    v0 = _direct(1, _score(0, 1))  # the strongest rejected direct attempt
    s1 = _chain(1, 3, _score(0, 0), v0.node_id)  # net 0: raw sum 32
    s2 = _chain(2, 4, _score(5, 4), s1.node_id)  # net +1, harmful: misses the bar
    s3 = _chain(3, 5, _score(0, 2), s2.node_id)
    nodes = [v0, s1, s2, s3]
    assert s2.score is not None and s2.score.net > 0 and not BAR.check(s2.score).passed
    both = decisions(nodes, ROOT, BAR)
    assert both["paper"].node_id is None and not both["paper"].yes
    assert both["code"].node_id == s2.node_id and both["code"].yes


# ---- the variants around those cases ------------------------------------------------------------
def test_code_accepts_every_row_right_and_ties_go_to_the_earlier_node():
    allright = NodeScore.from_outcome(BATCH, repairs=H, harms=[])
    assert accept(allright, ROOT, "code", BAR).reason.startswith("every row right")
    a = _chain(1, 3, _score(3, 1), "r1.g1.a1")
    b = _chain(2, 4, _score(4, 2), a.node_id)  # same raw sum 34, later
    w = winner([b, a], ROOT, "code", BAR)
    assert w.node_id == a.node_id and w.yes


def test_code_stops_early_on_all_right_paper_does_not():
    # every row right but no attributable repair (raw 1, credited 0 on H): misses the bar
    s = NodeScore.from_outcome(BATCH, repairs=[], harms=[], right=H)
    assert s.all_right and not BAR.check(s).passed
    assert early_stop(s, "code", BAR).yes
    assert not early_stop(s, "paper", BAR).yes
    assert early_stop(_score(1, 0), "paper", BAR).yes


def test_paper_winner_is_the_best_strength_key_among_passing_nodes():
    a = _chain(1, 3, _score(2, 0), "r1.g1.a1")
    b = _chain(2, 4, _score(4, 1), a.node_id)  # net 3 beats net 2
    c = _chain(3, 5, _score(4, 1), b.node_id)  # same key up to local_seq: the earlier wins
    bad = _chain(4, 6, None, c.node_id)
    assert winner([a, b, c, bad], ROOT, "paper", BAR).node_id == b.node_id
    assert strength_key(_score(4, 1), 4) > strength_key(_score(4, 1), 5)


def test_invalid_nodes_never_win_and_unknown_variants_raise():
    bad = _chain(1, 3, None, "r1.g1.a1")
    assert winner([bad], ROOT, "code", BAR).node_id is None
    assert winner([bad], ROOT, "paper", BAR).node_id is None
    with pytest.raises(ValueError, match="acceptance variant"):
        accept(_score(1, 0), ROOT, "mara", BAR)


# ---- the bar is the prefilter's -----------------------------------------------------------------
def test_bar_reads_the_protocol_and_follows_the_prefilter_order():
    assert Bar.of(ProtocolConfig()) == Bar()
    assert Bar().harm_cap(32) == max(2, 0.10 * 32) and Bar().harm_cap(8) == 2
    assert BAR.check(_score(0, 9)).outcome == "no_repair"
    assert BAR.check(_score(1, 4)).outcome == "harmful"
    assert BAR.check(_score(1, 3)).outcome == "passed"
    errs = _score(1, 0, exec_errors=2, tool_runs=20)
    assert BAR.check(errs).outcome == "exec_errors"
    assert BAR.check(_score(1, 0, exec_errors=1, tool_runs=20)).passed  # 0.05 <= cap
    strong, weak = BAR.check(_score(13, 0)), BAR.check(_score(12, 0))
    assert strong.strong and not weak.strong  # repair rate 13/32 >= 0.40 > 12/32
    # two held-out errors are too few to ask for a repair; the harm cap still applies
    small = BatchSpec.build("g1", H[:2], P, _train)
    none = NodeScore.from_outcome(small, repairs=[], harms=[])
    assert BAR.check(none).outcome == "passed"
    assert BAR.check(NodeScore.from_outcome(small, repairs=[], harms=P[:4])).outcome == "harmful"
    assert Bar(min_held_out=0).check(none).outcome == "no_repair"
    assert Bar.of(ProtocolConfig(support=SupportConfig(min_held_out=0))) == Bar(min_held_out=0)
    # a composite answers only for the held-out errors of kinds it has a branch for: two of nine
    # ask for nothing, a third does, and so does counting every one
    held9 = BatchSpec.build("g1", H[:9], P, _train)
    two = NodeScore.from_outcome(held9, repairs=[], harms=[], in_contract=2)
    assert two.n_in_contract == 2 and BAR.check(two).outcome == "passed"
    three = NodeScore.from_outcome(held9, repairs=[], harms=[], in_contract=3)
    assert three.n_in_contract == 3 and BAR.check(three).outcome == "no_repair"
    assert NodeScore.from_outcome(held9, repairs=[], harms=[]).n_in_contract == 9
    assert NodeScore.from_dict(two.to_dict()) == two
    assert "in_contract" not in NodeScore.from_outcome(held9, repairs=[], harms=[]).to_dict()
    with pytest.raises(ValueError, match="in_contract"):
        NodeScore.from_outcome(held9, repairs=[], harms=[], in_contract=10)
    assert Bar(count_in_contract=False).check(two).outcome == "no_repair"
    every = ProtocolConfig(support=SupportConfig(min_held_out_counts="all"))
    assert Bar.of(every) == Bar(count_in_contract=False)
    # an outcome without a count (not a composite) counts every held-out error
    assert (
        BAR.outcome(0, 0, 9, 0, 0.0) == "no_repair" and BAR.outcome(0, 0, 9, 0, 0.0, 2) == "passed"
    )


# ---- batch and scores ---------------------------------------------------------------------------
def test_batch_refuses_non_train_rows_and_checks_its_fingerprint():
    with pytest.raises(ValueError, match=r"not train questions \['v1'\]"):
        BatchSpec.build("g1", ["h1"], ["v1"], lambda q: "train" if q != "v1" else "val")
    d = BATCH.to_dict()
    assert BatchSpec.from_dict(d) == BATCH
    with pytest.raises(ValueError, match="fingerprint"):
        BatchSpec.from_dict({**d, "qids": [*d["qids"][1:], d["qids"][0]]})


def test_root_mismatch_invalidates():
    base = {q: False for q in H} | {q: True for q in P}
    check_root(BATCH, base)
    with pytest.raises(RootMismatchError, match="h03"):
        check_root(BATCH, {**base, "h03": True})


def test_node_scores_credit_only_attributable_repairs_and_round_trip():
    s = NodeScore.from_outcome(BATCH, repairs=["h00"], harms=["p01"], right=["h05"])
    assert s.repairs == ("h00",) and s.harms == ("p01",) and s.net == 0
    assert s.raw[:6] == (1, 0, 0, 0, 0, 1) and s.credited[:6] == (1, 0, 0, 0, 0, 0)
    assert NodeScore.from_dict(s.to_dict()) == s
    with pytest.raises(ValueError, match="credits"):
        NodeScore(("h",), ("H",), (0,), (1,), ("R",))
    with pytest.raises(ValueError, match="credits"):
        NodeScore(("p",), ("P",), (1,), (0,), ("K",))
    with pytest.raises(ValueError, match="not in batch"):
        NodeScore.from_outcome(BATCH, repairs=["zz"], harms=[])


# ---- where a chain starts -----------------------------------------------------------------------
def test_chain_starts_from_the_strongest_or_the_last_scored_rejected_attempt():
    a1, a2 = _direct(1, _score(0, 1)), _direct(2, _score(0, 0))
    a3 = ChainNode("r1.g1.a3", "g1", "direct", 3, 0, "", "", 2, "d3", None, "rejected_check")
    strongest = chain_start([a1, a2, a3], "strongest", BAR)
    assert strongest.yes and strongest.node_id == a2.node_id  # net 0 beats net -1
    last = chain_start([a2, a1, a3], "last", BAR)
    assert last.yes and last.node_id == a2.node_id  # a3 was never scored
    weaker = _direct(2, _score(0, 3))
    assert chain_start([weaker, a1], "last", BAR).node_id == weaker.node_id
    assert chain_start([weaker, a1], "strongest", BAR).node_id == a1.node_id
    passing = chain_start([a1, _direct(2, _score(1, 0))], "strongest", BAR)
    assert not passing.yes and passing.node_id is None and "no chain" in passing.reason
    assert not chain_start([a3], "strongest", BAR).yes
    with pytest.raises(ValueError, match="only direct"):
        chain_start([_chain(1, 3, _score(0, 0), "r1.g1.a1")], "last", BAR)


def test_a_direct_attempt_as_a_chain_node_keeps_the_prefilters_in_contract_count():
    # the chain's start rule measures direct attempts on stand-in batches with the prefilter's
    # count of held-out errors inside the contract, so the bar gives the prefilter's verdict
    from tsevo.evolve.chain import _direct_nodes
    from tsevo.evolve.outcome import AttemptRecord
    from tsevo.library.tool import Tool

    def node(n_in_contract: int | None) -> NodeScore:
        rec = AttemptRecord(
            1, "r1.g1.a1", "m", checked=True, n_held_out=6, n_in_contract=n_in_contract
        )
        rec.n_probe, rec.tool_runs = 4, 6
        draft = Tool(id="r1.g1.a1", source="def tool():\n    return None\n")
        (n,) = _direct_nodes([(rec, draft)], "g1")
        return n.score

    assert node(2).n_in_contract == 2 and BAR.check(node(2)).outcome == "passed"
    assert node(3).n_in_contract == 3 and BAR.check(node(3)).outcome == "no_repair"
    assert node(None).n_in_contract == 6 and BAR.check(node(None)).outcome == "no_repair"
