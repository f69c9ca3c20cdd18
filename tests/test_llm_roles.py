"""The LLM roles one by one against the scripted OpenAI-compatible server (real HTTP, no mocks)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tsevo.data import Question, QuestionView
from tsevo.library.library import ScopedTool
from tsevo.library.tool import Contract, Guidance, Matcher, ReadingRule, Scope, Tool
from tsevo.roles.llm.client import LLMClient
from tsevo.roles.llm.config import BudgetLimits, LLMConfig, RoleConfigs
from tsevo.roles.llm.jsoncall import InvalidReply
from tsevo.roles.llm.roles import (
    LLMAnswerer,
    LLMGlobalPlanner,
    LLMLocalPlanner,
    LLMReviewer,
    LLMRunStopped,
    LLMSynthesizer,
    LLMTriage,
    RoleContext,
)
from tsevo.roles.llm.roles.catalog import render_primitives, render_sandbox_rules
from tsevo.roles.protocols import (
    AttemptFeedback,
    Category,
    ContractCard,
    Dossier,
    ErrorItem,
    Evidence,
    Example,
    WorkGroup,
)
from tsevo.testing import FakeOpenAIServer, Fault


def _view(q: Question) -> QuestionView:
    """What a role sees of ``q`` (an opaque id; no gold, metadata or source id)."""
    return QuestionView.of(q, "v-" + q.fingerprint[:8])


def _q(
    qid: str = "q-secret-id-17",
    task: str = "TASK-NAME-XYZ",
    text: str = "Is the trend of the series rising or falling?",
    options: tuple[str, ...] = ("rising", "falling", "flat"),
    gold: int = 0,
) -> Question:
    y = np.linspace(0.0, 5.0, 40) + np.sin(np.arange(40))
    return Question(
        id=qid,
        source="synthetic",
        task=task,
        question=text,
        options=options,
        series={"x": y},
        primary=("x",),
        gold=gold,
        subtask="SUBTASK-HIDDEN",
        metadata={"secret": "META-HIDDEN"},
    )


class Env:
    """A scripted server plus a role context on it."""

    def __init__(self, script: Any, **cfg: Any) -> None:
        self.srv = FakeOpenAIServer.llama_cpp(script, default=cfg.pop("default", None)).start()
        kw = {"base_url": self.srv.base_url, "model": "scripted", "concurrency": 1}
        kw.update({"backoff_base_s": 0.0, "backoff_cap_s": 0.01, "max_retries": 1})
        kw.update(cfg)
        self.client = LLMClient(RoleConfigs(LLMConfig(**kw)))
        self.ctx = RoleContext(self.client)

    def prompts(self) -> list[str]:
        return [b["messages"][0]["content"] for b in self.srv.chat_requests()]

    def close(self) -> None:
        self.client.close()
        self.srv.stop()


@pytest.fixture
def env_factory() -> Iterator[Any]:
    made: list[Env] = []

    def make(script: Any, **cfg: Any) -> Env:
        e = Env(script, **cfg)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


# ---------------------------------------------------------------------------- answerer
def test_answerer_sees_only_the_question_and_constrains_the_letter(env_factory: Any) -> None:
    env = env_factory([{"option": "B", "reason": "it falls"}])
    a = LLMAnswerer(env.ctx).answer(_q())
    assert (a.option, a.reason) == (1, "it falls")
    prompt = env.prompts()[0]
    for hidden in ("q-secret-id-17", "TASK-NAME-XYZ", "SUBTASK-HIDDEN", "META-HIDDEN", "gold"):
        assert hidden not in prompt
    assert "A) rising" in prompt and 'series "x"' in prompt
    body = env.srv.chat_requests()[0]
    schema = body["response_format"]["schema"]
    assert schema["properties"]["option"]["enum"] == ["A", "B", "C"]


def test_answerer_invalid_replies_fall_back_or_raise(env_factory: Any) -> None:
    bad = [Fault.malformed(), {"option": "Z"}, Fault.truncated({"option": "A", "reason": "x" * 50})]
    env = env_factory(bad + bad)
    ans = LLMAnswerer(env.ctx)
    a = ans.answer(_q())
    assert a.option == 0 and a.reason.startswith("fallback to option A")
    assert env.ctx.stats["answerer"].fallbacks == 1
    assert env.client.accounting.get("answerer", "base").invalid == 3
    with pytest.raises(InvalidReply):
        LLMAnswerer(env.ctx, on_invalid="raise").answer(_q(qid="other", text="Other question?"))


def test_transport_failures_raise_then_stop_the_run(env_factory: Any) -> None:
    env = env_factory(None, default=Fault.server_error(500), max_retries=0)
    env.ctx.max_consecutive_failures = 3
    ans = LLMAnswerer(env.ctx)
    from tsevo.roles.llm.client import LLMCallError

    for i in range(2):
        with pytest.raises(LLMCallError):
            ans.answer(_q(text=f"Question number {i}?"))
    with pytest.raises(LLMRunStopped) as ei:
        ans.answer(_q(text="Question number 3?"))
    assert ei.value.reason == "endpoint_down"


def test_budget_and_replay_miss_stop_the_run(env_factory: Any, tmp_path: Any) -> None:
    env = env_factory(
        [{"option": "A", "reason": ""}],
        budget=BudgetLimits(max_calls=1),
        json_mode="json_object_schema",
    )
    ans = LLMAnswerer(env.ctx)
    ans.answer(_q())
    with pytest.raises(LLMRunStopped) as ei:
        ans.answer(_q(text="A second question?"))
    assert ei.value.reason == "budget"
    cassette = str(tmp_path / "c.sqlite")
    rec = env_factory([{"option": "C", "reason": ""}], cache_path=cassette)
    LLMAnswerer(rec.ctx).answer(_q())
    rec.client.close()
    env2 = env_factory([], cache_mode="replay", cache_path=cassette)
    assert LLMAnswerer(env2.ctx).answer(_q()).option == 2  # replayed, no server call
    with pytest.raises(LLMRunStopped) as ei:
        LLMAnswerer(env2.ctx).answer(_q(text="Never recorded?"))
    assert ei.value.reason == "replay_miss" and env2.srv.n_chat == 0


def test_long_series_are_downsampled_to_fit_the_prompt_budget(env_factory: Any) -> None:
    env = env_factory([{"option": "A", "reason": ""}], max_prompt_tokens=700)
    y = np.cumsum(np.ones(2000))
    q = Question(
        id="long",
        source="s",
        task="t",
        question="Rising?",
        options=("yes", "no"),
        series={"x": y},
        primary=("x",),
        gold=0,
    )
    LLMAnswerer(env.ctx).answer(q)
    p = env.prompts()[0]
    assert "stride" in p and len(p) < 2800


# ---------------------------------------------------------------------------- reviewer
def _tool(
    tid: str = "r1.g1.a1", rule: ReadingRule | None = None, scope: Scope | None = None
) -> Tool:
    return Tool(
        id=tid,
        source="def t():\n    return {'slope': 1.0}\n",
        outputs=("slope",),
        contract=Contract(measurement="trend.slope"),
        guidance=Guidance("Positive slope means rising, negative means falling.", rule),
        scope=scope or Scope(),
    )


def test_reviewer_reads_evidence_and_guidance(env_factory: Any) -> None:
    rule = ReadingRule("label", "slope", (0.0,), ("falling", "rising"))
    env = env_factory(
        [
            {"decision": "replace", "option": "A", "tools": ["r1.g1.a1"], "reason": "slope > 0"},
            {"decision": "replace", "option": "B", "tools": [], "reason": "same"},
        ]
    )
    rv = LLMReviewer(env.ctx)
    ev = [Evidence(ScopedTool(_tool(rule=rule), 1), "ok", {"slope": 0.123456789})]
    r = rv.review(_q(), 1, ev)
    assert (r.decision, r.option, r.responsible) == ("replace", 0, ("r1.g1.a1",))
    r2 = rv.review(_q(text="Another?"), 1, ev)  # replace with the incoming option is a keep
    assert r2.decision == "keep" and r2.option == 1
    p = env.prompts()[0]
    assert "Positive slope means rising" in p and "0.1235" in p and "Current answer: B" in p
    assert '"reading_rule"' in p and "TASK-NAME-XYZ" not in p


def test_reviewer_without_evidence_makes_no_request(env_factory: Any) -> None:
    env = env_factory([])
    ev = [Evidence(ScopedTool(_tool(), 1), "error", None)]
    r = LLMReviewer(env.ctx).review(_q(), 0, ev)
    assert r.decision == "no_decision" and env.srv.n_chat == 0


def test_reviewer_invalid_reply_keeps_the_incoming_answer(env_factory: Any) -> None:
    env = env_factory([Fault.malformed()] * 3)
    ev = [Evidence(ScopedTool(_tool(), 1), "ok", {"slope": 1.0})]
    r = LLMReviewer(env.ctx).review(_q(), 2, ev)
    assert r.decision == "no_decision" and r.option is None


def test_prompt_patches_reach_the_reviewer_for_in_scope_questions(env_factory: Any) -> None:
    from tsevo.library.library import Library, Stage

    patch = Tool(
        id="r1.p1",
        kind="prompt_patch",
        guidance=Guidance("PATCH-TEXT: trust the slope tool over the summary."),
        scope=Scope(matcher=Matcher(require=("trend",))),
    )
    lib = Library().append_stage(Stage(1, (_tool(), patch)))
    env = env_factory(None, default={"decision": "keep", "option": None, "tools": [], "reason": ""})
    rv = LLMReviewer(env.ctx).for_library(lib)
    ev = [Evidence(ScopedTool(_tool(), 1), "ok", {"slope": 1.0})]
    rv.review(_q(), 0, ev)
    rv.review(_q(text="How many peaks are there?"), 0, ev)
    p_in, p_out = env.prompts()
    assert "PATCH-TEXT" in p_in and "PATCH-TEXT" not in p_out


# ---------------------------------------------------------------------------- triage
def _errors(n: int) -> list[ErrorItem]:
    return [
        ErrorItem(
            f"e{i:03d}", f"Question {i} about the trend?", ("up", "down"), tool_fired=i % 2 == 0
        )
        for i in range(n)
    ]


def test_define_enforces_the_category_limit_with_feedback(env_factory: Any) -> None:
    three = {"categories": [{"label": f"L{i}", "criteria": "c"} for i in range(3)]}
    two = {
        "categories": [
            {"label": "trend", "criteria": "trend words"},
            {"label": "b", "criteria": "c"},
        ]
    }
    env = env_factory([three, two])
    cats = LLMTriage(env.ctx).define(_errors(5), 2)
    assert [c.id for c in cats] == ["c1", "c2"] and cats[0].label == "trend"
    second = env.srv.chat_requests()[1]["messages"]
    assert "give at most 2" in second[-1]["content"]
    assert '"id": "e000"' in env.prompts()[0] and "task" not in env.prompts()[0].lower()


def test_assign_feeds_missing_ids_back_and_splits_batches(env_factory: Any) -> None:
    cats = [Category("c1", "up", "rising"), Category("c2", "down", "falling")]

    def respond(req: dict[str, Any]) -> Any:
        msgs = req["messages"]
        ids = msgs[0]["content"].split("exactly once: ", 1)[1].split("\n", 1)[0].split(", ")
        rows = [{"id": i, "category": "c1" if int(i[1:]) % 2 else "c2"} for i in ids]
        if len(msgs) == 1 and len(ids) == 32:
            rows = rows[3:]  # the first reply of the full batch misses three ids
        return {"assignments": rows}

    env = env_factory(respond)
    got = LLMTriage(env.ctx).assign(cats, _errors(40))
    assert len(got) == 40 and got["e001"] == "c1" and got["e002"] == "c2"
    reqs = env.srv.chat_requests()
    assert len(reqs) == 3  # 32 (missing ids, re-asked) + 8
    feedback = reqs[1]["messages"][-1]["content"]
    assert "missing from your reply: e000, e001, e002" in feedback
    enum = reqs[0]["response_format"]["schema"]["$defs"]["Assignment"]["properties"]["id"]["enum"]
    assert len(enum) == 32


# ---------------------------------------------------------------------------- planners
def _dossier() -> Dossier:
    qs = [
        _q(qid=f"s{i}", task="trend task", text=f"Is the trend of series {i} rising or falling?")
        for i in range(4)
    ]
    rec = SimpleNamespace(final_answer=1, correct=False, tools_ok=())
    return Dossier(
        "no_tool.c1",
        "no_tool",
        "trend",
        "trend questions",
        tuple(Example(_view(q), q.gold, rec) for q in qs),
        (),
        "",
        ("r0.old",),
    )


def _card_reply(**kw: Any) -> dict[str, Any]:
    d = {
        "action": "create",
        "artifact_kind": "tool",
        "target_tool": "",
        "failure_type": "missing_measurement",
        "root_cause": "no slope",
        "focus": "slope",
        "measurement": "trend.slope",
        "signature": ["primary"],
        "success_criterion": "fixes held-out errors",
        "reading": "label",
        "calibration": False,
        "params": {"window": 10},
        "scope": {
            "tasks": ["trend task"],
            "arity": "single",
            "options_kind": "label",
            "match_terms": ["trend", "rising", "unrelatedword"],
            "forbid_terms": ["peaks"],
            "anti_tasks": [],
        },
    }
    d.update(kw)
    return d


def test_local_planner_builds_a_checked_contract_card(env_factory: Any) -> None:
    from tsevo.library.library import scope_matches

    bad = _card_reply(scope={**_card_reply()["scope"], "tasks": ["invented task"]})
    env = env_factory([bad, _card_reply()])
    d = _dossier()
    card = LLMLocalPlanner(env.ctx).plan(d)
    assert isinstance(card, ContractCard) and isinstance(card.contract, Contract)
    assert card.contract.measurement == "trend.slope" and card.contract.params == {"window": 10}
    assert card.scope.tasks == ("trend task",) and card.plan["rule_kind"] == "label"
    assert "unrelatedword" not in card.scope.matcher.terms and card.scope.matcher.forbid == (
        "peaks",
    )
    assert all(scope_matches(card.scope, e.question) for e in d.support)
    fb = env.srv.chat_requests()[1]["messages"][-1]["content"]
    assert "invented task" in fb
    p = env.prompts()[0]
    assert "trend task" in p and '"correct": "A"' in p and "spectral" in p  # rows, gold, catalog


def test_local_planner_skip_and_target_checks(env_factory: Any) -> None:
    env = env_factory(
        [
            _card_reply(action="refine", artifact_kind="usage_guidance", target_tool="nope"),
            _card_reply(action="skip"),
        ]
    )
    assert LLMLocalPlanner(env.ctx).plan(_dossier(), ["measurement x.y gave no_repair"]) is None
    assert "is not a tool of the library" in env.srv.chat_requests()[1]["messages"][-1]["content"]
    assert "measurement x.y gave no_repair" in env.prompts()[0]


def test_global_planner_merges_and_narrows(env_factory: Any) -> None:
    d = _dossier()
    env = env_factory([_card_reply(), _card_reply()])
    pl = LLMLocalPlanner(env.ctx)
    c1 = pl.plan(d)
    c2 = pl.plan(Dossier("no_tool.c2", "no_tool", "t2", "c", d.support, (), "", ()))
    assert c1 is not None and c2 is not None
    env2 = env_factory(
        [
            {"groups": [{"buckets": ["no_tool.c1"], "forbid": []}]},
            {"groups": [{"buckets": ["no_tool.c1", "no_tool.c2"], "forbid": ["peaks", "rising"]}]},
        ]
    )
    groups = LLMGlobalPlanner(env2.ctx).coordinate([c1, c2], {"no_tool.c1": ["rising trend?"]})
    assert len(groups) == 1 and isinstance(groups[0], WorkGroup)
    assert groups[0].bucket_ids == ("no_tool.c1", "no_tool.c2")
    assert groups[0].scope.matcher.forbid == ("peaks",)  # "rising" is in its own support text
    assert (
        "missing from every group: no_tool.c2"
        in env2.srv.chat_requests()[1]["messages"][-1]["content"]
    )


# ---------------------------------------------------------------------------- synthesizer
def _group() -> WorkGroup:
    card = ContractCard(
        "no_tool.c1",
        "create",
        "tool",
        "",
        "missing",
        "no slope",
        "slope",
        Contract("trend.slope", ("primary",), "fixes"),
        Scope(arity="single"),
        {"rule_kind": "label"},
    )
    return WorkGroup("g1", (card,), card.contract, card.scope)


def _synth(source: str, **kw: Any) -> dict[str, Any]:
    d = {
        "source": source,
        "function_name": "slope_tool",
        "outputs": ["slope"],
        "measurement": "trend.slope",
        "description": "slope",
        "guidance": "positive: rising",
        "reading_rule": {
            "kind": "label",
            "key": "slope",
            "bins": [0.0],
            "labels": ["falling", "rising"],
            "margin": 0.05,
            "confidence": 0.8,
        },
        "give_up": False,
    }
    d.update(kw)
    return d


GOOD = "def slope_tool():\n    y = ctx.primary()\n    r = P.trend(y)\n    if r is None:\n        return None\n    return {'slope': float(r['slope'])}\n"


def test_synthesizer_feeds_gate_reasons_back_and_returns_a_tool(env_factory: Any) -> None:
    bad = "import os\n" + GOOD
    env = env_factory([_synth(bad), _synth(GOOD)])
    ex = [
        Example(_view(q), q.gold, SimpleNamespace(final_answer=1, correct=False, tools_ok=()))
        for q in [_q()]
    ]
    t = LLMSynthesizer(env.ctx).synthesize(_group(), 1, [], ex)
    assert isinstance(t, Tool) and t.source.startswith("def slope_tool")
    assert t.guidance.rule is not None and t.guidance.rule.margin == 0.05
    assert t.provenance.author == "scripted" and t.contract.signature == ("primary",)
    fb = env.srv.chat_requests()[1]["messages"][-1]["content"]
    assert "sandbox gate" in fb and "mport" in fb
    p = env.prompts()[0]
    assert "ctx.primary(" in p and "P.trend(" in p and "trend.slope" in p
    body = env.srv.chat_requests()[0]
    assert body.get("reasoning_effort") == "high"  # synthesis runs at the higher effort


def test_synthesizer_prompt_fits_with_the_json_contract(env_factory: Any) -> None:
    """Examples are dropped until the prompt fits together with the JSON contract the client
    appends (a prompt that fitted only without it was refused by the client as too long)."""
    from tsevo.roles.llm.jsonreply import with_json_contract
    from tsevo.roles.llm.render import estimate_message_tokens
    from tsevo.roles.llm.roles.synthesizer import SynthReply

    ex = [
        Example(_view(q), q.gold, SimpleNamespace(final_answer=1, correct=False, tools_ok=()))
        for q in (_q(f"q{i}", text=f"Example {i}: is the trend rising?") for i in range(6))
    ]
    free = env_factory([])
    text = LLMSynthesizer(free.ctx).prompt(_group(), 1, [], ex)
    msgs = [{"role": "user", "content": text}]
    bare = estimate_message_tokens(msgs)
    full = estimate_message_tokens(with_json_contract(msgs, SynthReply.model_json_schema()))
    assert bare < full - 1 and all(f"Example {i}:" in text for i in range(6))
    env = env_factory([_synth(GOOD)], max_prompt_tokens=full - 1)  # fits only without it
    t = LLMSynthesizer(env.ctx).synthesize(_group(), 1, [], ex)
    assert isinstance(t, Tool)
    sent = env.prompts()[0]
    assert 0 < sum(f"Example {i}:" in sent for i in range(6)) < 6


def test_synthesizer_replan_hint_repair_and_give_up(env_factory: Any) -> None:
    env = env_factory([_synth("", give_up=True), _synth(GOOD)])
    syn = LLMSynthesizer(env.ctx)
    hist = [
        AttemptFeedback(1, "a1", "trend.slope", "no_repair"),
        AttemptFeedback(2, "a2", "acf.acf1", "rejected_check"),
    ]
    assert syn.synthesize(_group(), 3, hist, []) is None
    assert "repaired no error" in env.prompts()[0]
    draft = Tool(id="r1.g1.a3", source=GOOD, outputs=("slope",), contract=Contract("trend.slope"))
    fixed = syn.repair(_group(), draft, "context selection: reads a covariate", [])
    assert fixed is not None and fixed.provenance.parent == "r1.g1.a3"
    assert "Problem: context selection: reads a covariate" in env.prompts()[1]


def test_catalog_and_rules_render_from_live_objects() -> None:
    from tsevo.library.primitives import CATALOG
    from tsevo.library.sandbox.facades import CTX_MEMBERS

    full, compact = render_primitives(False), render_primitives(True)
    assert all(f"P.{n}(" in full for n in CATALOG) and all(f"{n}(" in compact for n in CATALOG)
    rules = render_sandbox_rules()
    assert all(f"ctx.{m}(" in rules for m in CTX_MEMBERS)


def test_prompt_assets_have_the_expected_slots() -> None:
    from tsevo.roles.llm.prompts import load_prompt

    assert load_prompt("answerer").slots == {"question"}
    assert load_prompt("triage_define").slots == {"n", "max_categories", "errors"}
    assert "violation" in load_prompt("synthesizer_repair").slots
    _ = json  # keep the import used for readers grepping the JSON contracts
