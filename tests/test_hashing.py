"""The one canonical JSON and the one series hash produce the bytes they produced before they merged.

The digests below were computed with the two former implementations (``library/tool.py`` and
``roles/llm/cache.py`` for JSON; ``library/forecasting.py`` and ``data/sources/_common.py`` for
series): tool hashes, library files, LLM cache keys, forecast cache keys and split groups depend on
them, so they are pinned.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsevo.hashing import canonical_json, series_hash

OBJ = {"b": [1, 2.5, "é"], "a": {"z": None, "y": True}}


def test_canonical_json_readable_form_is_pinned():
    assert canonical_json(OBJ) == (
        '{\n  "a": {\n    "y": true,\n    "z": null\n  },\n  "b": [\n    1,\n    2.5,\n    "é"\n  ]\n}\n'
    )


def test_canonical_json_compact_form_is_pinned():
    assert canonical_json(OBJ, compact=True) == '{"a":{"y":true,"z":null},"b":[1,2.5,"é"]}'


@pytest.mark.parametrize("compact", [False, True])
def test_canonical_json_refuses_nan(compact):
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan}, compact=compact)


def test_series_hash_length_framing_is_pinned():
    assert series_hash([1.0, 2.5, -3.0]) == (
        "37b35aa34d5e6bad9ba14ada86e3527fcb71d8bcdd3f785d12db0588f2918c36"
    )
    assert series_hash([0.0]) != series_hash([0.0, 0.0])


def test_series_hash_separator_framing_is_pinned():
    assert series_hash([1.0, 2.0], [3.0], framing="separator", n=12) == "ec04c860a8cf"


def test_series_hash_dtype_independent():
    assert series_hash([1, 2, 3]) == series_hash(np.array([1.0, 2.0, 3.0]))


def test_series_hash_rejects_unknown_framing():
    with pytest.raises(ValueError, match="framing"):
        series_hash([1.0], framing="nul")  # type: ignore[arg-type]
