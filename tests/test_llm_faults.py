"""Faults injected by the scripted server end in a retry, a re-ask or a bounded, classified failure."""

from __future__ import annotations

import time

import pydantic
import pytest

from tsevo.roles.llm import (
    InvalidReply,
    JsonReplyError,
    LLMCallError,
    LLMClient,
    LLMConfig,
    extract_json,
    json_call,
)
from tsevo.testing import FakeOpenAIServer, Fault

USER = [{"role": "user", "content": "Assign each error to a category."}]


class Assign(pydantic.BaseModel):
    assignments: dict[str, str]


class Answer(pydantic.BaseModel):
    answer: str
    confidence: float


def make(srv: FakeOpenAIServer, **kw: object) -> LLMClient:
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("max_retries", 3)
    return LLMClient(LLMConfig(base_url=srv.base_url, model="scripted", **kw))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- transport faults
def test_429_with_retry_after_then_success() -> None:
    with FakeOpenAIServer([Fault.rate_limit(retry_after=1), "fine"]) as srv:
        c = make(srv)
        t0 = time.monotonic()
        r = c.chat("triage", "assign", USER)
        waited = time.monotonic() - t0
        assert r.text == "fine" and r.attempts == 2
        assert waited >= 0.95  # Retry-After honoured, not the 0.01 s backoff
        times = [q.time for q in srv.requests]
        assert times[1] - times[0] >= 0.95
        assert c.accounting.get("triage", "assign").retries == 1


def test_500_then_success() -> None:
    with FakeOpenAIServer([Fault.server_error(500), Fault.server_error(503), "fine"]) as srv:
        c = make(srv)
        r = c.chat("a", "s", USER)
        assert (r.text, r.attempts) == ("fine", 3)
        assert srv.n_chat == 3


def test_timeout_then_success() -> None:
    with FakeOpenAIServer([Fault.slow(2.0, "too late"), "in time"]) as srv:
        c = make(srv, timeout_s=0.3)
        t0 = time.monotonic()
        r = c.chat("a", "s", USER)
        assert r.text == "in time" and r.attempts == 2
        assert time.monotonic() - t0 < 1.5  # did not wait for the slow reply


def test_dropped_connection_then_success() -> None:
    with FakeOpenAIServer([Fault.disconnect(), "fine"]) as srv:
        c = make(srv)
        assert c.chat("a", "s", USER).text == "fine"


def test_bounded_failure_after_max_retries() -> None:
    with FakeOpenAIServer(default=Fault.server_error(502, "bad gateway")) as srv:
        c = make(srv, max_retries=2)
        with pytest.raises(LLMCallError) as ei:
            c.chat("a", "s", USER)
        e = ei.value
        assert (e.kind, e.status, e.attempts, e.retries, e.retryable) == ("server", 502, 3, 2, True)
        assert srv.n_chat == 3
        st = c.accounting.get("a", "s")
        assert (st.errors, st.calls, st.retries) == (1, 0, 2)
    with FakeOpenAIServer(default=Fault.slow(1.0, "late")) as srv:
        c = make(srv, max_retries=1, timeout_s=0.2)
        with pytest.raises(LLMCallError) as ei:
            c.chat("a", "s", USER)
        assert ei.value.kind == "timeout" and ei.value.attempts == 2
    with FakeOpenAIServer(default=Fault.rate_limit(retry_after=None)) as srv:
        c = make(srv, max_retries=1)
        with pytest.raises(LLMCallError) as ei:
            c.chat("a", "s", USER)
        assert ei.value.kind == "rate_limit" and srv.n_chat == 2


# ---------------------------------------------------------------------------- content faults
def test_truncated_json_reask_with_feedback_then_success() -> None:
    good = {"assignments": {"q1": "c1", "q2": "c2"}}
    with FakeOpenAIServer.llama_cpp([Fault.truncated(good), good]) as srv:
        c = make(srv)
        obj, meta = json_call(c, "triage", "assign", USER, Assign)
        assert obj.assignments == {"q1": "c1", "q2": "c2"}
        assert meta.n_attempts == 2 and meta.n_invalid == 1
        assert "truncated" in (meta.attempts[0].error or "")
        second = srv.chat_requests()[1]["messages"]
        assert second[-2]["role"] == "assistant" and second[-2]["content"] == meta.attempts[0].text
        assert "truncated" in second[-1]["content"]  # the error is fed back
        assert c.accounting.get("triage", "assign").invalid == 1


def test_malformed_json_reask_then_success() -> None:
    with FakeOpenAIServer(
        [Fault.malformed(), '```json\n{"answer": "B", "confidence": 0.7}\n```']
    ) as srv:
        c = make(srv)
        obj, meta = json_call(c, "answerer", "base", USER, Answer)
        assert obj == Answer(answer="B", confidence=0.7)
        assert "malformed" in (meta.attempts[0].error or "")
        assert "malformed" in srv.chat_requests()[1]["messages"][-1]["content"]


def test_schema_violation_feedback_names_the_field() -> None:
    with FakeOpenAIServer(
        [{"answer": "B"}, {"answer": "B", "confidence": "high"}, {"answer": "B", "confidence": 0.9}]
    ) as srv:
        c = make(srv)
        obj, meta = json_call(c, "answerer", "base", USER, Answer)
        assert obj.confidence == 0.9 and meta.n_invalid == 2
        assert "confidence" in (meta.attempts[0].error or "")
        assert "confidence" in srv.chat_requests()[1]["messages"][-1]["content"]


def test_invalid_reply_after_retries_records_every_attempt() -> None:
    with FakeOpenAIServer(default=Fault.malformed("not json at all")) as srv:
        c = make(srv)
        with pytest.raises(InvalidReply) as ei:
            json_call(c, "triage", "assign", USER, Assign, retries=2)
        e = ei.value
        assert len(e.attempts) == 3 and all(a.error for a in e.attempts)
        assert e.meta.n_invalid == 3
        assert srv.n_chat == 3
        assert c.accounting.get("triage", "assign").invalid == 3


def test_extra_validator_missing_ids_reasks() -> None:
    ids = {"q1", "q2", "q3"}

    def covers(obj: Assign) -> str | None:
        missing = sorted(ids - set(obj.assignments))
        extra = sorted(set(obj.assignments) - ids)
        if missing or extra:
            return f"must cover exactly these ids; missing {missing}, unknown {extra}"
        return None

    partial = {"assignments": {"q1": "c1", "q3": "c2"}}  # a reply missing ids
    full = {"assignments": {"q1": "c1", "q2": "c1", "q3": "c2"}}
    with FakeOpenAIServer.llama_cpp([partial, full]) as srv:
        c = make(srv)
        obj, meta = json_call(c, "triage", "assign", USER, Assign, validate=covers)
        assert set(obj.assignments) == ids
        assert "missing ['q2']" in (meta.attempts[0].error or "")
        assert "missing ['q2']" in srv.chat_requests()[1]["messages"][-1]["content"]
    with FakeOpenAIServer(default=partial) as srv:
        c = make(srv)
        with pytest.raises(InvalidReply, match="missing"):
            json_call(c, "triage", "assign", USER, Assign, validate=covers, retries=1)
        assert srv.n_chat == 2


def test_validator_raising_valueerror_is_a_rejection() -> None:
    def no_z(obj: Answer) -> None:
        if obj.answer == "Z":
            raise ValueError("answer must be one of the option letters A-D")

    with FakeOpenAIServer(
        [{"answer": "Z", "confidence": 1}, {"answer": "A", "confidence": 1}]
    ) as srv:
        obj, meta = json_call(make(srv), "answerer", "base", USER, Answer, validate=no_z)
        assert obj.answer == "A" and "option letters" in (meta.attempts[0].error or "")


def test_transport_fault_inside_json_call_is_retried_not_reasked() -> None:
    with FakeOpenAIServer.llama_cpp(
        [Fault.rate_limit(0), Fault.server_error(), {"answer": "A", "confidence": 0.5}]
    ) as srv:
        c = make(srv)
        obj, meta = json_call(c, "answerer", "base", USER, Answer)
        assert obj.answer == "A" and meta.n_attempts == 1 and meta.n_invalid == 0
        assert c.accounting.get("answerer", "base").retries == 2


def test_scripted_unsupported_format_fault_steps_down_on_a_real_request() -> None:
    """The probe passes, the real request gets llama.cpp's 500: the client falls back and resends."""
    with FakeOpenAIServer([Fault.unsupported_format(), {"answer": "A", "confidence": 1}]) as srv:
        c = make(srv)
        obj, meta = json_call(c, "answerer", "base", USER, Answer)
        assert obj.answer == "A" and meta.n_invalid == 0
        kinds = [b["response_format"]["type"] for b in srv.chat_requests()]
        assert kinds == ["json_schema", "json_object"]
        assert next(iter(c.capabilities().values()))["json_mode"] == "json_object_schema"
        assert c.accounting.get("answerer", "base").errors == 0


@pytest.mark.parametrize(
    ("text", "finish", "why"),
    [
        ("", "stop", "empty"),
        ("The answer is B.", "stop", "no JSON object"),
        ('{"answer": "B", "conf', "stop", "truncated"),
        ('{"answer": "B"}', "length", None),  # complete despite the cut: accepted
        ('{"answer": "B", "confidence": 0.', "length", "token limit"),
        ("{'answer': 'B'}", "stop", "malformed"),
        ('Here you go: {"answer": "B"} hope it helps', "stop", None),
    ],
)
def test_extract_json_cases(text: str, finish: str, why: str | None) -> None:
    if why is None:
        assert extract_json(text, finish_reason=finish) == {"answer": "B"}
    else:
        with pytest.raises(JsonReplyError, match=why):
            extract_json(text, finish_reason=finish)
