"""The ties diagnostic's cross-kind tie-break (tests.bench.mixed_ties._shared_ties)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.bench.mixed_ties import _shared_ties
from tsevo.roles.builtin.measure import Spec


def _ties(*keys: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(spec=Spec("summary"), key=k) for k in keys]


def test_a_tie_shared_with_related_kinds_scores_their_share_and_chance_overlap_relates_nothing():
    common = [f"m{i}" for i in range(8)]  # two kinds about one property tie on the same eight
    tied = {
        "up_yn": (_ties(*common, "fluke_a"), 700),
        "direction": (_ties(*common, "fluke_b"), 700),
        "other": (_ties("m0", *(f"x{i}" for i in range(8))), 700),  # one measurement by chance
    }
    shared = _shared_ties(tied)
    assert shared["up_yn"] == [1.0] * 8 + [0.0]  # related to "direction" only
    assert shared["direction"] == [1.0] * 8 + [0.0]
    assert shared["other"] == [0.0] * 9  # an overlap of one in 700 relates no kind


def test_related_kinds_need_an_overlap_beyond_chance_in_the_catalog_ranked():
    keys = [f"m{i}" for i in range(8)]
    few = {"a": (_ties(*keys), 10), "b": (_ties(*keys), 10)}  # 8 of 10 ranked: chance
    assert _shared_ties(few) == {"a": [0.0] * 8, "b": [0.0] * 8}
