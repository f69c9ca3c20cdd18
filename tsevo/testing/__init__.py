"""Offline helpers that ship with tsevo: a scripted OpenAI-compatible server for tests and workshops.

Example:
    >>> from tsevo.testing import FakeOpenAIServer, Fault
"""

from .fake_openai import FakeOpenAIServer, Fault, RecordedRequest, Reply, Responder, match_substring

__all__ = ["FakeOpenAIServer", "Fault", "RecordedRequest", "Reply", "Responder", "match_substring"]
