"""Calibration trees: fitting rules, the leak guard, compiled code ≡ sklearn, attaching to tools."""

from __future__ import annotations

import ast
import hashlib
import json
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsevo.library.calibration import (
    KIND,
    CalibrationError,
    CalibrationResult,
    LeakError,
    attach_tree,
    compile_tree,
    compile_tree_function,
    fit_calibration,
    split_guard_from_splits,
    tool_output_keys,
    tree_to_json,
)
from tsevo.library.calibration._fit import _float32_cut, _group_split

FEATURES = ("slope", "ratio", "flag", "noise")


def make_data(n: int = 240, seed: int = 0, noise_labels: bool = False) -> dict[str, Any]:
    """Three classes driven by two features; groups of 1-3 rows share a fingerprint."""
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.normal(size=n),
            rng.gamma(2.0, 1.0, size=n),
            rng.integers(0, 2, size=n).astype(float),
            rng.normal(size=n),
        ]
    )
    if noise_labels:
        y = list(rng.choice(["upward", "downward"], size=n))
    else:
        score = X[:, 0] + 0.2 * rng.normal(size=n)
        y = [
            "upward" if s > 0.4 else ("downward" if s < -0.4 else "flat")
            for s in score + 0.3 * (X[:, 1] > 3)
        ]
    groups: list[str] = []
    i = 0
    while len(groups) < n:
        groups += [f"fp{i:04d}"] * int(rng.integers(1, 4))
        i += 1
    groups = groups[:n]
    ids = [f"q{j:04d}" for j in range(n)]
    return {"X": X, "y": y, "groups": groups, "ids": ids}


def fit(data: dict[str, Any], **kw: Any) -> CalibrationResult:
    return fit_calibration(
        data["X"], data["y"], data["groups"], feature_names=FEATURES, ids=data["ids"], **kw
    )


@pytest.fixture(scope="module")
def fitted() -> tuple[dict[str, Any], CalibrationResult]:
    data = make_data()
    res = fit(data, split_guard=split_guard_from_splits(dict.fromkeys(data["ids"], "train")))
    assert res.accepted, res.reason
    return data, res


def probe_inputs(res: CalibrationResult, X: np.ndarray, seed: int = 1) -> np.ndarray:
    """Random rows, the training rows, and rows sitting on / next to every threshold."""
    rng = np.random.default_rng(seed)
    rows = [X, rng.normal(scale=3.0, size=(3000, X.shape[1])), X + 1e-7 * rng.normal(size=X.shape)]

    def nodes(n: dict[str, Any]) -> list[dict[str, Any]]:
        return [] if "class" in n else [n, *nodes(n["left"]), *nodes(n["right"])]

    assert res.tree is not None
    edge = []
    for node in nodes(dict(res.tree)):
        for v in (
            node["threshold"],
            node["cut"],
            np.nextafter(node["cut"], -np.inf),
            np.nextafter(node["cut"], np.inf),
            float(np.float32(node["threshold"])),
        ):
            r = X[rng.integers(0, X.shape[0], size=50)].copy()
            r[:, node["index"]] = v
            edge.append(r)
    return np.vstack(rows + edge)


# ------------------------------------------------------------------------------ compiled ≡ sklearn
def test_compiled_tree_matches_sklearn_predict(fitted: tuple[dict[str, Any], CalibrationResult]):
    data, res = fitted
    assert res.kind == KIND and res.estimator is not None
    assert set(res.classes) == {"upward", "downward", "flat"}
    src = compile_tree_function(res)
    ns: dict[str, Any] = {"__builtins__": {}}
    exec(compile(src, "<calib>", "exec"), ns)
    fn = ns["calibrated_class"]
    Z = probe_inputs(res, data["X"])
    expected = res.estimator.predict(Z)
    got = np.array([fn(*map(float, row)) for row in Z])
    assert got.shape == expected.shape
    assert np.array_equal(got, expected), int(np.sum(got != expected))
    # the JSON walk agrees too
    assert np.array_equal(res.predict_index(Z), expected)
    assert res.predict(Z[:5]) == [res.classes[i] for i in expected[:5]]


def test_compiled_fragment_has_no_calls_or_attributes(
    fitted: tuple[dict[str, Any], CalibrationResult],
):
    _, res = fitted
    tree = ast.parse(compile_tree(res))
    kinds = {type(n).__name__ for n in ast.walk(tree)}
    assert not kinds & {"Call", "Attribute", "Import", "ImportFrom", "Subscript"}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert all(not n.startswith("_") for n in names)


def test_float32_cut_is_exact():
    rng = np.random.default_rng(3)
    for _ in range(3000):
        a, b = np.sort(
            rng.normal(size=2).astype(np.float32) * np.float32(rng.choice([1e-4, 1, 1e6]))
        )
        thr = (float(a) + float(b)) / 2.0
        cut, strict = _float32_cut(thr)
        for x in (
            thr,
            cut,
            np.nextafter(cut, -np.inf),
            np.nextafter(cut, np.inf),
            float(a),
            float(b),
        ):
            assert (float(np.float32(x)) <= thr) == (x < cut if strict else x <= cut)


def test_refit_on_all_rows_matches_a_plain_sklearn_fit(
    fitted: tuple[dict[str, Any], CalibrationResult],
):
    from sklearn.tree import DecisionTreeClassifier

    data, res = fitted
    classes = sorted(set(data["y"]))
    yk = np.array([classes.index(v) for v in data["y"]])
    est = DecisionTreeClassifier(
        max_depth=3, min_samples_leaf=4, class_weight="balanced", random_state=0
    ).fit(data["X"], yk)
    assert tree_to_json(est, FEATURES) == res.tree
    assert res.n_rows == len(data["y"])
    assert res.class_counts == tuple(Counter(data["y"])[c] for c in res.classes)


def test_nan_feature_gives_minus_one(fitted: tuple[dict[str, Any], CalibrationResult]):
    _, res = fitted
    used = res.features_used
    assert used
    row = np.zeros((1, len(FEATURES)))
    row[0, FEATURES.index(used[0])] = np.nan
    assert res.predict_index(row)[0] == -1
    ns: dict[str, Any] = {"__builtins__": {}}
    exec(compile_tree_function(res), ns)
    assert ns["calibrated_class"](*row[0]) == -1


# ------------------------------------------------------------------------------ fit rules
def test_refused_below_min_per_class():
    data = make_data(n=120, seed=5)
    y = ["a"] * 105 + ["b"] * 15
    res = fit_calibration(data["X"], y, data["groups"], feature_names=FEATURES)
    assert not res.accepted and res.tree is None and res.balanced_accuracy is None
    assert res.reason.startswith("refused") and res.dropped_classes == ("b",)
    with pytest.raises(CalibrationError):
        compile_tree(res)
    # 16 per class is enough to fit (accepted or not, it is no longer refused)
    y16 = ["a"] * 104 + ["b"] * 16
    res16 = fit_calibration(data["X"], y16, data["groups"], feature_names=FEATURES)
    assert not res16.reason.startswith("refused") and res16.classes == ("a", "b")


def test_rare_class_dropped_others_kept():
    data = make_data(n=240, seed=0)
    y = list(data["y"])
    rare = [i for i, v in enumerate(y) if v == "flat"]
    for i in rare[10:]:
        y[i] = "upward"  # leave only 10 "flat"
    res = fit_calibration(data["X"], y, data["groups"], feature_names=FEATURES)
    assert res.dropped_classes == ("flat",)
    assert res.classes == ("downward", "upward")
    assert res.n_rows == 230


def test_rejected_on_noise_labels():
    data = make_data(n=600, seed=11, noise_labels=True)
    res = fit(data)
    assert res.balanced_accuracy is not None
    assert res.balanced_accuracy < 0.55
    assert not res.accepted and res.tree is None and res.reason.startswith("rejected")


def test_non_finite_rows_are_dropped():
    data = make_data(n=240, seed=0)
    X = data["X"].copy()
    X[:7, 1] = np.nan
    res = fit_calibration(X, data["y"], data["groups"], feature_names=FEATURES)
    assert res.n_rows == 233 and res.accepted


@given(
    sizes=st.lists(st.integers(1, 6), min_size=2, max_size=60),
    holdout=st.floats(0.05, 0.5),
    seed=st.integers(0, 1000),
)
def test_grouped_split_never_straddles(sizes: list[int], holdout: float, seed: int):
    groups = [f"g{i}" for i, s in enumerate(sizes) for _ in range(s)]
    hold = _group_split(groups, holdout, seed)
    sides: dict[str, set[bool]] = {}
    for g, h in zip(groups, hold, strict=True):
        sides.setdefault(g, set()).add(bool(h))
    assert all(len(s) == 1 for s in sides.values())
    assert 0 < hold.sum() < len(groups)  # both sides non-empty
    # holdout reaches its target with at most one extra group
    assert hold.sum() >= min(holdout * len(groups), len(groups) - max(sizes))
    assert hold.sum() < holdout * len(groups) + max(sizes) + 1e-9


# ------------------------------------------------------------------------------ leak guard
@pytest.mark.parametrize("bad_split", ["val", "test", "unknown"])
def test_leak_guard_raises_before_reading_labels(bad_split: str):
    data = make_data(n=60)
    splits = dict.fromkeys(data["ids"], "train")
    splits[data["ids"][17]] = bad_split
    if bad_split == "unknown":
        del splits[data["ids"][17]]
    y: list[Any] = [True] * 60  # unreadable labels: the guard must fire first
    with pytest.raises(LeakError, match=data["ids"][17]):
        fit_calibration(
            data["X"],
            y,
            data["groups"],
            feature_names=FEATURES,
            ids=data["ids"],
            split_guard=split_guard_from_splits(splits),
        )


def test_guard_applies_to_groups_without_ids():
    data = make_data(n=60)
    seen: list[str] = []

    def guard(rid: str) -> str:
        seen.append(rid)
        return "train"

    fit_calibration(data["X"], data["y"], data["groups"], feature_names=FEATURES, split_guard=guard)
    assert seen == data["groups"]


# ------------------------------------------------------------------------------ gold as hashes
def test_gold_stored_only_as_hashes(fitted: tuple[dict[str, Any], CalibrationResult]):
    data, res = fitted
    d = res.to_dict()
    text = json.dumps(d)
    # class names appear once each (the class list); no per-row answers anywhere
    for c in res.classes:
        assert text.count(json.dumps(c)) == 1
    assert len(d["gold_hashes"]) == res.n_rows
    # the hashes do encode (id, label): changing one gold label changes the digest
    y2 = list(data["y"])
    y2[0] = "flat" if y2[0] != "flat" else "upward"
    res2 = fit_calibration(data["X"], y2, data["groups"], feature_names=FEATURES, ids=data["ids"])
    assert res2.gold_digest != res.gold_digest
    assert res.gold_digest == hashlib.sha256("\n".join(res.gold_hashes).encode()).hexdigest()


def test_round_trip(fitted: tuple[dict[str, Any], CalibrationResult]):
    _, res = fitted
    d = json.loads(json.dumps(res.to_dict()))
    back = CalibrationResult.from_dict(d)
    assert back == res  # estimator excluded from equality
    assert back.estimator is None
    assert compile_tree(back) == compile_tree(res)
    assert back.to_dict() == res.to_dict()
    with pytest.raises(ValueError):
        CalibrationResult.from_dict({**d, "kind": "other"})


def test_integer_labels():
    data = make_data(n=240, seed=2)
    y = [{"upward": 0, "downward": 1, "flat": 2}[v] for v in data["y"]]
    res = fit_calibration(data["X"], y, data["groups"], feature_names=FEATURES)
    assert res.accepted and res.classes == (0, 1, 2)
    with pytest.raises(TypeError):
        fit_calibration(data["X"], [*y[:-1], "x"], data["groups"], feature_names=FEATURES)


# ------------------------------------------------------------------------------ attach_tree
TOOL = '''def tool():
    """Slope and spread of the primary series."""
    y = ctx.series(ctx.primary[0])
    if len(y) < 8:
        return None  # abstain
    tr = P.trend(y)
    s = P.summary(y)
    return {"slope": tr["slope"], "ratio": s["ratio"],
            "flag": tr["slope"] > 0,   # a boolean output
            "noise": s["noise"]}
'''


class FakeCtx:
    def __init__(self, y: np.ndarray):
        self.primary = ("x",)
        self._y = y

    def series(self, name: str) -> np.ndarray:
        return self._y


class FakeP:
    def __init__(self, feats: np.ndarray):
        self.f = feats

    def trend(self, y: np.ndarray) -> dict[str, float]:
        return {"slope": float(self.f[0])}

    def summary(self, y: np.ndarray) -> dict[str, float]:
        return {"ratio": float(self.f[1]), "noise": float(self.f[3])}


def run_tool(src: str, feats: np.ndarray, n: int = 20) -> Any:
    ns: dict[str, Any] = {"ctx": FakeCtx(np.zeros(n)), "P": FakeP(feats), "len": len}
    exec(compile(src, "<tool>", "exec"), ns)
    return ns["tool"]()


def test_attach_tree_parses_and_runs(fitted: tuple[dict[str, Any], CalibrationResult]):
    data, res = fitted
    assert tool_output_keys(TOOL) == FEATURES
    new = attach_tree(TOOL, res)
    ast.parse(new)
    assert "# abstain" in new and '"""Slope and spread' in new  # the rest of the text is kept
    rng = np.random.default_rng(7)
    for row in data["X"][rng.integers(0, len(data["X"]), size=60)]:
        feats = row.copy()
        feats[2] = float(feats[0] > 0)  # what the tool computes for "flag"
        out = run_tool(new, feats)
        base = run_tool(TOOL, feats)
        assert set(out) == {*FEATURES, "class_id"}
        assert {k: out[k] for k in FEATURES} == base
        expect = res.predict_index(np.array([[float(out[k]) for k in FEATURES]]))[0]
        assert out["class_id"] == expect
        assert isinstance(out["class_id"], int)
    assert run_tool(new, data["X"][0], n=3) is None  # abstention path untouched


def test_attach_tree_same_line_return_and_name_clash(
    fitted: tuple[dict[str, Any], CalibrationResult],
):
    _, res = fitted
    src = (
        "def tool():\n"
        "    calib_v0 = 1.0\n"
        '    a = P.trend(ctx.series("x")); return {"slope": a["slope"], "ratio": 2.0, '
        '"flag": False, "noise": calib_v0}\n'
    )
    new = attach_tree(src, res, output_key="cls")
    out = run_tool(new, np.array([0.5, 2.0, 0.0, 1.0]))
    assert out["noise"] == 1.0 and out["cls"] in range(len(res.classes))
    assert "calib1_class" in new


def test_attach_tree_refuses_forecaster(fitted: tuple[dict[str, Any], CalibrationResult]):
    _, res = fitted
    bad = TOOL.replace("tr = P.trend(y)", "fc = P.forecast(y, h=16)\n    tr = P.trend(y)")
    with pytest.raises(CalibrationError, match="forecaster"):
        attach_tree(bad, res)
    alias = TOOL.replace("tr = P.trend(y)", "f = P.forecast\n    tr = P.trend(y)")
    with pytest.raises(CalibrationError, match="forecaster"):
        attach_tree(alias, res)


@pytest.mark.parametrize(
    ("src", "match"),
    [
        (TOOL.replace('"noise": s["noise"]', '"other": s["noise"]'), "not returned"),
        (TOOL.replace("return None  # abstain", 'return {"slope": 0.0}'), "abstain"),
        (TOOL + "\n\ndef helper():\n    return 1\n", "exactly one function"),
        (TOOL.replace("def tool():", "def tool(y):"), "no arguments"),
        (
            TOOL.replace('    return {"slope"', '    out = {"slope"').replace(
                '"noise": s["noise"]}', '"noise": s["noise"]}\n    return out'
            ),
            "dict literal",
        ),
        (TOOL.replace('"noise": s["noise"]}', '"noise": s["noise"], "class_id": 1.0}'), "already"),
    ],
)
def test_attach_tree_rejects_bad_shapes(
    fitted: tuple[dict[str, Any], CalibrationResult], src: str, match: str
):
    _, res = fitted
    ast.parse(src)
    with pytest.raises(CalibrationError, match=match):
        attach_tree(src, res)


def test_attach_tree_needs_an_accepted_fit():
    data = make_data(n=600, seed=11, noise_labels=True)
    res = fit(data)
    with pytest.raises(CalibrationError, match="not accepted"):
        attach_tree(TOOL, res)
