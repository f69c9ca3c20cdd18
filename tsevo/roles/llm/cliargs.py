"""The LLM command-line flags, shared by ``tsevo evolve``/``eval`` and ``tsevo taxonomy``.

:func:`add_llm_arguments` adds the flags (same names, same meaning everywhere);
:func:`role_configs_from_args` turns parsed flags into :class:`~tsevo.roles.llm.config.RoleConfigs`
(a config file < ``TSEVO_LLM_*`` variables < the flags). The API key is never a flag: it comes from
``TSEVO_LLM_API_KEY`` or ``OPENAI_API_KEY`` only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .config import RoleConfigs

__all__ = ["add_llm_arguments", "role_configs_from_args"]


def add_llm_arguments(p: argparse.ArgumentParser, cache_default: str = "in the run folder") -> None:
    """Add the LLM flags to ``p`` as one argument group."""
    g = p.add_argument_group(
        "LLM backend (--backend llm; also TSEVO_LLM_* variables and a config file; "
        "the API key only from TSEVO_LLM_API_KEY or OPENAI_API_KEY)"
    )
    g.add_argument("--base-url", help="OpenAI-compatible endpoint incl. /v1")
    g.add_argument("--model", help="model id as the server names it")
    g.add_argument("--llm-config", type=Path, help="LLM config file (TOML or JSON)")
    g.add_argument("--temperature", type=float)
    g.add_argument("--max-tokens", type=int, help="completion tokens per call")
    g.add_argument("--max-prompt-tokens", type=int, help="estimated prompt-token limit per call")
    g.add_argument("--timeout", type=float, help="seconds per request")
    g.add_argument("--concurrency", type=int, help="requests in flight at once")
    g.add_argument("--reasoning-effort", choices=["low", "medium", "high"])
    g.add_argument(
        "--json-mode",
        choices=["auto", "json_schema", "json_object_schema", "json_object", "prompt"],
        help="response_format support (auto: detected by probing)",
    )
    g.add_argument(
        "--cache-mode",
        choices=["read_write", "replay", "off"],
        help="read_write (default), replay (offline, fails on an unseen request) or off",
    )
    g.add_argument(
        "--cache-path", type=Path, help=f"response cache file (default: {cache_default})"
    )
    g.add_argument("--budget-calls", type=int, help="stop after this many LLM requests")
    g.add_argument("--budget-tokens", type=int, help="stop after this many tokens")
    g.add_argument("--budget-wall-s", type=float, help="stop after this many seconds")


def role_configs_from_args(args: argparse.Namespace) -> RoleConfigs:
    """Role configs from the LLM flags (file < environment < flags; the key from the environment)."""
    budget = {
        k: v
        for k, v in {
            "max_calls": args.budget_calls,
            "max_tokens": args.budget_tokens,
            "max_wall_s": args.budget_wall_s,
        }.items()
        if v is not None
    }
    return RoleConfigs.load(
        args.llm_config,
        base_url=args.base_url,
        model=args.model,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        timeout_s=args.timeout,
        concurrency=args.concurrency,
        reasoning_effort=args.reasoning_effort,
        cache_mode=args.cache_mode,
        cache_path=str(args.cache_path) if getattr(args, "cache_path", None) else None,
        max_prompt_tokens=args.max_prompt_tokens,
        json_mode=args.json_mode,
        budget=budget or None,
    )
