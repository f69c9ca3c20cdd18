"""The concept lexicon: which words point at which catalog groups (short stems included)."""

from __future__ import annotations

import pytest

from tsevo.library.primitives import CATALOG
from tsevo.roles.builtin.concepts import CONCEPTS, concept_stems, groups_for


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
