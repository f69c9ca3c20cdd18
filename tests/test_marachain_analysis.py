"""The LLM chain step's contracts (design §8.10) and its context cap (§8.13), on a hand-built chain.

Lineage v0 -> n1 -> n2 on a batch of three held-out errors and two probe rows:

* v0 repairs h1; n1 repairs h1 and h2; n2 repairs h2 only and harms p1, so on n2 (the node to
  edit) h1 is a lost win, regressed and oscillating (root 0 -> 1 -> 1 -> 0: two flips), h3 a
  residual, p1 regressed (a harm), and h2 credited by n1's change.
"""

from __future__ import annotations

from typing import Any

import pytest

from tsevo.marachain import BatchSpec, ChangeEntry, NodeScore, ScoreHistory
from tsevo.marachain.analysis import StepFacts, change_of, check_analysis, check_edit, source_diff
from tsevo.marachain.context import NodeText, step_context, stored_fields

BATCH = BatchSpec.build("g1", ["h1", "h2", "h3"], ["p1", "p2"], lambda q: "train")
FACTS = {"h1": "K", "h2": "R", "h3": "O", "p1": "R", "p2": "K"}


def _s(repairs: list[str], harms: tuple[str, ...] = (), facts: Any = None) -> NodeScore:
    return NodeScore.from_outcome(BATCH, repairs=repairs, harms=harms, facts=facts)


def _hist() -> ScoreHistory:
    h = ScoreHistory.start(BATCH)
    h = h.extend("v0", _s(["h1"]), ChangeEntry.make(1, "v0", "start", "v0"))
    h = h.extend("n1", _s(["h1", "h2"]), ChangeEntry.make(2, "n1", "llm", "widen"))
    return h.extend("n2", _s(["h2"], ("p1",), FACTS), ChangeEntry.make(3, "n2", "llm", "narrow"))


SOURCE = "def tool():\n    y = ctx.primary()\n    return {'m': float(y.mean())}\n"
NODE = NodeText(
    "n2",
    SOURCE,
    ("m",),
    "higher when m > 0",
    None,
    "tasks: t",
    "narrow",
    {"repairs": 1, "harms": 1, "net": 0},
    {q: {"fact": f, "reason": f"reason of {q}", "outputs": "{}"} for q, f in FACTS.items()},
)
STORED = stored_fields([NODE])


def _facts() -> StepFacts:
    return StepFacts.of(_hist(), STORED)


def _cite(q: str = "h3", field: str = "fact", quote: str = "O") -> dict[str, str]:
    return {"node_id": "n2", "qid": q, "field": field, "quote": quote}


def _diag(cat: str, rows: list[str], cites: Any = None) -> dict[str, Any]:
    return {
        "category": cat,
        "responsible_node": "n2",
        "rows": rows,
        "citations": cites if cites is not None else [],
        "action": "fix",
    }


def _valid() -> dict[str, Any]:
    return {
        "delta_tracing": [
            _diag("H", ["h1"]),
            _diag("A", ["h3"], [_cite()]),
            _diag("B", ["p1"]),
        ],
        "success_extraction": [{"qid": "h2", "node_id": "n1"}],
        "oscillation": [_diag("H", ["h1"])],
        "inconsistency": [],
        "corroboration": [_cite("", "source", "y = ctx.primary()")],
        "data_quality_issues": [],
    }


def test_facts_of_the_hand_built_chain() -> None:
    f = _facts()
    assert f.residuals == ("h3",) and f.oscillating == ("h1",)
    assert set(f.regressed) == {"h1", "p1"}
    assert f.lost_wins == ("h1",)
    assert dict(f.credited_by) == {"h2": ("n1",)}
    assert f.changes == 2 and f.lineage == ("v0", "n1", "n2")


def test_a_valid_analysis_is_accepted() -> None:
    assert check_analysis(_valid(), _facts()) == []


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda a: a["delta_tracing"].append(_diag("Z", ["h3"])), "unknown category"),
        (
            lambda a: a["delta_tracing"].__setitem__(1, _diag("A", ["h3"], [_cite(quote="K")])),
            "not verbatim",
        ),
        (lambda a: a["corroboration"].append(_cite("", "source", "import os")), "not verbatim"),
        (
            lambda a: a["corroboration"].append({**_cite(), "node_id": "x9"}),
            "not a node on the lineage",
        ),
        (lambda a: a["delta_tracing"].append(_diag("G", ["h3"])), "inconsistency pair"),
        (lambda a: a["delta_tracing"].__setitem__(0, _diag("H", ["h3"])), "needs lost wins"),
        (lambda a: a["delta_tracing"].__setitem__(1, _diag("A", ["h1"])), "needs facts O/S/A"),
        (
            lambda a: a["delta_tracing"].__setitem__(2, _diag("B", ["p2"])),
            "wrong replacement or a harm",
        ),
        (lambda a: a["delta_tracing"].append(_diag("E", ["h3"])), "needs a citation"),
        (lambda a: a["delta_tracing"].pop(1), "unexplained"),
        (lambda a: a.__setitem__("success_extraction", []), "without the change behind it"),
        (
            lambda a: a["success_extraction"].__setitem__(0, {"qid": "h2", "node_id": "v0"}),
            "was not credited",
        ),
        (
            lambda a: a["inconsistency"].append({"node_a": "v0", "node_b": "n1", "qid": "h1"}),
            "not a pair",
        ),
        (lambda a: a["data_quality_issues"].append({"qid": "h3", "issue": "bad"}), "also carry"),
    ],
)
def test_each_contract_breach_is_refused_with_a_reason(edit: Any, needle: str) -> None:
    a = _valid()
    edit(a)
    reasons = check_analysis(a, _facts())
    assert any(needle in r for r in reasons), reasons


def test_an_oscillating_row_must_be_covered() -> None:
    h = ScoreHistory.start(BATCH)
    h = h.extend("v0", _s(["h1"]), ChangeEntry.make(1, "v0", "start", "v0"))
    h = h.extend("n1", _s([]), ChangeEntry.make(2, "n1", "llm", "a"))
    facts = {"h1": "R", "h2": "K", "h3": "O", "p1": "K", "p2": "K"}
    h = h.extend("n2", _s(["h1"], (), facts), ChangeEntry.make(3, "n2", "llm", "b"))
    f = StepFacts.of(h, STORED)
    assert f.oscillating == ("h1",)
    a = {
        "delta_tracing": [_diag("A", ["h3"], [_cite()]), _diag("I", ["h2"])],
        "success_extraction": [{"qid": "h1", "node_id": "n2"}],
        "oscillation": [],
        "inconsistency": [],
        "corroboration": [],
    }
    assert any("oscillating rows ['h1']" in r for r in check_analysis(a, f))
    a["oscillation"] = [_diag("E", ["h1"], [_cite("h1", "reason", "reason of h1")])]
    assert check_analysis(a, f) == []


def test_inconsistency_pairs_come_from_equal_artifacts() -> None:
    f = StepFacts.of(_hist(), STORED, hashes={"v0": "x", "n1": "y", "n2": "x"})
    assert ("v0", "n2", "h1") in f.pairs and all(p[:2] == ("v0", "n2") for p in f.pairs)
    a = _valid()
    a["inconsistency"] = [{"node_a": "v0", "node_b": "n2", "qid": "h1"}]
    a["delta_tracing"].append(_diag("G", ["h1"]))
    assert check_analysis(a, f) == []


def test_edit_contract_and_the_changelog_tsevo_writes() -> None:
    f = _facts()
    act = {
        "target": "reading_rule",
        "op": "edit",
        "issue": "band",
        "change": "wider",
        "resolves": [],
    }
    assert any("resolves is empty" in r for r in check_edit({"actions": [act]}, f))
    assert any(
        "not batch rows" in r for r in check_edit({"actions": [{**act, "resolves": ["zz"]}]}, f)
    )
    assert check_edit({"actions": []}, f) == ["actions: at least one action is needed"]
    ok = {"actions": [{**act, "resolves": ["h3", "p1"]}]}
    assert check_edit(ok, f) == []
    diff = source_diff(SOURCE, SOURCE.replace("mean", "median"))
    c = change_of(4, "n3", ok, ["source"], diff, real=lambda q: f"real-{q}")
    assert c.subject == "llm: reading_rule: band" and c.resolves == ("real-h3", "real-p1")
    assert "-    return {'m': float(y.mean())}" in c.diff and c.fields_changed == ("source",)


def test_context_stays_within_its_cap_and_keeps_contract_and_table() -> None:
    h, f = _hist(), _facts()
    big = NodeText(**{**NODE.__dict__, "source": SOURCE + "#" * 6000})
    full = step_context(
        contract='{"measurement": "m"}', history=h, parent=big, best=NODE, analyses=[],
        facts=f, max_chars=400_000,
    )  # fmt: skip
    assert "## Node to edit" in full and "## Raw records" in full and "left out" not in full
    small = step_context(
        contract='{"measurement": "m"}', history=h, parent=big, best=NODE, analyses=[],
        facts=f, max_chars=2_500,
    )  # fmt: skip
    assert len(small) <= 2_500
    assert '{"measurement": "m"}' in small and "## Score history of g1" in small
    assert "left out to fit 2500 characters" in small
