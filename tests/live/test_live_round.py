"""Live tier: one small evolution round through a real llama.cpp server (``make test-live``).

Skipped unless ``TSEVO_LIVE_BASE_URL`` is set (``.ci/live.sh`` starts the server and sets it). The
model (gemma-3-270m, a 270M base model) answers badly and its tool code is expected to fail the
checks: the test asserts that the round finishes and everything is recorded cleanly, not quality.
A JSON report (duration, replies needing a retry, calls and tokens per role) is written to
``$TSEVO_LIVE_OUT/live_report.json`` and printed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get("TSEVO_LIVE_BASE_URL"),
        reason="live tier: set TSEVO_LIVE_BASE_URL (run `make test-live`)",
    ),
]


def test_live_round_finishes_and_records_everything() -> None:
    from tsevo.analysis import run_summary, summary_text
    from tsevo.data.synthetic import make_suite
    from tsevo.evolve import ProtocolConfig, evolve
    from tsevo.library.library import Library
    from tsevo.roles import RoleSet
    from tsevo.roles.llm.config import LLMConfig, RoleConfigs

    out = Path(os.environ.get("TSEVO_LIVE_OUT", ".cache/llm/live_run"))
    shutil.rmtree(out, ignore_errors=True)
    # TSEVO_LIVE_CACHE: a response cache to reuse (replies already in it cost no server time)
    cache = os.environ.get("TSEVO_LIVE_CACHE") or None
    default = LLMConfig(
        base_url=os.environ["TSEVO_LIVE_BASE_URL"],
        model=os.environ.get("TSEVO_LIVE_MODEL", "gemma3-270m"),
        temperature=0.0,
        concurrency=1,  # llama.cpp's server answers one request at a time
        timeout_s=300.0,
        max_retries=2,
        backoff_base_s=0.5,
        max_tokens=768,
        max_prompt_tokens=5500,  # n_ctx 8192 minus the completion and the chat template
        cache_path=cache,
    )
    short = {"max_tokens": int(os.environ.get("TSEVO_LIVE_ANSWER_TOKENS", "64"))}
    configs = RoleConfigs(
        default,
        {"answerer": short, "reviewer": short, "synthesizer": {"max_tokens": 1024}},
    )
    # default: 4 per family = 48 questions (24 train, 12 val, 12 test); smaller on a slow machine
    suite = make_suite(int(os.environ.get("TSEVO_LIVE_SIZE", "4")), seed=0)
    points = int(os.environ.get("TSEVO_LIVE_POINTS", "48"))
    t0 = time.monotonic()
    with RoleSet.llm(configs, run_dir=out, max_points=points) as roles:
        res = evolve(suite, roles=roles, config=ProtocolConfig(), out=out, log=print)
    wall = time.monotonic() - t0

    rd = res.rounds[0]
    assert rd.status in ("accepted", "rejected", "invalid")
    summary = run_summary(out)  # the store is whole
    text = summary_text(summary)
    assert "LLM accounting" in text
    acc = json.loads((out / "llm" / "accounting.json").read_text())
    assert [s["status"] for s in acc["sessions"]] == ["finished"]
    tot = acc["total"]
    assert tot["answerer"]["base"]["calls"] + tot["answerer"]["base"]["cache_hits"] > 0
    Library.load(out / "library")
    syn = out / "rounds" / "r1" / "synthesis.json"
    outcomes = []
    if syn.exists():
        outcomes = [a["outcome"] for g in json.loads(syn.read_text()) for a in g["attempts"]]

    roles = {}
    replies = invalid = 0
    for role, stages in tot.items():
        t = {k: sum(s[k] for s in stages.values()) for k in next(iter(stages.values()))}
        roles[role] = {
            k: t[k]
            for k in (
                "calls",
                "cache_hits",
                "prompt_tokens",
                "completion_tokens",
                "retries",
                "invalid",
                "errors",
            )
        }
        if role != "client":
            replies += t["calls"]
            invalid += t["invalid"]
    report = {
        "wall_s": round(wall, 1),
        "questions": len(suite),
        "status": rd.status,
        "reason": rd.reason,
        "funnel": rd.funnel,
        "synthesis_outcomes": outcomes,
        "replies": replies,
        "replies_rejected": invalid,
        "fraction_needing_retry": round(invalid / replies, 4) if replies else None,
        "roles": roles,
        "role_stats": acc["sessions"][0]["role_stats"],
        "capabilities": acc["sessions"][0]["capabilities"],
    }
    (out / "live_report.json").write_text(json.dumps(report, indent=2))
    print(text)
    print(json.dumps(report, indent=2))
