"""``tsevo serve-scripted``: the scripted OpenAI-compatible server, for a room with no API key.

:func:`scripted_server` puts a :class:`~tsevo.testing.responder.BuiltinResponder` behind a
:class:`~tsevo.testing.fake_openai.FakeOpenAIServer` on 127.0.0.1, so the notebooks (and ``tsevo
evolve --backend llm``) can run the LLM path with real prompts, JSON contracts, retries, the cache
and the accounting, and no model at all. The replies are computed by tsevo's builtin roles, and
everything says so:

* the banner (:func:`banner`) and every status line printed while serving;
* the only model id served, :data:`SCRIPTED_MODEL`: every reply names it, a request for any other
  id gets HTTP 404, so the manifest of every run it serves (``llm.models``) and every cached reply
  carry it.

The responder knows the questions of one suite (by default the notebooks' ``tiny`` preset with seed
5, the notebooks' defaults) and the run's protocol seed (the notebook's ``seed``; run ids are
salted with it). A request about another suite gets an HTTP 400 that says how to restart the server.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from tsevo.data import Question

from .fake_openai import FakeOpenAIServer, Fault, Reply
from .responder import BuiltinResponder

__all__ = [
    "DEFAULT_PORT",
    "SCRIPTED_MODEL",
    "ScriptedService",
    "banner",
    "scripted_server",
    "serve",
]

SCRIPTED_MODEL = "tsevo-builtin-roles-computed-not-a-model"
"""The one model id the scripted server serves: its replies are computed, not generated."""
DEFAULT_PORT = 8765
"""The port ``tsevo serve-scripted`` binds by default (``--port 0``: a free one)."""


class ScriptedService:
    """The builtin responder wrapped with counters and a plain error for a foreign suite.

    Args:
        questions: The suite the served runs answer.
        seed: The served runs' protocol seed (a notebook's ``seed``).
        suite_ref: How the suite was specified (shown in errors and the banner).
    """

    def __init__(self, questions: Iterable[Question], *, seed: int, suite_ref: str) -> None:
        qs = list(questions)
        self.responder = BuiltinResponder(qs, seed=seed)
        self.n_questions = len(qs)
        self.seed = seed
        self.suite_ref = suite_ref
        self.refused = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        """Answer one chat request with what the builtin role computes."""
        try:
            return self.responder(body)
        except ValueError as e:  # no tsevo role's prompt
            with self._lock:
                self.refused += 1
            return Fault.error(400, f"tsevo scripted server: not a tsevo role request: {e}")
        except KeyError as e:  # a question it does not know
            with self._lock:
                self.refused += 1
            return Fault.error(
                400,
                f"tsevo scripted server: this request is not about the suite it serves "
                f"({self.suite_ref}, protocol seed {self.seed}): {type(e).__name__}: {e}. "
                "Restart it with the notebook's size and seed: "
                "tsevo serve-scripted --suite synthetic:<size> --seed <seed>",
            )

    @property
    def counts(self) -> Mapping[str, int]:
        """Replies computed per request kind (answer, review, define, ...)."""
        return dict(self.responder.counts)

    def status(self, srv: FakeOpenAIServer | None = None) -> str:
        """One status line: replies computed so far per kind, and requests refused.

        Args:
            srv: The server (to count requests for another model id, refused with HTTP 404).
        """
        c = Counter(self.counts)
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none yet"
        line = (
            f"[scripted] {sum(c.values())} replies computed by the builtin roles, not a model "
            f"({kinds}); {self.refused} refused (not a role request of the suite served)"
        )
        if srv is not None:
            asked = [r.body.get("model") for r in srv.requests if r.body is not None]
            wrong = sum(1 for m in asked if m != SCRIPTED_MODEL)
            if wrong:
                line += f"; {wrong} refused for another model id (use model={SCRIPTED_MODEL!r})"
        return line


def scripted_server(
    questions: Iterable[Question], *, seed: int, suite_ref: str, port: int = 0
) -> tuple[FakeOpenAIServer, ScriptedService]:
    """The scripted server (not started) and its service; it serves only :data:`SCRIPTED_MODEL`."""
    service = ScriptedService(questions, seed=seed, suite_ref=suite_ref)
    srv = FakeOpenAIServer(
        service, models=(SCRIPTED_MODEL,), served_model=SCRIPTED_MODEL, port=port
    )
    return srv, service


def banner(srv: FakeOpenAIServer, service: ScriptedService) -> str:
    """What ``tsevo serve-scripted`` prints first: what it is, where, and how to point a notebook."""
    rule = "=" * 78
    return "\n".join(
        [
            rule,
            "tsevo scripted OpenAI-compatible server (offline, for teaching and tests)",
            "THE REPLIES ARE COMPUTED BY TSEVO'S BUILTIN ROLES, NOT BY A LANGUAGE MODEL.",
            "Prompts, JSON contracts, retries, the response cache and the accounting are real;",
            "the answers, plans and tools are what the deterministic builtin backend would give.",
            rule,
            f"base_url: {srv.base_url}",
            f"model:    {SCRIPTED_MODEL}  (the only id served; it lands in every run's manifest)",
            f"suite:    {service.suite_ref}, {service.n_questions} questions, "
            f"protocol seed {service.seed}",
            "notebook parameters:",
            f'    backend = "llm"; base_url = "{srv.base_url}"; model = "{SCRIPTED_MODEL}"',
            "command line:",
            f"    tsevo evolve --backend llm --base-url {srv.base_url} --model {SCRIPTED_MODEL} "
            f"--suite {service.suite_ref.split(':seed=')[0]} --seed {service.seed} --out runs/scripted",
            "no API key is needed (any value is accepted). Stop with Ctrl-C.",
            rule,
        ]
    )


def serve(
    srv: FakeOpenAIServer,
    service: ScriptedService,
    *,
    out: TextIO | None = None,
    every_s: float = 5.0,
    stop: threading.Event | None = None,
    on_ready: Callable[[FakeOpenAIServer], None] | None = None,
) -> int:
    """Start the server, print the banner, print a status line when counts change, until stopped.

    Stops on Ctrl-C, SIGTERM (when called from the main thread) or ``stop``; prints a last status
    line. Returns 0.
    """
    stream = out if out is not None else sys.stdout
    stop = stop if stop is not None else threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with srv:
        print(banner(srv, service), file=stream, flush=True)
        if on_ready is not None:
            on_ready(srv)
        last = ""
        try:
            while not stop.wait(every_s):
                line = service.status(srv)
                if line != last:
                    print(time.strftime("%H:%M:%S ") + line, file=stream, flush=True)
                    last = line
        except KeyboardInterrupt:
            pass
        final = service.status(srv)
    print(f"stopped. {final}", file=stream, flush=True)
    return 0
