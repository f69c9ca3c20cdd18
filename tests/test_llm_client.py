"""LLM client layer against a real scripted HTTP server on loopback: config, capability detection,
cache and replay, budget, accounting, concurrency, prompt assets. No mocks of the client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import tomllib
import urllib.request
from pathlib import Path

import pandas as pd
import pydantic
import pytest

from tsevo.roles.llm import (
    Accounting,
    BudgetExhausted,
    BudgetLimits,
    CachedReply,
    ChatRequest,
    LLMCallError,
    LLMClient,
    LLMConfig,
    PromptTooLong,
    ReplayMiss,
    ResponseCache,
    RoleConfigs,
    Usage,
    api_key_source,
    json_call,
    load_prompt,
)
from tsevo.roles.llm.prompts import PromptError, available_prompts
from tsevo.testing import FakeOpenAIServer, Fault, match_substring

USER = [{"role": "user", "content": "Which option fits the series? Reply in JSON."}]


class Answer(pydantic.BaseModel):
    answer: str


def make(srv: FakeOpenAIServer, tmp_path: Path | None = None, **kw: object) -> LLMClient:
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    if tmp_path is not None:
        kw.setdefault("cache_path", str(tmp_path / "llm_cache.sqlite"))
    return LLMClient(LLMConfig(base_url=srv.base_url, model="scripted", **kw))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- config
def test_config_precedence_file_env_kwargs(tmp_path: Path) -> None:
    toml = tmp_path / "llm.toml"
    toml.write_text(
        textwrap.dedent(
            """
            [llm]
            base_url = "http://file:1/v1"
            model = "file-model"
            temperature = 0.3
            max_tokens = 111
            [llm.budget]
            max_calls = 7
            [llm.roles.reviewer]
            model = "reviewer-model"
            """
        )
    )
    env = {
        "TSEVO_LLM_MODEL": "env-model",
        "TSEVO_LLM_TIMEOUT_S": "9.5",
        "TSEVO_LLM_BUDGET_MAX_TOKENS": "500",
    }
    rc = RoleConfigs.load(toml, env=env, max_tokens=222, temperature=None)
    d = rc.default
    assert d.base_url == "http://file:1/v1"  # file over default
    assert d.model == "env-model"  # env over file
    assert d.timeout_s == 9.5 and isinstance(d.timeout_s, float)
    assert d.max_tokens == 222  # kwargs over file
    assert d.temperature == 0.3  # None kwargs are ignored
    assert d.budget == BudgetLimits(max_calls=7, max_tokens=500)
    assert rc.for_role("reviewer").model == "reviewer-model"
    assert rc.for_role("answerer").model == "env-model"
    # the paper's documented default: synthesis at a higher reasoning effort
    assert rc.for_role("synthesizer").reasoning_effort == "high"
    assert rc.for_role("triage").reasoning_effort is None
    # JSON file, and round trip through to_dict
    js = tmp_path / "llm.json"
    js.write_text(json.dumps({"model": "j", "cache_mode": "replay", "cache_path": "x.sqlite"}))
    cfg = LLMConfig.load(js, env={})
    assert (cfg.model, cfg.cache_mode) == ("j", "replay")
    assert LLMConfig.from_dict(cfg.to_dict()) == cfg
    assert RoleConfigs.from_dict(rc.to_dict()) == rc


def test_config_refuses_keys_and_bad_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('model = "m"\napi_key = "sk-in-a-file"\n')
    with pytest.raises(ValueError, match="environment only"):
        LLMConfig.load(bad, env={})
    with pytest.raises(TypeError, match="unknown"):
        LLMConfig.from_dict({"modle": "typo"})
    with pytest.raises(ValueError, match="reasoning_effort"):
        LLMConfig(model="m", reasoning_effort="extreme")
    with pytest.raises(ValueError, match="run-level"):
        RoleConfigs(LLMConfig(model="m"), {"triage": {"cache_path": "x"}})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-123")
    cfg = LLMConfig.load(env=dict(os.environ), model="m")
    assert "sk-test-SECRET-123" not in json.dumps(RoleConfigs(cfg).to_dict())
    assert api_key_source() == "OPENAI_API_KEY"


# ---------------------------------------------------------------------------- capabilities
def test_response_format_leaves_length_bounds_to_validation() -> None:
    """Length bounds stay out of the decoding grammar (llama.cpp's server crashed on the
    synthesizer's 16,000-character ``source``); the reply is still validated against them."""
    from tsevo.roles.llm.capabilities import grammar_schema
    from tsevo.roles.llm.roles.synthesizer import SynthReply

    full = SynthReply.model_json_schema()
    assert full["properties"]["source"]["maxLength"] == 16000
    for level in ("json_schema", "json_object_schema"):
        with FakeOpenAIServer(['{"answer": "A"}']) as srv:
            c = make(srv, json_mode=level)
            c.chat("synthesizer", "synthesize", USER, schema=full)
            rf = srv.chat_requests()[0]["response_format"]
        sent = rf["json_schema"]["schema"] if level == "json_schema" else rf["schema"]
        text = json.dumps(sent)
        assert "maxLength" not in text and "maxItems" not in text, level
        assert sent["properties"]["source"]["type"] == "string"
    weird = {"properties": {"maxLength": {"type": "integer", "maxLength": 3}}}
    assert grammar_schema(weird) == {"properties": {"maxLength": {"type": "integer"}}}


@pytest.mark.parametrize(
    ("server_kw", "expected", "sent"),
    [
        ({}, "json_schema", "json_schema"),  # OpenAI-like
        (
            {"response_formats": ("text", "json_object")},
            "json_object_schema",
            "json_object",
        ),  # llama.cpp
        (
            {"response_formats": ("text", "json_object"), "json_object_schema": False},
            "json_object",
            "json_object",
        ),
        ({"response_formats": ("text",)}, "prompt", None),
    ],
)
def test_capability_detection_chain(server_kw: dict, expected: str, sent: str | None) -> None:
    with FakeOpenAIServer(['{"answer": "A"}', '{"answer": "B"}'], **server_kw) as srv:
        c = make(srv)
        r = c.chat("answerer", "base", USER, schema=Answer.model_json_schema())
        assert r.json_mode == expected and r.parsed == {"answer": "A"}
        real = srv.chat_requests()
        assert len(real) == 1
        rf = real[0].get("response_format")
        assert (rf or {}).get("type") == sent
        if expected == "json_object_schema":
            assert rf["schema"]["properties"]["answer"]["type"] == "string"
        # the schema is always in the prompt too
        assert '"answer"' in real[0]["messages"][-1]["content"]
        probes = srv.chat_requests(probes=True)[:-1]
        n_probes = len(probes)
        # remembered per (base_url, model): a different request does not probe again
        c.chat(
            "answerer",
            "base",
            [{"role": "user", "content": "again, JSON"}],
            schema=Answer.model_json_schema(),
        )
        assert len(srv.chat_requests(probes=True)) == n_probes + 2
        assert c.accounting.get("client", "probe").calls == n_probes
        c.close()


def test_llama_cpp_500_on_json_schema_falls_back_during_a_real_request(tmp_path: Path) -> None:
    """A remembered capability that no longer holds steps down the ladder on the real request."""
    with FakeOpenAIServer.llama_cpp(default='{"answer": "A"}') as srv:
        c = make(srv, tmp_path)
        target = f"{srv.base_url}|scripted"
        assert c.cache is not None
        c.cache.set_capability(target, {"json_mode": "json_schema"})
        r = c.chat("answerer", "base", USER, schema=Answer.model_json_schema())
        assert r.parsed == {"answer": "A"} and r.json_mode == "json_object_schema"
        bodies = srv.chat_requests(probes=True)
        assert [b["response_format"]["type"] for b in bodies] == ["json_schema", "json_object"]
        assert c.capabilities()[target]["json_mode"] == "json_object_schema"
        c.close()
        # persisted: a new client on the same cache file neither probes nor retries the 500
        c2 = make(srv, tmp_path)
        c2.chat(
            "answerer",
            "base",
            [{"role": "user", "content": "new, JSON"}],
            schema=Answer.model_json_schema(),
        )
        assert srv.chat_requests(probes=True)[-1]["response_format"]["type"] == "json_object"
        assert len(srv.chat_requests(probes=True)) == 3
        c2.close()


def test_reasoning_effort_sent_only_when_set_and_dropped_when_refused() -> None:
    with FakeOpenAIServer(default="ok") as srv:
        c = make(srv)
        c.chat("answerer", "base", USER)
        c.chat("synthesizer", "synthesize", USER)
        bodies = srv.chat_requests()
        assert "reasoning_effort" not in bodies[0]
        assert bodies[1]["reasoning_effort"] == "high"  # documented default override
        c.close()
    with FakeOpenAIServer(default="ok", reasoning_effort=False) as srv:
        c = make(srv)
        r = c.chat("synthesizer", "synthesize", USER)
        assert r.text == "ok" and r.attempts == 2
        c.chat("synthesizer", "synthesize", [{"role": "user", "content": "second"}])
        bodies = srv.chat_requests()
        assert [("reasoning_effort" in b) for b in bodies] == [True, False, False]
        c.close()


# ---------------------------------------------------------------------------- cache and replay
def test_cache_hit_makes_zero_requests(tmp_path: Path) -> None:
    with FakeOpenAIServer(default="an answer") as srv:
        c = make(srv, tmp_path)
        r1 = c.chat("answerer", "base", USER)
        n = srv.n_requests
        r2 = c.chat("answerer", "base", USER)
        assert srv.n_requests == n  # zero network calls
        assert (r1.cached, r2.cached, r2.text, r2.attempts) == (False, True, "an answer", 0)
        assert r2.usage == r1.usage
        # anything that affects the output changes the key
        c.chat("answerer", "base", USER, temperature=0.7)
        c.chat("answerer", "base", USER, max_tokens=17)
        assert srv.n_chat == 3
        st = c.accounting.get("answerer", "base")
        assert (st.calls, st.cache_hits, st.requests) == (3, 1, 4)
        c.close()


def test_replay_miss_is_loud_and_seen_requests_replay_without_server(tmp_path: Path) -> None:
    path = tmp_path / "cassette.sqlite"
    with FakeOpenAIServer.llama_cpp(['{"answer": "C"}', "plain"]) as srv:
        c = make(srv, tmp_path, cache_path=str(path))
        obj, _ = json_call(c, "triage", "define", USER, Answer)
        c.chat("reviewer", "review", [{"role": "user", "content": "keep or replace?"}])
        c.close()
    # server stopped: nothing listens on its port any more
    replay = LLMClient(
        LLMConfig(
            base_url=srv.base_url, model="scripted", cache_path=str(path), cache_mode="replay"
        )
    )
    obj2, meta = json_call(replay, "triage", "define", USER, Answer)
    assert obj2 == obj == Answer(answer="C") and meta.cached
    assert (
        replay.chat("reviewer", "review", [{"role": "user", "content": "keep or replace?"}]).text
        == "plain"
    )
    with pytest.raises(ReplayMiss, match=r"[Rr]e-record") as ei:
        replay.chat("reviewer", "review", [{"role": "user", "content": "an unseen prompt"}])
    assert "role=reviewer" in str(ei.value)
    # the cassette does not depend on the server's URL (a new random port replays the same)
    other = LLMClient(
        LLMConfig(
            base_url="http://127.0.0.1:9/v1",
            model="scripted",
            cache_path=str(path),
            cache_mode="replay",
        )
    )
    assert other.chat(
        "reviewer", "review", [{"role": "user", "content": "keep or replace?"}]
    ).cached
    with pytest.raises(FileNotFoundError):
        ResponseCache(tmp_path / "missing.sqlite", mode="replay")


def test_cache_file_never_holds_the_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-tsevo-test-DO-NOT-STORE-4242"
    monkeypatch.setenv("TSEVO_LLM_API_KEY", secret)
    with FakeOpenAIServer.llama_cpp(default='{"answer": "A"}') as srv:
        url = srv.base_url.replace("http://", f"http://user:{secret}@")
        c = LLMClient(
            LLMConfig(base_url=url, model="scripted", cache_path=str(tmp_path / "c.sqlite"))
        )
        json_call(c, "answerer", "base", USER, Answer)
        c.chat("answerer", "base", [{"role": "user", "content": "x"}])
        assert c.capabilities()  # a capability row was written too
        c.close()
    files = list(tmp_path.iterdir())
    assert files
    for f in files:
        assert secret.encode() not in f.read_bytes(), f


def test_cache_survives_a_killed_process(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite"
    code = textwrap.dedent(
        f"""
        import os, signal
        from tsevo.roles.llm import CachedReply, ResponseCache, Usage
        c = ResponseCache({str(path)!r})
        for i in range(20):
            c.put(f"k{{i}}", {{"model": "m"}}, CachedReply(f"reply {{i}}", Usage(i, 1)))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert p.returncode == -9
    with ResponseCache(path) as c:
        assert len(c) == 20
        got = c.get("k19")
        assert got is not None and got.text == "reply 19" and got.usage == Usage(19, 1)


def test_cache_is_safe_across_threads(tmp_path: Path) -> None:
    c = ResponseCache(tmp_path / "t.sqlite")

    def work(t: int) -> None:
        for i in range(50):
            c.put(f"{t}-{i}", {"model": "m"}, CachedReply(str(i), Usage(1, 1)))
            assert c.get(f"{t}-{i}") is not None

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(c) == 200
    c.close()


# ---------------------------------------------------------------------------- budget
def test_budget_exhaustion_raises_before_sending(tmp_path: Path) -> None:
    with FakeOpenAIServer(default="ok") as srv:
        c = make(srv, tmp_path, budget=BudgetLimits(max_calls=2))
        c.chat("answerer", "base", [{"role": "user", "content": "1"}])
        c.chat("answerer", "base", [{"role": "user", "content": "2"}])
        with pytest.raises(BudgetExhausted, match="max_calls") as ei:
            c.chat("answerer", "base", [{"role": "user", "content": "3"}])
        assert ei.value.limit == "max_calls"
        assert srv.n_chat == 2  # the third request never left
        # cached replies stay free after the budget is spent (a rerun resumes)
        assert c.chat("answerer", "base", [{"role": "user", "content": "1"}]).cached
        assert c.accounting.totals().errors == 0
        c.close()
    with FakeOpenAIServer(default="a longer reply " * 20) as srv:
        c = make(srv, budget=BudgetLimits(max_tokens=50))
        c.chat("answerer", "base", USER)  # this reply crosses the limit
        with pytest.raises(BudgetExhausted, match="max_tokens"):
            c.chat("answerer", "base", [{"role": "user", "content": "next"}])
        assert srv.n_chat == 1
    with FakeOpenAIServer(default="ok") as srv:
        c = make(srv, budget=BudgetLimits(max_wall_s=0.0))
        with pytest.raises(BudgetExhausted, match="max_wall_s"):
            c.chat("answerer", "base", USER)
        assert srv.n_requests == 0


def test_prompt_too_long_is_refused_before_sending() -> None:
    with FakeOpenAIServer(default="ok") as srv:
        c = make(srv, max_prompt_tokens=20)
        with pytest.raises(PromptTooLong):
            c.chat("answerer", "base", [{"role": "user", "content": "1.2345, " * 50}])
        assert srv.n_requests == 0
        with pytest.raises(TypeError, match="unknown chat parameters"):
            c.chat("answerer", "base", USER, temprature=0.1)


# ---------------------------------------------------------------------------- accounting
def test_accounting_per_role_and_stage() -> None:
    script = ["r1", "r2", "r3", '{"answer": 1}', '{"answer": "ok"}']
    with FakeOpenAIServer(script, response_formats=("text",)) as srv:
        c = make(srv)
        c.chat("triage", "define", [{"role": "user", "content": "a"}])
        c.chat("triage", "assign", [{"role": "user", "content": "b"}])
        c.chat("triage", "assign", [{"role": "user", "content": "b"}])  # cache hit
        c.chat("planner", "plan", [{"role": "user", "content": "c"}])
        json_call(c, "synthesizer", "synthesize", USER, Answer)  # one invalid, then valid
        acc = c.accounting
        assert (
            acc.get("triage", "assign").calls == 1 and acc.get("triage", "assign").cache_hits == 1
        )
        assert acc.get("triage", "define").calls == 1
        assert acc.get("planner", "plan").prompt_tokens > 0
        syn = acc.get("synthesizer", "synthesize")
        assert (syn.calls, syn.invalid) == (2, 1)
        assert acc.totals("triage").requests == 3
        df = acc.to_frame()
        assert set(df.columns) >= {
            "role",
            "stage",
            "calls",
            "cache_hits",
            "prompt_tokens",
            "completion_tokens",
            "latency_s",
            "retries",
            "invalid",
        }
        assert isinstance(df, pd.DataFrame) and len(df) == 5  # incl. the client's probe row
        again = Accounting.from_dict(acc.to_dict())
        merged = acc.merge(again)
        assert merged.get("triage", "assign").cache_hits == 2
        assert "triage:" in acc.summary()
        c.close()


# ---------------------------------------------------------------------------- concurrency
def test_map_chat_bounded_pool_keeps_order() -> None:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def responder(req: dict) -> str:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        text = req["messages"][-1]["content"]
        time.sleep(0.05 if int(text) % 2 else 0.01)  # later items often finish first
        with lock:
            state["now"] -= 1
        return f"echo {text}"

    with FakeOpenAIServer(responder) as srv:
        c = make(srv, concurrency=3)
        reqs = [
            ChatRequest("triage", "assign", [{"role": "user", "content": str(i)}])
            for i in range(12)
        ]
        replies = c.map_chat(reqs)
        assert [r.text for r in replies] == [f"echo {i}" for i in range(12)]
        assert 2 <= state["peak"] <= 3
        assert c.accounting.get("triage", "assign").calls == 12
        # exceptions in place when asked, in order
        out = c.map(lambda i: 1 / i, [1, 0, 2], return_exceptions=True)
        assert out[0] == 1 and isinstance(out[1], ZeroDivisionError) and out[2] == 0.5
        with pytest.raises(ZeroDivisionError):
            c.map(lambda i: 1 / i, [1, 0, 2])
        c.close()


def test_map_stops_on_budget_and_reports_in_place() -> None:
    with FakeOpenAIServer(default="ok") as srv:
        c = make(srv, concurrency=1, budget=BudgetLimits(max_calls=3))
        reqs = [ChatRequest("a", "s", [{"role": "user", "content": str(i)}]) for i in range(5)]
        out = c.map_chat(reqs, return_exceptions=True)
        assert [type(x).__name__ for x in out] == ["LLMReply"] * 3 + ["BudgetExhausted"] * 2
        assert srv.n_chat == 3


def test_failures_are_classified_and_not_retried_when_permanent() -> None:
    with FakeOpenAIServer([Fault.error(401, "bad key"), Fault.error(400, "bad request")]) as srv:
        c = make(srv, max_retries=3)
        with pytest.raises(LLMCallError) as ei:
            c.chat("a", "s", USER)
        assert (ei.value.kind, ei.value.status, ei.value.attempts) == ("auth", 401, 1)
        with pytest.raises(LLMCallError) as ei:
            c.chat("a", "s", [{"role": "user", "content": "x"}])
        assert ei.value.kind == "bad_request" and not ei.value.retryable
        assert srv.n_chat == 2
        assert c.accounting.get("a", "s").errors == 2


def test_model_required_and_models_route() -> None:
    with FakeOpenAIServer(default="ok", models=("m1", "m2")) as srv:
        with urllib.request.urlopen(srv.base_url + "/models", timeout=5) as resp:
            data = json.loads(resp.read())
        assert [m["id"] for m in data["data"]] == ["m1", "m2"]
        c = LLMClient(LLMConfig(base_url=srv.base_url))
        with pytest.raises(ValueError, match="no model configured"):
            c.chat("a", "s", USER)


# ---------------------------------------------------------------------------- prompt assets
def test_prompt_assets_fail_loudly_on_slots() -> None:
    t = load_prompt("json_contract")
    assert t.slots == {"schema"}
    assert "SCHEMA-X" in t.render(schema="SCHEMA-X")
    with pytest.raises(PromptError, match="missing"):
        t.render()
    with pytest.raises(PromptError, match="unknown"):
        t.render(schema="x", extra="y")
    with pytest.raises(PromptError, match="no prompt asset"):
        load_prompt("does_not_exist")
    assert {"json_contract", "retry_feedback", "probe_json"} <= set(available_prompts())


def test_prompt_assets_are_package_data(repo_root: Path) -> None:
    """pyproject's package-data globs cover the .txt/.md prompt assets."""
    cfg = tomllib.loads((repo_root / "pyproject.toml").read_text())
    globs = cfg["tool"]["setuptools"]["package-data"]["*"]
    assert "*.txt" in globs and "*.md" in globs
    assert (repo_root / "tsevo/roles/llm/prompts/__init__.py").is_file()


def test_match_substring_responder() -> None:
    responder = match_substring({"Q-017": "seasonal", "Q-018": {"answer": "B"}}, default="dunno")
    with FakeOpenAIServer(responder) as srv:
        c = make(srv)
        assert c.chat("a", "s", [{"role": "user", "content": "about Q-017"}]).text == "seasonal"
        assert json.loads(c.chat("a", "s", [{"role": "user", "content": "Q-018"}]).text) == {
            "answer": "B"
        }
        assert c.chat("a", "s", [{"role": "user", "content": "other"}]).text == "dunno"
