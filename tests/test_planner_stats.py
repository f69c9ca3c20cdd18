"""The builtin planner's statistics: number binding, out-of-fold margins, separation tie-breaks.

Known-answer and behavioural tests for the pieces that decide which measurement a builtin tool
uses and how boldly it reads it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tsevo.data import Question
from tsevo.library.context import ToolInput
from tsevo.library.primitives import CATALOG, primitive
from tsevo.library.reading import apply_rule
from tsevo.library.sandbox import Sandbox, check_source
from tsevo.library.tool import ReadingRule
from tsevo.roles.builtin.measure import Spec, number_is_float, spec_values
from tsevo.roles.builtin.rules import (
    Row,
    _fit_alternating,
    cross_validate,
    fit_rule,
    net_gain,
    separation,
    train_accuracy,
    tune_margin,
)
from tsevo.roles.builtin.specs import _number_bindings, enumerate_specs
from tsevo.roles.builtin.specsource import spec_source

FS = 128.0


def _two_tones(a1: float, f1: float, a2: float, f2: float, n: int = 512) -> np.ndarray:
    t = np.arange(n) / FS
    return a1 * np.sin(2 * np.pi * f1 * t) + a2 * np.sin(2 * np.pi * f2 * t + 0.3)


def _band_question(y: np.ndarray, k: int = 3) -> Question:
    return Question(
        id="s",
        source="t",
        task="spectral",
        question=(
            f"The signal is sampled at {int(FS)} Hz. Is the power in the delta band (1 to 4 Hz) "
            f"more than {k} times the power in the theta band (4 to 8 Hz)?"
        ),
        options=("yes", "no"),
        series={"y": y},
        primary=("y",),
        gold=0,
    )


# ------------------------------------------------------------------ primitives with a sampling rate


def test_band_ratio_known_answer() -> None:
    # amplitude 2 at 2 Hz against amplitude 1 at 6 Hz: power ratio 4
    y = _two_tones(2.0, 2.0, 1.0, 6.0)
    r = CATALOG["band_ratio"].fn(y, fs=FS, lo1=1.0, hi1=4.0, k=3.0, lo2=4.0, hi2=8.0)
    assert r is not None
    assert r["log_ratio"] == pytest.approx(np.log(4.0), abs=0.05)
    assert r["log_excess"] == pytest.approx(np.log(4.0 / 3.0), abs=0.05)
    assert r["share_1"] + r["share_2"] == pytest.approx(1.0, abs=0.01)
    swapped = CATALOG["band_ratio"].fn(y, fs=FS, lo1=4.0, hi1=8.0, k=1.0, lo2=1.0, hi2=4.0)
    assert swapped is not None and swapped["log_ratio"] == pytest.approx(-r["log_ratio"])
    # bands above Nyquist, empty bands and a non-positive factor abstain
    assert CATALOG["band_ratio"].fn(y, fs=FS, lo1=70.0, hi1=80.0, lo2=1.0, hi2=4.0) is None
    assert CATALOG["band_ratio"].fn(y, fs=FS, lo1=4.0, hi1=4.0, lo2=1.0, hi2=4.0) is None
    assert CATALOG["band_ratio"].fn(y, fs=FS, lo1=1.0, hi1=4.0, k=0.0, lo2=4.0, hi2=8.0) is None


def test_spectrum_reports_frequencies_in_units_of_the_sampling_rate() -> None:
    y = _two_tones(1.0, 10.0, 0.1, 30.0)
    hz = CATALOG["spectrum"].fn(y, fs=FS)
    unit = CATALOG["spectrum"].fn(y)
    assert hz is not None and unit is not None
    assert hz["dominant_freq"] == pytest.approx(10.0, abs=0.2)
    assert hz["dominant_freq"] == pytest.approx(unit["dominant_freq"] * FS)
    assert hz["dominant_period"] == unit["dominant_period"]  # periods stay in samples
    assert CATALOG["spectrum"].fn(y, fs=0.0) is None


def test_registry_refuses_numbers_naming_unknown_parameters() -> None:
    with pytest.raises(ValueError, match="unknown parameters"):

        @primitive(group="test", outputs=("v",), numbers=("nope",))
        def _bad_numbers_primitive(y: np.ndarray, *, fs: float = 1.0) -> dict[str, float]:
            return {"v": 0.0}

    assert "_bad_numbers_primitive" not in CATALOG


# ------------------------------------------------------------------ binding question numbers


def test_declared_numbers_bind_in_order_and_as_floats() -> None:
    binds = _number_bindings(CATALOG["band_ratio"])
    in_order = tuple(sorted((n, f"#{i}") for i, n in enumerate(CATALOG["band_ratio"].numbers)))
    assert in_order in binds
    assert (("fs", "#0"),) in binds
    # count-like parameters keep their single and paired bindings
    fc = _number_bindings(CATALOG["forecast"])
    assert (("h", "#0"),) in fc and (("h", "#0"), ("level_window", "#1")) in fc
    assert number_is_float("band_ratio", "fs") and number_is_float("band_ratio", "k")
    assert not number_is_float("forecast", "h")
    assert not number_is_float("rolling_profile", "w")  # int | float windows bind as counts
    specs = {s.describe("log_excess") for s in enumerate_specs(["qnum"])}
    assert "band_ratio.log_excess[qnum; fs=#0,hi1=#2,hi2=#5,k=#3,lo1=#1,lo2=#4]" in specs


def test_bound_band_ratio_matches_the_primitive_inside_the_sandbox() -> None:
    y = _two_tones(2.0, 2.0, 1.0, 6.0)
    q = _band_question(y)
    params = tuple(sorted((n, f"#{i}") for i, n in enumerate(CATALOG["band_ratio"].numbers)))
    spec = Spec("band_ratio", "qnum", params)
    vals = spec_values(spec, q)
    direct = CATALOG["band_ratio"].fn(y, fs=FS, lo1=1.0, hi1=4.0, k=3.0, lo2=4.0, hi2=8.0)
    assert vals is not None and direct is not None
    assert vals["log_excess"] == pytest.approx(direct["log_excess"])
    src = spec_source([(spec, ["log_excess"])])
    assert "fs=float(nums[0])" in src and "k=float(nums[3])" in src
    assert check_source(src).ok
    with Sandbox() as sb:
        (res,) = sb.run(src, [ToolInput.from_question(q)])
    assert res.status == "ok" and res.outputs is not None
    assert res.outputs["log_excess"] == pytest.approx(direct["log_excess"])
    # a whole-number parameter refuses a fractional number; too few numbers abstain
    frac = Question(
        id="f",
        source="t",
        task="forecast",
        question="Over the next 2.5 steps, higher or lower than the last 6?",
        options=("higher", "lower"),
        series={"y": y},
        primary=("y",),
        gold=0,
    )
    assert spec_values(Spec("forecast", "qnum", (("h", "#0"),)), frac) is None
    short = Question(
        id="g",
        source="t",
        task="spectral",
        question="Sampled at 128 Hz: more delta than theta?",
        options=("yes", "no"),
        series={"y": y},
        primary=("y",),
        gold=0,
    )
    assert spec_values(spec, short) is None


# ------------------------------------------------------------------ out-of-fold margins


def _noisy_rows(seed: int, n: int = 120) -> list[Row]:
    """Values in [-1, 1]: 'up' above 0, but labels are coin flips within 0.2 of the cut, where the
    current library happens to be right; far from the cut the current library is wrong."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        x = float(rng.uniform(-1, 1))
        near = abs(x) < 0.2
        gold = int(rng.integers(2)) if near else int(x > 0)
        current = gold if near else 1 - gold
        rows.append(Row(f"r{seed}-{i}", {"v": x}, ("down", "up"), (), gold, current))
    return rows


def test_tuned_margin_abstains_near_the_cut_and_generalizes() -> None:
    # where the cut lands inside the coin-flip zone varies with the sample, so judge over samples
    fresh = _noisy_rows(99, 1000)
    diffs, margins = [], []
    for seed in range(8):
        train = _noisy_rows(seed)
        rule = fit_rule("label", train, "v")
        assert rule is not None
        tuned = tune_margin(rule, train)
        margins.append(tuned.margin)
        diffs.append(net_gain(tuned, fresh) - net_gain(rule, fresh))
    assert sum(m > 0 for m in margins) >= 6
    assert sum(diffs) > 0 and sum(d >= 0 for d in diffs) >= 6


def test_clean_rows_keep_a_zero_margin() -> None:
    rng = np.random.default_rng(3)
    rows = []
    for i in range(60):
        x = float(rng.uniform(-1, 1))
        gold = int(x > 0)
        rows.append(Row(f"c{i}", {"v": x}, ("down", "up"), (), gold, 1 - gold))
    rule = fit_rule("label", rows, "v")
    assert rule is not None and tune_margin(rule, rows).margin == 0.0


def _three_class_rows(values: list[float], golds: list[int]) -> list[Row]:
    opts = ("decreases", "stays about the same", "increases")
    return [
        Row(f"q{i}", {"v": v}, opts, (), g)
        for i, (v, g) in enumerate(zip(values, golds, strict=True))
    ]


def test_few_row_loo_scores_only_rows_whose_class_the_fit_could_know() -> None:
    # four rows of three classes: the lone "decreases" and "increases" rows cannot be named by a
    # fit on the other three, so plain leave-one-out caps every measurement at 2 / 4
    golds = [0, 1, 1, 2]
    clean = _three_class_rows([-2.0, 0.1, -0.1, 2.0], golds)
    assert cross_validate("label", clean, "v", few=True) == 1.0
    # the two scored rows decide: a measurement that mixes them up scores 0, not 0.5
    mixed = _three_class_rows([-2.0, 3.0, -3.0, 2.0], golds)
    assert cross_validate("label", mixed, "v", few=True) == 0.0
    # every class a singleton: nothing can be scored
    assert cross_validate("label", clean[:1] + clean[3:], "v", few=True) == 0.0
    # plain leave-one-out on the same rows would count the lone rows as misses: 2 of 4
    plain = 0
    for i, r in enumerate(clean):
        rule = fit_rule("label", clean[:i] + clean[i + 1 :], "v", few=True)
        plain += rule is not None and apply_rule(rule, r.values, r.options, (), "").option == r.gold
    assert plain == 2
    # numeric readings keep plain scoring over every row (a fit from one row names any number)
    nums = [Row(f"n{i}", {"v": float(i)}, ("1", "2", "3"), (), i - 1) for i in (1, 2, 3)]
    assert cross_validate("nearest_number", nums, "v", few=True) == 1.0


# ------------------------------------------------------------------ separation


def test_separation_prefers_the_wider_gap() -> None:
    def rows(gap: float) -> list[Row]:
        out = []
        for i in range(20):
            up = i % 2
            v = (1 + gap / 2 + i / 40) if up else -(1 + gap / 2 + i / 40)
            out.append(Row(f"s{i}", {"v": v}, ("down", "up"), (), up))
        return out

    rule = ReadingRule("label", "v", (0.0,), ("down", "up"))
    wide, narrow = separation(rule, rows(2.0)), separation(rule, rows(0.1))
    assert wide > narrow > 0
    overlap = [Row("o1", {"v": 1.5}, ("down", "up"), (), 0), *rows(0.1)]
    assert separation(rule, overlap) < 0
    assert separation(ReadingRule("extremum", prefix="d_", mode="min"), rows(1.0)) == 0.0


def test_number_separation_is_the_narrowest_rows_relative_margin() -> None:
    """A value read exactly scores 1; one halfway to a wrong option less; one nearer it below 0."""
    opts = ("10", "20", "40")
    rule = ReadingRule("nearest_number", "v", scale=2.0)
    exact = [Row(f"e{i}", {"v": 5.0 * 2**i}, opts, (), i) for i in range(3)]
    assert separation(rule, exact) == pytest.approx(1.0)
    loose = [*exact, Row("l", {"v": 6.0}, opts, (), 0)]  # 12: 2 from 10, 8 from 20
    assert separation(rule, loose) == pytest.approx((8 - 2) / (8 + 2))
    wrong = [*exact, Row("w", {"v": 8.0}, opts, (), 0)]  # 16 lies nearer 20 than 10
    assert separation(rule, wrong) < 0
    assert separation(rule, exact[:1]) == 0.0  # one row says nothing


# ------------------------------------------------------------------ alternating bands


def _brute_alternating(pts: list[tuple[float, str]], segs: int) -> int:
    srt = sorted(pts)
    vals = [p[0] for p in srt]
    n = len(srt)
    pos = [i for i in range(1, n) if vals[i - 1] < vals[i]]
    best = -1
    for cuts in itertools.combinations(pos, segs - 1):
        b = [0, *cuts, n]
        for start in (0, 1):
            hits = sum(
                sum(1 for p in srt[b[k] : b[k + 1]] if p[1] == ("a", "b")[(start + k) % 2])
                for k in range(segs)
            )
            best = max(best, hits)
    return best


def test_alternating_bands_are_the_exact_optimum() -> None:
    rng = np.random.default_rng(0)
    for _ in range(25):
        n = int(rng.integers(16, 28))
        vals = np.round(rng.normal(size=n), 1)  # ties on purpose: cuts only between distinct values
        pts = [
            (float(v), ("a", "b")[int(c)]) for v, c in zip(vals, rng.integers(0, 2, n), strict=True)
        ]
        rows = [
            Row(str(i), {"k": v}, ("a", "b"), (), 0 if lab == "a" else 1)
            for i, (v, lab) in enumerate(pts)
        ]
        for segs in (3, 4):
            got = _fit_alternating(pts, ("a", "b"), "k", segs)
            assert got is not None
            hits, rule = got
            assert hits == _brute_alternating(pts, segs)
            assert train_accuracy(rule, rows) * n == pytest.approx(hits)
            assert len(rule.bins) == segs - 1 and list(rule.bins) == sorted(rule.bins)


def test_label_rule_reads_a_non_monotone_relation_only_when_it_clearly_pays() -> None:
    # "lower" for moderate values, "higher" at both extremes
    xs = np.linspace(-3, 3, 60)
    rows = [
        Row(f"u{i}", {"v": float(x)}, ("higher", "lower"), (), 0 if abs(x) > 1.5 else 1)
        for i, x in enumerate(xs)
    ]
    rule = fit_rule("label", rows, "v")
    assert rule is not None and rule.labels == ("higher", "lower", "higher")
    assert train_accuracy(rule, rows) == 1.0
    assert cross_validate("label", rows, "v") > 0.9
    # a monotone relation with one stray row keeps its single cut
    mono = [
        Row(
            f"m{i}", {"v": float(x)}, ("higher", "lower"), (), int(x < 0) if i != 5 else int(x >= 0)
        )
        for i, x in enumerate(xs)
    ]
    r2 = fit_rule("label", mono, "v")
    assert r2 is not None and len(r2.bins) == 1


# ------------------------------------------------------------------ word-conditioned extremum


def _cand_rows(n: int = 40) -> list[Row]:
    """Candidate questions: the most correlated candidate is gold, unless the question says
    "mirrors" (then the least correlated one is)."""
    rng = np.random.default_rng(7)
    rows = []
    for i in range(n):
        scores = {c: float(rng.uniform(-1, 1)) for c in "ABC"}
        mirrored = i % 2 == 0
        pick = (min if mirrored else max)(scores, key=scores.__getitem__)
        text = (
            "Which candidate mirrors the reference?"
            if mirrored
            else "Which candidate copies the reference?"
        )
        opts = ("Series A", "Series B", "Series C")
        rows.append(
            Row(
                f"c{i}",
                {f"corr_{c}": v for c, v in scores.items()},
                opts,
                ("A", "B", "C"),
                "ABC".index(pick),
                question=text,
            )
        )
    return rows


def test_extremum_rule_learns_the_word_that_flips_it() -> None:
    rows = _cand_rows()
    rule = fit_rule("extremum", rows, "corr")
    assert rule is not None and rule.invert_words in (("mirrors",), ("copies",))
    assert train_accuracy(rule, rows) >= 0.95  # the 2% margin may abstain on a near tie
    assert cross_validate("extremum", rows, "corr") >= 0.9
    plain = ReadingRule("extremum", prefix="corr_", mode=rule.mode)
    assert train_accuracy(plain, rows) < 0.7
    # the rule round-trips, names its word for a reader, and only extremum rules may carry one
    assert ReadingRule.from_dict(rule.to_dict()) == rule
    assert "when the question says" in rule.describe()
    assert "invert_words" not in plain.to_dict()  # rules without words serialize as before
    with pytest.raises(ValueError):
        ReadingRule("label", "v", (0.0,), ("a", "b"), invert_words=("x",))
    with pytest.raises(ValueError):
        ReadingRule("extremum", prefix="d_", invert_words=("Mirrors",))


def test_apply_rule_inverts_only_when_the_question_names_the_word() -> None:
    from tsevo.library.reading import apply_rule

    rule = ReadingRule("extremum", prefix="c_", mode="max", invert_words=("mirrors",))
    outs = {"c_A": 0.9, "c_B": -0.8, "c_C": 0.1}
    opts = ("Series A", "Series B", "Series C")
    assert apply_rule(rule, outs, opts, ("A", "B", "C"), "Which one copies it?").option == 0
    assert apply_rule(rule, outs, opts, ("A", "B", "C"), "Which one MIRRORS it?").option == 1
    assert apply_rule(rule, outs, opts, ("A", "B", "C")).option == 0  # no text: no inversion


def test_the_label_fits_median_is_numpys() -> None:
    """Classes are ordered by a median taken without numpy: the same value, to the last bit."""
    from tsevo.roles.builtin.rules import _median

    g = np.random.default_rng(5)
    for n in range(1, 40):
        for _ in range(20):
            xs = list(g.normal(size=n) * 10.0 ** g.integers(-8, 9))
            if n > 3:
                xs[1] = xs[0]  # ties
            assert _median(xs) == float(np.median(xs))
    assert _median([1e308, 1e308]) == float(np.median([1e308, 1e308]))  # overflow: inf for both
    assert np.isnan(_median([1.0, float("nan"), 2.0]))


def test_top_screened_is_the_full_sort_cut_at_k(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner's screen computes separations only where the first k can come from: the same k."""
    from tsevo.roles.builtin import planner as planner_mod

    rng = np.random.default_rng(3)
    for trial in range(200):
        n, k = int(rng.integers(0, 40)), int(rng.integers(1, 12))
        seps = rng.choice([0.1, 0.5, 0.9, np.nan], size=n)  # nan: the separation raises
        screened = []
        for i in range(n):
            rule = ReadingRule("label", f"k{i}", (0.0,), ("a", "b"))
            acc = float(rng.choice([1.0, 0.75, 0.5, 0.25]))
            cover = float(rng.choice([1.0, 0.5]))
            screened.append((acc, cover, int(rng.integers(0, 2)), f"m{i % 7}", None, "k", rule, []))

        def sep(rule: ReadingRule, rows: object, seps: np.ndarray = seps) -> float:
            value = float(seps[int(rule.key[1:])])
            if np.isnan(value):
                raise ValueError("no separation")
            return value

        full = []
        for acc, cover, p, name, spec, key, rule, rows in screened:
            try:
                full.append((acc, sep(rule, rows), cover, p, name, spec, key, rule, rows))
            except ValueError:
                continue
        full.sort(key=lambda s: (-s[0], -s[1], -s[2], s[3], s[4]))
        monkeypatch.setattr(planner_mod, "separation", sep)
        assert planner_mod._top(screened, k) == full[:k], trial
