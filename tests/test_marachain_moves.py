"""The builtin chain's move families (design §3.3, §8.11): each keeps the contract and is legal.

Window, normalization and primitive moves keep the feeding mode (so the signature), the artifact
kind and the function name, and their values come from support rows; scope moves keep tasks,
arity and option shape; the history's categories order the families (ties H > A > I > B) and a
family changed twice without gain is exhausted; a lost win is reverted to the node that had it.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from types import SimpleNamespace

import pytest

from tsevo.agent import AnswerRecord
from tsevo.agent.records import StageStep, ToolRun
from tsevo.data import QuestionView
from tsevo.data.synthetic import make_suite
from tsevo.evolve.chain import rule_variant
from tsevo.library.primitives import CATALOG
from tsevo.library.sandbox.gate import check_source
from tsevo.library.tool import Contract, Guidance, Matcher, Provenance, ReadingRule, Scope, Tool
from tsevo.marachain import Bar, BatchSpec, ChangeEntry, LedgerEntry, NodeScore, ScoreHistory, Spend
from tsevo.marachain.moves import (
    Genome,
    blame_order,
    categories,
    evidence_right,
    exhausted,
    family_order,
    fit_on_support,
    genome_draft,
    genome_of,
    param_variants,
    parse_measurement,
    primitive_variants,
    refit_moves,
    revert_genome,
    row_facts,
    scope_variants,
    spec_moves,
    with_rule,
)
from tsevo.marachain.step import Parent, artifact_key, choose_move
from tsevo.roles.builtin.composite import Branch
from tsevo.roles.builtin.measure import Spec, SpecCache
from tsevo.roles.builtin.specs import enumerate_specs
from tsevo.roles.builtin.specsource import spec_source
from tsevo.roles.protocols import Example


@functools.cache
def _trend_examples() -> tuple[Example, ...]:
    suite = make_suite("tiny", seed=0)
    rows = [q for q in suite.train if q.task == "synthetic/trend"]
    return tuple(Example(QuestionView.of(q, q.id), q.gold, None) for q in rows)


def _tool(spec: Spec, key: str, rule: ReadingRule, scope: Scope | None = None) -> Tool:
    m = spec.describe(key)
    name = "measure_x"
    return Tool(
        id="r1.g1.a1",
        kind="tool",
        name=name,
        description=f"measures {m}",
        source=spec_source([(spec, [key])], name=name, doc=f"Evidence: {m}."),
        scope=scope or Scope(tasks=("synthetic/trend",), arity="single", options_kind="label"),
        contract=Contract(
            measurement=m,
            signature=("primary", "question_numbers"),
            success_criterion="",
            params={"a": "#0"},
        ),
        guidance=Guidance(f"Computes {m}. How to read it: {rule.describe()}.", rule),
        outputs=(key,),
        provenance=Provenance(bucket="b1", attempt=1, action="create"),
    )


def _label_rule(key: str) -> ReadingRule:
    return ReadingRule("label", key=key, bins=(-0.1, 0.1), labels=("downward", "flat", "upward"))


def test_measurement_names_parse_back_to_their_specs() -> None:
    specs = enumerate_specs(["primary", "qnum", "window2", "dual_diff", "cand"])
    assert len(specs) > 200
    for s in specs[::7]:
        key = CATALOG[s.primitive].outputs[0]
        parsed = parse_measurement(s.describe(key))
        assert parsed is not None and parsed[0].describe(parsed[1]) == s.describe(key)
    assert parse_measurement("composite(acf.acf1)") is None
    assert parse_measurement("no_such_primitive.x") is None
    assert parse_measurement("acf") is None


def test_genome_of_accepts_only_a_draft_it_rewrites_exactly() -> None:
    t = _tool(Spec("trend", "window2"), "slope", _label_rule("slope"))
    g = genome_of(t, [], [])
    assert g is not None and not g.composite and g.measurement == "trend.slope[window2]"
    assert genome_draft(t, g) == t
    assert genome_of(replace(t, source=t.source + "# edited\n"), [], []) is None
    calibrated = replace(t, contract=replace(t.contract, calibration={"kind": "tree"}))
    assert genome_of(calibrated, [], []) is None
    # a plan row names the spec directly (no parsing needed)
    row = {
        "measurement": "trend.slope[window2]",
        "key": "slope",
        "spec": Spec("trend", "window2").to_dict(),
    }
    assert genome_of(t, [row], []) == g


def test_window_moves_keep_mode_and_use_grid_values_or_question_numbers() -> None:
    s = Spec("forecast", "qnum", (("h", "#0"), ("level_window", "#1")))
    out = param_variants(s, "window")
    assert out and all(v.primitive == "forecast" and v.mode == "qnum" for v in out)
    grid = set(CATALOG["forecast"].grid["h"])
    for v in out:
        p = dict(v.params)
        assert any(isinstance(x, str) and x.startswith("#") for x in p.values())
        assert all(x in grid or x in ("#0", "#1") for x in p.values())
        assert v != s
    assert Spec("forecast", "qnum", (("h", 8), ("level_window", "#1"))) in out
    assert Spec("forecast", "qnum", (("level_window", "#1"),)) in out  # h back to its default
    # a primitive without window parameters has no window move
    assert param_variants(Spec("trend", "window2"), "window") == []


def test_normalization_moves_toggle_preprocessing_only() -> None:
    s = Spec("arch_lm", "primary", (("diff", True),))
    out = param_variants(s, "normalization")
    assert out == [Spec("arch_lm", "primary", ())]  # diff=False is the default: dropped
    back = param_variants(Spec("arch_lm", "primary"), "normalization")
    assert back == [s]
    assert all("lags" not in dict(v.params) for v in out + back)


def test_primitive_moves_stay_in_the_family_and_the_feeding_mode() -> None:
    s = Spec("trend", "window2")
    out = primitive_variants(s)
    assert out[0] == s
    group = CATALOG["trend"].group
    assert {CATALOG[v.primitive].group for v in out} == {group}
    assert all(v.mode == "window2" for v in out)
    assert {v.primitive for v in out} <= {n for n, p in CATALOG.items() if p.group == group}


def test_spec_moves_refit_on_support_and_keep_the_contract() -> None:
    ex = list(_trend_examples())
    assert len(ex) >= 8
    t = _tool(Spec("trend", "window2"), "slope", _label_rule("slope"))
    g = genome_of(t, [], [])
    assert g is not None
    moves = list(spec_moves(g, "primitive", ex, SpecCache(), [0]))
    assert moves, "another output or primitive of the trend family reads these rows"
    cvs = [cv for _, _, cv in moves]
    assert cvs == sorted(cvs, reverse=True)
    for ng, what, _ in moves[:5]:
        d = genome_draft(t, ng)
        assert d.kind == t.kind and d.name == t.name and d.id == t.id
        assert d.contract.signature == t.contract.signature
        assert d.scope == t.scope
        assert ng.branches[0].spec.mode == "window2"
        assert d.guidance is not None and d.guidance.rule is not None
        assert d.guidance.rule.key == ng.branches[0].keys[0]  # refit on the new key
        assert d.contract.measurement != t.contract.measurement
        assert check_source(d.source).ok, what
    # support values decide: the best move reads the support rows at least as well as any
    best = moves[0][0].branches[0]
    fits = fit_on_support(best.spec, best.keys[0], "label", ex, SpecCache())
    assert fits and fits[0].cv == pytest.approx(moves[0][2])
    # refitting the rule on support rows changes the rule and nothing else
    refit = list(refit_moves(g, ex, SpecCache(), [0]))
    assert refit and refit[0][0].branches[0].spec == g.branches[0].spec
    assert refit[0][0].branches[0].rule != g.branches[0].rule


def test_scope_moves_stay_within_the_contract_scope() -> None:
    ex = list(_trend_examples())
    m = Matcher({"trending": 1.0, "upward": 0.5, "between": 0.25}, 0.4)
    scope = Scope(tasks=("synthetic/trend",), arity="single", options_kind="label", matcher=m)
    wider = scope_variants(scope, ex, wider=True)
    assert [s.matcher.threshold for s, _ in wider] == [0.2, 0.0]
    narrower = scope_variants(scope, ex, wider=False)
    for s, _ in [*wider, *narrower]:
        assert (s.tasks, s.arity, s.options_kind, s.anti_tasks) == (
            scope.tasks,
            scope.arity,
            scope.options_kind,
            scope.anti_tasks,
        )
        assert s.matcher.terms == m.terms
    assert all(s.matcher.threshold > m.threshold for s, _ in narrower)
    assert scope_variants(Scope(), ex, wider=True) == []


BATCH = BatchSpec.build("g1", ["h1", "h2", "h3", "h4"], ["p1", "p2"], lambda q: "train")


def _score(repairs=(), harms=(), facts=None) -> NodeScore:
    return NodeScore.from_outcome(BATCH, repairs=repairs, harms=harms, facts=facts)


def test_categories_count_rows_and_order_the_families() -> None:
    s = _score(["h1"], ["p2"], {"h1": "R", "h2": "O", "h3": "A", "h4": "K", "p2": "R"})
    assert categories(s, []) == {"H": 0, "A": 2, "I": 1, "B": 1, "out_of_contract": 0}
    order, lead = family_order(categories(s, []), [], harmful=False)
    assert lead == "A" and order[:2] == ["scope", "reading_rule"]
    # ties go H > A > I > B
    assert family_order({"H": 1, "A": 1, "I": 1, "B": 1}, [], harmful=False)[1] == "H"
    assert family_order({"H": 0, "A": 0, "I": 2, "B": 2}, [], harmful=False)[1] == "I"
    # B: the next live dimension; a harmful parent narrows the scope first
    b_order, _ = family_order({"B": 3}, [], harmful=False)
    assert b_order[:3] == ["window", "normalization", "primitive"]
    assert family_order({"B": 3}, [], harmful=True)[0][:2] == ["scope", "reading_rule"]


def test_a_kept_wrong_answer_is_i_only_when_the_evidence_reads_support_rows() -> None:
    s = _score([], [], {"h1": "K", "h2": "K", "h3": "O", "h4": "O"})
    assert categories(s, [], unreachable=["h3"]) == {
        "H": 0,
        "A": 1,
        "I": 2,
        "B": 0,
        "out_of_contract": 1,
    }
    wrong = categories(s, [], unreachable=["h3"], evidence_right=False)
    assert (wrong["I"], wrong["B"]) == (0, 2)
    suite = make_suite("tiny", seed=0)
    rows = [q for q in suite.train if q.task == "synthetic/window_compare"]
    ex = [Example(QuestionView.of(q, q.id), q.gold, None) for q in rows]
    cache = SpecCache()

    def branch(spec: Spec, key: str) -> Genome:
        return Genome((Branch((), (), (), spec, (key,), _label_rule(key)),), False, Scope())

    # regime persistence reads these rows at cv 0.67; a band power up to 0.5 Hz at cv 0
    assert evidence_right(branch(Spec("regime_switch"), "persistence"), ex, cache, [0])
    band = Spec("band_power", "primary", (("f_hi", 0.5),))
    assert not evidence_right(branch(band, "band_power"), ex, cache, [0])
    assert evidence_right(None, ex, cache, [0])


def test_exhausted_families_are_skipped_and_gains_reorder_them() -> None:
    record = [("measurement", 0), ("measurement", 0), ("window", 0), ("primitive", 2)]
    assert exhausted(record) == {"measurement"}
    order, _ = family_order({"B": 1}, record, harmful=False)
    assert "measurement" not in order
    assert order[0] == "primitive"  # its earlier change repaired rows without harm
    assert exhausted([("window", 1), ("window", -1)]) == {"window"}
    assert exhausted([("window", 1), ("window", 0)]) == set()


def test_row_facts_read_the_trace() -> None:
    tid = "r1.g1.c1.s1"
    scope = Scope(tasks=("synthetic/trend",))
    draft = replace(_tool(Spec("trend", "window2"), "slope", _label_rule("slope")), id=tid)
    draft = replace(draft, scope=scope)
    ex = list(_trend_examples())[:5]
    qs = [e.question for e in ex]

    def rec(q: QuestionView, step: StageStep | None) -> AnswerRecord:
        return AnswerRecord(q.id, q.fingerprint, q.task, 0, "", (step,) if step else (), 0, False)

    recs = {
        qs[0].id: rec(qs[0], None),
        qs[1].id: rec(
            qs[1], StageStep(1, (tid,), (ToolRun(tid, "abstain"),), "no_decision", "", 0, 0)
        ),
        qs[2].id: rec(qs[2], StageStep(1, (tid,), (ToolRun(tid, "error"),), "no_tool", "", 0, 0)),
        qs[3].id: rec(
            qs[3], StageStep(1, (tid,), (ToolRun(tid, "ok", {"slope": 1.0}),), "keep", "", 0, 0)
        ),
        qs[4].id: rec(
            qs[4],
            StageStep(
                1, (tid,), (ToolRun(tid, "ok", {"slope": 1.0}),), "replace", "", 0, 1, (tid,)
            ),
        ),
    }
    facts = row_facts(draft, qs, recs)
    assert [facts[q.id] for q in qs] == ["S", "A", "E", "K", "R"]
    other = replace(draft, scope=Scope(tasks=("synthetic/lag",)))
    assert row_facts(other, qs[:1], recs) == {qs[0].id: "O"}


def _composite() -> Genome:
    b1 = Branch(
        ("k1",), ("upward",), (), Spec("trend", "window2"), ("slope",), _label_rule("slope")
    )
    b2 = Branch(("k2",), (), ("upward",), Spec("acf", "primary"), ("acf1",), _label_rule("acf1"))
    return Genome((b1, b2), True, Scope(tasks=("synthetic/trend",)))


def test_a_composite_genome_blames_the_branch_that_fired_on_wrong_rows() -> None:
    g = _composite()
    s = _score(["h1"], ["p1"])
    outputs = {"h2": {"b2_acf1": 0.3}, "h3": {"b2_acf1": 0.1}, "h1": {"b1_slope": 1.0}}
    assert blame_order(g, s, outputs) == [1, 0]
    assert blame_order(g, s, {}) == [0, 1]
    # the tool's rule splits back into the branches' rules
    wide = rule_variant(g.rule, wider=True)
    assert wide != g.rule and with_rule(g, wide).rule == wide
    t = Tool(
        id="r1.g1.a1",
        kind="tool",
        name="kinds_2_g1",
        description="",
        source="def kinds_2_g1():\n    return None\n",
        scope=g.scope,
        contract=Contract(measurement=g.measurement, signature=("primary",), success_criterion=""),
        guidance=Guidance("", g.rule),
    )
    d = genome_draft(t, g)
    assert check_source(d.source).ok
    assert [k.require for k in d.scope.kinds] == [("upward",), ()]
    assert genome_of(d, [], list(g.branches)) == g


def test_revert_restores_the_field_that_lost_a_win() -> None:
    t = _tool(Spec("trend", "window2"), "slope", _label_rule("slope"))
    g0 = genome_of(t, [], [])
    assert g0 is not None
    g1 = replace(g0, branches=(replace(g0.branches[0], keys=("kendall_tau",)),))
    m = Matcher({"trending": 1.0}, 0.0)
    g2 = replace(g1, scope=replace(g1.scope, matcher=m))
    h = ScoreHistory.start(BATCH).extend("v0", _score(["h1", "h2"]))
    h = h.extend("s1", _score(["h2", "h3"]), ChangeEntry.make(1, "s1", "primitive", "x"))
    h = h.extend("s2", _score(["h2", "h3"]), ChangeEntry.make(2, "s2", "scope", "y"))
    assert h.lost_wins() == ("h1",)
    found = revert_genome(g2, h, {"v0": g0, "s1": g1, "s2": g2})
    assert found is not None
    ng, family, undone = found
    assert (family, undone) == ("primitive", "s1")
    assert ng.branches == g0.branches and ng.scope == g2.scope  # the later scope edit is kept
    # nothing lost: nothing to revert
    ok = ScoreHistory.start(BATCH).extend("v0", _score(["h1"]))
    assert revert_genome(g0, ok, {"v0": g0}) is None


def test_ledger_entries_carry_the_move_and_keep_old_bytes() -> None:
    plain = LedgerEntry("n:score", 1, "g1", "c", "n", "step", "", Spend(steps=1))
    assert "category" not in plain.to_dict() and "label" not in plain.to_dict()
    moved = replace(plain, category="B", label="builtin chain: window: h=8")
    d = moved.to_dict()
    assert (d["category"], d["label"]) == ("B", "builtin chain: window: h=8")
    assert LedgerEntry.from_dict(d) == moved
    assert LedgerEntry.from_dict(plain.to_dict()) == plain


class _NoIdea:
    def synthesize(self, *args: object) -> None:
        return None


def test_a_step_never_repeats_an_artifact_and_reaches_exhausted() -> None:
    """Design §8.11: seen artifacts are skipped (no rollout) and two changes without gain
    exhaust a family, so a chain that never gains ends with no move left."""
    ex = list(_trend_examples())
    m = Matcher({"series": 1.0, "between": 0.5}, 0.5)
    scope = Scope(tasks=("synthetic/trend",), arity="single", options_kind="label", matcher=m)
    t = _tool(Spec("trend", "window2"), "slope", _label_rule("slope"), scope)
    g = genome_of(t, [], [])
    assert g is not None
    score = _score([], [], {"h1": "K", "h2": "O", "h3": "K", "h4": "R"})
    par = Parent(t, score, g, {})
    inp = SimpleNamespace(
        examples=ex, tries=[], synthesizer=_NoIdea(), group=SimpleNamespace(cards=()), held_qs=[]
    )
    history = ScoreHistory.start(BATCH).extend(t.id, score)
    seen = {artifact_key(t)}
    record: list[tuple[str, int]] = []
    tried: list[str] = []
    for _ in range(40):
        move, lead, _cats, order = choose_move(par, Bar(), inp, tried, seen, history, record, {})
        if move is None:
            break
        assert artifact_key(move.draft) not in seen
        assert move.draft.kind == t.kind and move.draft.contract.signature == t.contract.signature
        assert move.axis in order and lead in ("A", "I", "B")
        seen.add(artifact_key(move.draft))
        record.append((move.axis, 0))
    else:
        raise AssertionError("the chain never ran out of moves")
    families = [f for f, _ in record]
    assert {"primitive", "scope", "reading_rule"} <= set(families)
    assert all(families.count(f) <= 2 for f in set(families))  # F after two changes
    # a seen artifact is never offered again: the first move, marked seen, is skipped
    first, *_ = choose_move(par, Bar(), inp, [], {artifact_key(t)}, history, [], {})
    assert first is not None
    again, *_ = choose_move(
        par, Bar(), inp, [], {artifact_key(t), artifact_key(first.draft)}, history, [], {}
    )
    assert again is not None and artifact_key(again.draft) != artifact_key(first.draft)
