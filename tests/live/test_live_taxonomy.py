"""Live tier: the LLM agreement gate's five phases against a real llama.cpp server (``make test-live``).

Skipped unless ``TSEVO_LIVE_BASE_URL`` is set (``.ci/live.sh`` starts the server). The draft comes
from the builtin induction on the planted fixture; the four annotators are the real model (its
seeds and annotator ids make four distinct conversations). One gate round of
``TSEVO_LIVE_GATE_TRACES`` traces (default 2): discovery per trace, the vote, assignment per
confirmed error and deliberation. gemma-3-270m is far too small to annotate well: the test asserts
that every phase's request reached the model, that its replies were checked (refused ones
re-asked, then dropped), and that the round record and the status are consistent, not quality. A
JSON report (calls, re-asks, proposals kept per annotator, confirmed errors, both κ, coverage,
wall time) goes to ``$TSEVO_LIVE_OUT/live_taxonomy.json``.
"""

from __future__ import annotations

import json
import os
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


def test_live_llm_gate_runs_every_phase_and_records_it(tmp_path: Path) -> None:
    from tests.taxonomy_fixtures import planted_run
    from tsevo.roles.llm.config import LLMConfig
    from tsevo.taxonomy.gate import GateConfig
    from tsevo.taxonomy.llm import LLMOptions
    from tsevo.taxonomy.runs import gate_run, induce_run, llm_client

    run = planted_run(tmp_path / "run")
    induce_run(run)
    cfg = LLMConfig(
        base_url=os.environ["TSEVO_LIVE_BASE_URL"],
        model=os.environ.get("TSEVO_LIVE_MODEL", "gemma3-270m"),
        temperature=0.7,
        concurrency=1,
        timeout_s=float(os.environ.get("TSEVO_LIVE_CALL_TIMEOUT_S", 120)),
        max_retries=1,
        backoff_base_s=0.5,
        max_tokens=384,
        max_prompt_tokens=5500,
        cache_mode="off",
    )
    client = llm_client(run, cfg)
    n = int(os.environ.get("TSEVO_LIVE_GATE_TRACES", "2"))
    t0 = time.monotonic()
    try:
        res = gate_run(
            run,
            config=GateConfig(max_rounds=1, per_round=n),
            backend="llm",
            llm=client,
            options=LLMOptions(retries=1, annotate_chars=2500),
        )
        acc = client.accounting.to_dict()
        totals = client.accounting.totals()
    finally:
        client.close()
    rnd = res.rounds[0]
    ph = rnd["phases"]
    assert set(ph["proposals"]) == {"alpha", "beta", "gamma", "delta"}
    assert len(rnd["traces"]) == n
    recon = ph["reconciliation"]
    assert set(rnd["errors"]) == set(recon["confirmed"])  # kappa's items are the confirmed errors
    for eid, v in recon["voted"].items():  # the vote's arithmetic, from the record
        assert (eid in recon["confirmed"]) == (v["tally"] >= 3)
    assert res.taxonomy.status in ("accepted", "review_required")
    if rnd["cohen_area"] is None:
        assert res.taxonomy.status == "review_required"
    report = {
        "wall_s": round(time.monotonic() - t0, 1),
        "traces": n,
        "proposals_kept": {a: len(p) for a, p in ph["proposals"].items()},
        "voted": len(recon["voted"]),
        "confirmed": len(recon["confirmed"]),
        "cohen_area": rnd["cohen_area"],
        "fleiss_code_macro": rnd["fleiss_code_macro"],
        "coverage": rnd["coverage"],
        "status": res.taxonomy.status,
        "degenerate": rnd.get("degenerate"),
        "annotators": rnd.get("annotators"),
        "calls": totals.calls,
        "invalid_replies": totals.invalid,
        "accounting": acc,
    }
    out = Path(os.environ.get("TSEVO_LIVE_OUT", ".cache/llm/live_run"))
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report, indent=1, default=str)
    (out / "live_taxonomy.json").write_text(text + "\n", "utf-8")
    print(text)
    # discovery asked the model once per annotator and trace at least (re-asks on top)
    assert totals.calls >= 4 * n
