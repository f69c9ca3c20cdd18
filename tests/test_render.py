"""One rendering of series and questions shared by every LLM role."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsevo.data import Question
from tsevo.roles.llm import (
    PromptTooLong,
    check_budget,
    estimate_tokens,
    format_number,
    render_question,
    render_series,
)


def values_of(text: str) -> list[str]:
    return text.splitlines()[1].split("): ", 1)[1].split(", ")


def test_short_series_all_points_and_summary() -> None:
    out = render_series("x", [3.14159265, 2.0, -1.0, 10.0], sig=3)
    head, vals = out.splitlines()
    assert head.startswith('series "x": n=4')
    assert "mean=3.54" in head and "min=-1" in head and "max=10" in head
    assert "first=3.14" in head and "last=10" in head
    assert "std=" in head
    assert "all 4 points, 3 significant digits" in vals
    assert values_of(out) == ["3.14", "2", "-1", "10"]


def test_long_series_is_downsampled_with_the_stride_stated() -> None:
    y = np.arange(1000, dtype=float) + 0.123456
    out = render_series("load", y, max_points=256, sig=4, role="primary")
    assert out.startswith('series "load" (primary): n=1000')
    assert "stride 4: every 4th point from index 0, 250 of 1000 shown, 4 significant digits" in out
    vals = values_of(out)
    assert len(vals) == 250
    assert vals[:3] == ["0.1235", "4.123", "8.123"]
    assert vals[-1] == "996.1"  # index 996, rounded to 4 significant digits
    assert "last=999.1" in out  # the summary still describes the whole series


@given(
    n=st.integers(1, 3000),
    max_points=st.integers(1, 400),
    sig=st.integers(1, 8),
)
def test_downsampling_invariants(n: int, max_points: int, sig: int) -> None:
    y = np.sin(np.arange(n) / 7.0) * 1000
    out = render_series("s", y, max_points=max_points, sig=sig)
    vals = values_of(out)
    stride = max(1, math.ceil(n / max_points))
    assert len(vals) <= max_points
    assert len(vals) == math.ceil(n / stride)
    if stride > 1:
        assert f"stride {stride}:" in out
    for v, x in zip(vals, y[::stride], strict=True):
        digits = re.sub(r"e.*$", "", v).replace("-", "").replace(".", "").lstrip("0")
        assert len(digits) <= sig
        assert float(v) == pytest.approx(x, rel=10 ** (1 - sig), abs=1e-9)


def test_format_number() -> None:
    assert format_number(1234567.0) == "1.235e6"
    assert format_number(-0.0) == "0"
    assert format_number(0.000123456, 2) == "0.00012"
    assert format_number(float("nan")) == "nan"
    assert format_number(2.5e-7, 3) == "2.5e-7"


def make_question() -> Question:
    return Question(
        id="Q-SECRET-ID-77",
        source="SOURCE-SECRET",
        task="TASK-SECRET",
        subtask="SUBTASK-SECRET",
        question="Which candidate series matches the reference?",
        context="Sensor readings from a pump.",
        options=("Candidate A", "Candidate B", "Neither"),
        series={
            "ref": np.linspace(0, 1, 50),
            "A": np.ones(50),
            "B": np.arange(50.0),
            "temp": np.zeros(50),
        },
        primary=("ref",),
        covariates=("temp",),
        candidates=("A", "B"),
        gold=1,
        group="GROUP-SECRET",
        metadata={"answer": "GOLD-SECRET", "template": "TEMPLATE-SECRET"},
    )


def test_render_question_shows_roles_and_lettered_options() -> None:
    out = render_question(make_question(), max_points=20)
    assert out.splitlines()[0] == "Question: Which candidate series matches the reference?"
    assert "Context: Sensor readings from a pump." in out
    assert 'series "ref" (primary): n=50' in out
    assert 'series "temp" (covariate)' in out
    assert 'series "A" (candidate)' in out and 'series "B" (candidate)' in out
    assert "stride 3" in out
    assert out.rstrip().endswith("A) Candidate A\nB) Candidate B\nC) Neither")


def test_render_question_never_shows_gold_or_metadata() -> None:
    out = render_question(make_question())
    assert "SECRET" not in out
    assert "gold" not in out.lower()


def test_token_estimate_and_budget() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("1234") == 2  # digits count double
    msgs = [{"role": "user", "content": "x" * 400}]
    assert check_budget(msgs, 200) == 104  # 100 + 4 per message
    assert check_budget(msgs, None) == 104
    with pytest.raises(PromptTooLong) as ei:
        check_budget(msgs, 50)
    assert ei.value.estimated == 104 and ei.value.limit == 50
    q = render_question(make_question(), max_points=256)
    assert estimate_tokens(q) > len(q) // 4
