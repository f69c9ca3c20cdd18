"""What every LLM role shares: the client, the stop signal, JSON calls with a circuit breaker, rendering.

Error policy of the LLM roles (on top of the engine's containment, see ``tsevo.evolve``):

* An invalid reply is re-asked with the validation error fed back (:func:`json_call`, at most
  ``retries`` re-asks); when every attempt fails the role raises
  :class:`~tsevo.roles.llm.jsoncall.InvalidReply` (or, for the answering roles, degrades as the
  protocol asks: a reviewer keeps the incoming answer, an answerer falls back and says so).
* A request that fails for good (:class:`~tsevo.roles.llm.client.LLMCallError`, after the client's
  bounded retries with backoff) is raised, so the engine contains it (bucket skipped, group stopped,
  question not completed). After ``max_consecutive_failures`` such failures in a row the endpoint
  is considered down and the run stops.
* A spent budget (:class:`~tsevo.roles.llm.accounting.BudgetExhausted`), a replay-mode miss
  (:class:`~tsevo.roles.llm.cache.ReplayMiss`) and a dead endpoint raise :class:`LLMRunStopped`.
  It is a :class:`~tsevo.roles.callbacks.RunStopped` and derives from ``BaseException`` on purpose, like ``KeyboardInterrupt``: the round engine
  contains ``Exception`` from roles (a failed role must not void a round), but these conditions
  must stop the whole run, leaving the store as a kill would (resumable; cached replies are free
  on the rerun) instead of being recorded as per-question failures that a resume would reuse.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from tsevo.data import QuestionView

from ...callbacks import RunStopped
from ..accounting import BudgetExhausted
from ..cache import ReplayMiss
from ..client import LLMCallError, LLMClient
from ..jsoncall import JsonCallMeta, json_call
from ..jsonreply import with_json_contract
from ..prompts import load_prompt
from ..render import PromptTooLong, check_budget, format_number, option_letter, render_series

__all__ = [
    "LLMRunStopped",
    "RoleContext",
    "RoleStats",
    "dumps",
    "fmt_outputs",
    "letters",
    "option_index",
    "question_series_brief",
    "render_rows",
    "trim_to_budget",
]

M = TypeVar("M", bound=pydantic.BaseModel)


class LLMRunStopped(RunStopped):
    """The LLM backend cannot go on: the run stops and can be resumed by rerunning it.

    Attributes:
        reason: ``budget`` | ``replay_miss`` | ``endpoint_down``.
        cause: The underlying error.
    """


def letters(n: int) -> list[str]:
    """Option letters for ``n`` options (``A``, ``B``, ...)."""
    return [option_letter(i) for i in range(n)]


def option_index(letter: str | None, n: int) -> int | None:
    """Index of an option letter (tolerates ``"b"``, ``"B)"``, ``"B. text"``), None when invalid."""
    if letter is None:
        return None
    s = str(letter).strip().upper()
    if not s:
        return None
    c = s[0]
    if len(s) > 1 and s[1].isalnum():
        return None
    i = ord(c) - ord("A")
    return i if 0 <= i < n else None


def fmt_outputs(outputs: Mapping[str, Any] | None, sig: int = 4) -> dict[str, Any] | None:
    """Tool outputs with numbers rounded to ``sig`` significant digits (booleans kept)."""
    if outputs is None:
        return None
    out: dict[str, Any] = {}
    for k, v in sorted(outputs.items()):
        if isinstance(v, bool):
            out[k] = v
        elif isinstance(v, int | float):
            out[k] = float(format_number(float(v), sig))
        else:
            out[k] = str(v)[:40]
    return out


def question_series_brief(q: QuestionView) -> list[str]:
    """One summary line per series of a question (no values): what evolution prompts show."""
    roles = [(n, "primary") for n in q.primary]
    roles += [(n, "covariate") for n in q.covariates]
    roles += [(n, "candidate") for n in q.candidates]
    return [render_series(n, q.series[n], max_points=1, role=r).split("\n", 1)[0] for n, r in roles]


def dumps(obj: Any) -> str:
    """Compact, deterministic JSON for prompt data blocks."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=False, separators=(",", ": "))


@dataclass
class RoleStats:
    """Role-level counters the client's accounting does not know (fallbacks, degraded decisions)."""

    fallbacks: int = 0
    invalid_final: int = 0
    stopped: str = ""


@dataclass
class RoleContext:
    """The client and the settings every LLM role of a run shares.

    Args:
        client: The LLM client (cache, accounting and budget live there).
        retries: Re-asks after an invalid reply (the protocol's ``<= 2 retries``).
        max_points: Most values per series in answering prompts (fewer are tried when a prompt
            exceeds the per-prompt token budget).
        sig: Significant digits of rendered numbers.
        max_consecutive_failures: Transient failures (timeouts, 5xx, 429, connection errors that
            outlasted the client's retries) in a row after which the endpoint is considered down
            and the run stops.
    """

    client: LLMClient
    retries: int = 2
    max_points: int = 128
    sig: int = 4
    max_consecutive_failures: int = 5
    stats: dict[str, RoleStats] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._failures = 0

    def role_stats(self, role: str) -> RoleStats:
        """Counters of one role."""
        with self._lock:
            return self.stats.setdefault(role, RoleStats())

    def model(self, role: str) -> str:
        """The model id a role runs on."""
        return self.client.roles.for_role(role).model

    def prompt_limit(self, role: str) -> int | None:
        """The per-prompt token budget of a role (None: unchecked)."""
        return self.client.roles.for_role(role).max_prompt_tokens

    def fits(self, role: str, text: str, reply: type[pydantic.BaseModel] | None = None) -> bool:
        """True when a one-message prompt fits the role's per-prompt token budget.

        With ``reply`` (the call's reply model) the JSON contract that the client appends to the
        prompt counts too, as it does in the client's own check.
        """
        msgs: list[dict[str, Any]] = [{"role": "user", "content": text}]
        if reply is not None:
            msgs = with_json_contract(msgs, reply.model_json_schema())
        try:
            check_budget(msgs, self.prompt_limit(role))
        except PromptTooLong:
            return False
        return True

    def render(self, asset: str, **slots: object) -> str:
        """Render a prompt asset."""
        return load_prompt(asset).render(**slots)

    def call(
        self,
        role: str,
        stage: str,
        prompt: str,
        model_cls: type[M],
        *,
        validate: Callable[[M], str | None] | None = None,
        retries: int | None = None,
        **params: Any,
    ) -> tuple[M, JsonCallMeta]:
        """One JSON call with the run-level stop conditions applied.

        ``params`` are per-call overrides of the role's request settings (``temperature``,
        ``seed``: the sampled answers of the self-consistency baseline).

        Raises:
            LLMRunStopped: Budget exhausted, replay miss, or the endpoint is down.
            InvalidReply: Every attempt was rejected.
            LLMCallError: The request failed for good (the endpoint is not yet considered down).
            PromptTooLong: The prompt exceeds the role's per-prompt token budget.
        """
        msgs = [{"role": "user", "content": prompt}]
        try:
            out = json_call(
                self.client,
                role,
                stage,
                msgs,
                model_cls,
                retries=self.retries if retries is None else retries,
                validate=validate,
                **params,
            )
        except BudgetExhausted as e:
            self.role_stats(role).stopped = "budget"
            raise LLMRunStopped("budget", str(e), e) from e
        except ReplayMiss as e:
            self.role_stats(role).stopped = "replay_miss"
            raise LLMRunStopped("replay_miss", str(e), e) from e
        except LLMCallError as e:
            if not e.retryable:  # a refused request (e.g. too long), not a dead endpoint
                raise
            with self._lock:
                self._failures += 1
                down = self._failures >= self.max_consecutive_failures
            if down:
                self.role_stats(role).stopped = "endpoint_down"
                raise LLMRunStopped(
                    "endpoint_down",
                    f"{self.max_consecutive_failures} LLM requests in a row failed for good; "
                    f"last: {e}. Check the server and rerun the same command to resume.",
                    e,
                ) from e
            raise
        with self._lock:
            self._failures = 0
        return out


def trim_to_budget(
    ctx: RoleContext,
    role: str,
    build: Callable[[int], str],
    n: int,
    *,
    minimum: int = 1,
    reply: type[pydantic.BaseModel] | None = None,
) -> tuple[str, int]:
    """Build a prompt from the first ``n`` items, dropping items until it fits the token budget.

    Args:
        ctx: Role context (budget).
        role: Role (its ``max_prompt_tokens``).
        build: ``k -> prompt`` using the first ``k`` items.
        n: Items available.
        minimum: Fewest items to try before giving up.
        reply: The call's reply model (its JSON contract counts; see :meth:`RoleContext.fits`).

    Returns:
        The prompt and the number of items it holds (the smallest tried when nothing fits:
        the client then refuses it with :class:`PromptTooLong`).
    """
    k = n
    while True:
        text = build(k)
        if ctx.fits(role, text, reply) or k <= minimum:
            return text, k
        k = max(minimum, k * 3 // 4 if k > 4 else k - 1)


def render_rows(rows: Sequence[Mapping[str, Any]]) -> str:
    """A JSON list with one row per line (readable for models and humans)."""
    if not rows:
        return "[]"
    return "[\n" + ",\n".join(dumps(r) for r in rows) + "\n]"
