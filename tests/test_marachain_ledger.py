"""The chain ledger: one log for every spend, caps checked through it, torn lines survived."""

from __future__ import annotations

import json

import pytest

from tsevo.marachain import Caps, ChainLedger, LedgerEntry, MaraConfig, Spend, read_ledger_lines


def _step(ledger: ChainLedger, node: str, rollouts: int = 10, calls: int = 2, tokens: int = 500):
    chain = node.rsplit(".", 1)[0]
    ledger.record(LedgerEntry(f"{node}:step", 1, "g1", chain, node, "step", spend=Spend(steps=1)))
    for role in ("chain_analyse", "chain_mutate"):
        ledger.record(
            LedgerEntry(
                f"{node}:{role}",
                1,
                "g1",
                chain,
                node,
                "call",
                role,
                Spend(calls=calls // 2, tokens=tokens // 2),
            )
        )
    ledger.record(
        LedgerEntry(f"{node}:score", 1, "g1", chain, node, "score", spend=Spend(rollouts=rollouts))
    )


def test_ledger_counts_per_node_and_role_and_reloads(tmp_path):
    path = tmp_path / "ledger.jsonl"
    led = ChainLedger(path)
    _step(led, "r1.g1.c1.s1")
    _step(led, "r1.g1.c1.s2", rollouts=12)
    assert led.total() == Spend(steps=2, rollouts=22, calls=4, tokens=1000)
    assert led.by_node()["r1.g1.c1.s2"] == Spend(steps=1, rollouts=12, calls=2, tokens=500)
    assert led.calls_by_role() == {"chain_analyse": 2, "chain_mutate": 2}
    assert led.total(chain_id="r1.g1.c1") == led.total(group_id="g1") == led.total()
    again = ChainLedger(path)
    assert again.entries == led.entries and again.summary() == led.summary()
    assert all(line.endswith("\n") for line in path.read_text().splitlines(keepends=True))


def test_a_repeated_key_spends_nothing(tmp_path):
    path = tmp_path / "ledger.jsonl"
    led = ChainLedger(path)
    e = LedgerEntry(
        "r1.g1.c1.s1:score", 1, "g1", "r1.g1.c1", "r1.g1.c1.s1", "score", spend=Spend(rollouts=64)
    )
    assert led.record(e) is e
    again = ChainLedger(path)  # a resumed run records the same spend once more
    assert again.has(e.key)
    assert (
        again.record(
            LedgerEntry(
                e.key, 1, "g1", "r1.g1.c1", "r1.g1.c1.s1", "score", spend=Spend(rollouts=99)
            )
        )
        == e
    )
    assert again.total().rollouts == 64 and len(read_ledger_lines(path)) == 1


def test_torn_last_line_is_ignored_then_cut_before_the_next_append(tmp_path):
    path = tmp_path / "ledger.jsonl"
    led = ChainLedger(path)
    _step(led, "r1.g1.c1.s1")
    whole = path.read_bytes()
    line = json.dumps(
        LedgerEntry("x", 1, "g1", "c", "r1.g1.c1.s2", "step", spend=Spend(steps=1)).to_dict()
    )
    for torn in (line[: len(line) // 2], line):  # half a line, and a whole one without its newline
        path.write_bytes(whole + torn.encode())
        back = ChainLedger(path)
        assert back.entries == led.entries and not back.has("x")
        _step(back, "r1.g1.c1.s2")
        assert ChainLedger(path).total() == Spend(steps=2, rollouts=20, calls=4, tokens=1000)
        assert len(read_ledger_lines(path)) == 8
    path.write_bytes(whole.replace(b"\n", b"\nnot json\n", 1))
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        ChainLedger(path)


def test_caps_stop_before_the_step_that_would_pass_them():
    led = ChainLedger()
    caps = Caps(steps=3, rollouts=25, calls=100, tokens=10_000)
    assert led.stop_reason(caps) is None
    _step(led, "r1.g1.c1.s1")
    _step(led, "r1.g1.c1.s2")
    nxt = Spend(steps=1, rollouts=10, calls=2, tokens=1)
    assert led.stop_reason(caps) is None
    assert led.stop_reason(caps, next_step=nxt) == "budget:rollouts"  # 20 + 10 > 25
    _step(led, "r1.g1.c1.s3", rollouts=0)
    assert led.stop_reason(caps) == "budget:steps"
    # the run's caps count earlier rounds too
    run = Caps(steps=100, rollouts=10_000, calls=7, tokens=10**6)
    fresh = ChainLedger()
    assert (
        fresh.stop_reason(caps, run, earlier_rounds=Spend(calls=6), next_step=nxt) == "budget:calls"
    )
    # an axis whose spend is known only afterwards stops once it is reached
    over = ChainLedger()
    _step(over, "r1.g1.c1.s1", tokens=10_000)
    assert over.stop_reason(caps, next_step=nxt) == "budget:tokens"
    cfg = MaraConfig(depth=5)
    assert cfg.round_caps() == Caps(60, 4000, 150, 1_500_000)


def test_entries_are_validated():
    with pytest.raises(ValueError, match="role"):
        LedgerEntry("k", 1, "g1", "c", "n", "call", "answerer")
    with pytest.raises(ValueError, match="empty key"):
        LedgerEntry("", 1, "g1", "c", "n", "call")
    with pytest.raises(ValueError, match=r"Spend\.rollouts"):
        Spend(rollouts=-1)
    e = LedgerEntry("k", 1, "g1", "c", "n", "score", spend=Spend(rollouts=3, cache_hits=1))
    assert LedgerEntry.from_dict(e.to_dict()) == e
    assert e.to_dict()["val_runs"] == 0
