"""The taxonomy's consumers config and the judge (issue 12, "Consumers").

``ProtocolConfig.taxonomy`` (:class:`~tsevo.taxonomy.config.TaxonomyConfig`) is off by default and
then leaves ``config.json`` byte for byte as before it; ``answer.selection = "judge"`` chooses
among sampled answers by a pinned taxonomy's outcome-blind codes, never by gold. The end-to-end
pass runs through the scripted OpenAI-compatible server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tsevo.agent import Agent
from tsevo.data import Question, QuestionView
from tsevo.data.synthetic import make_suite
from tsevo.evolve.baseline import AnswerConfig, baseline_answerer
from tsevo.evolve.config import ProtocolConfig
from tsevo.evolve.views import ViewIds
from tsevo.library.library import Library
from tsevo.roles import RoleSet
from tsevo.roles.llm.config import LLMConfig, RoleConfigs
from tsevo.roles.protocols import BaseAnswer
from tsevo.taxonomy import Code, Taxonomy, TaxonomyError, save_taxonomy
from tsevo.taxonomy.config import TaxonomyConfig
from tsevo.taxonomy.judge import ANSWER_TIME_FEATURES, Judge, answer_features
from tsevo.taxonomy.traces import FEATURES
from tsevo.testing import BuiltinResponder, FakeOpenAIServer

#: sha256 of the default ``config.json`` before the taxonomy consumers existed (commit 7cfdbcf).
DEFAULT_CONFIG_SHA = "0512011f48360322cb4fc68f54b6b5c67700713be4fc869615e39f7e85c923dc"


def _det(feature: str, value: Any, op: str = "==") -> dict[str, Any]:
    return {"any": [{"all": [{"feature": feature, "op": op, "value": value}]}]}


def _code(cid: str, feature: str, value: Any, severity: str | None = "major", **kw: Any) -> Code:
    fields: dict[str, Any] = {"outcome_blind": True, "applies_to_role": "answerer"}
    fields.update(kw)
    return Code(
        id=cid,
        category=cid[0],
        name=f"Code_{cid.replace('.', '_')}",
        severity=severity,
        detector=_det(feature, value),
        **fields,
    )


def _code_op(cid: str, feature: str, value: Any, op: str) -> Code:
    return dataclasses.replace(_code(cid, feature, value), detector=_det(feature, value, op))


def _tax(*codes: Code, status: str = "accepted") -> Taxonomy:
    return Taxonomy.create(codes, status=status)


def _view(n: int = 4, gold: int | None = 0, **kw: Any) -> tuple[Question, QuestionView]:
    q = Question(
        id="q1",
        source="synthetic",
        task="trend",
        question="Which trend does the series show?",
        options=tuple(f"option {i}" for i in range(n)),
        series={"x": np.arange(4.0)},
        primary=("x",),
        gold=gold,
        **kw,
    )
    return q, QuestionView.of(q, "v1")


LAST = _code("B.1", "answer.position", "last")


# ---------------------------------------------------------------------------- the judge alone
def test_the_judge_avoids_the_sample_on_which_a_code_fires() -> None:
    _, v = _view(4)
    judge = Judge(_tax(LAST))
    samples = [BaseAnswer(3, "trend: up"), BaseAnswer(3, "trend: up"), BaseAnswer(1, "trend: up")]
    pick = judge.judge(samples, v)
    assert (pick.option, pick.index) == (1, 2)  # majority would say 3
    assert pick.weights == (2, 2, 0) and pick.fired == (("B.1",), ("B.1",), ())
    assert pick.rule.startswith("judge: lowest weight 0 (1 of 3 samples)")
    assert pick.votes == {"1": 1, "3": 2} and pick.tied == ()
    d = pick.to_dict()
    assert d["fired"] == [["B.1"], ["B.1"], []] and d["taxonomy"] == judge.fingerprint
    assert d["sample"] == 2 and d["rule"] == pick.rule
    # bound to the question, the judge is a Selection (answer.selection's strategy object)
    assert judge.bind(v).select(samples) == pick
    with pytest.raises(ValueError, match="needs the question"):
        judge.bind(None).select(samples)


def test_severity_weights_and_uniform_weights_choose_differently() -> None:
    _, v = _view(4)
    first_minor = _code("B.2", "answer.position", "first", severity="minor")
    last_critical = _code("B.1", "answer.position", "last", severity="critical")
    samples = [BaseAnswer(3), BaseAnswer(0)]
    by_severity = Judge(_tax(last_critical, first_minor)).judge(samples, v)
    assert by_severity.weights == (3, 1) and by_severity.option == 0
    uniform = Judge(_tax(last_critical, first_minor), weights="uniform").judge(samples, v)
    assert uniform.weights == (1, 1) and uniform.option == 3  # tie, 1:1 -> first sampled
    assert uniform.tied == (0, 3)
    assert uniform.rule.endswith("tie -> majority, tie -> first sampled")


def test_ties_go_to_the_majority_among_the_tied_then_the_first_sampled() -> None:
    _, v = _view(4)
    judge = Judge(_tax(LAST))
    # nothing fires: the majority option (2) wins, from the first sample carrying it
    pick = judge.judge([BaseAnswer(0), BaseAnswer(2), BaseAnswer(2)], v)
    assert (pick.option, pick.index, pick.tied) == (2, 1, ())
    assert pick.rule == "judge: lowest weight 0 (3 of 3 samples), tie -> majority"
    # the majority of ALL samples (3) is out: it fires; among the rest 1 and 2 tie -> first
    pick = judge.judge([BaseAnswer(3), BaseAnswer(2), BaseAnswer(3), BaseAnswer(1)], v)
    assert (pick.option, pick.index, pick.tied) == (2, 1, (1, 2))
    # a majority among the tied that is not the first tied sample
    pick = judge.judge([BaseAnswer(3), BaseAnswer(0), BaseAnswer(2), BaseAnswer(2)], v)
    assert (pick.option, pick.index) == (2, 2)
    with pytest.raises(ValueError):
        judge.judge([], v)


def test_reason_words_and_kind_are_judged_too() -> None:
    _, v = _view(3)
    terse = _code_op("B.3", "answer.reason_words", 2, "<=")
    judge = Judge(_tax(terse))
    pick = judge.judge([BaseAnswer(0, "guess"), BaseAnswer(0, "the series rises steadily")], v)
    assert pick.index == 1 and pick.fired == (("B.3",), ())
    feats = answer_features(v, BaseAnswer(2, "Trend rule: slope positive"))
    assert feats["answer.position"] == "last" and feats["answer.reason_kind"] == "trend rule"
    assert feats["domain.n_options"] == 3


def test_codes_the_judge_cannot_use_are_dropped_with_a_warning() -> None:
    outcome = _code("B.4", "correct.final", False)  # claims outcome-blind, reads the outcome
    tool = _code("A.1", "tool.any_error", True, applies_to_role=None)
    unknown = _code("B.5", "answer.mood", "sad")
    unmarked = _code("B.6", "answer.position", "first", outcome_blind=None)
    no_detector = dataclasses.replace(_code("B.7", "answer.position", "first"), detector=None)
    with pytest.warns(UserWarning, match="leaves out 5 code"):
        judge = Judge(_tax(LAST, outcome, tool, unknown, unmarked, no_detector))
    assert judge.ids == ("B.1",)
    assert "outcome-aware feature 'correct.final'" in judge.dropped["B.4"]
    assert "cannot fire when the answer is chosen" in judge.dropped["A.1"]
    assert "unknown feature" in judge.dropped["B.5"]
    assert judge.dropped["B.6"] == "not marked outcome-blind"
    assert judge.dropped["B.7"] == "no detector"


def test_the_judge_reads_outcome_blind_answer_time_features_only() -> None:
    assert all(FEATURES[f].outcome_blind for f in ANSWER_TIME_FEATURES)
    _, v = _view(4)
    assert set(answer_features(v, BaseAnswer(1, "x"))) == set(ANSWER_TIME_FEATURES)


def test_gold_canary_changing_gold_never_changes_the_choice() -> None:
    judge = Judge(_tax(LAST, _code("B.2", "answer.position", "first", severity="minor")))
    samples = [BaseAnswer(3, "a b"), BaseAnswer(0, "c"), BaseAnswer(1, "d e f"), BaseAnswer(3)]
    picks = set()
    for gold in (None, 0, 1, 2, 3):
        q, _ = _view(4, gold=gold)
        picks.add(judge.judge(samples, QuestionView.of(q, "v1")).to_dict().__repr__())
    assert len(picks) == 1


def test_an_unaccepted_taxonomy_is_refused_unless_allowed() -> None:
    draft = _tax(LAST, status="review_required")
    with pytest.raises(TaxonomyError, match="review_required"):
        Judge(draft)
    assert Judge(draft, allow_unaccepted=True).ids == ("B.1",)
    with pytest.raises(ValueError, match="severity"):
        Judge(_tax(LAST), weights="fitted")


# ---------------------------------------------------------------------------- the config
def test_taxonomy_config_round_trip_describe_and_refusals(tmp_path: Path) -> None:
    tax = _tax(LAST)
    path = save_taxonomy(tax, tmp_path / "taxonomy.json")
    cfg = TaxonomyConfig(path=str(path), fingerprint=tax.fingerprint, judge_weights="uniform")
    assert TaxonomyConfig.from_dict(cfg.to_dict()) == cfg and not cfg.is_default
    assert TaxonomyConfig().is_default
    rows = {r["name"]: r for r in cfg.describe()}
    assert set(rows) == {f"taxonomy.{k}" for k in TaxonomyConfig.field_names()}
    assert rows["taxonomy.judge_weights"]["value"] == "uniform"
    assert rows["taxonomy.judge_weights"]["default"] == "severity"
    assert cfg.load().fingerprint == tax.fingerprint
    assert TaxonomyConfig.from_params({"allow_unaccepted": "true"}).allow_unaccepted is True
    wrong = "sha256:" + "0" * 64
    with pytest.raises(TaxonomyError, match=r"taxonomy\.json: fingerprint sha256:"):
        TaxonomyConfig(path=str(path), fingerprint=wrong).load()
    with pytest.raises(ValueError, match="fingerprint"):
        TaxonomyConfig(path=str(path), fingerprint="abc")
    with pytest.raises(ValueError, match="without a path"):
        TaxonomyConfig(fingerprint=wrong)
    with pytest.raises(ValueError, match="triage needs a pinned taxonomy"):
        TaxonomyConfig(triage=True)
    with pytest.raises(ValueError, match="diagnoses='beside' needs a pinned taxonomy"):
        TaxonomyConfig(diagnoses="beside")
    assert TaxonomyConfig(path=str(path), triage=True, diagnoses="instead").triage
    with pytest.raises(ValueError, match="no taxonomy is pinned"):
        TaxonomyConfig().load()
    with pytest.raises(TypeError, match="unknown"):
        TaxonomyConfig.from_dict({"nope": 1})
    draft = save_taxonomy(_tax(LAST, status="draft"), tmp_path / "draft.json")
    with pytest.raises(TaxonomyError, match=r"draft\.json: .*'draft'"):
        TaxonomyConfig(path=str(draft)).load()
    assert TaxonomyConfig(path=str(draft), allow_unaccepted=True).load().status == "draft"


def test_default_protocol_is_byte_identical_and_the_nested_config_round_trips(
    tmp_path: Path,
) -> None:
    cfg = ProtocolConfig()
    assert cfg.taxonomy == TaxonomyConfig() and "taxonomy" not in cfg.to_dict()
    assert hashlib.sha256(cfg.to_json().encode()).hexdigest() == DEFAULT_CONFIG_SHA
    explicit = ProtocolConfig.from_params({"taxonomy.judge_weights": "severity"})
    assert explicit.to_json() == cfg.to_json()
    path = save_taxonomy(_tax(LAST), tmp_path / "taxonomy.json")
    judged = ProtocolConfig.from_params(
        {"answer.selection": "judge", "answer.samples": "3", "TAXONOMY.PATH": str(path)}
    )
    assert judged.answer == AnswerConfig(selection="judge", samples=3)
    assert judged.to_dict()["taxonomy"]["path"] == str(path)
    back = ProtocolConfig.load(judged.save(tmp_path / "config.json"))
    assert back == judged and back.fingerprint() == judged.fingerprint() != cfg.fingerprint()
    assert ProtocolConfig.from_params({"seed": "2"}, base=judged).taxonomy == judged.taxonomy
    rows = {r["name"]: r for r in judged.describe()}
    assert (
        rows["taxonomy"]["value"]["path"] == str(path) and rows["taxonomy"]["default"]["path"] == ""
    )
    assert json.loads(judged.to_json())["answer"]["selection"] == "judge"
    with pytest.raises(ValueError, match=r"taxonomy\.path"):
        ProtocolConfig.from_params({"answer.selection": "judge"})
    with pytest.raises(TypeError, match="unknown"):
        ProtocolConfig.from_params({"taxonomy.nope": 1})


# ---------------------------------------------------------------------------- end to end
def _suite_with_gold(suite: Any, shift: int) -> list[Question]:
    return [dataclasses.replace(q, gold=(q.gold + shift) % len(q.options)) for q in suite.val]


def _base_pass(qs: list[Question], suite: Any, taxonomy: TaxonomyConfig) -> tuple[list, list]:
    """One base pass over ``qs`` with answer.selection=judge through the scripted server."""
    n = len(qs[0].options)
    last, first = chr(ord("A") + n - 1), "A"
    resp = BuiltinResponder(list(suite))
    # every question: samples say last, first, last (majority: last)
    replies = [lambda r, x=x: {**r, "option": x, "reason": "pick"} for x in (last, first, last)]
    resp.inject("answer", *(replies * len(qs)))
    view = ViewIds(suite, "0").view
    with FakeOpenAIServer(resp) as srv:
        configs = RoleConfigs(LLMConfig(base_url=srv.base_url, model="scripted", concurrency=1))
        with RoleSet.llm(configs) as roles:
            answerer = baseline_answerer(
                roles,
                AnswerConfig(selection="judge", samples=3),
                train=suite.train,
                seed=0,
                view=view,
                taxonomy=taxonomy,
            )
            agent = Agent(Library(), answerer, roles.reviewer, views=view)
            try:
                records = [agent.answer(q) for q in qs]
            finally:
                agent.close()
        seeds = [b.get("seed") for b in srv.chat_requests()]
    return records, seeds


def test_a_base_pass_with_the_judge_over_http_and_its_gold_canary(tmp_path: Path) -> None:
    suite = make_suite(8, seed=5, families=["trend", "seasonality"])
    sizes = [len(q.options) for q in suite.val]
    qs = [q for q in suite.val if len(q.options) == max(sizes, key=sizes.count)][:3]
    path = save_taxonomy(_tax(LAST), tmp_path / "taxonomy.json")
    taxonomy = TaxonomyConfig(path=str(path))
    records, seeds = _base_pass(qs, suite, taxonomy)
    assert seeds == [0, 1, 2] * len(qs)  # the same sampled requests as majority
    for rec in records:
        assert rec.base_answer == 0 and rec.base_detail is not None
        sel = rec.base_detail["selection"]
        assert sel["rule"].startswith("judge: lowest weight 0 (1 of 3 samples)")
        assert sel["fired"] == [["B.1"], [], ["B.1"]] and sel["sample"] == 1
        assert sel["taxonomy"] == _tax(LAST).fingerprint and sel["option"] == "A"
        assert rec.base_detail["baseline"] == "judge3@t0.7"
    # the canary: other gold, same choices and records of the choice
    shifted = [q2 for q2 in _suite_with_gold(suite, 1) if q2.id in {q.id for q in qs}]
    again, _ = _base_pass(shifted, suite, taxonomy)
    assert [r.base_detail for r in again] == [r.base_detail for r in records]
    assert [r.base_answer for r in again] == [r.base_answer for r in records]
    # the judge without a pinned taxonomy is refused before any request
    with pytest.raises(ValueError, match=r"taxonomy\.path"):
        _base_pass(qs, suite, TaxonomyConfig())


def test_the_builtin_answerer_refuses_the_judge_as_it_refuses_majority(tmp_path: Path) -> None:
    suite = make_suite(8, seed=5, families=["trend"])
    path = save_taxonomy(_tax(LAST), tmp_path / "taxonomy.json")
    with pytest.raises(ValueError, match="LLM answerer"):
        baseline_answerer(
            RoleSet.builtin(),
            AnswerConfig(selection="judge"),
            train=suite.train,
            seed=0,
            view=ViewIds(suite, "0").view,
            taxonomy=TaxonomyConfig(path=str(path)),
        )
