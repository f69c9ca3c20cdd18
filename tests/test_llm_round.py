"""A whole round through the LLM path over real HTTP (scripted server delegating to the builtin roles).

Covers: the round end to end, the cached rerun (zero network calls), replay with the server
stopped, every fault ending in a retry / bounded failure / invalid round, accounting in the store
and the summary, budget exhaustion and resume, the CLI (``evolve --backend llm`` and ``eval``), and
backend-agnostic libraries.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tsevo.analysis import run_summary, summary_text
from tsevo.data.synthetic import make_suite
from tsevo.evolve import EvolutionResult, ProtocolConfig, eval_library, evolve
from tsevo.library.library import Library
from tsevo.roles import RoleSet
from tsevo.roles.llm.config import LLMConfig, RoleConfigs
from tsevo.roles.llm.roles import LLMRunStopped
from tsevo.store import RunStore
from tsevo.testing import BuiltinResponder, FakeOpenAIServer, Fault

SECRET = "sk-tsevo-test-secret-never-stored"


def _configs(base_url: str, **kw: Any) -> RoleConfigs:
    base = {
        "base_url": base_url,
        "model": "scripted",
        "concurrency": 1,
        "backoff_base_s": 0.01,
        "backoff_cap_s": 0.05,
        "max_retries": 3,
        "timeout_s": 20.0,
    }
    base.update(kw)
    return RoleConfigs(LLMConfig(**base))


def _quiet(_s: str) -> None:
    pass


def evolve_llm(
    suite: Any, cfg: ProtocolConfig, configs: RoleConfigs, *, out: Path, log: Any = _quiet
) -> EvolutionResult:
    """One engine, LLM roles: the role set brings the backend's callbacks (accounting, resume)."""
    with RoleSet.llm(configs, run_dir=out) as roles:
        return evolve(suite, roles=roles, config=cfg, out=out, log=log)


@pytest.fixture(scope="module")
def tiny() -> Any:
    return make_suite("tiny", seed=5)


@pytest.fixture(scope="module")
def first_run(tiny: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny round once through the scripted server, with every fault injected on the way.

    The API key is set in the environment (it must never reach the run folder). Faults: 429 with
    Retry-After, 503, a reply slower than the answerer's timeout, a dropped connection, truncated
    and malformed JSON, an assign reply missing ids, tool source the sandbox gate refuses, tool
    source that passes the gate but gives no evidence (caught by the engine's checks), malformed
    reviews until the reviewer gives up.
    """
    out = tmp_path_factory.mktemp("llm") / "run1"
    old = os.environ.get("TSEVO_LLM_API_KEY")
    os.environ["TSEVO_LLM_API_KEY"] = SECRET
    resp = BuiltinResponder(list(tiny))
    _inject_faults(resp)
    try:
        with FakeOpenAIServer.llama_cpp(resp) as srv:
            res = evolve_llm(
                tiny, ProtocolConfig(), _run_configs(srv.base_url), out=out, log=_quiet
            )
            n = srv.n_requests
            bodies = srv.chat_requests(probes=True)
    finally:
        if old is None:
            os.environ.pop("TSEVO_LLM_API_KEY", None)
        else:
            os.environ["TSEVO_LLM_API_KEY"] = old
    return {
        "out": out,
        "result": res,
        "requests": n,
        "bodies": bodies,
        "counts": dict(resp.counts),
        "pending": {k: resp.pending(k) for k in ("answer", "assign", "synthesize", "review")},
    }


def _run_configs(base_url: str, **kw: Any) -> RoleConfigs:
    """The first run's configs: the answerer times out fast (for the slow-reply fault)."""
    return _configs(base_url, **kw).with_override("answerer", timeout_s=0.5)


def _inject_faults(resp: BuiltinResponder) -> None:
    resp.inject(
        "answer",
        Fault.rate_limit(0.01),
        Fault.server_error(503),
        Fault.slow(1.5, {"option": "A", "reason": "late"}),
        Fault.truncated({"option": "A", "reason": "cut off in the middle"}),
        Fault.malformed(),
        Fault.disconnect(),
    )
    resp.inject("assign", _drop_ids)
    resp.inject("synthesize", _bad_import, _always_abstains)
    resp.inject("review", Fault.malformed("{not json"), Fault.malformed(), Fault.malformed())


def test_round_runs_end_to_end_through_http(first_run: dict[str, Any], tiny: Any) -> None:
    from tsevo.roles.builtin import GlobalSummaryAnswerer

    res, out = first_run["result"], first_run["out"]
    rd = res.rounds[0]
    assert rd.status in ("accepted", "rejected")
    # the answerer delegation is exact: the base pass equals the builtin answerer's accuracy
    ans = GlobalSummaryAnswerer()
    acc = sum(ans.answer(q).option == q.gold for q in tiny.train) / len(tiny.train)
    assert rd.funnel.train_accuracy == pytest.approx(acc)
    assert rd.funnel.buckets >= 2 and rd.funnel.attempts >= 2
    c = first_run["counts"]
    for kind in ("answer", "define", "assign", "plan", "coordinate", "synthesize", "review"):
        assert c.get(kind, 0) >= 1, kind
    # llama.cpp-like server: the client settled on json_object + schema, never json_schema after
    fmts = [b.get("response_format", {}).get("type") for b in first_run["bodies"][-20:]]
    assert set(fmts) == {"json_object"}
    man = RunStore.open(out).manifest
    assert man["backend"] == "llm" and man["llm"]["models"]["synthesizer"] == "scripted"
    if rd.status == "accepted":
        lib = Library.load(out / "library")
        tools = lib.stages[-1].tools
        assert tools and all(t.guidance.rule is not None for t in tools)
        assert all(t.provenance.author == "scripted" for t in tools)


def test_accounting_in_store_and_summary(first_run: dict[str, Any]) -> None:
    out = first_run["out"]
    acc = json.loads((out / "llm" / "accounting.json").read_text())
    assert [s["status"] for s in acc["sessions"]] == ["finished"]
    tot = acc["total"]
    assert set(tot) >= {"answerer", "reviewer", "triage", "local_planner", "synthesizer"}
    ans = tot["answerer"]["base"]
    assert ans["errors"] == 0
    assert ans["calls"] + ans["retries"] == first_run["counts"]["answer"]  # every request counted
    assert tot["triage"]["assign"]["prompt_tokens"] > 0
    per_round = json.loads((out / "rounds" / "r1" / "llm_accounting.json").read_text())
    assert per_round["accounting"]["synthesizer"]["synthesize"]["calls"] >= 1
    text = summary_text(run_summary(out))
    assert "LLM accounting" in text and "answerer:" in text and "synthesizer:" in text


def test_no_credential_anywhere_in_the_run(first_run: dict[str, Any]) -> None:
    for p in Path(first_run["out"]).rglob("*"):
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), p


def test_cached_rerun_makes_zero_network_calls(
    first_run: dict[str, Any], tiny: Any, tmp_path: Path
) -> None:
    cache = first_run["out"] / "llm_cache.sqlite"
    with FakeOpenAIServer.llama_cpp(BuiltinResponder(list(tiny))) as srv:
        cfgs = _run_configs(srv.base_url, cache_path=str(cache))
        res = evolve_llm(tiny, ProtocolConfig(), cfgs, out=tmp_path / "run2", log=_quiet)
        assert srv.n_requests == 0
    first = first_run["result"]
    assert res.rounds[0].status == first.rounds[0].status
    assert res.library.fingerprint() == first.library.fingerprint()
    acc = json.loads((tmp_path / "run2" / "llm" / "accounting.json").read_text())["total"]
    assert sum(s["calls"] for st in acc.values() for s in st.values()) == 0
    first = json.loads((first_run["out"] / "llm" / "accounting.json").read_text())["total"]
    assert acc["answerer"]["base"]["cache_hits"] == first["answerer"]["base"]["calls"]


def test_replay_with_the_server_stopped(
    first_run: dict[str, Any], tiny: Any, tmp_path: Path
) -> None:
    cache = tmp_path / "cassette.sqlite"
    shutil.copy(first_run["out"] / "llm_cache.sqlite", cache)
    cfgs = _run_configs("http://127.0.0.1:9/v1", cache_path=str(cache), cache_mode="replay")
    res = evolve_llm(tiny, ProtocolConfig(), cfgs, out=tmp_path / "run3", log=_quiet)
    assert res.library.fingerprint() == first_run["result"].library.fingerprint()
    # an unseen request fails loudly and stops the run (no network, resumable)
    other = make_suite(2, seed=11)
    with pytest.raises(LLMRunStopped) as ei:
        evolve_llm(other, ProtocolConfig(), cfgs, out=tmp_path / "run4", log=_quiet)
    assert ei.value.reason == "replay_miss"
    ev = RunStore.open(tmp_path / "run4").events("llm_stopped")
    assert ev and ev[-1]["reason"] == "replay_miss"


def _drop_ids(reply: dict[str, Any]) -> dict[str, Any]:
    return {"assignments": reply["assignments"][2:]}


def _bad_import(reply: dict[str, Any]) -> dict[str, Any]:
    return {**reply, "source": "import os\n" + reply["source"]}


def _always_abstains(reply: dict[str, Any]) -> dict[str, Any]:
    # passes the AST gate, violates the contract at run time: no evidence on any support row
    src = f"def {reply['function_name'] or 'tool'}():\n    return None\n"
    return {**reply, "source": src}


def test_every_fault_ends_in_retry_or_bounded_failure(first_run: dict[str, Any]) -> None:
    out = first_run["out"]
    assert all(v == 0 for v in first_run["pending"].values()), first_run["pending"]
    tot = json.loads((out / "llm" / "accounting.json").read_text())["total"]
    ans = tot["answerer"]["base"]
    assert ans["retries"] >= 4  # 429, 503, timeout, disconnect: retried with backoff
    assert ans["invalid"] >= 2  # truncated, malformed: re-asked with the error fed back
    assert tot["triage"]["assign"]["invalid"] >= 1  # missing ids fed back
    assert tot["synthesizer"]["synthesize"]["invalid"] >= 1  # gate reasons fed back
    assert tot["reviewer"]["review"]["invalid"] >= 3  # bounded: the reviewer gave up, kept
    # the runtime contract violation was caught by the engine's checks and recorded
    syn = json.loads((out / "rounds" / "r1" / "synthesis.json").read_text())
    violations = [v for g in syn for a in g["attempts"] for v in a["violations"]]
    assert any("no evidence" in v for v in violations)
    recs = [
        json.loads(x)
        for p in (out / "evals").glob("train.*.jsonl")
        for x in p.read_text().splitlines()
    ]
    assert any("no valid review" in s["reason"] for r in recs for s in r["steps"])
    # the store is whole: the summary reads, every stored library loads
    run_summary(out)
    for d in [out / "library", *(out / "rounds" / "r1").glob("*library")]:
        if d.exists():
            Library.load(d)


def test_define_failure_marks_the_round_invalid(tmp_path: Path) -> None:
    suite = make_suite(8, seed=5)
    resp = BuiltinResponder(list(suite))
    # one define call re-asks twice (3 replies); the engine tries it 3 times, each resent afresh
    # because a reply judged invalid is never replayed within a run: 9 bad replies in all
    resp.inject("define", *[Fault.malformed() for _ in range(9)])
    out = tmp_path / "invalid"
    with FakeOpenAIServer.llama_cpp(resp) as srv:
        res = evolve_llm(suite, ProtocolConfig(), _configs(srv.base_url), out=out, log=_quiet)
    rd = res.rounds[0]
    assert rd.status == "invalid" and "clustering failed" in rd.reason
    assert res.library.fingerprint() == res.root.fingerprint()
    assert not (out / "rounds" / "r1" / "library").exists()
    assert "INVALID" in summary_text(run_summary(out))


def test_budget_exhaustion_stops_cleanly_and_resumes(tmp_path: Path) -> None:
    suite = make_suite(8, seed=5)
    out = tmp_path / "budget"
    with FakeOpenAIServer.llama_cpp(BuiltinResponder(list(suite))) as srv:
        with pytest.raises(LLMRunStopped) as ei:
            evolve_llm(
                suite,
                ProtocolConfig(),
                _configs(srv.base_url, budget={"max_calls": 40}),
                out=out,
                log=_quiet,
            )
        assert ei.value.reason == "budget"
        first_calls = srv.n_chat
        acc = json.loads((out / "llm" / "accounting.json").read_text())
        assert acc["sessions"][0]["status"] == "stopped:budget"
        assert RunStore.open(out).events("llm_stopped")
        res = evolve_llm(suite, ProtocolConfig(), _configs(srv.base_url), out=out, log=_quiet)
    assert res.rounds[0].status in ("accepted", "rejected")
    acc = json.loads((out / "llm" / "accounting.json").read_text())
    assert [s["status"] for s in acc["sessions"]] == ["stopped:budget", "finished"]
    hits = sum(
        s["cache_hits"] for st in acc["sessions"][1]["accounting"].values() for s in st.values()
    )
    assert hits >= first_calls - 2  # the first session's replies were reused, not re-bought


def test_resume_refuses_other_models(tmp_path: Path) -> None:
    suite = make_suite(2, seed=5)
    out = tmp_path / "models"
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer.llama_cpp(BuiltinResponder(list(suite))) as srv:
        evolve_llm(
            suite,
            ProtocolConfig(),
            _configs(srv.base_url, cache_path=str(cache)),
            out=out,
            log=_quiet,
        )
        with pytest.raises(ValueError, match="other LLM settings"):
            evolve_llm(
                suite,
                ProtocolConfig(),
                _configs(srv.base_url, model="other", cache_path=str(cache)),
                out=out,
                log=_quiet,
            )


def test_libraries_are_backend_agnostic(
    first_run: dict[str, Any], tiny: Any, tmp_path: Path
) -> None:
    from tsevo.library.roots import make_root
    from tsevo.roles.builtin import GlobalSummaryAnswerer, RuleReviewer

    if first_run["result"].rounds[0].status != "accepted":
        pytest.skip("the LLM round was not accepted: no library to transfer")
    llm_lib = Library.load(first_run["out"] / "library")
    # LLM-evolved library on the builtin agent: its tools carry reading rules and fire
    res = eval_library(
        tiny, llm_lib, answerer=GlobalSummaryAnswerer(), reviewer=RuleReviewer(), split="test"
    )
    assert res["tools_fired"] > 0 and res["replaced"] > 0 and res["counts"]["n"] == len(tiny.test)
    # a builtin-backend library (the expert root: tools with guidance text and reading rules) on
    # the LLM agent: the LLM reviewer gets each tool's guidance text and evidence
    builtin_lib = make_root("expert")
    cache = tmp_path / "eval.sqlite"
    shutil.copy(first_run["out"] / "llm_cache.sqlite", cache)  # base answers are cache hits
    resp = BuiltinResponder(list(tiny))
    with FakeOpenAIServer.llama_cpp(resp) as srv:
        with RoleSet.llm(_configs(srv.base_url, cache_path=str(cache))) as rs:
            r2 = eval_library(
                tiny, builtin_lib, answerer=rs.answerer, reviewer=rs.reviewer, split="test"
            )
        prompts = [b["messages"][0]["content"] for b in srv.chat_requests()]
    assert resp.counts["review"] > 0 and resp.counts.get("answer", 0) == 0
    assert resp.counts["choose"] > 0  # the LLM reads the scope catalog before inspecting tools
    assert r2["tools_fired"] > 0 and r2["replaced"] > 0
    texts = {t.guidance.text for t in builtin_lib.all_artifacts()}
    assert all(any(t in p for t in texts) for p in prompts if resp.kind_of(p) == "review")


def test_cli_evolve_and_eval_with_the_llm_backend(
    first_run: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tsevo.cli import main

    out = tmp_path / "cli"
    suite = make_suite(2, seed=3)
    with FakeOpenAIServer.llama_cpp(
        BuiltinResponder(list(suite) + list(make_suite("tiny", seed=5)))
    ) as srv:
        flags = ["--backend", "llm", "--base-url", srv.base_url, "--model", "scripted", "--quiet"]
        rc = main(["evolve", "--suite", "synthetic:2", "--seed", "3", "--out", str(out), *flags])
        text = capsys.readouterr().out
        assert rc == 0 and "LLM accounting" in text
        assert (out / "llm_cache.sqlite").exists() and (out / "llm" / "accounting.json").exists()
        rc = main(
            [
                "eval",
                "--library",
                str(first_run["out"] / "library"),
                "--suite",
                "synthetic:tiny",
                "--seed",
                "5",
                "--backend",
                "llm",
                "--base-url",
                srv.base_url,
                "--model",
                "scripted",
            ]
        )
        text = capsys.readouterr().out
    assert rc == 0 and "paired: helped" in text and "transfer eval on test" in text
    rc = main(
        [
            "eval",
            "--library",
            str(first_run["out"] / "library"),
            "--suite",
            "synthetic:tiny",
            "--seed",
            "5",
        ]
    )
    assert rc == 0 and "paired: helped" in capsys.readouterr().out


def test_cli_budget_stop_exits_3_and_rerun_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tsevo.cli import main

    out = tmp_path / "cli_budget"
    suite = make_suite(2, seed=4)
    with FakeOpenAIServer.llama_cpp(BuiltinResponder(list(suite))) as srv:
        flags = ["--backend", "llm", "--base-url", srv.base_url, "--model", "scripted", "--quiet"]
        argv = ["evolve", "--suite", "synthetic:2", "--seed", "4", "--out", str(out), *flags]
        assert main([*argv, "--budget-calls", "5"]) == 3
        capsys.readouterr()
        assert main(argv) == 0
    assert "round 1" in capsys.readouterr().out


def test_role_requests_name_no_source_id_and_define_no_task_or_subtask(
    first_run: dict[str, Any], tiny: Any
) -> None:
    """Roles see opaque per-run ids; the define step sees no task label and no subtask either."""
    head = BuiltinResponder([]).heads["define"]
    prompts = ["\n".join(m["content"] for m in b["messages"]) for b in first_run["bodies"]]
    ids = {q.id for q in tiny}
    for p in prompts:
        assert not any(i in p for i in ids), "a source id reached a prompt"
    define = [p for p in prompts if head in p]
    assert define, "no define request was recorded"
    tasks = {q.task for q in tiny}
    # subtasks that are not plain words of the questions' own text (e.g. "window_direction")
    subtasks = {q.subtask for q in tiny if "_" in q.subtask}
    assert subtasks
    for p in define:
        assert not any(t in p for t in tasks), "a task label reached the define step"
        assert not any(s in p for s in subtasks), "a subtask reached the define step"
        rest = p[p.index("Errors (JSON):") + len("Errors (JSON):") :].lstrip()
        rows, _ = json.JSONDecoder().raw_decode(rest)
        assert rows and all(set(r) <= {"id", "question", "options", "shape", "trace"} for r in rows)
        assert all(r["id"].startswith("q") and r["id"] not in ids for r in rows)
