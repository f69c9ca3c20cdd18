"""The concept lexicon: which words point at which catalog groups (short stems included), and a
benchmark's own additions (validated, recorded by the run)."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from tsevo.library.primitives import CATALOG
from tsevo.roles import RoleSet
from tsevo.roles.builtin.concepts import (
    CONCEPTS,
    catalog_groups,
    concept_stems,
    extend,
    groups_for,
    load_concepts,
)
from tsevo.roles.builtin.kindplan import KindPlanSettings


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("cycle", "cycl"),
        ("cycles", "cycl"),
        ("cyclic", "cycl"),
        ("cyclical", "cycl"),
        ("flipped", "flip"),
        ("flipping", "flip"),
        ("lagged", "lag"),
        ("lags", "lag"),
        ("drives", "driv"),
        ("driven", "driv"),
        ("cause", "caus"),
        ("causal", "caus"),
        ("causality", "caus"),
        ("waveform", "wave"),
        ("growth", "grow"),
        ("means", "mean"),
        ("walk", "walk"),
        ("flat", "flat"),
        ("stuck", "stuck"),
        ("tails", "tail"),
        ("jumps", "jump"),
        ("swings", "swing"),
        # stems of five letters or more: any word that starts with them
        ("stationarity", "stationar"),
        ("oscillations", "oscillat"),
        ("noisier", "noisi"),
        ("noisiest", "noisi"),
        ("abruptly", "abrupt"),
        ("extremes", "extreme"),
    ],
)
def test_an_inflected_word_hits_its_stem(word: str, stem: str) -> None:
    assert stem in CONCEPTS
    assert stem in concept_stems([word])
    assert set(CONCEPTS[stem]) <= groups_for([word])


@pytest.mark.parametrize(
    ("word", "stem"),
    [("large", "lag"), ("reduced", "red"), ("redo", "red"), ("meant", "mean"), ("leaf", "lead")],
)
def test_a_short_stem_is_not_found_inside_another_word(word: str, stem: str) -> None:
    assert stem not in concept_stems([word])


def test_words_outside_the_lexicon_point_nowhere() -> None:
    assert groups_for(["which", "of", "the", "two", "best", "describes"]) == frozenset()
    assert concept_stems([]) == frozenset()


def test_two_phrasings_of_a_cycle_question_share_a_stem() -> None:
    a = ["how", "many", "complete", "cycles", "does", "this", "series", "go", "through"]
    b = ["count", "the", "full", "periods", "of", "the", "cyclic", "pattern"]
    assert "cycl" in concept_stems(a) & concept_stems(b)


def test_a_stuck_or_flat_lined_sensor_points_at_the_flat_segment_measurements() -> None:
    for words in (["the", "sensor", "got", "stuck"], ["a", "flat", "lined", "segment"]):
        assert "anomaly" in groups_for(words)
    assert CATALOG["flat_segments"].group == "anomaly"
    # a flat trend ("rise, fall or stay flat") adds only that group to the trend words' search
    assert groups_for(["flat"]) == frozenset({"anomaly"})


# ---- a benchmark's own words: lexicon additions -------------------------------------------------


def test_extend_adds_replaces_and_mutes_stems_without_touching_the_shipped_lexicon():
    lex = extend({"wobbl": ["noise", "window"], "flat": [], "stuck": ["segments"]})
    assert groups_for(["wobbly"], lex) == {"noise", "window"}
    assert concept_stems(["wobbling"], lex) == {"wobbl"}
    assert groups_for(["flat"], lex) == frozenset() and concept_stems(["flat"], lex) == frozenset()
    assert groups_for(["stuck"], lex) == {"segments"}
    # the shipped lexicon is the default and is unchanged
    assert groups_for(["wobbly"]) == frozenset() and concept_stems(["flat"]) == {"flat"}
    assert CONCEPTS["stuck"] != ("segments",)
    # short stems keep the shipped matching: the word and its inflections, never inside another
    short = extend({"hum": ["spectral"]})
    assert concept_stems(["hums"], short) == {"hum"} and concept_stems(["human"], short) == set()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"Wob": ["noise"]}, "concept entry 'Wob': a stem is three or more lower-case letters"),
        ({"wo": ["noise"]}, "concept entry 'wo'"),
        ({"wobbl": ["nois"]}, "concept entry 'wobbl': unknown catalog group 'nois'"),
        ({"wobbl": "noise"}, "concept entry 'wobbl': expected a list of catalog groups"),
        ([("wobbl", ["noise"]), ("wobbl", ["window"])], "concept entry 'wobbl' is given twice"),
    ],
)
def test_a_bad_entry_is_named(extra, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        extend(extra)


def test_every_group_an_entry_may_name_is_a_catalog_group():
    assert catalog_groups() == {p.group for p in CATALOG.values()}
    assert set(extend({g[:3] + "zz": [g] for g in catalog_groups()})) >= set(CONCEPTS)


def test_load_concepts_reads_a_json_object_and_names_the_file_on_error(tmp_path):
    good = tmp_path / "concepts.json"
    good.write_text(json.dumps({"wobbl": ["noise"], "plateau": ["anomaly", "segments"]}))
    assert load_concepts(good) == (("plateau", ("anomaly", "segments")), ("wobbl", ("noise",)))
    for name, text, message in [
        ("list.json", "[1, 2]", "expected one JSON object"),
        ("broken.json", "{", "not JSON"),
        ("group.json", json.dumps({"wobbl": ["noise", "sesonal"]}), "unknown catalog group"),
    ]:
        p = tmp_path / name
        p.write_text(text)
        with pytest.raises(ValueError, match=re.escape(str(p))) as err:
            load_concepts(p)
        assert message in str(err.value)
    with pytest.raises(FileNotFoundError):
        load_concepts(tmp_path / "missing.json")


def test_kind_plan_settings_carry_the_additions_sorted_and_record_them():
    a = KindPlanSettings(concepts={"wobbl": ["noise"], "flat": []})
    b = KindPlanSettings(concepts=(("flat", ()), ("wobbl", ("noise",))))
    assert a == b and hash(a) == hash(b) and a.concepts == (("flat", ()), ("wobbl", ("noise",)))
    assert groups_for(["wobbly"], a.lexicon) == {"noise"}
    assert dataclasses.replace(a, bar=0.5).lexicon == a.lexicon
    assert a.recorded() == {"concepts": {"flat": [], "wobbl": ["noise"]}}
    assert KindPlanSettings().recorded() == {} and KindPlanSettings().lexicon is CONCEPTS
    with pytest.raises(ValueError, match="unknown catalog group"):
        KindPlanSettings(concepts={"wobbl": ["nois"]})


def test_a_role_set_records_the_planner_additions_and_nothing_by_default():
    assert RoleSet.builtin().recorded_settings() == {}
    rs = RoleSet.builtin(concepts={"wobbl": ["noise"]})
    assert rs.recorded_settings() == {"local_planner": {"concepts": {"wobbl": ["noise"]}}}
    assert rs.local_planner.kinds.bar == RoleSet.builtin().local_planner.kinds.bar
