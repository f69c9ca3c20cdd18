"""The per-question score history and changelog on a hand-built chain (design §8.9)."""

from __future__ import annotations

import pytest

from tsevo.marachain import BatchSpec, ChangeEntry, NodeScore, ScoreHistory

BATCH = BatchSpec.build("g1", ["h1", "h2", "h3"], ["p1", "p2"], lambda q: "train")


def _s(repairs, harms=()):
    return NodeScore.from_outcome(BATCH, repairs=repairs, harms=harms)


def _hist() -> ScoreHistory:
    h = ScoreHistory.start(BATCH).extend("r1.g1.a2", _s(["h1"], ["p2"]))
    h = h.extend(
        "r1.g1.c1.s1",
        _s(["h2"]),
        ChangeEntry.make(1, "r1.g1.c1.s1", "window", "widen the window to 48", resolves=["h2"]),
    )
    return h.extend(
        "r1.g1.c1.s2",
        _s(["h1", "h2"], ["p1"]),
        ChangeEntry.make(
            2,
            "r1.g1.c1.s2",
            "revert",
            "restore the h1 reading",
            fields_changed=["window"],
            diff="-a\n+b",
        ),
    )


def test_deltas_against_root_and_lineage_parent():
    rows = {(r["node_id"], r["qid"]): r for r in _hist().rows()}
    # v0: h1 repaired, p2 harmed
    assert (rows["r1.g1.a2", "h1"]["d_root"], rows["r1.g1.a2", "h1"]["d_prev"]) == (1, 1)
    assert (rows["r1.g1.a2", "p2"]["d_root"], rows["r1.g1.a2", "p2"]["d_prev"]) == (-1, -1)
    # s1: h1 lost, h2 won, p2 restored
    assert rows["r1.g1.c1.s1", "h1"]["d_prev"] == -1 and rows["r1.g1.c1.s1", "h1"]["d_root"] == 0
    assert rows["r1.g1.c1.s1", "p2"]["d_prev"] == 1 and rows["r1.g1.c1.s1", "p2"]["d_root"] == 0
    # s2: h1 back, p1 harmed
    assert rows["r1.g1.c1.s2", "h1"]["d_prev"] == 1 and rows["r1.g1.c1.s2", "p1"]["d_root"] == -1
    assert len(rows) == 3 * 5 and {r["step"] for r in _hist().rows()} == {1, 2, 3}


def test_fixed_broke_flags():
    h = _hist()
    assert h.fixed("r1.g1.c1.s1") == ("h2", "p2") and h.broke("r1.g1.c1.s1") == ("h1",)
    assert h.fixed("r1.g1.c1.s2") == ("h1",) and h.broke("r1.g1.c1.s2") == ("p1",)
    assert h.flips() == {"h1": 3, "h2": 1, "h3": 0, "p1": 1, "p2": 2}
    assert h.oscillations() == ("h1", "p2")
    assert h.residuals() == ("h3",) and h.harms() == ("p1",)
    mid = ScoreHistory(BATCH, h.nodes[:2])
    assert mid.lost_wins() == ("h1",) and h.lost_wins() == ()


def test_render_keeps_the_table_and_cuts_the_changelog_oldest_first():
    h = _hist()
    full = h.render(label=lambda q: q.upper())
    assert "N1 = r1.g1.a2; N2 = r1.g1.c1.s1; N3 = r1.g1.c1.s2" in full
    assert "H3 | H |    0  0  0  0 | 0" in full
    assert "oscillating (flipped >= 2x): H1, P2" in full
    assert full.index("[2] r1.g1.c1.s2") < full.index("[1] r1.g1.c1.s1")
    assert "fixed: H2, P2; broke: H1" in full and "resolves: h2" in full
    table = h.render(max_chars=10)
    assert "rows | part |" in table and "[2 older changelog entries left out]" in table
    assert "[1]" not in table
    # identical rows collapse
    wide = BatchSpec.build("g1", ["h1"], ["p1", "p2", "p3"], lambda q: "train")
    one = ScoreHistory.start(wide).extend(
        "r1.g1.a1", NodeScore.from_outcome(wide, repairs=["h1"], harms=[])
    )
    assert "p1, p2, p3 (3 rows) | P |" in one.render()


def test_changelog_entries_are_bounded_and_authored():
    e = ChangeEntry.make(1, "r1.g1.c1.s1", "window", "x" * 100 + "\nsecond line", diff="d" * 5000)
    assert len(e.subject) == 72 and len(e.diff) == 3000 and e.diff.endswith("3,000 characters]")
    assert ChangeEntry.from_dict(e.to_dict()) == e
    with pytest.raises(ValueError, match="subject"):
        ChangeEntry(1, "n", "t", "a\nb")
    with pytest.raises(ValueError, match="names author"):
        ScoreHistory.start(BATCH).extend(
            "r1.g1.c1.s1", _s([]), ChangeEntry.make(1, "r1.g1.c1.s9", "t", "s")
        )
    with pytest.raises(ValueError, match="seq 3 after 0"):
        ScoreHistory.start(BATCH).extend(
            "r1.g1.c1.s1", _s([]), ChangeEntry.make(3, "r1.g1.c1.s1", "t", "s")
        )
    other = BatchSpec.build("g2", ["h1"], [], lambda q: "train")
    with pytest.raises(ValueError, match="not scored on batch"):
        ScoreHistory.start(BATCH).extend(
            "r1.g1.a1", NodeScore.from_outcome(other, repairs=[], harms=[])
        )
