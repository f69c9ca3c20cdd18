"""Configuration of the LLM backend: one frozen :class:`LLMConfig` per role, merged from four sources.

Precedence (lowest to highest): field defaults < a config file (TOML or JSON) < environment
variables ``TSEVO_LLM_<FIELD>`` (budget fields: ``TSEVO_LLM_BUDGET_<FIELD>``) < explicit keyword
arguments (what the CLI flags become). The API key is read from the environment only
(``TSEVO_LLM_API_KEY``, then ``OPENAI_API_KEY``): it is never a field, never written to a config,
a manifest or the response cache, and a config file that names one is refused.

All roles share one config by default (the paper switches them together). :class:`RoleConfigs`
adds per-role overrides; the documented default override runs the ``synthesizer`` role at
``reasoning_effort="high"`` (the paper's higher effort for synthesis). A model that takes no
reasoning effort rejects the parameter, and the client then stops sending it (detected by
behaviour, see :mod:`tsevo.roles.llm.client`).

Example:
    >>> cfg = LLMConfig(base_url="http://127.0.0.1:8080/v1", model="gemma3-270m")
    >>> roles = RoleConfigs(cfg)
    >>> roles.for_role("answerer").reasoning_effort is None
    True
    >>> roles.for_role("synthesizer").reasoning_effort
    'high'
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "API_KEY_ENV_VARS",
    "DEFAULT_ROLE_OVERRIDES",
    "ENV_PREFIX",
    "BudgetLimits",
    "LLMConfig",
    "LLMError",
    "RoleConfigs",
    "api_key_from_env",
    "api_key_source",
]

ENV_PREFIX = "TSEVO_LLM_"
API_KEY_ENV_VARS = ("TSEVO_LLM_API_KEY", "OPENAI_API_KEY")
CONFIG_ENV_VAR = "TSEVO_LLM_CONFIG"

CacheMode = Literal["read_write", "replay", "off"]
JsonMode = Literal["auto", "json_schema", "json_object_schema", "json_object", "prompt"]
CACHE_MODES = ("read_write", "replay", "off")
JSON_MODES = ("auto", "json_schema", "json_object_schema", "json_object", "prompt")
REASONING_EFFORTS = ("low", "medium", "high")

#: Fields that belong to the run, not to a role: a role override may not change them.
RUN_LEVEL_FIELDS = frozenset({"cache_path", "cache_mode", "budget", "concurrency"})

#: The paper runs synthesis at a higher reasoning effort than the other roles.
DEFAULT_ROLE_OVERRIDES: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {"synthesizer": MappingProxyType({"reasoning_effort": "high"})}
)

_KEY_NAMES = frozenset({"api_key", "apikey", "key", "openai_api_key", "token", "authorization"})


class LLMError(Exception):
    """Base class of every error the LLM backend raises on purpose."""


def api_key_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """Return the API key from the environment (``TSEVO_LLM_API_KEY`` first, then ``OPENAI_API_KEY``).

    Args:
        env: Environment to read (defaults to ``os.environ``).

    Returns:
        The key, or None when neither variable is set (local servers need none).
    """
    env = os.environ if env is None else env
    for name in API_KEY_ENV_VARS:
        v = env.get(name)
        if v:
            return v
    return None


def api_key_source(env: Mapping[str, str] | None = None) -> str | None:
    """Name of the variable the key would come from (for manifests: the name, never the value)."""
    env = os.environ if env is None else env
    return next((n for n in API_KEY_ENV_VARS if env.get(n)), None)


@dataclass(frozen=True, kw_only=True)
class BudgetLimits:
    """Per-run limits; None means unlimited. Checked before every network call.

    Attributes:
        max_calls: Network requests (retries and capability probes included).
        max_tokens: Prompt plus completion tokens over the run.
        max_wall_s: Seconds since the client was created.
    """

    max_calls: int | None = None
    max_tokens: int | None = None
    max_wall_s: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v < 0):
                raise ValueError(
                    f"budget.{f.name} must be a non-negative number or None, got {v!r}"
                )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return dataclasses.asdict(self)


def _opt_int(v: Any) -> int | None:
    return None if _is_none(v) else int(v)


def _opt_float(v: Any) -> float | None:
    return None if _is_none(v) else float(v)


def _opt_str(v: Any) -> str | None:
    return None if _is_none(v) else str(v)


def _is_none(v: Any) -> bool:
    return v is None or (isinstance(v, str) and v.strip().lower() in ("", "none", "null"))


_COERCE: dict[str, Any] = {
    "base_url": str,
    "model": str,
    "temperature": float,
    "max_tokens": int,
    "timeout_s": float,
    "concurrency": int,
    "reasoning_effort": _opt_str,
    "seed": _opt_int,
    "max_retries": int,
    "backoff_base_s": float,
    "backoff_cap_s": float,
    "cache_path": _opt_str,
    "cache_mode": str,
    "json_mode": str,
    "max_prompt_tokens": _opt_int,
}
_BUDGET_COERCE: dict[str, Any] = {
    "max_calls": _opt_int,
    "max_tokens": _opt_int,
    "max_wall_s": _opt_float,
}


@dataclass(frozen=True, kw_only=True)
class LLMConfig:
    """Everything one role needs to talk to an OpenAI-compatible endpoint (no credentials).

    Attributes:
        base_url: Endpoint root including ``/v1`` (OpenAI, vLLM, Ollama, LM Studio, llama.cpp).
        model: Model id as the server names it (required before a client is built).
        temperature: Sampling temperature (0 = greedy; the cache makes reruns free either way).
        max_tokens: Completion token limit per call.
        timeout_s: Per-request timeout in seconds.
        concurrency: Network requests in flight at once (run-level).
        reasoning_effort: None (not sent) or ``low`` | ``medium`` | ``high``.
        seed: Sampling seed sent to servers that accept one (None: not sent).
        max_retries: Retries after a transient failure (429, 5xx, timeout, connection).
        backoff_base_s: First backoff delay; doubles per retry, with jitter.
        backoff_cap_s: Largest backoff delay (also caps a server's Retry-After).
        cache_path: SQLite response cache; None keeps an in-memory cache for this process.
        cache_mode: ``read_write`` (hits are free), ``replay`` (an unseen request fails loudly,
            no network) or ``off``.
        json_mode: ``auto`` detects the server's JSON support by probing; or force one of
            ``json_schema`` | ``json_object_schema`` | ``json_object`` | ``prompt``.
        max_prompt_tokens: Estimated prompt-token limit checked before sending (None: unchecked).
        budget: Per-run limits (run-level).
    """

    base_url: str = "https://api.openai.com/v1"
    model: str = ""
    temperature: float = 0.0
    max_tokens: int = 2048
    timeout_s: float = 120.0
    concurrency: int = 4
    reasoning_effort: str | None = None
    seed: int | None = None
    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    cache_path: str | None = None
    cache_mode: CacheMode = "read_write"
    json_mode: JsonMode = "auto"
    max_prompt_tokens: int | None = None
    budget: BudgetLimits = field(default_factory=BudgetLimits)

    def __post_init__(self) -> None:
        if isinstance(self.budget, Mapping):
            object.__setattr__(self, "budget", BudgetLimits(**dict(self.budget)))
        if isinstance(self.cache_path, Path):
            object.__setattr__(self, "cache_path", str(self.cache_path))
        if not isinstance(self.base_url, str) or not self.base_url.startswith(
            ("http://", "https://")
        ):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not isinstance(self.model, str):
            raise ValueError(f"model must be a string, got {type(self.model).__name__}")
        if not (self.temperature >= 0):
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")
        for name in ("max_tokens", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries!r}")
        for name in ("timeout_s", "backoff_cap_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.backoff_base_s < 0:
            raise ValueError(f"backoff_base_s must be >= 0, got {self.backoff_base_s!r}")
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise ValueError(
                f"reasoning_effort must be None or one of {REASONING_EFFORTS}, "
                f"got {self.reasoning_effort!r}"
            )
        if self.cache_mode not in CACHE_MODES:
            raise ValueError(f"cache_mode must be one of {CACHE_MODES}, got {self.cache_mode!r}")
        if self.json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {JSON_MODES}, got {self.json_mode!r}")
        if self.max_prompt_tokens is not None and self.max_prompt_tokens < 1:
            raise ValueError(f"max_prompt_tokens must be >= 1, got {self.max_prompt_tokens!r}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LLMConfig:
        """Build from a dict (e.g. :meth:`to_dict` output); unknown keys and keys raise.

        Args:
            d: Field values; ``budget`` may be a dict.

        Raises:
            ValueError: The dict names an API key (keys come from the environment only).
            TypeError: Unknown fields.
        """
        _refuse_keys(d, "config")
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise TypeError(f"unknown LLM config fields: {sorted(unknown)}")
        kw = {k: _COERCE[k](v) if k in _COERCE else v for k, v in d.items()}
        if "budget" in kw and isinstance(kw["budget"], Mapping):
            b = dict(kw["budget"])
            _refuse_keys(b, "budget")
            bad = set(b) - set(_BUDGET_COERCE)
            if bad:
                raise TypeError(f"unknown budget fields: {sorted(bad)}")
            kw["budget"] = BudgetLimits(**{k: _BUDGET_COERCE[k](v) for k, v in b.items()})
        return cls(**kw)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Collect ``TSEVO_LLM_*`` settings from the environment (as overrides, not a config).

        Args:
            env: Environment to read (defaults to ``os.environ``).

        Returns:
            Field values found (``budget`` as a dict when any budget variable is set).
        """
        env = os.environ if env is None else env
        out: dict[str, Any] = {}
        for name, conv in _COERCE.items():
            key = ENV_PREFIX + name.upper()
            if key in env:
                out[name] = conv(env[key])
        budget = {
            n: conv(env[ENV_PREFIX + "BUDGET_" + n.upper()])
            for n, conv in _BUDGET_COERCE.items()
            if ENV_PREFIX + "BUDGET_" + n.upper() in env
        }
        if budget:
            out["budget"] = budget
        return out

    @classmethod
    def load(
        cls,
        path: str | Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> LLMConfig:
        """Merge defaults < file < environment < ``overrides`` into one config.

        Args:
            path: TOML or JSON file (top-level fields, or an ``[llm]`` table); None reads the
                path in ``TSEVO_LLM_CONFIG`` when set.
            env: Environment (defaults to ``os.environ``).
            **overrides: Explicit values (CLI flags); None values are ignored.

        Returns:
            The merged config.
        """
        return RoleConfigs.load(path, env=env, **overrides).default

    # ------------------------------------------------------------------ use
    def replace(self, **changes: Any) -> LLMConfig:
        """Copy with some fields changed (``budget`` may be a dict of changes)."""
        if isinstance(changes.get("budget"), Mapping):
            changes["budget"] = dataclasses.replace(self.budget, **dict(changes["budget"]))
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict of every field (never a credential: the key is not a field)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["budget"] = self.budget.to_dict()
        return d


def _refuse_keys(d: Mapping[str, Any], where: str) -> None:
    bad = [k for k in d if str(k).lower() in _KEY_NAMES]
    if bad:
        raise ValueError(
            f"{where} names {bad}: the API key is read from the environment only "
            f"({' or '.join(API_KEY_ENV_VARS)}), never from a config"
        )


def _merge(base: dict[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in new.items():
        if k == "budget" and isinstance(v, Mapping):
            out["budget"] = {**dict(out.get("budget") or {}), **dict(v)}
        else:
            out[k] = v
    return out


def _read_file(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    data: Any
    if path.suffix.lower() == ".json":
        data = json.loads(text)
    elif path.suffix.lower() == ".toml":
        data = tomllib.loads(text)
    else:
        raise ValueError(f"config file {path} must end in .toml or .json")
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a table/object at the top level")
    if "llm" in data and isinstance(data["llm"], dict):
        data = data["llm"]
    return data


@dataclass(frozen=True)
class RoleConfigs:
    """One default config plus per-role overrides (all roles switched together by default).

    Attributes:
        default: The config every role uses unless overridden.
        overrides: ``{role: {field: value}}``; defaults to :data:`DEFAULT_ROLE_OVERRIDES`
            (``synthesizer`` at ``reasoning_effort="high"``). Run-level fields (cache, budget,
            concurrency) cannot be overridden per role.
    """

    default: LLMConfig
    overrides: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: {k: dict(v) for k, v in DEFAULT_ROLE_OVERRIDES.items()}
    )

    def __post_init__(self) -> None:
        frozen: dict[str, Mapping[str, Any]] = {}
        known = {f.name for f in fields(LLMConfig)}
        for role, ov in self.overrides.items():
            _refuse_keys(ov, f"override for role {role!r}")
            bad = set(ov) - known
            if bad:
                raise TypeError(f"unknown fields in override for role {role!r}: {sorted(bad)}")
            run_level = set(ov) & RUN_LEVEL_FIELDS
            if run_level:
                raise ValueError(
                    f"override for role {role!r} sets run-level fields {sorted(run_level)}; "
                    "set them on the default config"
                )
            frozen[role] = MappingProxyType({k: _COERCE[k](v) for k, v in ov.items()})
        object.__setattr__(self, "overrides", MappingProxyType(frozen))
        for role in frozen:
            self.for_role(role)  # validate now, not at the first call

    def for_role(self, role: str) -> LLMConfig:
        """The config a role runs with (the default plus its override, if any)."""
        ov = self.overrides.get(role)
        return self.default.replace(**dict(ov)) if ov else self.default

    def with_override(self, role: str, **changes: Any) -> RoleConfigs:
        """Copy with one role's override extended (e.g. a transfer study's other model)."""
        ov = {r: dict(v) for r, v in self.overrides.items()}
        ov[role] = {**ov.get(role, {}), **changes}
        return RoleConfigs(self.default, ov)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (for the run's config.json; never a credential)."""
        return {
            "default": self.default.to_dict(),
            "overrides": {r: dict(v) for r, v in self.overrides.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoleConfigs:
        """Inverse of :meth:`to_dict`."""
        return cls(LLMConfig.from_dict(d["default"]), dict(d.get("overrides") or {}))

    @classmethod
    def load(
        cls,
        path: str | Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        role_overrides: Mapping[str, Mapping[str, Any]] | None = None,
        **overrides: Any,
    ) -> RoleConfigs:
        """Merge defaults < file < environment < explicit values; roles from file and arguments.

        Args:
            path: TOML or JSON config file; its ``roles`` table (``[roles.synthesizer]``) holds
                per-role overrides. None reads ``TSEVO_LLM_CONFIG`` when set.
            env: Environment (defaults to ``os.environ``).
            role_overrides: Explicit per-role overrides, merged over the file's and the defaults.
            **overrides: Explicit field values (CLI flags); None values are ignored.

        Returns:
            The merged role configs.
        """
        env = os.environ if env is None else env
        if path is None and env.get(CONFIG_ENV_VAR):
            path = env[CONFIG_ENV_VAR]
        merged: dict[str, Any] = {}
        roles: dict[str, dict[str, Any]] = {k: dict(v) for k, v in DEFAULT_ROLE_OVERRIDES.items()}
        if path is not None:
            data = _read_file(Path(path))
            for role, ov in dict(data.pop("roles", {}) or {}).items():
                roles[role] = {**roles.get(role, {}), **dict(ov)}
            merged = _merge(merged, data)
        merged = _merge(merged, LLMConfig.from_env(env))
        merged = _merge(merged, {k: v for k, v in overrides.items() if v is not None})
        for role, ov in dict(role_overrides or {}).items():
            roles[role] = {**roles.get(role, {}), **dict(ov)}
        return cls(LLMConfig.from_dict(merged), roles)
