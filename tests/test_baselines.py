"""The paper's answering baselines (issue 14, part C) through the scripted OpenAI-compatible server.

Self-consistency (``answer.selection = "majority"`` over N sampled answers), Self-Refine (one
critique-and-revise pass) and four-shot in-context learning from train each run the whole paired
protocol on a small suite over real HTTP (:class:`~tsevo.testing.FakeOpenAIServer` with the
:class:`~tsevo.testing.BuiltinResponder`). The tests read what was sent (N samples with distinct
seeds, the reflection call after every answer, four train questions with their gold in every ICL
prompt and never a val or test question) and what was recorded (the trace's ``base_detail``, the
manifest, ``config.json``), that the default leaves the run as it was, that a resume under another
baseline is refused and that the builtin backend refuses them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tsevo.data.synthetic import make_suite
from tsevo.evolve import ProtocolConfig, eval_baseline, evolve
from tsevo.evolve.baseline import PAPER_BASELINES, AnswerConfig, icl_examples, paper_baseline
from tsevo.evolve.views import ViewIds
from tsevo.roles import RoleSet
from tsevo.roles.llm.config import LLMConfig, RoleConfigs
from tsevo.roles.protocols import BaseAnswer
from tsevo.roles.selection import MajorityVote, resolve_selection
from tsevo.testing import BuiltinResponder, FakeOpenAIServer

GOLD = "Gold answer (train example): "


@pytest.fixture(scope="module")
def suite() -> Any:
    return make_suite(8, seed=5, families=["trend", "seasonality"])


def _run(suite: Any, out: Path, answer: str | None) -> dict[str, Any]:
    resp = BuiltinResponder(list(suite))
    params = {} if answer is None else {"answer": answer}
    with FakeOpenAIServer(resp) as srv:
        configs = RoleConfigs(
            LLMConfig(base_url=srv.base_url, model="scripted", concurrency=1, timeout_s=20.0)
        )
        with RoleSet.llm(configs, run_dir=out) as roles:
            evolve(suite, roles=roles, config=ProtocolConfig.from_params(params), out=out, log=str)
        bodies = srv.chat_requests()
    records = [
        json.loads(line)
        for p in sorted((out / "evals").glob("*.jsonl"))
        for line in p.read_text().splitlines()
        if line.strip()
    ]
    return {
        "resp": resp,
        "bodies": bodies,
        "records": records,
        "manifest": json.loads((out / "manifest.json").read_text()),
        "config": json.loads((out / "config.json").read_text()),
        "out": out,
    }


@pytest.fixture(scope="module")
def runs(suite: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("baselines")
    names = {"base": None, "sc": "self-consistency", "refine": "self-refine", "icl": "4-shot ICL"}
    return {k: _run(suite, root / k, v) for k, v in names.items()}


def _prompt(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in body["messages"] if m["role"] == "user"))


def _kind(resp: BuiltinResponder, body: dict[str, Any]) -> str:
    return resp.kind_of(_prompt(body))


def test_default_is_the_protocols_answerer(runs: dict[str, dict[str, Any]]) -> None:
    base = runs["base"]
    assert "answer" not in base["config"]["protocol"]  # config.json as before the baselines
    assert "baseline" not in base["manifest"]
    assert base["manifest"]["roles"]["answerer"] == "llm-answerer:scripted"
    assert all("base_detail" not in r for r in base["records"])
    answers = [b for b in base["bodies"] if _kind(base["resp"], b) == "answer"]
    assert answers and all("seed" not in b and b.get("temperature", 0) == 0 for b in answers)
    assert {_kind(base["resp"], b) for b in base["bodies"]}.isdisjoint({"icl", "refine"})
    assert ProtocolConfig().to_dict() == ProtocolConfig(answer=AnswerConfig()).to_dict()
    assert (
        ProtocolConfig().fingerprint()
        == ProtocolConfig.from_params({"answer": "base"}).fingerprint()
    )


def test_self_consistency_samples_n_answers_and_records_the_vote(
    runs: dict[str, dict[str, Any]],
) -> None:
    sc = runs["sc"]
    bodies = [b for b in sc["bodies"] if _kind(sc["resp"], b) == "answer"]
    by_prompt: dict[str, list[dict[str, Any]]] = {}
    for b in bodies:
        by_prompt.setdefault(_prompt(b), []).append(b)
    base = runs["base"]
    base_answers = [b for b in base["bodies"] if _kind(base["resp"], b) == "answer"]
    assert len(by_prompt) == len(base_answers) > 0  # the same questions, each asked five times
    assert len(bodies) == 5 * len(by_prompt)
    for group in by_prompt.values():  # five requests per question, each with its own seed
        assert sorted(b["seed"] for b in group) == [0, 1, 2, 3, 4]
        assert all(b["temperature"] == pytest.approx(0.7) for b in group)
    assert sc["manifest"]["baseline"]["name"] == "self-consistency"
    assert sc["config"]["protocol"]["answer"]["selection"] == "majority"
    assert sc["records"] and all(r["base_detail"] for r in sc["records"])
    for r in sc["records"]:
        d = r["base_detail"]
        assert [s["seed"] for s in d["samples"]] == [0, 1, 2, 3, 4]
        assert d["selection"]["rule"].startswith("majority")
        assert d["selection"]["option"] == "ABCDEFGHIJ"[r["base_answer"]]
        assert sum(d["selection"]["votes"].values()) == 5


def test_majority_vote_breaks_ties_deterministically_and_records_them() -> None:
    vote = resolve_selection("majority")
    assert isinstance(vote, MajorityVote)
    pick = vote.select([BaseAnswer(2), BaseAnswer(1), BaseAnswer(1), BaseAnswer(2), BaseAnswer(0)])
    assert (pick.option, pick.index, pick.tied) == (2, 0, (1, 2))
    assert pick.rule == "majority, tie -> first sampled"
    pick = vote.select([BaseAnswer(0), BaseAnswer(1), BaseAnswer(1)])
    assert (pick.option, pick.index, pick.tied, pick.votes) == (1, 1, (), {"0": 1, "1": 2})
    with pytest.raises(ValueError, match="unknown answer selection"):
        resolve_selection("judge")


def test_self_refine_makes_one_reflection_call_per_answer_and_records_both(
    runs: dict[str, dict[str, Any]],
) -> None:
    rf = runs["refine"]
    kinds = [_kind(rf["resp"], b) for b in rf["bodies"]]
    assert kinds.count("refine") == kinds.count("answer") > 0
    for i, k in enumerate(kinds):  # each reflection follows its own answer
        if k == "refine":
            assert kinds[i - 1] == "answer"
            first = re.search(r"^First answer: ([A-J])$", _prompt(rf["bodies"][i]), re.M)
            assert first is not None
    for r in rf["records"]:
        d = r["base_detail"]["refine"]
        assert set(d) >= {"first", "first_reason", "critique", "final", "changed"}
        assert d["critique"].startswith("the builtin reading")
        assert d["final"] == "ABCDEFGHIJ"[r["base_answer"]]
    assert rf["manifest"]["baseline"]["name"] == "self-refine"


def test_icl_shows_four_train_questions_with_gold_and_never_val_or_test(
    runs: dict[str, dict[str, Any]], suite: Any
) -> None:
    icl = runs["icl"]
    resp = icl["resp"]
    bodies = [b for b in icl["bodies"] if _kind(resp, b) == "icl"]
    assert bodies and not [b for b in icl["bodies"] if _kind(resp, b) == "answer"]
    train = {q.id for q in suite.train}
    main, spares = (
        icl["manifest"]["baseline"]["icl_examples"],
        icl["manifest"]["baseline"]["icl_spares"],
    )
    assert len(main) == 4 and len(spares) == 1
    own_seen = 0
    for b in bodies:
        prompt = _prompt(b)
        examples = prompt[: prompt.index("The question to answer")]
        asked = resp._question(prompt[prompt.index("The question to answer") :]).id
        blocks = re.findall(r"(Question: .*?)\n" + re.escape(GOLD) + r"([A-J])", examples, re.S)
        assert len(blocks) == 4 and prompt.count(GOLD) == 4
        shown = []
        for block, letter in blocks:
            v = resp._question(block)
            q = resp.by_id[v.id]
            assert q.id in train  # chosen from train only: no val or test question, ever
            assert "ABCDEFGHIJ"[q.gold] == letter  # the gold, labelled as a train example
            shown.append(v.id)
        assert asked not in shown  # a train question never sees its own gold
        if asked in main:  # the spare takes its place
            own_seen += 1
            assert shown == [x for x in main if x != asked] + spares
        else:
            assert shown == main  # one fixed draw for the whole run
    assert own_seen == 4  # the base pass answered each example (train) once
    ids = ViewIds(suite, "0")
    chosen = icl_examples(suite.train, 4, 0, ids.view)
    assert [e.question.id for e in chosen] == main + spares
    assert [e.question.id for e in icl_examples(reversed(list(suite.train)), 4, 0, ids.view)] == [
        e.question.id for e in chosen
    ]  # the draw does not depend on the split's order
    assert all(len(r["base_detail"]["shots"]) == 4 for r in icl["records"])


def test_resume_under_another_baseline_is_refused(
    runs: dict[str, dict[str, Any]], suite: Any
) -> None:
    out = runs["refine"]["out"]
    with FakeOpenAIServer(BuiltinResponder(list(suite))) as srv:
        configs = RoleConfigs(LLMConfig(base_url=srv.base_url, model="scripted", timeout_s=20.0))
        with RoleSet.llm(configs, run_dir=out) as roles:
            with pytest.raises(ValueError, match="different config"):
                evolve(
                    suite,
                    roles=roles,
                    config=ProtocolConfig.from_params({"answer": "self-consistency"}),
                    out=out,
                    log=str,
                )
            same = ProtocolConfig.from_params({"answer": "self-refine"})
            evolve(suite, roles=roles, config=same, out=out, log=str)  # the same one resumes
        assert srv.n_chat == 0  # nothing asked: refused first, then every reply stored


def test_builtin_backend_refuses_the_llm_baselines(suite: Any, tmp_path: Path) -> None:
    for name in ("self-consistency", "self-refine", "4-shot ICL"):
        cfg = ProtocolConfig.from_params({"answer": name})
        with pytest.raises(ValueError, match="no builtin analogue"):
            evolve(suite, config=cfg, out=tmp_path / "b", log=str)
    assert not (tmp_path / "b").exists()


def test_config_names_and_params() -> None:
    assert set(PAPER_BASELINES) == {"base", "self-consistency", "self-refine", "4-shot ICL"}
    assert paper_baseline("4 shot icl") == AnswerConfig(shots=4)
    cfg = ProtocolConfig.from_params({"answer.selection": "majority", "answer.samples": "3"})
    assert cfg.answer == AnswerConfig(selection="majority", samples=3)
    assert ProtocolConfig.from_dict(cfg.to_dict()) == cfg
    assert ProtocolConfig.from_params({"rounds": 2}, base=cfg).answer == cfg.answer
    with pytest.raises(ValueError, match="selection"):
        AnswerConfig(selection="vote")
    with pytest.raises(TypeError, match="unknown"):
        ProtocolConfig.from_params({"answer.votes": 3})
    with pytest.raises(ValueError, match="unknown baseline"):
        paper_baseline("chain of thought")


def test_eval_baseline_pairs_base_and_baseline_on_the_same_questions(suite: Any) -> None:
    resp = BuiltinResponder(list(suite))
    with FakeOpenAIServer(resp) as srv:
        configs = RoleConfigs(
            LLMConfig(base_url=srv.base_url, model="scripted", concurrency=1, timeout_s=20.0)
        )
        with RoleSet.llm(configs) as roles:
            rep = eval_baseline(suite, roles, paper_baseline("self-refine"), split="val")
            with pytest.raises(ValueError, match="val or test"):
                eval_baseline(suite, roles, paper_baseline("4-shot ICL"), split="train")
        kinds = [_kind(resp, b) for b in srv.chat_requests()]
    n = len(suite.val)
    # the base arm asks each question once; the baseline's answers come from the cache, then
    # each one gets its reflection call
    assert kinds.count("answer") == n and kinds.count("refine") == n
    assert rep["n"] == n and rep["baseline"] == "self-refine"
    assert rep["counts"]["n"] == n
    assert rep["tasks"][-1]["task"] == "ALL"
    assert rep["delta"] == 0.0 and rep["refine_changed"] == 0  # the builtin reading agrees
    with pytest.raises(ValueError, match="no builtin analogue"):
        eval_baseline(suite, RoleSet.builtin(), paper_baseline("self-refine"))


def test_the_command_line_runs_a_named_baseline_and_the_report_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tsevo.cli import main

    out = tmp_path / "cli"
    argv = ["evolve", "--suite", "synthetic:2", "--seed", "3", "--out", str(out), "--quiet"]
    with pytest.raises(SystemExit, match="LLM answerer"):
        main([*argv, "--baseline", "self-refine"])
    assert not out.exists()
    resp = BuiltinResponder(list(make_suite(2, seed=3)), seed=3)
    with FakeOpenAIServer(resp) as srv:
        flags = ["--backend", "llm", "--base-url", srv.base_url, "--model", "scripted"]
        assert main([*argv, *flags, "--baseline", "self-refine"]) == 0
    assert resp.counts["refine"] == resp.counts["answer"] > 0
    cfg = json.loads((out / "config.json").read_text())["protocol"]
    assert cfg["answer"]["refine"] is True
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert "baseline: self-refine" in capsys.readouterr().out


def test_a_split_vote_over_http_goes_to_the_majority_and_a_tie_is_recorded(suite: Any) -> None:
    resp = BuiltinResponder(list(suite))
    view = ViewIds(suite, "0").view
    q = next(q for q in suite.val if len(q.options) >= 3)

    def says(letter: str) -> Any:
        return lambda reply: {**reply, "option": letter}

    with FakeOpenAIServer(resp) as srv:
        configs = RoleConfigs(LLMConfig(base_url=srv.base_url, model="scripted", concurrency=1))
        with RoleSet.llm(configs) as roles:
            sc = roles.baseline_answerer(selection="majority", samples=5)
            resp.inject("answer", *(says(x) for x in "BCCBA"))
            tie = sc.answer(view(q))
            resp.inject("answer", *(says(x) for x in "ACCBC"))
            sc4 = roles.baseline_answerer(selection="majority", samples=5, temperature=0.9)
            win = sc4.answer(view(q))
        seeds = [b.get("seed") for b in srv.chat_requests()]
        temps = [b.get("temperature") for b in srv.chat_requests()]
    assert seeds == [0, 1, 2, 3, 4] * 2  # every sample asked, none served from another's reply
    assert temps == [0.7] * 5 + [0.9] * 5
    assert tie.option == 1 and tie.detail is not None
    assert tie.detail["selection"]["tied"] == ["B", "C"]
    assert tie.detail["selection"]["rule"] == "majority, tie -> first sampled"
    assert [s["option"] for s in tie.detail["samples"]] == list("BCCBA")
    assert win.option == 2 and win.detail is not None
    assert win.detail["selection"]["votes"] == {"A": 1, "B": 1, "C": 3}
    assert win.detail["selection"]["tied"] == [] and win.detail["selection"]["sample"] == 1
