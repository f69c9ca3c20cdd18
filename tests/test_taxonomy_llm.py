"""The taxonomy's LLM backend through the scripted server (real HTTP): induce, gate, faults, cache.

The server's replies are computed from each request by
:class:`~tsevo.testing.taxonomy_responder.TaxonomyResponder`; nothing in tsevo is mocked.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.taxonomy_fixtures import SENTINEL, planted_run
from tsevo.cli import main
from tsevo.roles.llm import LLMClient, LLMConfig
from tsevo.store import RunLayout
from tsevo.taxonomy.gate import GateConfig
from tsevo.taxonomy.llm import CodeDraft, draft_problems, quote_in
from tsevo.taxonomy.prompts import available, load
from tsevo.taxonomy.runs import gate_run, induce_run
from tsevo.taxonomy.traces import read_traces
from tsevo.testing import FakeOpenAIServer, Fault
from tsevo.testing.taxonomy_responder import TAXONOMY_KINDS, TaxonomyResponder

#: What must never reach a request: val/test text and the ids the fixture gives questions,
#: tasks, subtasks and groups.
FORBIDDEN = (SENTINEL, "src-0", "synthetic/task", "grp-", '"sub0"', "sub1", "sub2")


def _cfg(srv: FakeOpenAIServer, **kw: object) -> LLMConfig:
    kw.setdefault("timeout_s", 5.0)
    return LLMConfig(base_url=srv.base_url, model="scripted", backoff_base_s=0.01, **kw)  # type: ignore[arg-type]


def _files(lay: RunLayout) -> dict[str, bytes]:
    root = lay.taxonomy.dir
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _bodies(srv: FakeOpenAIServer) -> list[str]:
    return [json.dumps(b, ensure_ascii=False) for b in srv.chat_requests()]


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory):
    """One planted run induced and gated on the LLM backend; the server's record kept."""
    root = planted_run(tmp_path_factory.mktemp("txllm") / "run")
    resp = TaxonomyResponder(noise=0.15)
    with FakeOpenAIServer(resp) as srv:
        ind = induce_run(root, backend="llm", llm=_cfg(srv))
        n_induce = srv.n_chat
        res = gate_run(root, backend="llm", llm=_cfg(srv))
        bodies = _bodies(srv)
        chats = srv.chat_requests()
    return {
        "root": root,
        "ind": ind,
        "gate": res,
        "counts": dict(resp.counts),
        "bodies": bodies,
        "chats": chats,
        "n_induce": n_induce,
        "files": _files(RunLayout(root)),
    }


def test_llm_induction_in_eight_steps(llm_run):
    ind, counts = llm_run["ind"], llm_run["counts"]
    active = [r for r, v in ind.steps["step2_roles"]["counted"].items() if v["active"]]
    assert counts["domain"] == counts["roles"] == counts["axis_a"] == counts["axis_c"] == 1
    assert counts["axis_b"] == len(active) >= 2  # one call per active role
    assert counts["dedup"] == 1 and counts["coverage"] == 1
    for step in ("step1_domain", "step2_roles", "step2_5_signals", "step3_A", "step5_C",
                 "step6_dedup", "step7_structure", "step8_coverage"):  # fmt: skip
        assert step in ind.steps
    tax = ind.taxonomy
    assert tax.generation["provider"] == "llm" and tax.generation["model"] == "scripted"
    assert tax.axis("A") and tax.axis("B")
    # ids minted by tsevo in order; the replies carried none
    for axis in "AB":
        assert [c.id for c in tax.axis(axis)] == [
            f"{axis}.{i + 1}" for i in range(len(tax.axis(axis)))
        ]
    assert not any('"id"' in json.dumps(ind.steps[s]["reply"]) for s in ("step3_A", "step5_C"))
    # the planted tool failure (timeouts) is what the A codes are about
    assert any("tool" in (c.area or "") for c in tax.axis("A"))
    # every code grounded in >= 2 induction-pool traces, quotes copied from them
    traces = {
        t.problem_id: t for t in read_traces(RunLayout(llm_run["root"]).taxonomy.traces("train"))
    }
    pool = set(ind.pool_ids)
    for c in tax.codes:
        assert len(c.evidence_trace_ids) >= 2 and set(c.evidence_trace_ids) <= pool
        for ex in c.examples:
            assert quote_in(ex["quote"], traces[ex["trace_id"]])
        if c.category == "B":
            assert c.applies_to_role in active and c.area == c.applies_to_role
    # an axis (or active role) without a code is a recorded gap, never filler
    for r in active:
        assert any(c.applies_to_role == r for c in tax.axis("B")) or any(
            g["axis"] == "B" and g["role"] == r for g in tax.coverage_gaps
        )
    assert tax.axis("C") or any(g["axis"] == "C" for g in tax.coverage_gaps)
    assert all(g["reason"].startswith("step 8") for g in tax.coverage_gaps)


def test_llm_gate_four_annotators(llm_run):
    res, chats = llm_run["gate"], llm_run["chats"][llm_run["n_induce"] :]
    assert res.rounds and all(r["panel"] == "llm-4annotators" for r in res.rounds)
    resp = TaxonomyResponder()
    kinds = [resp.kind_of(b["messages"][0]["content"]) for b in chats]
    asked = [b for b, k in zip(chats, kinds, strict=True) if k != "edits"]
    # the default unit is the event: the five phases, four annotators each (design 4.2)
    assert {"discover", "vote", "assign"} <= set(kinds) and "annotate" not in kinds
    assert len(asked) % 4 == 0
    for k in range(0, len(asked), 4):  # four distinct requests (persona, seed) per item and phase
        batch = asked[k : k + 4]
        assert len({json.dumps(b, sort_keys=True) for b in batch}) == 4
        assert [b.get("seed") for b in batch] == [0, 1, 2, 3]
    for r in res.rounds:
        assert set(r["labels"]) == {"alpha", "beta", "gamma", "delta"}
        assert r["unit"] == "event" and not r["degenerate"]
        assert r["errors"] == r["phases"]["reconciliation"]["confirmed"]
        assert set(r["consolidated"]) == set(r["errors"])
        assert "cohen_area" in r and "fleiss_code_macro" in r and "coverage" in r
    # the noisy annotators disagree somewhere (kappa is not trivially 1)
    assert any(r["cohen_area"] is not None and r["cohen_area"] < 1 for r in res.rounds)
    agr = res.taxonomy.generation["agreement"]
    assert agr["panel"] == "llm-4annotators" and agr["metric"] == "cohen_area"
    assert res.taxonomy.status in ("accepted", "review_required")
    man = json.loads(RunLayout(llm_run["root"]).taxonomy.manifest.read_text())
    assert man["gate"]["backend"] == "llm" and man["gate"]["panel"] == "llm-4annotators"
    assert man["induce"]["backend"] == "llm" and man["induce"]["llm"]["model"] == "scripted"
    # annotators read gate-pool traces only
    gate_ids = set(llm_run["ind"].gate_ids)
    for b in asked:
        shown = re.findall(r'\\"trace_id\\":\\"([0-9a-f]{16})\\"', json.dumps(b))
        assert shown and set(shown) <= gate_ids


def test_canary_no_val_test_text_or_ids_in_any_request(llm_run):
    bodies = llm_run["bodies"]
    assert bodies
    for b in bodies:
        for bad in FORBIDDEN:
            assert bad not in b, bad
    # induction requests show induction-pool traces only
    pool = set(llm_run["ind"].pool_ids)
    for b in bodies[: llm_run["n_induce"]]:
        assert set(re.findall(r'\\"trace_id\\":\\"([0-9a-f]{16})\\"', b)) <= pool
    for blob in llm_run["files"].values():
        assert SENTINEL.encode() not in blob


def test_cached_rerun_makes_zero_calls_and_identical_artifacts(llm_run):
    root = llm_run["root"]
    lay = RunLayout(root)
    with FakeOpenAIServer(TaxonomyResponder(noise=0.15)) as srv:
        base = ["--backend", "llm", "--base-url", srv.base_url, "--model", "scripted"]
        assert main(["taxonomy", "induce", str(root), *base]) == 0
        assert main(["taxonomy", "gate", str(root), *base]) == 0
        assert srv.n_requests == 0  # not a chat, not a capability probe
    assert _files(lay) == llm_run["files"]
    # replay mode: the same, with no network at all
    with FakeOpenAIServer(default=Fault.server_error(500)) as srv:
        client = LLMClient(_cfg(srv, cache_mode="replay", cache_path=str(lay.llm_cache)))
        induce_run(root, backend="llm", llm=client)
        gate_run(root, backend="llm", llm=client)
        client.close()
        assert srv.n_chat == 0
    assert _files(lay) == llm_run["files"]


def test_faults_are_repaired_or_recorded(tmp_path):
    root = planted_run(tmp_path / "run")
    resp = TaxonomyResponder()
    resp.inject("domain", Fault.server_error(500))  # transport retry
    resp.inject("roles", Fault.slow(2.0, "late"))  # past the client's timeout: retried
    resp.inject("axis_a", Fault.malformed())  # re-asked with the error fed back

    def missing_field(reply):  # the required "codes" field missing
        return {"drafts": reply["codes"]}

    corrupted = []

    def bad_quote(reply):  # the first reply with codes: quotes copied from nowhere
        if corrupted or not reply["codes"]:
            return reply
        corrupted.append(1)
        codes = [dict(c) for c in reply["codes"]]
        for c in codes:
            c["evidence"] = [{**e, "quote": "a quote that is in no trace"} for e in c["evidence"]]
        return {"codes": codes}

    resp.inject("axis_b", bad_quote, bad_quote, bad_quote)  # grounding check, re-asked
    resp.inject("axis_c", missing_field, missing_field, missing_field)  # every attempt invalid
    resp.inject(
        "coverage", Fault.server_error(503), Fault.server_error(503), Fault.server_error(503)
    )
    with FakeOpenAIServer(resp) as srv:
        ind = induce_run(root, backend="llm", llm=_cfg(srv, timeout_s=0.5, max_retries=2))
        chats = srv.chat_requests()
    s = ind.steps
    assert s["step1_domain"]["error"] is None and s["step1_domain"]["reply"]
    assert s["step2_roles"]["error"] is None and s["step2_roles"]["reply"]
    assert s["step3_A"]["invalid"] == 1 and "malformed" in s["step3_A"]["errors"][0]
    b_steps = [s[k] for k in s if k.startswith("step4_B_")]
    assert sum(b["invalid"] for b in b_steps) == 1
    assert any(b["invalid"] and "quote" in b["errors"][0] and b["reply"] for b in b_steps)
    fed = [c["messages"][-1]["content"] for c in chats if len(c["messages"]) > 1]
    assert any("not copied from trace" in m for m in fed)  # the problem went back to the model
    assert s["step5_C"]["reply"] is None and s["step5_C"]["attempts"] == 3
    assert "codes" in s["step5_C"]["error"] and "invalid reply" in s["step5_C"]["error"]
    assert s["step8_coverage"]["error"] and "server" in s["step8_coverage"]["error"].lower()
    tax = ind.taxonomy
    assert tax.axis("A")  # repaired
    assert not tax.axis("C")  # never filler ...
    c_gaps = [g for g in tax.coverage_gaps if g["axis"] == "C"]
    assert c_gaps and all("step 8" in g["reason"] for g in c_gaps)  # ... a recorded gap
    # an annotator that never answers validly gives no codes that round, recorded (trace unit)
    resp2 = TaxonomyResponder()
    resp2.inject("annotate", *([Fault.malformed("nope")] * 3))
    with FakeOpenAIServer(resp2) as srv:
        res = gate_run(
            root, backend="llm", llm=_cfg(srv, cache_mode="off"), config=GateConfig(unit="trace")
        )
    first = next(r for r in res.rounds if r["errors"])
    assert first["annotators"]["alpha"]["error"] and first["annotators"]["alpha"]["attempts"] == 3
    assert all(not v for v in first["labels"]["alpha"].values())
    assert first["annotators"]["beta"]["error"] is None


def test_draft_contract_checks():
    traces = {t.problem_id: t for t in _few()}
    a, b = list(traces.values())[:2]
    line = a.raw_trajectory.split("\n")[0]
    good = {
        "axis": "A",
        "name": "Tool_Timeout",
        "description": "A tool timed out.",
        "when_to_use": "A tool_error line with error_kind timeout.",
        "when_not_to_use": "Not for other tool errors.",
        "detection_heuristics": ["tool.error_timeout == true"],
        "severity": "major",
        "area": "tool",
        "evidence": [
            {"trace_id": a.problem_id, "event_seq": 1, "quote": line},
            {"trace_id": b.problem_id, "event_seq": 1, "quote": b.raw_trajectory.split("\n")[0]},
        ],
        "detector": {
            "any": [{"all": [{"feature": "tool.error_timeout", "op": "==", "value": True}]}]
        },
    }
    assert (
        draft_problems(CodeDraft.model_validate(good), "c", shown=traces, axis="A", areas=["tool"])
        == []
    )
    bad = {
        **good,
        "applies_to_role": "reviewer",
        "area": "elsewhere",
        "evidence": [{"trace_id": a.problem_id, "event_seq": 99, "quote": "not there at all"}] * 2,
        "detector": {"any": [{"all": [{"feature": "correct.final", "op": "==", "value": False}]}]},
    }
    problems = " ".join(
        draft_problems(CodeDraft.model_validate(bad), "c", shown=traces, axis="A", areas=["tool"])
    )
    for word in (
        "only B codes",
        "area",
        "two different traces",
        "event_seq",
        "quote",
        "outcome-blind",
    ):
        assert word in problems


def test_prompt_assets():
    assert {"persona_alpha", "persona_delta", "code_rules"} <= set(available())
    # the first line names the step before any slot, and no two steps share it
    heads = [load(a).text.split("\n", 1)[0].split("$", 1)[0] for a in TAXONOMY_KINDS.values()]
    assert all(h.startswith("AdaMAST ") and len(h) > 30 for h in heads)
    assert not any(a != b and a.startswith(b) for a in heads for b in heads)


def _few():
    from tests.taxonomy_fixtures import planted

    return planted(n=30)[0][:6]


def test_dedup_and_structure_repair(tmp_path):
    root = planted_run(tmp_path / "run", n=120)
    resp = TaxonomyResponder()

    def messy(reply):  # a badly named code and a second name for the same detector
        codes = [dict(c) for c in reply["codes"]]
        assert codes, "the responder finds A codes on the planted run"
        twin = {**codes[0], "name": "Same_Failure_Named_Twice"}
        codes[0]["name"] = "tool error seen in many of these failed runs"
        codes[0]["id"] = "A.9"  # a model's id is ignored: tsevo mints ids
        return {"codes": [*codes, twin]}

    resp.inject("axis_a", messy)
    with FakeOpenAIServer(resp) as srv:
        ind = induce_run(root, backend="llm", llm=_cfg(srv, cache_mode="off"))
    assert resp.counts["dedup"] == 1 and resp.counts["structure"] == 1
    removed = ind.steps["step6_dedup"]["removed"]
    assert [k for k, v in removed.items() if v.startswith("duplicate of D1")]  # the model named it
    s7 = ind.steps["step7_structure"]
    assert "D1" in s7["problems"] and s7["reply"]["fixes"] and not s7["dropped"]
    names = [c.name for c in ind.taxonomy.axis("A")]
    assert "Tool_Error_Seen_In_Many_Of" in names and "Same_Failure_Named_Twice" not in names
    assert [c.id for c in ind.taxonomy.axis("A")] == [f"A.{i + 1}" for i in range(len(names))]


def test_cli_llm_backend_needs_a_model(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TSEVO_LLM_MODEL", raising=False)
    monkeypatch.delenv("TSEVO_LLM_CONFIG", raising=False)
    root = planted_run(tmp_path / "run", n=40)
    assert main(["taxonomy", "induce", str(root), "--backend", "llm"]) == 2
    assert "needs a model" in capsys.readouterr().err
    assert not RunLayout(root).taxonomy.draft.exists()


def test_llm_gate_edits_between_rounds(tmp_path):
    root = planted_run(tmp_path / "run", n=200)
    induce_run(root)  # a builtin draft: the LLM panel gates any draft
    resp = TaxonomyResponder(noise=0.6)  # annotators that disagree: low per-code kappa
    with FakeOpenAIServer(resp) as srv:
        res = gate_run(root, backend="llm", llm=_cfg(srv, cache_mode="off"))
    failed = [r for r in res.rounds[:-1] if not r["passed"]]
    assert failed and resp.counts["edits"] == len(failed)
    assert all(r["edits"]["error"] is None for r in failed)
    relabels = [e for entry in res.lineage for e in entry.edits if e["op"] == "relabel"]
    assert relabels and all("(llm)" in entry.trigger for entry in res.lineage)
    assert res.taxonomy.version_n == 1 + len(res.lineage)
    fps = [r["fingerprint"] for r in res.rounds]
    assert len(set(fps)) > 1  # later rounds label the edited version


def test_cli_gate_with_four_annotator_models(tmp_path, capsys):
    root = planted_run(tmp_path / "run", n=120)
    assert main(["taxonomy", "induce", str(root)]) == 0  # builtin draft
    with FakeOpenAIServer(TaxonomyResponder()) as srv:
        args = ["--backend", "llm", "--base-url", srv.base_url, "--model", "scripted"]
        args += ["--annotator-models", "m-a,m-b,m-c,m-d", "--cache-mode", "off"]
        assert main(["taxonomy", "gate", str(root), *args]) == 0
        asked = [b["model"] for b in srv.chat_requests() if "You are annotator" in json.dumps(b)]
    assert "LLM accounting" in capsys.readouterr().out
    assert set(asked) == {"m-a", "m-b", "m-c", "m-d"}
    man = json.loads(RunLayout(root).taxonomy.manifest.read_text())
    assert man["gate"]["llm"]["options"]["annotator_models"] == ["m-a", "m-b", "m-c", "m-d"]
    assert man["induce"]["backend"] == "builtin"
    with pytest.raises(SystemExit):
        main(["taxonomy", "gate", str(root), "--annotator-models", "only,three,models"])
