"""The question data model: validation (many kinds of malformed records), lenient loading,
immutability and the content fingerprint."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsevo.data import LoadReport, Question, RecordError, Suite, load_suite


def base() -> dict[str, Any]:
    """A valid record using every role (primary, covariate, two candidates)."""
    return {
        "id": "q1",
        "source": "synthetic",
        "task": "trend direction",
        "subtask": "linear",
        "question": "Is the series y rising or falling, given x?",
        "context": "Daily sales.",
        "options": ["rising", "falling", "flat"],
        "gold": 0,
        "group": "g1",
        "series": {
            "y": [1.0, 2.0, 3.5, 4.0],
            "x": [0.5, 0.25, 0.125, 0.0],
            "A": [1.0, 2.0, 3.0],
            "B": [3.0, 2.0, 1.0],
        },
        "primary": ["y"],
        "covariates": ["x"],
        "candidates": ["A", "B"],
        "metadata": {"template": "t1", "difficulty": 0.3},
    }


def test_base_record_is_valid() -> None:
    q = Question.from_dict(base())
    assert q.id == "q1" and q.gold == 0 and q.gold_option == "rising"
    assert list(q.series) == ["y", "x", "A", "B"]
    assert q.role_of("x") == "covariate" and q.role_of("A") == "candidate"


# Each case: (kind, mutate(record) -> record, expected record_id, expected field, reason fragment).
Mutator = Callable[[dict[str, Any]], Any]


def _set(path: str, value: Any) -> Mutator:
    def f(d: dict[str, Any]) -> dict[str, Any]:
        *head, last = path.split(".")
        tgt = d
        for k in head:
            tgt = tgt[k]
        tgt[last] = value
        return d

    return f


def _drop(key: str) -> Mutator:
    def f(d: dict[str, Any]) -> dict[str, Any]:
        del d[key]
        return d

    return f


def _add_series(name: str, role: str | None, value: Any = (1.0, 2.0)) -> Mutator:
    def f(d: dict[str, Any]) -> dict[str, Any]:
        d["series"][name] = list(value)
        if role:
            d[role] = [*d[role], name]
        return d

    return f


def _compose(*fs: Mutator) -> Mutator:
    def f(d: dict[str, Any]) -> Any:
        for g in fs:
            d = g(d)
        return d

    return f


NAN, INF = float("nan"), float("inf")

CASES: list[tuple[str, Mutator, str, str, str]] = [
    # series values
    ("nan", _set("series.y", [1.0, NAN, 2.0]), "q1", "series.y", "NaN at index 1"),
    ("pos_inf", _set("series.y", [1.0, 2.0, INF]), "q1", "series.y", "+inf at index 2"),
    ("neg_inf", _set("series.x", [-INF, 1.0]), "q1", "series.x", "-inf at index 0"),
    ("nan_in_ndarray", _set("series.y", np.array([0.0, np.nan])), "q1", "series.y", "NaN"),
    ("empty_series", _set("series.y", []), "q1", "series.y", "empty"),
    ("ragged_nested", _set("series.y", [1.0, [2.0, 3.0], 4.0]), "q1", "series.y", "nested"),
    ("two_d_array", _set("series.y", np.ones((2, 3))), "q1", "series.y", "one-dimensional"),
    ("string_values", _set("series.y", ["1.0", "2.0"]), "q1", "series.y", "not a number"),
    ("bool_values", _set("series.y", [True, False, True]), "q1", "series.y", "not a number"),
    ("bool_ndarray", _set("series.y", np.array([True, False])), "q1", "series.y", "dtype bool"),
    ("complex_ndarray", _set("series.y", np.array([1 + 2j])), "q1", "series.y", "complex"),
    ("none_series", _set("series.y", None), "q1", "series.y", "NoneType"),
    ("series_value_is_str", _set("series.y", "1,2,3"), "q1", "series.y", "str"),
    ("series_value_is_mapping", _set("series.y", {"a": 1.0}), "q1", "series.y", "dict"),
    ("series_value_is_set", _set("series.y", {1.0, 2.0}), "q1", "series.y", "set"),
    ("int_too_large", _set("series.y", [1, 10**400]), "q1", "series.y", "too large"),
    # the series mapping and roles
    ("series_not_mapping", _set("series", [[1.0, 2.0]]), "q1", "series", "mapping"),
    ("no_series", _set("series", {}), "q1", "series", "no series"),
    ("series_name_empty", _add_series("", None), "q1", "series", "non-empty"),
    ("series_name_not_str", _add_series(3, None), "q1", "series", "non-empty"),  # type: ignore[arg-type]
    ("primary_not_in_series", _set("primary", ["z"]), "q1", "primary", "'z'"),
    ("candidate_not_in_series", _set("candidates", ["A", "C"]), "q1", "candidates", "'C'"),
    ("orphan_series", _add_series("w", None), "q1", "series", "no role"),
    ("same_series_two_roles", _set("covariates", ["x", "y"]), "q1", "covariates", "already"),
    ("zero_primaries", _set("primary", []), "q1", "primary", "0 primary"),
    (
        "three_primaries",
        _compose(_add_series("p2", "primary"), _add_series("p3", "primary")),
        "q1",
        "primary",
        "3 primary",
    ),
    ("primary_as_string", _set("primary", "y"), "q1", "primary", "list of series names"),
    ("primary_duplicate_names", _set("primary", ["y", "y"]), "q1", "primary", "duplicate"),
    ("covariates_as_string", _set("covariates", "x"), "q1", "covariates", "list"),
    # options
    ("one_option", _compose(_set("options", ["rising"])), "q1", "options", "at least 2"),
    ("no_options", _compose(_set("options", []), _set("gold", None)), "q1", "options", "0 option"),
    ("eleven_options", _set("options", [f"o{i}" for i in range(11)]), "q1", "options", "at most"),
    ("duplicate_options_case", _set("options", ["Rising", "rising"]), "q1", "options", "duplicate"),
    (
        "duplicate_options_space",
        _set("options", ["goes  up", " Goes up ", "down"]),
        "q1",
        "options",
        "[0]",
    ),
    ("empty_option", _set("options", ["rising", "   "]), "q1", "options[1]", "empty"),
    ("non_string_option", _set("options", ["rising", 3]), "q1", "options[1]", "int"),
    ("options_as_string", _set("options", "rising,falling"), "q1", "options", "str"),
    # gold
    ("gold_too_high", _set("gold", 3), "q1", "gold", "out of range"),
    ("gold_negative", _set("gold", -1), "q1", "gold", "out of range"),
    ("gold_bool", _set("gold", True), "q1", "gold", "bool"),
    ("gold_float", _set("gold", 1.0), "q1", "gold", "float"),
    ("gold_str", _set("gold", "1"), "q1", "gold", "str"),
    # required fields, ids, types
    ("missing_id", _drop("id"), "<record>", "id", "missing"),
    ("missing_source", _drop("source"), "q1", "source", "missing"),
    ("missing_task", _drop("task"), "q1", "task", "missing"),
    ("missing_question", _drop("question"), "q1", "question", "missing"),
    ("missing_options", _drop("options"), "q1", "options", "missing"),
    ("missing_series", _drop("series"), "q1", "series", "missing"),
    ("missing_primary", _drop("primary"), "q1", "primary", "missing"),
    ("null_task", _set("task", None), "q1", "task", "missing"),
    ("empty_id", _set("id", ""), "<record>", "id", "empty"),
    ("blank_id", _set("id", "  "), "<record>", "id", "empty"),
    ("int_id", _set("id", 7), "7", "id", "int"),
    ("list_id", _set("id", ["q1"]), "<record>", "id", "list"),
    ("empty_source", _set("source", " "), "q1", "source", "empty"),
    ("question_not_str", _set("question", 42), "q1", "question", "int"),
    ("empty_question", _set("question", ""), "q1", "question", "empty"),
    ("task_not_str", _set("task", ["trend"]), "q1", "task", "list"),
    ("context_not_str", _set("context", 3.5), "q1", "context", "float"),
    ("subtask_not_str", _set("subtask", 0), "q1", "subtask", "int"),
    ("group_not_str", _set("group", 12), "q1", "group", "int"),
    ("unknown_field", _set("answer", "rising"), "q1", "answer", "unknown"),
    # metadata and fingerprint
    ("metadata_not_serializable", _set("metadata", {"f": object()}), "q1", "metadata", "JSON"),
    ("metadata_nan", _set("metadata", {"score": NAN}), "q1", "metadata", "JSON"),
    ("metadata_tuple_key", _set("metadata", {(1, 2): "x"}), "q1", "metadata", "JSON"),
    ("metadata_list", _set("metadata", []), "q1", "metadata", "mapping"),
    ("metadata_str", _set("metadata", "template=t1"), "q1", "metadata", "mapping"),
    (
        "fingerprint_mismatch",
        _set("fingerprint", "0123456789abcdef"),
        "q1",
        "fingerprint",
        "edited",
    ),
]


def test_at_least_thirty_distinct_kinds() -> None:
    kinds = [c[0] for c in CASES]
    assert len(set(kinds)) == len(kinds) >= 30


@pytest.mark.parametrize(
    ("kind", "mutate", "rid", "fld", "fragment"), CASES, ids=[c[0] for c in CASES]
)
def test_malformed_record_raises_one_clear_error(
    kind: str, mutate: Mutator, rid: str, fld: str, fragment: str
) -> None:
    rec = mutate(base())
    with pytest.raises(RecordError) as ei:
        Question.from_dict(rec)
    err = ei.value
    assert (err.record_id, err.field) == (rid, fld), str(err)
    assert fragment in err.reason, err.reason
    msg = str(err)
    assert repr(rid) in msg and repr(fld) in msg
    assert err.to_dict() == {"record_id": rid, "field": fld, "reason": err.reason}
    # The same record inside a batch: strict loading stops on it, lenient loading reports it.
    with pytest.raises(RecordError) as ei2:
        Suite.from_records([base() | {"id": "ok"}, rec])
    assert ei2.value.field == fld
    suite, report = Suite.from_records([base() | {"id": "ok"}, rec], lenient=True)
    assert suite.ids == ["ok"] and [e.field for e in report.errors] == [fld]


def test_missing_id_is_named_by_position() -> None:
    rec = base()
    del rec["id"]
    with pytest.raises(RecordError) as ei:
        Question.from_dict(rec, index=4)
    assert ei.value.record_id == "<record 4>"
    _, report = Suite.from_records([base(), rec], lenient=True)
    assert report.errors[0].record_id == "<record 1>"


def test_record_not_a_mapping() -> None:
    with pytest.raises(RecordError) as ei:
        Question.from_dict(["q1"], index=0)  # type: ignore[arg-type]
    assert (ei.value.record_id, ei.value.field) == ("<record 0>", "<record>")


def test_unequal_candidate_lengths_only_when_required() -> None:
    rec = base()  # candidates A and B have equal length; make them unequal
    rec["series"]["B"] = [3.0, 2.0]
    Question.from_dict(rec)  # allowed by default
    with pytest.raises(RecordError) as ei:
        Question.from_dict(rec, strict_candidate_lengths=True)
    assert (ei.value.record_id, ei.value.field) == ("q1", "candidates")
    assert "unequal" in ei.value.reason
    with pytest.raises(RecordError):
        Suite.from_records([rec], strict_candidate_lengths=True)


def test_direct_construction_validates_too() -> None:
    with pytest.raises(RecordError) as ei:
        Question(
            id="d1",
            source="s",
            task="t",
            question="q?",
            options=("a", "b"),
            series={"y": [1.0, math.inf]},
            primary=("y",),
        )
    assert (ei.value.record_id, ei.value.field) == ("d1", "series.y")
    with pytest.raises(RecordError) as ei:
        Question(
            id=5,
            source="s",
            task="t",
            question="q?",
            options=("a", "b"),
            series={"y": [1.0]},
            primary=("y",),
        )  # type: ignore[arg-type]
    assert ei.value.field == "id"


def test_numpy_inputs_are_normalized() -> None:
    rec = base()
    rec["series"] = {
        "y": np.arange(4, dtype=np.int64),
        "x": np.array([0.5, 0.25], dtype=np.float32),
        "A": np.array([1.0, 2.0], dtype=object),
        "B": (3, 2.5),
    }
    rec["options"] = np.array(["rising", "falling", "flat"])
    rec["gold"] = np.int64(2)
    q = Question.from_dict(rec)
    assert all(v.dtype == np.float64 for v in q.series.values())
    assert q.gold == 2 and type(q.gold) is int
    assert all(type(o) is str for o in q.options)
    json.dumps(q.to_dict())  # plain JSON types only


# --------------------------------------------------------------------------- suite-level errors


def _jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_duplicate_ids_in_a_suite(tmp_path: Path) -> None:
    a, b = base(), base() | {"question": "Is y falling?"}
    with pytest.raises(RecordError) as ei:
        Suite.from_records([a, b])
    assert (ei.value.record_id, ei.value.field) == ("q1", "id")
    assert "duplicate id" in ei.value.reason
    with pytest.raises(RecordError):
        Suite("s", [Question.from_dict(a), Question.from_dict(b)])


def test_unknown_split_label() -> None:
    with pytest.raises(RecordError) as ei:
        Suite.from_records([base() | {"split": "holdout"}])
    assert (ei.value.record_id, ei.value.field) == ("q1", "split")
    q = Question.from_dict(base())
    with pytest.raises(RecordError) as ei:
        Suite("s", [q], {"q1": "dev"})
    assert ei.value.field == "split"


def test_invalid_json_line(tmp_path: Path) -> None:
    good = json.dumps(base())
    f = _jsonl(tmp_path / "s.jsonl", [good, '{"id": "q2", "source": ', "[1, 2]"])
    with pytest.raises(RecordError) as ei:
        load_suite(f)
    assert (ei.value.record_id, ei.value.field) == ("<line 2>", "<json>")
    suite, report = load_suite(f, lenient=True)
    assert suite.ids == ["q1"]
    assert [(e.record_id, e.field) for e in report.errors] == [
        ("<line 2>", "<json>"),
        ("<line 3>", "<record>"),
    ]


# --------------------------------------------------------------------------- lenient loading


def test_lenient_load_keeps_good_records_in_order_and_reports_every_bad_one(tmp_path: Path) -> None:
    goods = [base() | {"id": f"g{i}", "question": f"Question number {i}?"} for i in range(5)]
    dup_content = goods[1] | {"id": "dup-of-g1"}  # same visible content as g1
    bads = {
        "b-nan": (_set("series.y", [1.0, NAN]), "series.y"),
        "b-opts": (_set("options", ["x"]), "options"),
        "b-gold": (_set("gold", 9), "gold"),
        "b-field": (_set("extra", 1), "extra"),
        "b-role": (_set("primary", ["nope"]), "primary"),
    }
    lines = [json.dumps({"__suite__": "mixed", "schema_version": 1})]
    expected_errors = []
    order = [goods[0], "bad:b-nan", goods[1], "bad:b-opts", "json", goods[2], dup_content]
    order += ["bad:b-gold", goods[3], "bad:b-field", "bad:b-role", goods[4], "dupid"]
    for lineno, item in enumerate(order, start=2):
        if item == "json":
            lines.append("{not json")
            expected_errors.append((f"<line {lineno}>", "<json>"))
        elif item == "dupid":
            lines.append(json.dumps(goods[0] | {"question": "different text"}))
            expected_errors.append(("g0", "id"))
        elif isinstance(item, str):
            bid = item.split(":")[1]
            mutate, fld = bads[bid]
            lines.append(json.dumps(mutate(base() | {"id": bid}), allow_nan=True))
            expected_errors.append((bid, fld))
        else:
            lines.append(json.dumps(item))
    f = _jsonl(tmp_path / "mixed.jsonl", lines)

    suite, report = load_suite(f, lenient=True)
    assert isinstance(report, LoadReport) and not report.ok
    assert suite.name == "mixed"
    assert suite.ids == [g["id"] for g in goods]
    assert [(e.record_id, e.field) for e in report.errors] == expected_errors
    assert report.duplicates == ["dup-of-g1"]
    assert report.n_read == len(order)
    assert report.n_read == report.n_kept + len(report.errors) + len(report.duplicates)
    # Nothing corrupted: kept questions equal the ones built from the good records alone.
    for g in goods:
        assert suite[g["id"]] == Question.from_dict(g)
    frame = report.to_frame()
    assert list(frame.columns) == ["record_id", "field", "reason"] and len(frame) == 7
    text = str(report)
    assert "kept 5" in text and "rejected 7" in text and "duplicates dropped 1" in text

    with pytest.raises(RecordError) as ei:
        load_suite(f)  # strict: the first bad record stops the load
    assert ei.value.record_id == "b-nan"


def test_lenient_from_records_with_non_mapping_and_unexpected_values() -> None:
    recs: list[Any] = [base(), 42, base() | {"id": "q2", "series": {"y": [object()]}}]
    suite, report = Suite.from_records(recs, lenient=True)
    assert suite.ids == ["q1"]
    assert [(e.record_id, e.field) for e in report.errors] == [
        ("<record 1>", "<record>"),
        ("q2", "series.y"),
    ]
    assert report.n_read == 3 and report.n_kept == 1


# --------------------------------------------------------------------------- immutability


def test_question_is_immutable() -> None:
    q = Question.from_dict(base())
    with pytest.raises(ValueError):
        q.series["y"][0] = 99.0
    with pytest.raises(TypeError):
        q.series["z"] = np.zeros(3)  # type: ignore[index]
    with pytest.raises(TypeError):
        del q.series["y"]  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        q.metadata["template"] = "other"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.id = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.gold = 1  # type: ignore[misc]
    assert isinstance(q.options, tuple) and isinstance(q.primary, tuple)
    assert all(not v.flags.writeable for v in q.series.values())


def test_caller_mutating_inputs_does_not_change_the_question() -> None:
    rec = base()
    arr = np.array([1.0, 2.0, 3.0])
    rec["series"]["y"] = arr
    q = Question.from_dict(rec)
    fp = q.fingerprint
    arr[0] = -5.0
    rec["series"]["x"].append(7.0)
    rec["options"].append("oscillating")
    rec["options"][0] = "changed"
    rec["candidates"].append("C")
    rec["metadata"]["template"] = "t2"
    rec["series"]["new"] = [1.0]
    assert q.series["y"][0] == 1.0 and q.series["x"].size == 4
    assert q.options == ("rising", "falling", "flat")
    assert q.candidates == ("A", "B") and "new" not in q.series
    assert q.metadata["template"] == "t1"
    assert (
        q.fingerprint
        == fp
        == Question.from_dict(base() | {"series": q.to_dict()["series"]}).fingerprint
    )


def test_pickle_and_copy_round_trip() -> None:
    q = Question.from_dict(base())
    q2 = pickle.loads(pickle.dumps(q))
    assert q2 == q and q2.fingerprint == q.fingerprint and q2 is not q
    assert not q2.series["y"].flags.writeable
    assert copy.deepcopy(q) == q and copy.copy(q) is q
    r = dataclasses.replace(q, id="q9")
    assert r.id == "q9" and r.fingerprint == q.fingerprint


# --------------------------------------------------------------------------- fingerprint

FIXED = {
    "id": "fixed-1",
    "source": "synthetic",
    "task": "trend direction",
    "question": "Which way does y move?",
    "context": "",
    "options": ["up", "down"],
    "series": {"y": [0.0, 0.5, 1.25, -0.0, 3e-5]},
    "primary": ["y"],
    "gold": 0,
}
# Changing how fingerprints are computed invalidates every stored suite and cache: do it on purpose.
FIXED_FINGERPRINT = "7897397187b8c3f2"


def test_fingerprint_is_pinned() -> None:
    assert Question.from_dict(FIXED).fingerprint == FIXED_FINGERPRINT


def test_fingerprint_is_stable_across_processes() -> None:
    code = (
        "import json, sys; from tsevo.data import Question; "
        "print(Question.from_dict(json.loads(sys.argv[1])).fingerprint)"
    )
    env = dict(os.environ, PYTHONHASHSEED="random")
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(FIXED)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert out.stdout.strip() == FIXED_FINGERPRINT


def _two_primary() -> dict[str, Any]:
    d = base()
    d["series"]["z"] = [9.0, 8.0]
    d["primary"] = ["y", "z"]
    return d


VISIBLE_CHANGES: list[tuple[str, Mutator]] = [
    ("question", _set("question", "Is the series y rising or falling?")),
    ("context", _set("context", "Weekly sales.")),
    ("task", _set("task", "trend shape")),
    ("source", _set("source", "timeseriesexam")),
    ("option_text", _set("options", ["rising", "falling", "constant"])),
    ("option_order", _set("options", ["falling", "rising", "flat"])),
    ("series_value_one_ulp", _set("series.y", [1.0, 2.0, 3.5, float(np.nextafter(4.0, 5.0))])),
    ("series_negative_zero", _set("series.x", [0.5, 0.25, 0.125, -0.0])),
    ("series_length", _set("series.y", [1.0, 2.0, 3.5])),
    ("added_covariate", _add_series("w", "covariates")),
    (
        "covariate_to_candidate",
        _compose(_set("covariates", []), _set("candidates", ["A", "B", "x"])),
    ),
    ("candidate_order", _set("candidates", ["B", "A"])),
]


@pytest.mark.parametrize(("what", "mutate"), VISIBLE_CHANGES, ids=[c[0] for c in VISIBLE_CHANGES])
def test_fingerprint_changes_with_visible_content(what: str, mutate: Mutator) -> None:
    assert Question.from_dict(mutate(base())).fingerprint != Question.from_dict(base()).fingerprint


def test_fingerprint_changes_with_primary_order() -> None:
    d = _two_primary()
    swapped = _two_primary() | {"primary": ["z", "y"]}
    assert Question.from_dict(d).fingerprint != Question.from_dict(swapped).fingerprint


@pytest.mark.parametrize(
    "change",
    [
        {"id": "other"},
        {"gold": 2},
        {"gold": None},
        {"group": "g-other"},
        {"metadata": {"template": "t9", "extra": [1, 2]}},
        {"subtask": "quadratic"},
    ],
    ids=["id", "gold", "unlabeled", "group", "metadata", "subtask"],
)
def test_fingerprint_ignores_non_visible_fields(change: dict[str, Any]) -> None:
    q0, q1 = Question.from_dict(base()), Question.from_dict(base() | change)
    assert q1.fingerprint == q0.fingerprint
    assert q1 != q0  # ... but the questions are not equal


def test_fingerprint_ignores_series_dict_order_and_numeric_type() -> None:
    d = base()
    d["series"] = dict(reversed(list(d["series"].items())))
    d["series"]["B"] = [3, 2, 1]
    assert Question.from_dict(d).fingerprint == Question.from_dict(base()).fingerprint


_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12
).filter(str.strip)
_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(
    question=_text,
    options=st.lists(
        _text, min_size=2, max_size=10, unique_by=lambda s: " ".join(s.split()).casefold()
    ),
    ys=st.lists(_floats, min_size=1, max_size=30),
    gold=st.integers(min_value=0, max_value=9) | st.none(),
    meta=st.dictionaries(_text, st.integers() | _text | st.booleans(), max_size=3),
)
def test_to_dict_from_dict_round_trip(
    question: str, options: list[str], ys: list[float], gold: int | None, meta: dict[str, Any]
) -> None:
    g = None if gold is None else gold % len(options)
    q = Question(
        id="h1",
        source="hyp",
        task="t",
        question=question,
        options=tuple(options),
        series={"y": ys},
        primary=("y",),
        gold=g,
        metadata=meta,
    )
    d = json.loads(json.dumps(q.to_dict()))
    q2 = Question.from_dict(d)  # stored fingerprint must match the rebuilt content
    assert q2 == q and q2.fingerprint == q.fingerprint
    assert np.array_equal(
        q2.series["y"].view(np.int64), np.asarray(ys, dtype=np.float64).view(np.int64)
    )
