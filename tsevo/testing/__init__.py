"""Offline helpers that ship with tsevo: a scripted OpenAI-compatible server for tests and workshops.

* :class:`FakeOpenAIServer`: a real HTTP server on loopback speaking the OpenAI protocol, its replies
  scripted (a list, or a function of the request), with injectable faults.
* :class:`BuiltinResponder`: a script that answers every LLM role's request with what the builtin
  roles compute, so a whole round runs through real HTTP with no model (replies are computed, not
  a model's).
* :func:`scripted_server` / :func:`serve` (``tsevo serve-scripted``): the two together on a port of
  127.0.0.1 for a room with no API key; it serves one model id, :data:`SCRIPTED_MODEL`, which says
  that the replies are computed, not a model's.

Example:
    >>> from tsevo.testing import FakeOpenAIServer, Fault
"""

from .fake_openai import FakeOpenAIServer, Fault, RecordedRequest, Reply, Responder, match_substring
from .responder import KINDS, BuiltinResponder
from .scripted import DEFAULT_PORT, SCRIPTED_MODEL, ScriptedService, banner, scripted_server, serve

__all__ = [
    "DEFAULT_PORT",
    "KINDS",
    "SCRIPTED_MODEL",
    "BuiltinResponder",
    "FakeOpenAIServer",
    "Fault",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedService",
    "banner",
    "match_substring",
    "scripted_server",
    "serve",
]
