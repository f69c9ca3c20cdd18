"""The LLM backend as a whole: a :class:`~tsevo.evolve.round.RoleSet` on one client, run-store glue, eval.

* :func:`build_roleset` puts every role of a round on one :class:`~.roles.RoleContext`.
* :func:`open_backend` builds the client from :class:`~.config.RoleConfigs`; with a run folder the
  response cache lives in it (``runs/<id>/llm_cache.sqlite``) unless a cache path is configured.
* :func:`evolve_llm` runs :func:`tsevo.evolve.run.evolve` on the LLM roles and writes what the
  backend knows into the run store: ``llm/config.json`` (role configs, no credentials),
  ``llm/accounting.json`` (per session and in total: per role and stage calls, cache hits,
  tokens, latency, retries, invalid replies, failures; plus fallbacks and the budget) and
  ``rounds/r<r>/llm_accounting.json`` (what each round cost). A stop (budget, replay miss, endpoint
  down) is recorded as an ``llm_stopped`` event and re-raised as
  :class:`~.roles.LLMRunStopped`; rerunning the same command resumes (cached replies are free).
* :func:`eval_library` answers a suite split with any library on any backend and reports paired
  deltas against the bare agent (the transfer study: a builtin-evolved library on an LLM agent, or
  an LLM-evolved library on the builtin agent).

Accounting files are written with :func:`tsevo.store.atomic_write_text` (the store's generic JSON
writer refuses any key containing ``token``, which token counts are); this module refuses
credential-like keys itself, and the API key is never part of any object it writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .accounting import Accounting
from .client import LLMClient, clean_base_url
from .config import RoleConfigs
from .roles import (
    LLMAnswerer,
    LLMGlobalPlanner,
    LLMLocalPlanner,
    LLMReviewer,
    LLMRunStopped,
    LLMSynthesizer,
    LLMTriage,
    RoleContext,
)

if TYPE_CHECKING:
    from tsevo.data import Suite
    from tsevo.evolve.config import ProtocolConfig
    from tsevo.evolve.round import RoleSet, RoundResult
    from tsevo.evolve.run import EvolutionResult
    from tsevo.library.library import Library

__all__ = [
    "ACCOUNTING_FILE",
    "CACHE_FILE",
    "CONFIG_FILE",
    "LLMBackend",
    "build_roleset",
    "eval_library",
    "evolve_llm",
    "open_backend",
]

CACHE_FILE = "llm_cache.sqlite"
CONFIG_FILE = "llm/config.json"
ACCOUNTING_FILE = "llm/accounting.json"
ROUND_ACCOUNTING = "rounds/r{r}/llm_accounting.json"
ROLES = ("answerer", "reviewer", "triage", "local_planner", "global_planner", "synthesizer")
#: Settings that change replies: a resumed run must keep them (its stored answers used them).
REPLY_FIELDS = ("model", "temperature", "max_tokens", "reasoning_effort", "seed")
_CREDENTIAL_KEYS = frozenset({"api_key", "apikey", "openai_api_key", "authorization", "password"})


def build_roleset(ctx: RoleContext, *, max_attempts: int = 3) -> RoleSet:
    """Every role of a round on the LLM behind ``ctx``."""
    from tsevo.evolve.round import RoleSet

    return RoleSet(
        LLMAnswerer(ctx),
        LLMReviewer(ctx),
        LLMTriage(ctx),
        LLMLocalPlanner(ctx),
        LLMGlobalPlanner(ctx),
        LLMSynthesizer(ctx, max_attempts=max_attempts),
        workers=max(1, int(ctx.client.roles.default.concurrency)),
    )


@dataclass
class LLMBackend:
    """A client, the shared role context and the role set built on it.

    Attributes:
        configs: The role configs in use (cache path resolved).
        client: The client.
        ctx: The shared role context.
        roles: The role set.
        started: Wall-clock start of this session.
    """

    configs: RoleConfigs
    client: LLMClient
    ctx: RoleContext
    roles: RoleSet
    started: float = field(default_factory=time.time)

    @property
    def accounting(self) -> Accounting:
        """The client's accounting (this session)."""
        return self.client.accounting

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
    """Build the client and the role set.

    Args:
        configs: Role configs (e.g. ``RoleConfigs.load(path, model=..., base_url=...)``).
        run_dir: Run folder; when given and no cache path is configured, the response cache is
            ``<run_dir>/llm_cache.sqlite``.
        retries: Re-asks after an invalid reply (the protocol's 2).
        max_attempts: Synthesis attempts per group (shown to the synthesizer).
        max_points: Most values per series in answering prompts.

    Returns:
        The backend (close it when done).
    """
    d = configs.default
    if run_dir is not None and d.cache_path is None and d.cache_mode != "off":
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        d = d.replace(cache_path=str(Path(run_dir) / CACHE_FILE))
        configs = RoleConfigs(d, {r: dict(v) for r, v in configs.overrides.items()})
    client = LLMClient(configs)
    ctx = RoleContext(client, retries=retries, max_points=max_points)
    return LLMBackend(configs, client, ctx, build_roleset(ctx, max_attempts=max_attempts))


# ---------------------------------------------------------------------------- run store glue
def _check_keys(obj: Any, where: str) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if str(k).lower() in _CREDENTIAL_KEYS and v:
                raise ValueError(f"refusing to write a credential-like field {k!r} to {where}")
            _check_keys(v, where)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _check_keys(v, where)


def write_json(root: str | Path, rel: str, obj: Any) -> Path:
    """Write JSON atomically inside a run folder (credential-like keys refused)."""
    from tsevo.store import atomic_write_text

    _check_keys(obj, rel)
    p = Path(root) / rel
    atomic_write_text(p, json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n")
    return p


def read_json(root: str | Path, rel: str) -> Any:
    """Read a JSON file of a run folder (None when absent)."""
    p = Path(root) / rel
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None


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


def _check_resume(out: Path, configs: RoleConfigs) -> None:
    old = read_json(out, CONFIG_FILE)
    if not old:
        return
    prev = RoleConfigs.from_dict(old["configs"])
    diffs = []
    for r in ROLES:
        a, b = prev.for_role(r), configs.for_role(r)
        for f in REPLY_FIELDS:
            if getattr(a, f) != getattr(b, f):
                diffs.append(f"{r}.{f}: {getattr(a, f)!r} -> {getattr(b, f)!r}")
    if diffs:
        raise ValueError(
            f"{out} was started with other LLM settings ({'; '.join(diffs[:4])}); its stored "
            "answers came from them. Resume with the same settings or choose another --out."
        )


class _Recorder:
    """Writes accounting into the run folder: per round (on the engine's hook) and per session."""

    def __init__(self, out: Path, backend: LLMBackend) -> None:
        self.out = out
        self.backend = backend
        self.snapshot: dict[str, Any] = {}
        self.last_round = 0

    def flush_round(self, r: int) -> None:
        cur = self.backend.accounting.to_dict()
        delta = _acc_delta(cur, self.snapshot)
        self.snapshot = cur
        rel = ROUND_ACCOUNTING.format(r=r)
        old = read_json(self.out, rel)
        total = _acc_add(old["accounting"], delta) if old else delta
        models = self.backend.models()
        write_json(self.out, rel, {"round": r, "accounting": total, "models": models})

    def on_round_end(self, r: int, _result: RoundResult) -> None:
        self.flush_round(r)
        self.last_round = r
        self.write_session("running")

    def write_session(self, status: str) -> None:
        old = read_json(self.out, ACCOUNTING_FILE) or {"sessions": []}
        sessions = [
            s for s in old["sessions"] if s.get("started") != round(self.backend.started, 3)
        ]
        sessions.append(self.backend.session_dict(status))
        total: dict[str, Any] = {}
        for s in sessions:
            total = _acc_add(total, s["accounting"])
        write_json(self.out, ACCOUNTING_FILE, {"sessions": sessions, "total": total})


def evolve_llm(
    suite: Suite,
    cfg: ProtocolConfig | None,
    configs: RoleConfigs,
    *,
    out: str | Path,
    suite_ref: str = "",
    log: Callable[[str], None] = print,
    progress: bool = False,
    retries: int = 2,
    max_points: int = 128,
) -> EvolutionResult:
    """Run :func:`~tsevo.evolve.run.evolve` with every role on the LLM; accounting goes to the store.

    Args:
        suite: A split suite.
        cfg: Protocol config (default: the paper's).
        configs: LLM role configs.
        out: Run folder (rerun the same call to resume).
        suite_ref: How the suite was specified.
        log: Line logger.
        progress: Progress bars.
        retries: Re-asks after an invalid reply.
        max_points: Most values per series in answering prompts.

    Returns:
        The evolution result.

    Raises:
        LLMRunStopped: Budget exhausted, replay miss or endpoint down: the run is left resumable
            and the stop is recorded (event ``llm_stopped`` and the session's accounting).
        ValueError: The run folder was started with other reply-affecting LLM settings.
    """
    from tsevo.evolve.config import ProtocolConfig
    from tsevo.evolve.run import evolve

    cfg = cfg or ProtocolConfig()
    outp = Path(out)
    _check_resume(outp, configs)
    backend = open_backend(
        configs,
        run_dir=outp,
        retries=retries,
        max_attempts=cfg.max_synthesis_attempts,
        max_points=max_points,
    )
    rec = _Recorder(outp, backend)
    d = backend.configs.default
    manifest = {
        "backend": "llm",
        "llm": {
            "base_url": clean_base_url(d.base_url),
            "models": backend.models(),
            "cache": CACHE_FILE if d.cache_path == str(outp / CACHE_FILE) else "external",
        },
    }
    status = "error"
    try:
        result = evolve(
            suite,
            cfg,
            out=outp,
            roles=backend.roles,
            suite_ref=suite_ref,
            log=log,
            progress=progress,
            manifest_extra=manifest,
            on_round_end=rec.on_round_end,
        )
        write_json(outp, CONFIG_FILE, {"configs": backend.configs.to_dict()})
        status = "finished"
        return result
    except LLMRunStopped as e:
        status = f"stopped:{e.reason}"
        rec.flush_round(rec.last_round + 1)
        _event(outp, "llm_stopped", reason=e.reason, message=str(e)[:500])
        log(f"LLM run stopped ({e.reason}): {e}")
        raise
    finally:
        if (outp / "config.json").exists():
            if not (outp / CONFIG_FILE).exists():
                write_json(outp, CONFIG_FILE, {"configs": backend.configs.to_dict()})
            rec.write_session(status)
        backend.close()


def _event(out: Path, kind: str, **data: Any) -> None:
    from tsevo.store import RunStore

    if (out / "config.json").exists():
        RunStore.open(out).event(kind, **data)


# ---------------------------------------------------------------------------- transfer eval
def eval_library(
    suite: Suite,
    library: Library,
    answerer: Any,
    reviewer: Any,
    *,
    split: str | None = "test",
    sandbox: Any = None,
    max_tools: int = 3,
    z: float = 1.96,
) -> dict[str, Any]:
    """Answer a split with the bare agent and with ``library`` (same roles); report paired deltas.

    Args:
        suite: The suite.
        library: The library to evaluate (evolved on any backend).
        answerer: Base answerer (builtin or LLM).
        reviewer: Reviewer (builtin or LLM). An :class:`LLMReviewer` is bound to the library's
            prompt patches.
        split: ``train`` | ``val`` | ``test``, or None for every question.
        sandbox: Tool executor (a new sandbox by default).
        max_tools: Tools per question over the chain.
        z: z of the paired lower bound.

    Returns:
        ``{"split", "n", "library", "tasks": [per task and ALL: n, bare, with_library, delta,
        helped, harmed], "counts": paired counts, "delta", "delta_lb", "tools_fired",
        "replaced"}``.
    """
    from tsevo.agent import Agent, records_by_id
    from tsevo.evolve.evaluate import outcomes, task_table
    from tsevo.evolve.gate import paired_counts
    from tsevo.library.library import Library as Lib
    from tsevo.library.sandbox import Sandbox

    if split is not None and not suite.splits:
        raise ValueError(f"the suite has no splits; use split=None instead of {split!r}")
    qs = list(getattr(suite, split)) if split is not None else list(suite)
    own = sandbox is None
    sb = Sandbox() if own else sandbox
    try:
        rev_lib = reviewer.for_library(library) if isinstance(reviewer, LLMReviewer) else reviewer
        bare = Agent(Lib(), answerer, reviewer, executor=sb, max_tools=max_tools)
        before = records_by_id(bare.answer_many(qs))
        withlib = Agent(
            library,
            answerer,
            rev_lib,
            executor=sb,
            max_tools=max_tools,
            base_cache=bare.base_cache,
        )
        after = records_by_id(withlib.answer_many(qs))
    finally:
        if own:
            sb.close()
    ob, oa = outcomes(before), outcomes(after)
    counts = paired_counts(ob, oa)
    tasks = task_table(before, after, ("bare", "with_library"))
    return {
        "split": split or "all",
        "n": len(qs),
        "library": library.fingerprint(),
        "tasks": tasks,
        "counts": counts.to_dict(),
        "delta": round(counts.delta, 6) if counts.n else None,
        "delta_lb": round(counts.delta_lb(z), 6) if counts.n else None,
        "tools_fired": sum(r.tool_fired for r in after.values()),
        "replaced": sum(bool(r.replaced_by) for r in after.values()),
    }


def eval_text(res: Mapping[str, Any]) -> str:
    """Printable table of :func:`eval_library`'s result."""
    lines = [
        f"transfer eval on {res['split']} ({res['n']} questions), library {res['library']}:",
        f"  {'task':28s} {'n':>5s} {'bare':>7s} {'w/ lib':>7s} {'delta':>7s} {'helped':>7s} {'harmed':>7s}",
    ]

    def pct(x: float | None) -> str:
        return "   -  " if x is None else f"{100 * x:6.1f}"

    for row in res["tasks"]:
        d = "   -  " if row["delta"] is None else f"{100 * row['delta']:+6.1f}"
        lines.append(
            f"  {row['task']:28s} {row['n']:5d} {pct(row['bare'])}  {pct(row['with_library'])}  "
            f"{d}  {row['helped']:6d}  {row['harmed']:6d}"
        )
    c = res["counts"]
    lb = "-" if res["delta_lb"] is None else f"{res['delta_lb']:+.4f}"
    dl = "-" if res["delta"] is None else f"{res['delta']:+.4f}"
    lines.append(
        f"paired: helped {c['helped']}, harmed {c['harmed']}, n {c['n']} of {c['n_attempted']}, "
        f"delta {dl}, delta_lb {lb}; tools fired on {res['tools_fired']}, "
        f"answers replaced on {res['replaced']}"
    )
    return "\n".join(lines)
