import json
from dataclasses import replace

import numpy as np
import pytest

from tsevo.data import Question
from tsevo.library.library import Library, Stage, library_from_tools, scope_matches
from tsevo.library.reading import apply_rule, match_label
from tsevo.library.tool import (
    Contract,
    Guidance,
    Matcher,
    Provenance,
    ReadingRule,
    Scope,
    Tool,
    options_kind,
    question_tokens,
)

SRC = 'def tool():\n    y = ctx.primary()\n    return {"m": float(np.mean(y))}\n'


def _q(text="Is the trend upward or downward?", options=("upward", "downward", "flat"), **kw):
    series = kw.pop("series", {"y": np.linspace(0, 1, 32)})
    primary = kw.pop("primary", ("y",))
    return Question(
        id=kw.pop("id", "q1"),
        source="t",
        task=kw.pop("task", "trend"),
        question=text,
        options=options,
        series=series,
        primary=primary,
        gold=0,
        **kw,
    )


def _tool(tid="t1", **kw):
    base = dict(
        id=tid,
        name="tool",
        description="mean level",
        source=SRC,
        round=1,
        scope=Scope(tasks=("trend",), arity="single", matcher=Matcher({"trend": 1.0}, 0.5)),
        contract=Contract("summary.mean", ("primary",), "fixes level questions", params={"w": 3}),
        guidance=Guidance(
            "higher mean means upward", ReadingRule("label", "m", (0.5,), ("downward", "upward"))
        ),
        outputs=("m",),
        provenance=Provenance(bucket="b1", attempt=2),
    )
    base.update(kw)
    return Tool(**base)


def test_tool_roundtrip_and_hash_detects_tampering():
    t = _tool()
    t2 = Tool.from_dict(json.loads(json.dumps(t.to_dict())))
    assert t2 == t and t2.hash == t.hash
    d = t.to_dict()
    d["source"] = d["source"].replace("mean", "median")
    with pytest.raises(ValueError, match="hash"):
        Tool.from_dict(d)


def test_tool_validation():
    with pytest.raises(ValueError):
        Tool(id="bad id!", source=SRC)
    with pytest.raises(ValueError, match="no source"):
        Tool(id="x", kind="tool", source="")
    with pytest.raises(ValueError, match="target"):
        Tool(id="g", kind="usage_guidance")
    with pytest.raises(ValueError):
        ReadingRule("label", "k", (0.0, 1.0), ("a", "b"))  # needs 3 labels


def test_library_save_load_byte_identical(tmp_path):
    lib = library_from_tools("expert", [_tool("a"), _tool("b", source=SRC.replace("mean", "std"))])
    lib = lib.append_stage(Stage(1, (_tool("r1.c"),), "round 1", "strict"))
    p1 = lib.save(tmp_path / "lib1")
    lib2 = Library.load(p1)
    assert lib2 == lib
    p2 = lib2.save(tmp_path / "lib2")
    files1 = sorted(f.relative_to(p1) for f in p1.rglob("*") if f.is_file())
    files2 = sorted(f.relative_to(p2) for f in p2.rglob("*") if f.is_file())
    assert files1 == files2
    for f in files1:
        assert (p1 / f).read_bytes() == (p2 / f).read_bytes()
    assert (p1 / "stage_0" / "a.py").read_text() == SRC
    # overwrite in place keeps a valid library
    lib.save(p1)
    assert Library.load(p1) == lib


def test_library_rejects_reused_ids_and_bad_order():
    with pytest.raises(ValueError, match="twice"):
        library_from_tools("x", [_tool("a")]).append_stage(Stage(1, (_tool("a"),)))
    lib = library_from_tools("x", [_tool("a")]).append_stage(Stage(2, (_tool("b"),)))
    with pytest.raises(ValueError):
        lib.append_stage(Stage(1, (_tool("c"),)))


def test_scope_matching_and_anti_scope():
    q = _q()
    assert scope_matches(_tool().scope, q)
    assert not scope_matches(Scope(tasks=("other",)), q)
    assert not scope_matches(Scope(anti_tasks=("trend",)), q)
    assert not scope_matches(Scope(arity="dual"), q)
    assert not scope_matches(Scope(options_kind="numeric"), q)
    assert scope_matches(Scope(options_kind="label"), q)
    assert not scope_matches(Scope(anti_matcher=Matcher(require=("upward",))), q)
    assert not scope_matches(Scope(matcher=Matcher(forbid=("trend",))), q)
    # numbers are masked out of matcher tokens
    assert "120" not in question_tokens("compare t=120 with t=180")


def test_options_that_share_a_number_are_labels_not_numbers() -> None:
    assert options_kind(("12 hours", "24 hours", "7.5 hours"), ()) == "numeric"
    assert options_kind(("Series 1", "Series 2"), ()) == "numeric"
    assert options_kind(("an AR(1) process", "an MA(1) process"), ()) == "label"
    assert options_kind(("AR(2)", "AR(1)"), ()) == "numeric"
    assert options_kind(("upward", "downward"), ()) == "label"
    assert options_kind(("1.5 m", "1.50 m", "3 m"), ()) == "label"  # one value written twice


def test_shortlist_caps_three_tools_over_chain():
    tools = [_tool(f"t{i}") for i in range(3)]
    lib = library_from_tools("x", tools).append_stage(Stage(1, (_tool("r1"), _tool("r2"))))
    sl = lib.shortlist(_q(), max_tools=3)
    assert [len(r) for r in sl] == [3, 0]
    assert sum(len(r) for r in lib.shortlist(_q(), max_tools=4)) == 4


def test_effective_applies_refine_rescope_retire():
    t = _tool("a", round=0)
    lib = library_from_tools("x", [t, _tool("b", round=0)])
    new_rule = Guidance("flipped", ReadingRule("label", "m", (0.5,), ("upward", "downward")))
    st = Stage(
        1,
        (
            Tool(
                id="g1",
                kind="usage_guidance",
                guidance=new_rule,
                provenance=Provenance(action="refine", target="a"),
            ),
            Tool(
                id="s1",
                kind="scope_override",
                scope=Scope(tasks=("nothing",)),
                provenance=Provenance(action="rescope", target="b"),
            ),
        ),
    )
    lib = lib.append_stage(st)
    eff = lib.effective()
    a = next(x for x in eff[0] if x.tool.id == "a")
    assert a.tool.guidance == new_rule and a.amended_by == ("g1",)
    assert lib.shortlist(_q())[0] == [a]  # b rescoped away
    lib = lib.append_stage(
        Stage(
            2,
            (Tool(id="x1", kind="tombstone", provenance=Provenance(action="retire", target="a")),),
        )
    )
    assert [x.tool.id for x in lib.effective()[0]] == ["b"]


def test_scope_catalog_text():
    lib = library_from_tools("expert", [_tool("a")])
    text = lib.scope_catalog()
    assert "a [tool] mean level" in text and "tasks: trend" in text and "reading rule" in text


def test_reading_rules():
    opts = ("The trend is upward", "The trend is downward", "flat")
    label = ReadingRule(
        "label", "v", (-1.0, 1.0), ("downward", "flat", "upward"), margin=0.1, confidence=0.8
    )
    assert apply_rule(label, {"v": 2.0}, opts).option == 0
    assert apply_rule(label, {"v": 0.0}, opts).option == 2
    assert apply_rule(label, {"v": 1.05}, opts).option is None  # inside the abstain band
    assert apply_rule(label, {"w": 1.0}, opts).option is None
    assert apply_rule(label, None, opts).option is None
    near = ReadingRule("nearest_number", "p", scale=2.0, offset=1.0, margin=0.05)
    assert apply_rule(near, {"p": 5.9}, ("period 7", "period 13", "period 24")).option == 1
    assert apply_rule(near, {"p": 4.5}, ("7", "13")).option is None  # 10 is equidistant
    ext = ReadingRule("extremum", prefix="d_", mode="min", margin=0.05)
    out = {"d_A": 3.0, "d_B": 0.5, "d_C": 2.0}
    assert apply_rule(ext, out, ("Series A", "Series B", "Series C"), ("A", "B", "C")).option == 1
    assert (
        apply_rule(
            ext, {"d_A": 1.0, "d_B": 1.01, "d_C": 5.0}, ("A", "B", "C"), ("A", "B", "C")
        ).option
        is None
    )
    assert match_label("up", ("upward", "down")) is None
    assert match_label("Upward", ("upward", "downward")) == 0


def test_extract_numbers_reads_common_notation():
    from tsevo.library.context import extract_numbers, mentions

    assert extract_numbers("t=40..80") == (40.0, 80.0)
    assert extract_numbers("8-13 Hz") == (8.0, 13.0)
    assert extract_numbers("lag of -4 steps, ratio 0.25") == (-4.0, 0.25)
    assert extract_numbers("series A1 and B2") == ()
    assert mentions("Does ad_spend lead sales?", "ad_spend")
    assert not mentions("Does ad_spending lead sales?", "ad_spend")


def test_save_killed_between_renames_is_recovered(tmp_path):
    lib = library_from_tools("x", [_tool("a")])
    dest = lib.save(tmp_path / "lib")
    dest.rename(tmp_path / "lib.old")  # what a kill between the two renames leaves
    assert Library.load(tmp_path / "lib") == lib
    assert not (tmp_path / "lib.old").exists()
    lib2 = lib.append_stage(Stage(1, (_tool("b"),)))
    (tmp_path / "lib").rename(tmp_path / "lib.old")
    lib2.save(tmp_path / "lib")
    assert Library.load(tmp_path / "lib") == lib2 and not (tmp_path / "lib.old").exists()


def test_question_numbers_bind_to_primitive_parameters():
    from tsevo.library.sandbox import check_source
    from tsevo.roles.builtin.measure import Spec, spec_values
    from tsevo.roles.builtin.specsource import spec_source

    y = np.concatenate([np.zeros(60), np.linspace(0, 5, 40)])
    q = Question(
        id="f",
        source="t",
        task="forecast",
        question="Forecast the next 12 steps. Compared with the mean of the last 6 values, higher or lower?",
        options=("higher", "lower"),
        series={"y": y},
        primary=("y",),
        gold=0,
    )
    spec = Spec("forecast", "qnum", (("h", "#0"), ("level_window", "#1")))
    vals = spec_values(spec, q)
    assert vals is not None and vals["h"] == 12
    src = spec_source([(spec, ["delta_sigma"])])
    assert "h=int(nums[0])" in src and "level_window=int(nums[1])" in src
    assert check_source(src).ok
    q0 = Question(
        id="g",
        source="t",
        task="forecast",
        question="Will it go up?",
        options=("higher", "lower"),
        series={"y": y},
        primary=("y",),
        gold=0,
    )
    assert spec_values(spec, q0) is None  # no numbers to bind: the measurement abstains


def test_reading_without_reasons_reads_the_same():
    """``explain=False`` (the fitting loops' fast path) names the same option at the same confidence."""
    rng = np.random.default_rng(7)
    opts = ("The trend is upward", "The trend is downward", "flat")
    label = ReadingRule(
        "label", "v", (-1.0, 1.0), ("downward", "flat", "upward"), margin=0.1, confidence=0.8
    )
    near = ReadingRule("nearest_number", "v", scale=10.0, offset=5.0, margin=0.05)
    ext = ReadingRule("extremum", prefix="d_", mode="min", margin=0.05, invert_words=("mirrors",))
    tree = ReadingRule(
        "tree", tree=("v", 0.0, "flat", ("w", 0.5, "downward", "upward")), margin=0.05
    )
    rules = [
        label,
        near,
        ext,
        tree,
        ReadingRule("consensus", branches=(label, tree), quorum=1.0),
        ReadingRule(
            "consensus", branches=(label, tree, replace(label, bins=(-0.5, 0.5))), quorum=0.6
        ),
        ReadingRule(
            "consensus",
            branches=(label, tree, replace(label, bins=(-0.5, 0.5))),
            quorum=0.7,
            weights=(1.0, 0.25, 0.5),
        ),
        ReadingRule("branches", branches=(ext, label)),
    ]
    seen: set[object] = set()
    for _ in range(400):
        out = {
            k: float(rng.normal()) for k in ("v", "w", "d_A", "d_B", "d_C") if rng.random() < 0.85
        }
        question = "Which series mirrors A?" if rng.random() < 0.5 else "Which is closest?"
        for rule, options, cands in [
            *((r, opts, ()) for r in rules if r.kind != "extremum"),
            (near, ("5", "15", "-5 units"), ()),
            (ext, ("Series A", "Series B", "Series C"), ("A", "B", "C")),
            (rules[-1], ("Series A", "B", "upward"), ("A", "B", "C")),
        ]:
            full = apply_rule(rule, out, options, cands, question)
            fast = apply_rule(rule, out, options, cands, question, explain=False)
            assert (fast.option, fast.confidence) == (full.option, full.confidence), (rule, out)
            assert full.reason and fast.reason in ("", full.reason)
            seen.add((rule.kind, full.option is None))
    # every rule kind was seen both answering and abstaining
    assert {k for k, _ in seen} == {
        "label",
        "nearest_number",
        "extremum",
        "tree",
        "consensus",
        "branches",
    }
    assert {(k, True) for k in ("label", "nearest_number", "extremum", "tree")} <= seen
    assert {(k, False) for k in ("label", "nearest_number", "extremum", "tree")} <= seen


def test_a_measurement_read_per_the_questions_number_is_in_its_units():
    """ "Sampled every N minutes ... in hours?": a period in samples times N, the same in the tool."""
    from tsevo.library.sandbox import check_source
    from tsevo.roles.builtin.measure import Spec, SpecCache, spec_values
    from tsevo.roles.builtin.specsource import spec_source

    y = np.sin(2 * np.pi * np.arange(240) / 24.0)
    text = "The series is sampled every 15 minutes. What is the period of its cycle, in hours?"
    q = Question(
        id="p",
        source="t",
        task="mixed",
        question=text,
        options=("6 hours", "3 hours", "12 hours"),
        series={"y": y},
        primary=("y",),
        gold=0,
    )
    plain, per = Spec("trend"), Spec("trend", per=0)
    assert per.describe("slope") == "trend.slope[per #0]"
    assert Spec.from_dict(per.to_dict()) == per and "per" not in plain.to_dict()
    want = {k: v * 15.0 for k, v in spec_values(plain, q).items()}
    assert spec_values(per, q) == pytest.approx(want)
    assert SpecCache().get(per, q) == pytest.approx(want)  # from the cached plain values
    src = spec_source([(per, ["slope"])])
    assert "nums[0]" in src and check_source(src).ok
    q0 = replace(q, id="p0", question="What is the period of its cycle, in hours?")
    assert spec_values(per, q0) is None  # no number stated: the measurement abstains
    with pytest.raises(ValueError, match="per"):
        Spec("xcorr", "dual_diff", per=0)
    # a location fraction read per the number and the series' length: a sample index in its units
    at = Spec("extremes", per=0, per_len=True)
    assert at.describe("argmax_frac") == "extremes.argmax_frac[per #0 x length]"
    assert Spec.from_dict(at.to_dict()) == at and "per_len" not in per.to_dict()
    frac = spec_values(Spec("extremes"), q)["argmax_frac"]
    assert spec_values(at, q)["argmax_frac"] == pytest.approx(frac * 15.0 * 240)
    assert SpecCache().get(at, q) == pytest.approx(spec_values(at, q))
    src = spec_source([(at, ["argmax_frac"])])
    assert "len(y)" in src and check_source(src).ok
    with pytest.raises(ValueError, match="per_len"):
        Spec("extremes", per_len=True)
