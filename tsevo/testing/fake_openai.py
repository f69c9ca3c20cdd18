"""A scripted OpenAI-compatible HTTP server on loopback, for tests, notebooks and offline workshops.

:class:`FakeOpenAIServer` is a real HTTP server (stdlib ``http.server`` in a thread, a random
free port on 127.0.0.1) that speaks ``GET /v1/models`` and ``POST /v1/chat/completions`` with the
OpenAI response shape, usage included. The client under test talks real HTTP to it; nothing is
mocked. Replies come from a *script*:

* a list of replies, served in order (a ``default`` may follow when it runs out), or
* a callable ``responder(request_json) -> reply``, so a test (or a whole round) can answer role
  requests deterministically from the request content.

A reply is a ``str`` (the message content), a ``dict`` (sent as its JSON text) or a
:class:`Fault`: 429 with Retry-After, 5xx, a slow reply past the client's timeout, a dropped
connection, truncated JSON (``finish_reason="length"``), malformed JSON, or the HTTP 500 that a
llama.cpp server returns for an OpenAI-style ``json_schema`` response format. A reply that misses
ids is ordinary content: script the dict without them.

The server also models capabilities: which ``response_format`` types it accepts (llama.cpp:
``text`` and ``json_object``, with a ``schema`` under ``json_object``), and whether it refuses
``reasoning_effort``. Capability probes (requests with the ``X-Tsevo-Probe`` header) pass the same
format checks but are answered by the server itself and never consume the script.

Every request is recorded (thread-safe) so tests can count calls.

Example:
    >>> from tsevo.testing import FakeOpenAIServer, Fault
    >>> with FakeOpenAIServer([Fault.server_error(), "hello"]) as srv:
    ...     srv.base_url.startswith("http://127.0.0.1:")
    True
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from tsevo.roles.llm.capabilities import PROBE_HEADER

__all__ = ["FakeOpenAIServer", "Fault", "RecordedRequest", "Reply", "Responder", "match_substring"]


#: llama.cpp server's answer to ``response_format={"type": "json_schema", ...}``.
LLAMA_CPP_JSON_SCHEMA_ERROR = (
    "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}]"
)


@dataclass(frozen=True)
class Fault:
    """A misbehaviour the server performs instead of (or before) a normal reply.

    Build with the classmethods; the fields are the recipe.

    Attributes:
        kind: ``status`` | ``slow`` | ``truncated`` | ``content`` | ``disconnect``.
        status: HTTP status (``status``).
        message: Error message (``status``) or raw content (``content``, ``truncated``).
        headers: Extra response headers (``status``).
        delay_s: Seconds to wait before answering (``slow``).
        then: The reply after the delay (``slow``).
    """

    kind: str
    status: int = 500
    message: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    then: Any = None

    @classmethod
    def rate_limit(cls, retry_after: float | None = 1.0) -> Fault:
        """HTTP 429, with a ``Retry-After`` header (seconds) unless None."""
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        return cls("status", 429, "Rate limit reached; please retry later", headers)

    @classmethod
    def server_error(cls, status: int = 500, message: str = "internal server error") -> Fault:
        """A 5xx (or any status) with an OpenAI-style error body."""
        return cls("status", status, message)

    @classmethod
    def error(cls, status: int, message: str, headers: Mapping[str, str] | None = None) -> Fault:
        """Any HTTP error status with an OpenAI-style error body."""
        return cls("status", status, message, dict(headers or {}))

    @classmethod
    def unsupported_format(cls) -> Fault:
        """The HTTP 500 llama.cpp returns for an OpenAI-style ``json_schema`` response format."""
        return cls("status", 500, LLAMA_CPP_JSON_SCHEMA_ERROR)

    @classmethod
    def slow(cls, delay_s: float, then: Reply = "") -> Fault:
        """Answer ``then`` only after ``delay_s`` seconds (past a short client timeout)."""
        return cls("slow", delay_s=delay_s, then=then)

    @classmethod
    def truncated(cls, reply: str | Mapping[str, Any], keep: float = 0.5) -> Fault:
        """The first ``keep`` fraction of the reply's text, with ``finish_reason="length"``."""
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return cls("truncated", message=text[: max(1, int(len(text) * keep))])

    @classmethod
    def malformed(cls, text: str = "{'answer': 'A', reason: no quotes,}") -> Fault:
        """Content that is not valid JSON (balanced, but not JSON)."""
        return cls("content", message=text)

    @classmethod
    def disconnect(cls) -> Fault:
        """Close the connection without any response."""
        return cls("disconnect")


Reply = Union[str, Mapping[str, Any], Fault]  # noqa: UP007 - a runtime alias, kept explicit
Responder = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received.

    Attributes:
        method: ``GET`` or ``POST``.
        path: Request path.
        body: Parsed JSON body (None for GET or an unparsable body).
        probe: True for a client capability probe.
        time: ``time.monotonic()`` on arrival.
    """

    method: str
    path: str
    body: dict[str, Any] | None
    probe: bool
    time: float


def match_substring(table: Mapping[str, Reply], default: Reply | None = None) -> Responder:
    """A responder that answers by the first table key found in the request's messages.

    Args:
        table: ``{substring: reply}``, tried in insertion order.
        default: Reply when nothing matches (None: an HTTP 400 that names the miss).

    Returns:
        A responder for :class:`FakeOpenAIServer`.
    """

    def respond(req: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in req.get("messages", []))
        for sub, reply in table.items():
            if sub in text:
                return reply
        if default is None:
            return Fault.error(400, "scripted server: no table entry matches the prompt")
        return default

    return respond


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4) if text else 0


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOpenAIServer


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def _send_json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(obj).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass  # the client gave up (e.g. its timeout fired first)

    def _error(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        etype = {
            400: "invalid_request_error",
            401: "authentication_error",
            404: "not_found_error",
            429: "rate_limit_error",
        }.get(status, "server_error")
        self._send_json(
            status, {"error": {"message": message, "type": etype, "code": None}}, headers
        )

    def do_GET(self) -> None:
        fake = self.server.fake
        fake._record("GET", self.path, None, False)
        if self.path.rstrip("/") == "/v1/models":
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "tsevo"}
                        for m in fake.models
                    ],
                },
            )
        else:
            self._error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw.decode("utf-8"))
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except (UnicodeDecodeError, ValueError):
            fake._record("POST", self.path, None, False)
            self._error(400, "request body is not a JSON object")
            return
        probe = self.headers.get(PROBE_HEADER) == "1"
        fake._record("POST", self.path, body, probe)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route POST {self.path}")
            return
        refusal = fake._refusal(body)
        if refusal is not None:
            self._error(*refusal)
            return
        reply: Reply = '{"ok": true}' if probe else fake._next_reply(body)
        self._answer(body, reply)

    def _answer(self, body: dict[str, Any], reply: Reply) -> None:
        fake = self.server.fake
        finish = "stop"
        if isinstance(reply, Fault):
            if reply.kind == "status":
                self._error(reply.status, reply.message, reply.headers)
                return
            if reply.kind == "disconnect":
                self.close_connection = True
                return
            if reply.kind == "slow":
                if fake._stopping.wait(reply.delay_s):
                    return
                self._answer(body, reply.then)
                return
            if reply.kind == "truncated":
                content, finish = reply.message, "length"
            elif reply.kind == "content":
                content = reply.message
            else:
                self._error(400, f"scripted server: unknown fault kind {reply.kind!r}")
                return
        elif isinstance(reply, str):
            content = reply
        elif isinstance(reply, Mapping):
            content = json.dumps(reply)
        else:
            self._error(400, f"scripted server: unusable reply of type {type(reply).__name__}")
            return
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        out: dict[str, Any] = {
            "id": f"chatcmpl-scripted-{fake.n_requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": fake.served_model or str(body.get("model", "scripted")),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                    "logprobs": None,
                }
            ],
        }
        if fake.report_usage:
            pt, ct = _tokens(prompt), _tokens(content)
            out["usage"] = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
        self._send_json(200, out)


class FakeOpenAIServer:
    """Scripted OpenAI-compatible server on 127.0.0.1 (a context manager).

    Args:
        script: A list of replies served in order, or a ``responder(request_json) -> reply``.
        default: Reply once a list script is exhausted (None: an HTTP 400 saying so).
        models: Model ids listed by ``GET /v1/models``.
        response_formats: ``response_format`` types accepted (``text``, ``json_object``,
            ``json_schema``). A refused ``json_schema`` gets llama.cpp's HTTP 500; a refused
            ``json_object`` an HTTP 400.
        json_object_schema: Whether a ``schema`` under ``json_object`` is accepted (llama.cpp:
            yes; otherwise HTTP 400 "extra inputs are not permitted").
        reasoning_effort: Whether ``reasoning_effort`` is accepted (otherwise HTTP 400
            "Unrecognized request argument supplied: reasoning_effort").
        report_usage: Include ``usage`` in replies.
        served_model: When set, the only model id served: every reply names it, and a request
            for another id gets HTTP 404 (as OpenAI answers an unknown model).
        port: Port on 127.0.0.1 (0: a free one).

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1`` once started.
    """

    def __init__(
        self,
        script: Sequence[Reply] | Responder | None = None,
        *,
        default: Reply | None = None,
        models: Sequence[str] = ("scripted",),
        response_formats: Collection[str] = ("text", "json_object", "json_schema"),
        json_object_schema: bool = True,
        reasoning_effort: bool = True,
        report_usage: bool = True,
        served_model: str | None = None,
        port: int = 0,
    ) -> None:
        self._responder: Responder | None = None
        self._script: list[Reply] = []
        if callable(script):
            self._responder = script
        elif script is not None:
            if isinstance(script, str | Mapping | Fault):
                raise TypeError("script must be a list of replies or a callable, not one reply")
            self._script = list(script)
        self.default = default
        self.models = tuple(models)
        self.response_formats = frozenset(response_formats)
        self.json_object_schema = json_object_schema
        self.reasoning_effort = reasoning_effort
        self.report_usage = report_usage
        self.served_model = served_model
        self.port = port
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    @classmethod
    def llama_cpp(
        cls, script: Sequence[Reply] | Responder | None = None, **kw: Any
    ) -> FakeOpenAIServer:
        """A server that behaves like ``llama_cpp.server`` on ``response_format``."""
        kw.setdefault("response_formats", ("text", "json_object"))
        kw.setdefault("json_object_schema", True)
        return cls(script, **kw)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeOpenAIServer:
        """Bind the port (a free one when 0) on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", self.port), _Handler)
        httpd.fake = self
        self._httpd = httpd
        port = httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-openai-{port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; slow replies in progress are abandoned."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ inspection
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def n_requests(self) -> int:
        """Number of requests received (all routes, probes included)."""
        with self._lock:
            return len(self._requests)

    def chat_requests(self, *, probes: bool = False) -> list[dict[str, Any]]:
        """Bodies of chat-completion requests (probes excluded unless asked)."""
        with self._lock:
            return [
                r.body
                for r in self._requests
                if r.path.rstrip("/") == "/v1/chat/completions"
                and r.body is not None
                and (probes or not r.probe)
            ]

    @property
    def n_chat(self) -> int:
        """Number of (non-probe) chat-completion requests received."""
        return len(self.chat_requests())

    def clear(self) -> None:
        """Forget recorded requests (the script position is kept)."""
        with self._lock:
            self._requests.clear()

    # ------------------------------------------------------------------ behaviour
    def _record(self, method: str, path: str, body: dict[str, Any] | None, probe: bool) -> None:
        with self._lock:
            self._requests.append(RecordedRequest(method, path, body, probe, time.monotonic()))

    def _refusal(self, body: Mapping[str, Any]) -> tuple[int, str] | None:
        rf = body.get("response_format")
        if rf is not None:
            rtype = rf.get("type") if isinstance(rf, Mapping) else None
            if rtype not in ("text", "json_object", "json_schema"):
                return 400, f"response_format.type: invalid value {rtype!r}"
            if rtype not in self.response_formats:
                if rtype == "json_schema":
                    return 500, LLAMA_CPP_JSON_SCHEMA_ERROR
                return 400, f"response_format of type {rtype!r} is not supported by this server"
            if rtype == "json_object" and "schema" in rf and not self.json_object_schema:
                return 400, "response_format.schema: Extra inputs are not permitted"
        if "reasoning_effort" in body and not self.reasoning_effort:
            return 400, "Unrecognized request argument supplied: reasoning_effort"
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return 400, "messages: a non-empty list is required"
        served, asked = self.served_model, body.get("model")
        if served and asked != served:
            return 404, f"The model {asked!r} does not exist here; the one served is {served!r}"
        return None

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self._responder is not None:
            try:
                return self._responder(body)
            except Exception as e:  # a broken responder is the test's bug: say so, don't retry
                return Fault.error(
                    400, f"scripted server: responder raised {type(e).__name__}: {e}"
                )
        with self._lock:
            i = self._served
            self._served += 1
        if i < len(self._script):
            return self._script[i]
        if self.default is not None:
            return self.default
        return Fault.error(
            400, f"scripted server: script exhausted after {len(self._script)} replies"
        )

    def __repr__(self) -> str:
        return f"FakeOpenAIServer({self.base_url or 'not started'}, {self.n_requests} requests)"
