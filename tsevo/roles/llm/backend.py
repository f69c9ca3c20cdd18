"""The LLM backend as a whole: every role on one client, and the callback that records it in a run.

* :func:`open_backend` builds the client from :class:`~.config.RoleConfigs` and the six LLM roles on
  one :class:`~.roles.RoleContext` (one client: cache, accounting, budget); with a run folder the
  response cache lives in it (``llm_cache.sqlite``) unless a cache path is configured.
  :meth:`tsevo.roles.RoleSet.llm` is the usual way in.
* :class:`LLMCallback` is what the backend contributes to a run (the engine knows no backend):
  the manifest fields (endpoint, models, cache), the resume check (a resumed run must keep the
  settings that change replies: its stored answers came from them), ``llm/config.json`` (role
  configs, no credentials), ``llm/accounting.json`` (per session and in total: per role and stage
  calls, cache hits, tokens, latency, retries, invalid replies, failures; plus fallbacks and the
  budget) and ``rounds/r<r>/llm_accounting.json`` (what each round cost). A stop (budget, replay
  miss, endpoint down) is recorded as an ``llm_stopped`` event; rerunning the same command resumes
  (cached replies are free).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsevo.store import RunLayout, RunStore

from ..callbacks import Callback, RunStopped
from .accounting import Accounting
from .client import LLMClient, clean_base_url
from .config import RoleConfigs
from .roles import (
    LLMAnswerer,
    LLMGlobalPlanner,
    LLMLocalPlanner,
    LLMReviewer,
    LLMSynthesizer,
    LLMTriage,
    RoleContext,
)

__all__ = ["REPLY_FIELDS", "ROLES", "LLMBackend", "LLMCallback", "open_backend"]

ROLES = ("answerer", "reviewer", "triage", "local_planner", "global_planner", "synthesizer")
#: Settings that change replies: a resumed run must keep them (its stored answers used them).
REPLY_FIELDS = ("model", "temperature", "max_tokens", "reasoning_effort", "seed")


@dataclass
class LLMBackend:
    """A client, the shared role context, the six roles on it, and its run callback.

    Attributes:
        configs: The role configs in use (cache path resolved).
        client: The client.
        ctx: The shared role context.
        roles: The LLM roles by role name.
        run_dir: The run folder the cache was placed in (if any).
        started: Wall-clock start of this session.
    """

    configs: RoleConfigs
    client: LLMClient
    ctx: RoleContext
    roles: dict[str, Any]
    run_dir: Path | None = None
    started: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        self.callback = LLMCallback(self)

    @property
    def accounting(self) -> Accounting:
        """The client's accounting (this session)."""
        return self.client.accounting

    @property
    def workers(self) -> int:
        """Questions answered concurrently (the default config's concurrency)."""
        return max(1, int(self.client.roles.default.concurrency))

    def models(self) -> dict[str, str]:
        """Model id per role."""
        return {r: self.configs.for_role(r).model for r in ROLES}

    def session_dict(self, status: str) -> dict[str, Any]:
        """This session's accounting, role counters, budget and detected capabilities."""
        return {
            "started": round(self.started, 3),
            "ended": round(time.time(), 3),
            "status": status,
            "accounting": self.accounting.to_dict(),
            "role_stats": {
                r: {
                    "fallbacks": s.fallbacks,
                    "invalid_final": s.invalid_final,
                    "stopped": s.stopped,
                }
                for r, s in sorted(self.ctx.stats.items())
            },
            "budget": self.client.budget.to_dict(),
            "capabilities": self.client.capabilities(),
        }

    def close(self) -> None:
        """Close the client (and the cache it opened)."""
        self.client.close()


def open_backend(
    configs: RoleConfigs,
    *,
    run_dir: str | Path | None = None,
    retries: int = 2,
    max_attempts: int = 3,
    max_points: int = 128,
) -> LLMBackend:
    """Build the client and the six LLM roles on it.

    Args:
        configs: Role configs (e.g. ``RoleConfigs.load(path, model=..., base_url=...)``).
        run_dir: Run folder; when given and no cache path is configured, the response cache is the
            run's ``llm_cache.sqlite``.
        retries: Re-asks after an invalid reply (the protocol's 2).
        max_attempts: Synthesis attempts per group (shown to the synthesizer).
        max_points: Most values per series in answering prompts.

    Returns:
        The backend (close it when done).
    """
    d = configs.default
    if run_dir is not None and d.cache_path is None and d.cache_mode != "off":
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        d = d.replace(cache_path=str(RunLayout(run_dir).llm_cache))
        configs = RoleConfigs(d, {r: dict(v) for r, v in configs.overrides.items()})
    client = LLMClient(configs)
    ctx = RoleContext(client, retries=retries, max_points=max_points)
    roles = {
        "answerer": LLMAnswerer(ctx),
        "reviewer": LLMReviewer(ctx),
        "triage": LLMTriage(ctx),
        "local_planner": LLMLocalPlanner(ctx),
        "global_planner": LLMGlobalPlanner(ctx),
        "synthesizer": LLMSynthesizer(ctx, max_attempts=max_attempts),
    }
    return LLMBackend(configs, client, ctx, roles, Path(run_dir) if run_dir is not None else None)


def _acc_delta(cur: Mapping[str, Any], prev: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for role, stages in cur.items():
        for stage, s in stages.items():
            p = prev.get(role, {}).get(stage, {})
            d = {k: (v - p.get(k, 0)) for k, v in s.items()}
            if any(v for v in d.values()):
                out.setdefault(role, {})[stage] = d
    return out


def _acc_add(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    return Accounting.from_dict(a).merge(Accounting.from_dict(b)).to_dict()


class LLMCallback(Callback):
    """What the LLM backend writes into a run: manifest fields, resume check, accounting."""

    def __init__(self, backend: LLMBackend) -> None:
        self.backend = backend
        self.snapshot: dict[str, Any] = {}
        self.last_round = 0

    # ------------------------------------------------------------------ run hooks
    def manifest(self) -> Mapping[str, Any]:
        """Backend, endpoint (no credentials), models per role and where the cache is."""
        be = self.backend
        d = be.configs.default
        own = be.run_dir is not None and d.cache_path == str(RunLayout(be.run_dir).llm_cache)
        return {
            "backend": "llm",
            "llm": {
                "base_url": clean_base_url(d.base_url),
                "models": be.models(),
                "cache": RunLayout(".").llm_cache.name if own else "external",
            },
        }

    def on_run_start(self, store: RunStore | None, *, resumed: bool) -> None:
        """Refuse a resume with other reply-affecting settings; record the configs."""
        if store is None:
            return
        old = store.read_json_or(store.layout.llm_config)
        if old:
            self._check_resume(store, RoleConfigs.from_dict(old["configs"]))
        else:
            store.write_json(store.layout.llm_config, {"configs": self.backend.configs.to_dict()})

    def on_round_end(self, r: int, result: Any, store: RunStore | None) -> None:
        """Write what round ``r`` cost and this session's accounting so far."""
        if store is None:
            return
        self._flush_round(r, store)
        self.last_round = r
        self._write_session("running", store)

    def on_stop(self, stop: RunStopped, store: RunStore | None) -> None:
        """Charge the partial round and record the stop as an ``llm_stopped`` event."""
        if store is None:
            return
        self._flush_round(self.last_round + 1, store)
        store.event("llm_stopped", reason=stop.reason, message=str(stop)[:500])

    def on_run_end(self, status: str, store: RunStore | None) -> None:
        """Write this session's accounting with its final status."""
        if store is not None:
            self._write_session(status, store)

    # ------------------------------------------------------------------ helpers
    def _check_resume(self, store: RunStore, prev: RoleConfigs) -> None:
        diffs = []
        for r in ROLES:
            a, b = prev.for_role(r), self.backend.configs.for_role(r)
            for f in REPLY_FIELDS:
                if getattr(a, f) != getattr(b, f):
                    diffs.append(f"{r}.{f}: {getattr(a, f)!r} -> {getattr(b, f)!r}")
        if diffs:
            raise ValueError(
                f"{store.root} was started with other LLM settings ({'; '.join(diffs[:4])}); its "
                "stored answers came from them. Resume with the same settings or choose another --out."
            )

    def _flush_round(self, r: int, store: RunStore) -> None:
        cur = self.backend.accounting.to_dict()
        delta = _acc_delta(cur, self.snapshot)
        self.snapshot = cur
        path = store.layout.round(r).llm_accounting
        old = store.read_json_or(path)
        total = _acc_add(old["accounting"], delta) if old else delta
        store.write_json(path, {"round": r, "accounting": total, "models": self.backend.models()})

    def _write_session(self, status: str, store: RunStore) -> None:
        old = store.read_json_or(store.layout.llm_accounting) or {"sessions": []}
        mine = round(self.backend.started, 3)
        sessions = [s for s in old["sessions"] if s.get("started") != mine]
        sessions.append(self.backend.session_dict(status))
        total: dict[str, Any] = {}
        for s in sessions:
            total = _acc_add(total, s["accounting"])
        store.write_json(store.layout.llm_accounting, {"sessions": sessions, "total": total})
