"""Cache verdicts and samples: an invalid reply is cached (replay answers it) but never replayed into
a retry of the identical request. Real HTTP against the scripted server; no mocks of the client."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tsevo.data.synthetic import make_suite
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.roles import RoleSet
from tsevo.roles.llm import (
    BudgetExhausted,
    BudgetLimits,
    ChatRequest,
    InvalidReply,
    LLMClient,
    LLMConfig,
    ReplayMiss,
    ResponseCache,
    RoleConfigs,
    json_call,
)
from tsevo.testing import BuiltinResponder, FakeOpenAIServer, Fault

USER = [{"role": "user", "content": "Which option fits the series? Reply in JSON."}]
DEAD = "http://127.0.0.1:9/v1"  # nothing listens: any network call would fail


class Answer(pydantic.BaseModel):
    answer: str


def client(base_url: str, path: Path, mode: str = "read_write", **kw: Any) -> LLMClient:
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("max_retries", 0)
    kw.setdefault("json_mode", "json_object_schema")  # no probe requests: exact call counts
    cfg = LLMConfig(
        base_url=base_url, model="scripted", cache_path=str(path), cache_mode=mode, **kw
    )  # type: ignore[arg-type]
    return LLMClient(cfg)


def engine(c: LLMClient, tries: int = 2, retries: int = 1) -> list[Any]:
    """What the engine does: call the role, and on an invalid reply call it again, identically."""
    out: list[Any] = []
    for _ in range(tries):
        try:
            obj, meta = json_call(c, "triage", "define", USER, Answer, retries=retries)
        except InvalidReply as e:
            out.append(("invalid", [(a.text, a.error, a.sample) for a in e.attempts]))
            continue
        out.append(("ok", obj.answer, [(a.text, a.error, a.sample) for a in meta.attempts]))
        break
    return out


def test_engine_retry_gets_a_fresh_reply_and_rerun_and_replay_reproduce_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache.sqlite"
    with FakeOpenAIServer.llama_cpp(["no json here", "{still not", '{"answer": "C"}']) as srv:
        c = client(srv.base_url, path)
        first = engine(c)
        # the retry of the identical call was sent (not served the cached invalid reply)
        assert srv.n_chat == 3
        c.close()
    assert [r[0] for r in first] == ["invalid", "ok"]
    assert first[1][1] == "C" and first[1][2] == [('{"answer": "C"}', None, 1)]
    assert [s for _, _, s in first[0][1]] == [0, 0]
    st = c.accounting.get("triage", "define")
    assert (st.calls, st.cache_hits, st.invalid, st.requests) == (3, 0, 2, 3)
    assert c.budget.calls == 3  # the re-sent request is a call for the budget too

    with ResponseCache(path) as cache:
        assert cache.verdicts() == {"valid": 1, "invalid": 2, "unchecked": 0}
        rows = {(e["text"], e["sample"], e["status"]) for e in cache.entries()}
        assert ('{"answer": "C"}', 1, "valid") in rows and ("no json here", 0, "invalid") in rows

    # a rerun in read_write mode walks the same samples: same replies, zero calls
    with FakeOpenAIServer.llama_cpp(default='{"answer": "Z"}') as srv2:
        c2 = client(srv2.base_url, path)
        assert engine(c2) == first
        assert srv2.n_chat == 0
        assert c2.accounting.get("triage", "define").cache_hits == 3
        c2.close()

    # replay with no server at all reproduces it byte for byte, the invalid replies included
    c3 = client(DEAD, path, mode="replay")
    assert engine(c3) == first
    # once valid, the sample is reused: another identical call is free, as before
    obj, meta = json_call(c3, "triage", "define", USER, Answer, retries=1)
    assert obj.answer == "C" and meta.cached and meta.attempts[0].sample == 1
    c3.close()


def test_successful_run_with_a_reask_reruns_with_zero_calls(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with FakeOpenAIServer.llama_cpp(['{"answer": 1}', '{"answer": "A"}']) as srv:
        c = client(srv.base_url, path)
        obj, meta = json_call(c, "answerer", "base", USER, Answer, retries=2)
        assert obj.answer == "A" and meta.n_invalid == 1 and srv.n_chat == 2
        c.close()
    for mode, url in (("read_write", srv.base_url), ("replay", DEAD)):
        with FakeOpenAIServer.llama_cpp(default='{"answer": "Z"}') as other:
            c2 = client(other.base_url if mode == "read_write" else url, path, mode=mode)
            obj2, meta2 = json_call(c2, "answerer", "base", USER, Answer, retries=2)
            assert other.n_chat == 0
        assert obj2 == obj and meta2.cached
        assert [(a.text, a.error) for a in meta2.attempts] == [
            (a.text, a.error) for a in meta.attempts
        ]
        st = c2.accounting.get("answerer", "base")
        assert (st.calls, st.cache_hits, st.invalid) == (0, 2, 1)
        c2.close()


def test_replay_of_a_run_that_never_retried_fails_loudly_on_the_retry(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with FakeOpenAIServer.llama_cpp(["nope"]) as srv:
        c = client(srv.base_url, path)
        assert engine(c, tries=1, retries=0)[0][0] == "invalid"
        c.close()
    c2 = client(DEAD, path, mode="replay")
    assert engine(c2, tries=1, retries=0)[0][0] == "invalid"  # the recorded run is answered
    with pytest.raises(ReplayMiss, match="sample 1") as ei:
        json_call(c2, "triage", "define", USER, Answer, retries=0)  # the run never asked this
    assert ei.value.sample == 1
    c2.close()


def test_budget_stops_the_resend_before_anything_is_sent(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with FakeOpenAIServer.llama_cpp(["x", "y", '{"answer": "B"}']) as srv:
        c = client(srv.base_url, path, budget=BudgetLimits(max_calls=2))
        with pytest.raises(InvalidReply):
            json_call(c, "triage", "define", USER, Answer, retries=1)
        with pytest.raises(BudgetExhausted):
            json_call(c, "triage", "define", USER, Answer, retries=1)
        assert srv.n_chat == 2 and c.budget.calls == 2
        c.close()


def test_reject_after_a_caller_check_and_seeded_resample(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with FakeOpenAIServer.llama_cpp(['{"answer": "X"}', '{"answer": "B"}']) as srv:
        c = client(srv.base_url, path, seed=7)
        obj, meta = json_call(c, "triage", "define", USER, Answer)
        assert obj.answer == "X"
        c.reject(meta)  # e.g. an engine rule the contract does not express
        obj2, meta2 = json_call(c, "triage", "define", USER, Answer)
        assert obj2.answer == "B" and not meta2.cached and meta2.attempts[0].sample == 1
        # a seeded server repeats itself: the next sample is drawn with the next seed
        assert [b.get("seed") for b in srv.chat_requests()] == [7, 8]
        c.close()
    with ResponseCache(path) as cache:
        assert cache.verdicts() == {"valid": 1, "invalid": 1, "unchecked": 0}
    c2 = client(DEAD, path, mode="replay", seed=7)
    o, m = json_call(c2, "triage", "define", USER, Answer)
    c2.reject(m)
    assert (o.answer, json_call(c2, "triage", "define", USER, Answer)[0].answer) == ("X", "B")
    c2.close()


def test_concurrent_identical_requests_are_fetched_once(tmp_path: Path) -> None:
    lock = threading.Lock()
    served = [0]

    def slow(body: dict[str, Any]) -> str:
        with lock:
            served[0] += 1
            n = served[0]
        time.sleep(0.2)
        return f"reply {n}"

    with FakeOpenAIServer(slow) as srv:
        c = client(srv.base_url, tmp_path / "cache.sqlite", concurrency=4)
        reqs = [ChatRequest("answerer", "base", USER) for _ in range(4)]
        texts = [r.text for r in c.map_chat(reqs)]
        assert texts == ["reply 1"] * 4 and srv.n_chat == 1
        st = c.accounting.get("answerer", "base")
        assert (st.calls, st.cache_hits) == (1, 3)
        c.close()


def test_schema_1_file_is_read_in_replay_and_upgraded_for_writing(tmp_path: Path) -> None:
    from tsevo.roles.llm.cache import SCHEMA_VERSION

    # record one reply, then rewrite the file as a schema-1 cache (the layout before samples)
    path = tmp_path / "old.sqlite"
    with FakeOpenAIServer.llama_cpp(['{"answer": "D"}']) as srv:
        c = client(srv.base_url, path)
        reply = c.chat("triage", "define", USER, schema=Answer.model_json_schema())
        c.close()
    old = tmp_path / "v1.sqlite"
    with sqlite3.connect(path) as src, sqlite3.connect(old) as dst:
        dst.execute("CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT)")
        dst.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        dst.execute(
            "CREATE TABLE responses (key TEXT PRIMARY KEY, model TEXT, request TEXT, "
            "text TEXT NOT NULL, usage TEXT NOT NULL, finish_reason TEXT, created_at REAL)"
        )
        dst.execute(
            "CREATE TABLE capabilities (target TEXT PRIMARY KEY, data TEXT, updated_at REAL)"
        )
        for row in src.execute(
            "SELECT key, model, request, text, usage, finish_reason, created_at FROM responses"
        ):
            dst.execute("INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)", row)
    src.close()
    dst.close()

    with ResponseCache(old, mode="replay") as cache:
        assert cache.schema_version == 1
        got = cache.get(reply.key)
        assert got is not None and (got.text, got.sample, got.status) == (
            '{"answer": "D"}',
            0,
            None,
        )
        assert not cache.mark(reply.key, 0, valid=True)  # replay writes nothing
    c2 = client(DEAD, old, mode="replay")
    assert json_call(c2, "triage", "define", USER, Answer)[0].answer == "D"
    c2.close()
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT v FROM meta").fetchone()[0] == "1"  # untouched
    conn.close()

    with ResponseCache(old) as cache:
        assert cache.schema_version == SCHEMA_VERSION == 2
        assert cache.mark(reply.key, 0, valid=False)
        assert cache.get(reply.key) is not None and cache.get(reply.key).status == "invalid"  # type: ignore[union-attr]
        assert cache.samples(reply.key) == 1 and cache.get(reply.key, 1) is None


def _round_configs(base_url: str, **kw: Any) -> RoleConfigs:
    return RoleConfigs(
        LLMConfig(
            base_url=base_url,
            model="scripted",
            concurrency=1,
            backoff_base_s=0.01,
            backoff_cap_s=0.05,
            max_retries=3,
            timeout_s=20.0,
            **kw,
        )
    )


def test_round_define_retry_recovers_and_replays(tmp_path: Path) -> None:
    """Three malformed define replies void one define call; the engine's retry now gets a fresh
    reply (before this fix it replayed the three cached invalid ones and voided the round)."""
    suite = make_suite(8, seed=5)
    resp = BuiltinResponder(list(suite))
    resp.inject("define", *[Fault.malformed() for _ in range(3)])
    out = tmp_path / "run"
    with FakeOpenAIServer.llama_cpp(resp) as srv:
        res = evolve_llm(suite, ProtocolConfig(), _round_configs(srv.base_url), out=out, log=_quiet)
    rd = res.rounds[0]
    assert "clustering failed" not in (rd.reason or "")
    assert rd.status in ("accepted", "rejected")
    assert resp.counts["define"] >= 4  # 3 invalid + the engine's retry, sent afresh
    # replayed offline, the round is the same (the invalid replies are answered from the cassette)
    cfgs = _round_configs(DEAD, cache_path=str(out / "llm_cache.sqlite"), cache_mode="replay")
    res2 = evolve_llm(suite, ProtocolConfig(), cfgs, out=tmp_path / "replay", log=_quiet)
    assert res2.rounds[0].status == rd.status
    assert res2.library.fingerprint() == res.library.fingerprint()


def _quiet(_s: str) -> None:
    pass


def evolve_llm(suite: Any, cfg: ProtocolConfig, configs: Any, *, out: Path, log: Any) -> Any:
    """The one engine with every role on the LLM (the role set brings the accounting callback)."""
    with RoleSet.llm(configs, run_dir=out) as roles:
        return evolve(suite, roles=roles, config=cfg, out=out, log=log)
