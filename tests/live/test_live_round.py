"""Live tier: one small evolution round through a real llama.cpp server (``make test-live``).

Skipped unless ``TSEVO_LIVE_BASE_URL`` is set (``.ci/live.sh`` starts the server and sets it). The
model (gemma-3-270m, a 270M base model) answers badly and its tool code is expected to fail the
checks: the test asserts that the round ends cleanly and everything is recorded, not quality.

The round runs under the LLM backend's own budget (``TSEVO_LIVE_BUDGET_S`` seconds, default 300,
and ``TSEVO_LIVE_BUDGET_CALLS`` requests, default 400): on a busy machine it stops cleanly
(``RunStopped``, a resumable folder, the session recorded as stopped) long before pytest's
timeout, instead of being killed by it. Besides the round, a second test sends one synthesis
request to the real model directly (outside the round's budget, one try, its own pytest timeout,
``TSEVO_LIVE_PROBE_TIMEOUT_S`` seconds for the request, default 600): the model's tool source goes
through the same checks a round applies (the sandbox gate, smoke runs and the output contract);
its outcome (usually a rejection) is recorded. The probe's prompt is held to
``TSEVO_LIVE_PROBE_PROMPT_TOKENS`` (default 4000: the compact primitives catalog and the examples
that fit) and its reply to 768 tokens, so a busy machine answers it in minutes. The probe must get
a reply: a prompt refused as too long or a request that fails (time-out, server error) fails the
test. A JSON report (duration, how
the round ended, replies needing a retry, calls and tokens per role, the synthesis probe) is
written to ``$TSEVO_LIVE_OUT/live_report.json`` and printed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get("TSEVO_LIVE_BASE_URL"),
        reason="live tier: set TSEVO_LIVE_BASE_URL (run `make test-live`)",
    ),
]


def _env_num(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def synthesis_probe(configs: object, suite: object, max_points: int) -> dict[str, object]:
    """One synthesis request to the real model; its draft goes through the round's checks."""
    from tsevo.data import QuestionView
    from tsevo.evolve.synthesize import check_draft
    from tsevo.library.sandbox import Sandbox
    from tsevo.library.tool import Contract, Scope
    from tsevo.roles import RoleSet
    from tsevo.roles.protocols import ContractCard, Example, WorkGroup

    card = ContractCard(
        "probe.c1",
        "create",
        "tool",
        "",
        "missing",
        "the answerer never measures the slope of the series",
        "slope",
        Contract("trend.slope", ("primary",), "fixes"),
        Scope(arity="single"),
        {"rule_kind": "label"},
    )
    group = WorkGroup("probe", (card,), card.contract, card.scope)
    qs = [q for q in suite.train if q.task == "trend"][:4] or list(suite.train)[:4]  # type: ignore[attr-defined]
    rec = type("Rec", (), {"final_answer": 0, "correct": False, "tools_ok": ()})()
    examples = [Example(QuestionView.of(q, "v-" + q.fingerprint[:8]), q.gold, rec) for q in qs]
    out: dict[str, object] = {"questions": len(qs)}
    t0 = time.monotonic()
    with RoleSet.llm(  # type: ignore[arg-type]
        configs, run_dir=None, retries=0, max_attempts=1, max_points=max_points
    ) as roles:
        try:
            draft = roles.synthesizer.synthesize(group, 1, [], examples)
        except Exception as e:  # an unusable reply is an expected, recorded outcome
            out.update(outcome="invalid_reply", error=f"{type(e).__name__}: {e}"[:500])
            out["error_type"] = type(e).__name__
            draft = None
        else:
            if draft is None:
                out["outcome"] = "gave_up"
    if draft is not None:
        out["source"] = draft.source[:2000]
        with Sandbox() as sb:
            violations = check_draft(draft, sb, qs)
        out["violations"] = [v[:300] for v in violations]
        out["outcome"] = "rejected" if violations else "passed_checks"
    out["wall_s"] = round(time.monotonic() - t0, 1)
    return out


def _out() -> Path:
    return Path(os.environ.get("TSEVO_LIVE_OUT", ".cache/llm/live_run"))


def _points() -> int:
    return int(os.environ.get("TSEVO_LIVE_POINTS", "48"))


def _suite() -> Any:
    from tsevo.data.synthetic import make_suite

    # default: 4 per family = 48 questions (24 train, 12 val, 12 test); smaller on a slow machine
    return make_suite(int(os.environ.get("TSEVO_LIVE_SIZE", "4")), seed=0)


def _default_config() -> Any:
    from tsevo.roles.llm.config import LLMConfig

    # TSEVO_LIVE_CACHE: a response cache to reuse (replies already in it cost no server time)
    cache = os.environ.get("TSEVO_LIVE_CACHE") or None
    return LLMConfig(
        base_url=os.environ["TSEVO_LIVE_BASE_URL"],
        model=os.environ.get("TSEVO_LIVE_MODEL", "gemma3-270m"),
        temperature=0.0,
        concurrency=1,  # llama.cpp's server answers one request at a time
        timeout_s=_env_num("TSEVO_LIVE_CALL_TIMEOUT_S", 90),  # bounds a budget's overshoot
        max_retries=2,
        backoff_base_s=0.5,
        max_tokens=768,
        max_prompt_tokens=5500,  # n_ctx 8192 minus the completion and the chat template
        cache_path=cache,
        budget={
            "max_wall_s": _env_num("TSEVO_LIVE_BUDGET_S", 300),
            "max_calls": int(_env_num("TSEVO_LIVE_BUDGET_CALLS", 400)),
        },
    )


def test_live_round_finishes_and_records_everything() -> None:
    from tsevo.analysis import run_summary, summary_text
    from tsevo.evolve import ProtocolConfig, evolve
    from tsevo.library.library import Library
    from tsevo.roles import RoleSet, RunStopped
    from tsevo.roles.llm.config import RoleConfigs

    out = _out()
    shutil.rmtree(out, ignore_errors=True)
    default = _default_config()
    short = {"max_tokens": int(os.environ.get("TSEVO_LIVE_ANSWER_TOKENS", "64"))}
    configs = RoleConfigs(
        default,
        {"answerer": short, "reviewer": short, "synthesizer": {"max_tokens": 1024}},
    )
    suite = _suite()
    points = _points()
    t0 = time.monotonic()
    stopped = None
    with RoleSet.llm(configs, run_dir=out, max_points=points) as roles:
        try:
            res = evolve(suite, roles=roles, config=ProtocolConfig(), out=out, log=print)
        except RunStopped as stop:  # the budget ran out: a clean, resumable stop
            stopped = stop
    wall = time.monotonic() - t0

    acc = json.loads((out / "llm" / "accounting.json").read_text())
    tot = acc["total"]
    assert tot["answerer"]["base"]["calls"] + tot["answerer"]["base"]["cache_hits"] > 0
    if stopped is None:
        rd = res.rounds[0]
        assert rd.status in ("accepted", "rejected", "invalid")
        assert [s["status"] for s in acc["sessions"]] == ["finished"]
        status, reason, funnel = rd.status, rd.reason, rd.funnel
        text = summary_text(run_summary(out))  # the store is whole
        assert "LLM accounting" in text
        Library.load(out / "library")
    else:
        assert stopped.reason == "budget", stopped
        assert acc["sessions"][-1]["status"].startswith("stopped"), acc["sessions"][-1]
        status, reason, funnel = f"stopped:{stopped.reason}", str(stopped)[:300], None
        text = f"round stopped by its budget after {wall:.0f} s (resumable): {stopped}"
    assert (
        wall
        < _env_num("TSEVO_LIVE_BUDGET_S", 300) + 2 * _env_num("TSEVO_LIVE_CALL_TIMEOUT_S", 90) + 60
    ), "the budget did not stop the round in time"
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
        "status": status,
        "reason": reason,
        "funnel": funnel,
        "synthesis_outcomes": outcomes,
        "replies": replies,
        "replies_rejected": invalid,
        "fraction_needing_retry": round(invalid / replies, 4) if replies else None,
        "roles": roles,
        "role_stats": acc["sessions"][0]["role_stats"],
        "capabilities": acc["sessions"][0]["capabilities"],
    }
    _update_report(out, report)
    print(text)
    print(json.dumps(report, indent=2))


def _update_report(out: Path, fields: dict[str, Any]) -> None:
    path = out / "live_report.json"
    report = json.loads(path.read_text()) if path.exists() else {}
    report.update(fields)
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))


#: Errors that mean the model never replied (the probe then proves nothing).
NO_REPLY = ("PromptTooLong", "LLMCallError", "BudgetExhausted", "LLMRunStopped", "ReplayMiss")


@pytest.mark.timeout(int(_env_num("TSEVO_LIVE_PROBE_TIMEOUT_S", 600)) + 120)
def test_live_synthesis_probe_reply_goes_through_the_checks() -> None:
    """One synthesis request to the real model (after the round, outside its budget)."""
    from tsevo.roles.llm.config import RoleConfigs

    probe_cfg = RoleConfigs(
        _default_config().replace(
            cache_path=None,
            cache_mode="off",
            max_retries=0,
            timeout_s=_env_num("TSEVO_LIVE_PROBE_TIMEOUT_S", 600),
            budget={"max_wall_s": None, "max_calls": None},
            max_prompt_tokens=int(_env_num("TSEVO_LIVE_PROBE_PROMPT_TOKENS", 4000)),
        ),
        {"synthesizer": {"max_tokens": 768}},
    )
    probe = synthesis_probe(probe_cfg, _suite(), _points())
    _update_report(_out(), {"synthesis_probe": probe})
    print(json.dumps({"synthesis_probe": probe}, indent=2))
    assert probe["outcome"] in ("invalid_reply", "gave_up", "rejected", "passed_checks"), probe
    assert probe.get("error_type") not in NO_REPLY, f"the model never replied: {probe}"
