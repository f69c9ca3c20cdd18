"""Composite tools, the pieces below the planner: two-feature and per-branch reading rules, the
question-token facade tools dispatch on (with attack cases), and kinds recovered from wording."""

from __future__ import annotations

import numpy as np
import pytest

from tsevo.data import Question, QuestionView
from tsevo.library._scope import series_order
from tsevo.library.context import ToolInput
from tsevo.library.reading import apply_rule
from tsevo.library.sandbox import Sandbox
from tsevo.library.tool import ReadingRule, question_tokens
from tsevo.roles.builtin.kinds import KindIndex, induce_kinds, masked_tokens, option_shape

TREE = ReadingRule(
    "tree",
    tree=("lag1", 0.5, ("spec_slope", -1.0, "red", "white"), "red"),
    margin=0.01,
    confidence=0.8,
)
BRANCHES = ReadingRule(
    "branches",
    branches=(
        ReadingRule("label", key="b1_slope", bins=(0.0,), labels=("downward", "upward")),
        ReadingRule("nearest_number", key="b2_period", scale=2.0, offset=0.0, margin=0.05),
        TREE.__class__("tree", tree=("b3_lag1", 0.5, "white", "red")),
    ),
)


def test_tree_rule_reads_two_features_and_abstains_near_cuts():
    opts = ("White noise", "Red noise")
    assert apply_rule(TREE, {"lag1": 0.2, "spec_slope": -2.0}, opts).option == 1
    assert apply_rule(TREE, {"lag1": 0.2, "spec_slope": 0.0}, opts).option == 0
    assert apply_rule(TREE, {"lag1": 0.9}, opts).option == 1  # the high side is a leaf
    assert apply_rule(TREE, {"lag1": 0.505, "spec_slope": 0.0}, opts).option is None  # band
    assert apply_rule(TREE, {"lag1": 0.2}, opts).option is None  # second feature missing
    assert TREE.read_keys() == ("lag1", "spec_slope")
    assert ReadingRule.from_dict(TREE.to_dict()) == TREE


@pytest.mark.parametrize(
    "tree",
    [
        ("a", 0.0, ("b", 0.0, ("c", 0.0, "x", "y"), "z"), "w"),  # depth 3
        ("a", 0.0, ("b", 0.0, "x", "y"), ("c", 0.0, "x", "y")),  # three features
        ("a", 0.0, "x", ""),  # empty leaf
    ],
)
def test_tree_rule_limits_are_enforced(tree):
    with pytest.raises(ValueError):
        ReadingRule("tree", tree=tree)


def test_branch_rule_reads_the_branch_whose_outputs_are_present():
    up = apply_rule(BRANCHES, {"b1_slope": 0.4}, ("upward", "downward"))
    assert up.option == 0
    per = apply_rule(BRANCHES, {"b2_period": 6.1}, ("10", "12", "24"))
    assert per.option == 1
    assert apply_rule(BRANCHES, {"other": 1.0}, ("a", "b")).option is None
    # two branches fire (two kinds with the same words): the one whose labels the options name reads
    both = apply_rule(BRANCHES, {"b1_slope": 0.4, "b3_lag1": 0.9}, ("red", "white"))
    assert both.option == 0
    assert BRANCHES.applies({"b2_period": 1.0}, ()) and not BRANCHES.applies({}, ())
    d = BRANCHES.to_dict()
    assert ReadingRule.from_dict(d) == BRANCHES and len(d["branches"]) == 3
    assert "b1_slope" in BRANCHES.describe() and "b2_period" in BRANCHES.describe()
    with pytest.raises(ValueError):
        ReadingRule("branches", branches=(BRANCHES,))


def test_plain_rules_serialize_as_before():
    d = ReadingRule("label", key="x", bins=(1.0,), labels=("a", "b")).to_dict()
    assert "tree" not in d and "branches" not in d and "invert_words" not in d


DISPATCH = """def kinded():
    toks = ctx.question_tokens()
    out = {}
    if "anomaly" in toks and "where" in toks:
        out["b1_n"] = float(len(toks))
    if "trend" in toks and "upward" not in toks:
        out["b2_n"] = 1.0
    if not out:
        return None
    return out
"""


def _inp(text: str) -> ToolInput:
    return ToolInput("q", "fp-" + text, text, {"y": np.arange(16.0)}, ("y",))


@pytest.fixture(scope="module")
def sb():
    s = Sandbox()
    yield s
    s.close()


def test_tools_dispatch_on_question_tokens(sb):
    assert sb.check(DISPATCH).ok
    res = sb.run(
        DISPATCH,
        [_inp("Where is the anomaly in series 3?"), _inp("What trend?"), _inp("Nothing.")],
    )
    assert res[0].outputs == {"b1_n": 6.0}  # "where is the anomaly in series": numbers left out
    assert res[1].outputs == {"b2_n": 1.0}
    assert res[2].status == "abstain"


@pytest.mark.parametrize(
    "body",
    [
        "t = ctx.question_tokens()\n    t.add('x')\n    return {'a': 1.0}",  # immutable
        "t = ctx.question_tokens('x')\n    return {'a': 1.0}",  # takes no argument
    ],
)
def test_question_tokens_cannot_be_mutated(sb, body):
    r = sb.run(f"def probe():\n    {body}\n", [_inp("Is the value above x?")])[0]
    assert r.status == "error"


def test_question_tokens_are_plain_words_without_numbers(sb):
    src = (
        "def probe():\n"
        "    t = ctx.question_tokens()\n"
        "    nums = [w for w in ('3', '3rd', '4', '5', '4.5', '120', 't=120') if w in t]\n"
        "    return {'nums': float(len(nums)), 'n': float(len(t)), 'value': float('value' in t)}\n"
    )
    r = sb.run(src, [_inp("Is the 3rd value 4.5 above x_1 at t=120?")])[0]
    assert r.outputs == {"nums": 0.0, "n": 7.0, "value": 1.0}  # is the rd value above x_ at


def test_question_tokens_reach_nothing_behind_them(sb):
    rep = sb.check(
        "def probe():\n    return {'a': float(len(ctx.question_tokens().__class__.__name__))}\n"
    )
    assert not rep.ok and any("'_'" in r for r in rep.reasons)


def _view(
    qid: str, text: str, options: tuple[str, ...], names: tuple[str, ...] = ("X",)
) -> QuestionView:
    q = Question(
        id=qid,
        source="test",
        task="mixed",
        question=text,
        options=options,
        series={n: np.linspace(0, 1, 32) + i for i, n in enumerate(names)},
        primary=names,
    )
    return QuestionView.of(q, "v" + qid)


def test_kinds_recover_templates_from_wording():
    yn = ("Yes", "No")
    qs = [
        _view("1", "Is the trend of X upward over the last 128 steps?", yn),
        _view("2", "Is the trend of X upward over the last 200 steps?", yn),
        _view("3", "Is the trend of X downward over the last 96 steps?", yn),  # one slot differs
        _view("4", "Where does the anomaly occur in X?", ("Beginning", "Middle", "End")),
        _view("5", "Where does the anomaly occur in X?", ("Start", "Center", "Finish")),
        _view("6", "Does X Granger-cause Y?", yn, ("X", "Y")),
    ]
    assert masked_tokens(qs[0]) == masked_tokens(qs[1])
    assert "@" in masked_tokens(qs[5]) and "#" in masked_tokens(qs[0])
    assert option_shape(qs[3]) != option_shape(qs[4])
    kinds = induce_kinds(qs)
    sizes = sorted(len(k.members) for k in kinds)
    assert sizes == [
        1,
        1,
        1,
        3,
    ]  # trend template (slot: upward/downward), two anomaly kinds, causality
    trend = next(k for k in kinds if len(k.members) == 3)
    assert "*" in trend.template and {"trend", "last", "steps"} <= trend.anchor
    assert "upward" not in trend.anchor
    assert [k.id for k in induce_kinds(reversed(qs))] == [k.id for k in kinds]
    idx = KindIndex(qs)
    req, forb = idx.dispatch(idx.of["v4"])
    assert idx.matches(qs[3], req, forb) and not idx.matches(qs[0], req, forb)


def test_kinds_tell_which_way_a_question_about_two_named_series_asks():
    yn, names = ("Yes", "No"), ("ts1", "ts2")
    qs = [
        _view("1", "Does series 1 Granger-cause series 2?", yn, names),
        _view("2", "Does series 1 Granger-cause series 2 ?", yn, names),
        _view("3", "Does series 2 Granger-cause series 1?", yn, names),
        _view("4", "Is series 2 a time-shifted copy of series 1?", yn, names),
        _view("5", "Is series 2 a time-reversed copy of series 1?", yn, names),  # a slot
    ]
    assert series_order(qs[0].question) == "@12" and series_order(qs[2].question) == "@21"
    assert series_order("Is Series B a shifted copy of Series A?") == "@ba"
    assert series_order("Is this series a random walk?") == ""  # one series, no order
    assert "@21" in question_tokens(qs[2].question) and "@21" not in question_tokens(qs[0].question)
    # the same words in the same template: only the order sets the two Granger questions apart
    assert question_tokens(qs[0].question) - {"@12"} == question_tokens(qs[2].question) - {"@21"}
    idx = KindIndex(qs)
    assert sorted(len(k.members) for k in idx.kinds) == [1, 2, 2]
    req, forb = idx.dispatch(idx.of["v1"])
    assert idx.matches(qs[1], req, forb) and not idx.matches(qs[2], req, forb)
    req, forb = idx.dispatch(idx.of["v3"])
    assert idx.matches(qs[2], req, forb) and not idx.matches(qs[0], req, forb)


def test_composite_source_computes_what_the_planner_measured(sb):
    """Every branch's prefixed outputs in the sandbox equal the planner-side values, on every mode."""
    from tsevo.data.synthetic import make_suite
    from tsevo.library.primitives import CATALOG
    from tsevo.roles.builtin.composite import Branch, branch_rule, composite_source
    from tsevo.roles.builtin.measure import Spec, spec_values

    specs = [
        Spec("trend"),
        Spec("window_compare", "window4"),
        Spec("shape_distance", "cand"),
        Spec("xcorr", "pair"),
        Spec("forecast", "qnum", (("h", "#0"),)),
        Spec("trend", per=0),  # read per the question's first number
        Spec("xcorr", "pair", per=0),
        Spec("extremes", per=0, per_len=True),  # a location per the number and the length
        Spec("local_anomaly_profile", "resid"),  # where the second series departs from the first
    ]
    keys = {"resid": ("argmax_frac",)}  # a residual is read as a location only
    brs = [
        Branch(
            (f"k{i}",),
            (),
            (),
            sp,
            keys.get(sp.mode, CATALOG[sp.primitive].outputs[:2]),
            ReadingRule(
                "label",
                key=keys.get(sp.mode, CATALOG[sp.primitive].outputs)[0],
                bins=(0.0,),
                labels=("a", "b"),
            ),
        )
        for i, sp in enumerate(specs)
    ]
    src = composite_source(brs, "comp")
    assert sb.check(src).ok
    pairs = [q for q in make_suite("mixed", seed=3) if len(q.primary) == 2][:8]
    qs = list(make_suite("tiny", seed=3))[:40] + pairs
    runs = sb.run(src, [ToolInput.from_question(q) for q in qs])
    for q, r in zip(qs, runs, strict=True):
        want = {}
        for i, b in enumerate(brs, 1):
            for k, v in (spec_values(b.spec, QuestionView.of(q, "x")) or {}).items():
                base = k.rsplit("_", 1)[0] if b.spec.mode == "cand" else k
                if base in b.keys:
                    want[f"b{i}_{k}"] = v
        assert dict(r.outputs or {}) == pytest.approx(want)
    # the residual is measured exactly where two primary series of one length are
    resid = f"b{len(brs)}_argmax_frac"
    both = [len(q.primary) == 2 and len({len(q.series[s]) for s in q.primary}) == 1 for q in qs]
    assert [resid in (r.outputs or {}) for r in runs] == both and sum(both) >= 4
    rule = branch_rule(brs)
    assert [b.read_keys()[0] for b in rule.branches] == [
        f"b{i}_{b.keys[0]}" for i, b in enumerate(brs, 1)
    ]


def test_a_composite_card_becomes_a_dispatching_tool_with_kind_scopes(sb):
    from tsevo.library.tool import Contract, Scope
    from tsevo.roles.builtin.composite import Branch
    from tsevo.roles.builtin.measure import Spec
    from tsevo.roles.builtin.synthesizer import TemplateSynthesizer
    from tsevo.roles.protocols import ContractCard, WorkGroup

    up = Branch(
        ("k1",),
        ("trend",),
        ("noise",),
        Spec("trend"),
        ("slope",),
        ReadingRule("label", key="slope", bins=(0.0,), labels=("downward", "upward")),
        {"cv_acc": 0.9},
    )
    loc = Branch(
        ("k2",),
        ("anomaly", "where"),
        (),
        Spec("spikes"),
        ("max_index_frac",),
        ReadingRule("label", key="max_index_frac", bins=(0.5,), labels=("early", "late")),
        {"cv_acc": 0.7},
    )
    card = ContractCard(
        "b", "create", "tool", "", "missing_measurement", "", "", Contract("c"), Scope(),
        plan={"composite": True, "branches": [up.to_dict(), loc.to_dict()]},
    )  # fmt: skip
    group = WorkGroup("g1", (card,), card.contract, card.scope)
    syn = TemplateSynthesizer()
    t1 = syn.synthesize(group, 1, [], [])
    assert t1 is not None and t1.contract.measurement.startswith("composite(trend.slope; spikes.")
    assert len(t1.scope.kinds) == 2 and t1.guidance.rule is not None
    res = sb.run(
        t1.source,
        [
            _inp("Is the trend upward?"),
            _inp("Is the trend under the noise upward?"),
            _inp("Where is the anomaly?"),
        ],
    )
    assert set(res[0].outputs or {}) == {"b1_slope"}
    assert res[1].status == "abstain"  # the forbidden word keeps the branch from firing
    assert set(res[2].outputs or {}) == {"b2_max_index_frac"}
    # a second attempt keeps only the branches that cross-validated at least 0.8
    from tsevo.roles.protocols import AttemptFeedback

    t2 = syn.synthesize(
        group, 2, [AttemptFeedback(1, t1.id, t1.contract.measurement, "harmful")], []
    )
    assert t2 is not None and t2.contract.measurement == "composite(trend.slope)"


def test_a_residual_measures_where_two_series_of_one_length_differ(sb):
    """``resid``: a primitive on the second series minus the first, read as a location only."""
    from tsevo.library.primitives import CATALOG
    from tsevo.roles.builtin.measure import LOCATION_KEY, Spec, spec_values
    from tsevo.roles.builtin.specsource import spec_source

    rng = np.random.default_rng(0)
    n = 240
    a = np.sin(np.arange(n) / 6.0) * 3.0 + 0.1 * rng.standard_normal(n)
    b = a + 0.05 * rng.standard_normal(n)
    b[150:156] += 4.0  # an anomaly injected into a copy

    def ask(series: dict, primary: tuple) -> Question:
        return Question(
            id="r",
            source="t",
            task="mixed",
            question="Series 2 is a copy of series 1 with an injected anomaly. Where is it?",
            options=("Beginning", "Middle", "End"),
            series=series,
            primary=primary,
            gold=2,
        )

    spec = Spec("local_anomaly_profile", "resid")
    assert spec.describe("argmax_frac") == "local_anomaly_profile.argmax_frac[resid]"
    q = ask({"ts1": a, "ts2": b}, ("ts1", "ts2"))
    vals = spec_values(spec, QuestionView.of(q, "x"))
    assert vals and all(LOCATION_KEY.search(k) for k in vals)
    assert set(vals) < set(CATALOG["local_anomaly_profile"].outputs)  # magnitudes are left out
    assert vals["argmax_frac"] == pytest.approx(152 / (n - 1), abs=0.06)  # a window of 0.1 n
    # each series alone has no such location: the sine's own extremes are everywhere
    alone = spec_values(Spec("local_anomaly_profile"), QuestionView.of(q, "x"))
    assert alone["argmax_frac"] != pytest.approx(vals["argmax_frac"], abs=0.06)
    # two series of different lengths, or one series, have no residual
    short = ask({"ts1": a, "ts2": b[:200]}, ("ts1", "ts2"))
    assert spec_values(spec, QuestionView.of(short, "x")) is None
    assert spec_values(spec, QuestionView.of(ask({"ts1": a}, ("ts1",)), "x")) is None
    src = spec_source([(spec, ["argmax_frac"])])
    assert sb.check(src).ok
    got = sb.run(src, [ToolInput.from_question(x) for x in (q, short)])
    assert dict(got[0].outputs) == pytest.approx({"argmax_frac": vals["argmax_frac"]})
    assert not got[1].outputs
