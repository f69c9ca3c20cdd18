"""``tsevo data kinds``: a suite's question kinds and the concept words they hit, before a round."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tsevo.analysis import SUITE_KINDS_COLUMNS, suite_kinds, suite_kinds_summary
from tsevo.cli import main
from tsevo.data import Question, Suite

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "experiments" / "example_questions.jsonl"


def _suite(texts: dict[str, str] | None = None) -> Suite:
    y = {"X": [1.0, 2.0, 1.5, 3.0, 2.5, 4.0]}
    texts = texts or {
        "w": "Does X wobble a lot after step {i}?",  # no lexicon word
        "t": "Is there an upward trend in X after step {i}?",
    }
    qs = [
        Question(id=f"{k}{i}", source="t", task="t", question=text.format(i=i),
                 options=("Yes", "No"), series=y, primary=("X",), gold=i % 2)
        for k, text in texts.items()
        for i in range(4)
    ]  # fmt: skip
    splits = {q.id: ("train" if int(q.id[1]) < 3 else "test") for q in qs}
    return Suite("mine", qs, splits=splits)


def test_kinds_count_questions_per_split_and_show_the_stems_their_words_hit():
    frame = suite_kinds(_suite())
    assert list(frame.columns) == SUITE_KINDS_COLUMNS
    rows = {r.template.split()[0]: r for r in frame.itertuples()}
    assert set(rows) == {"does", "is"}
    assert rows["is"].concepts == ["trend", "upward"] and "trend" in rows["is"].groups
    assert rows["does"].concepts == [] and rows["does"].groups == []
    assert (rows["does"].train, rows["does"].val, rows["does"].test) == (3, 0, 1)
    assert (rows["does"].pooled_train, rows["does"].partners) == (3, 0)  # Yes / No: no partner
    assert suite_kinds_summary(frame) == {
        "kinds": 2,
        "questions": 8,
        "median_questions_per_kind": 4.0,
        "min_rows": 2,
        "learnable_kinds": 2,
        "learnable_pooled": 2,
        "without_concepts": 1,
        "without_concepts_learnable": 1,
    }
    # an addition reaches the kind; the shipped lexicon is untouched for the next call
    added = suite_kinds(_suite(), {"wobbl": ["noise", "window"]})
    wobble = added[added["template"].str.startswith("does")].iloc[0]
    assert wobble["concepts"] == ["wobbl"] and wobble["groups"] == ["noise", "window"]
    assert suite_kinds_summary(added)["without_concepts"] == 0
    assert suite_kinds(_suite())["concepts"].tolist() == frame["concepts"].tolist()


def test_a_shared_added_stem_makes_two_phrasings_pooling_partners():
    # two phrasings of one Yes / No question: nothing the planner may pool them on until the
    # lexicon knows their word
    texts = {
        "a": "Is X climbing at step {i}?",
        "b": "Does X keep climbing all the way to step {i}?",
    }
    before = suite_kinds(_suite(texts))
    assert before["concepts"].tolist() == [[], []]
    assert before["pooled_train"].tolist() == [3, 3] and before["partners"].tolist() == [0, 0]
    after = suite_kinds(_suite(texts), {"climb": ["trend"]})
    assert after["concepts"].tolist() == [["climb"], ["climb"]]
    assert after["pooled_train"].tolist() == [6, 6] and after["partners"].tolist() == [1, 1]
    # a kind without train questions has no branch to serve it, whatever its partners hold
    unsplit = Suite("mine", list(_suite(texts)))
    assert set(suite_kinds(unsplit, {"climb": ["trend"]})["pooled_train"]) == {0}


def test_cli_lists_kinds_of_a_suite_file_with_and_without_additions(tmp_path, capsys):
    assert main(["data", "kinds", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "over these # weeks of daily @ what is the overall trend" in out
    assert out.rstrip().splitlines()[-1].startswith("5 kinds over 5 questions")

    extra = tmp_path / "concepts.json"
    extra.write_text(json.dumps({"beat": ["cycle", "shape"]}))
    assert main(["data", "kinds", str(EXAMPLE), "--concepts", str(extra), "--json"]) == 0
    data: Any = json.loads(capsys.readouterr().out)
    beat = next(k for k in data["kinds"] if "beat" in k["template"])
    assert "beat" in beat["concepts"] and {"cycle", "shape"} <= set(beat["groups"])
    assert data["summary"]["kinds"] == 5


@pytest.mark.parametrize("command", ["kinds", "evolve"])
def test_a_bad_lexicon_file_is_a_clean_error_naming_the_entry(tmp_path, capsys, command):
    bad = tmp_path / "concepts.json"
    bad.write_text(json.dumps({"wobbl": ["noise", "sesonal"]}))
    out = tmp_path / "run"
    argv = (
        ["data", "kinds", str(EXAMPLE), "--concepts", str(bad)]
        if command == "kinds"
        else ["evolve", "--suite", str(EXAMPLE), "--concepts", str(bad), "--out", str(out)]
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "concept entry 'wobbl': unknown catalog group 'sesonal'" in err
    assert not out.exists()  # nothing written


def test_evolve_refuses_additions_on_the_llm_backend(tmp_path):
    extra = tmp_path / "concepts.json"
    extra.write_text("{}")
    argv = ["evolve", "--backend", "llm", "--concepts", str(extra), "--out", str(tmp_path / "r")]
    with pytest.raises(SystemExit, match="builtin planner"):
        main(argv)


def test_the_readme_figures_for_a_mixed_development_seed(capsys):
    # README, "Your benchmark's own words": 137 kinds from 612 questions, 91 learnable, 4 stemless
    assert main(["data", "kinds", "synthetic:mixed", "--seed", "60011", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert (summary["kinds"], summary["questions"]) == (137, 612)
    assert (summary["learnable_kinds"], summary["learnable_pooled"]) == (91, 125)
    assert summary["without_concepts"] == 4
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert (
        "137 kinds from the wording of 612 questions: 91 have two or more train questions of "
        "their own, 125 with their pooling partners', and 4 hit no stem"
    ) in readme
