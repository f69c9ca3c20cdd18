"""The LLM Mara chain over real HTTP: the scripted server answers its two calls per step.

One tiny round (seed 5) on LLM roles with chains on (depth 2); its one chained group (g2) gets
faults on the way: the first analysis is malformed JSON, the second quotes a field that is not
verbatim (refused by tsevo's check and re-asked), the third is accepted; all three mutations of
step 1 resolve nothing, so step 1 is an invalid node and step 2 runs clean. Then a rerun on the
first run's response cache makes zero requests and writes the same chain.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tsevo.data.synthetic import make_suite
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.evolve.views import ViewIds
from tsevo.marachain import ChainLedger, MaraConfig
from tsevo.roles import RoleSet
from tsevo.roles.llm.config import LLMConfig, RoleConfigs
from tsevo.testing import BuiltinResponder, FakeOpenAIServer, Fault

CFG = ProtocolConfig(marachain=MaraConfig(depth=2))


def _configs(base_url: str, **kw: Any) -> RoleConfigs:
    return RoleConfigs(
        LLMConfig(base_url=base_url, model="scripted", concurrency=1, timeout_s=20.0, **kw)
    )


def _bad_quote(reply: dict[str, Any]) -> dict[str, Any]:
    reply["corroboration"] = [{**reply["corroboration"][0], "quote": "import os"}]
    return reply


def _no_resolves(reply: dict[str, Any]) -> dict[str, Any]:
    reply["actions"] = [{**a, "resolves": []} for a in reply["actions"]]
    return reply


def _run(suite: Any, out: Path, resp: BuiltinResponder, **kw: Any) -> dict[str, Any]:
    with FakeOpenAIServer.llama_cpp(resp) as srv:
        with RoleSet.llm(_configs(srv.base_url, **kw), run_dir=out) as roles:
            evolve(suite, roles=roles, config=CFG, out=out, log=lambda _s: None)
        prompts = [
            next(m for m in b["messages"] if m["role"] == "user")["content"]
            for b in srv.chat_requests()
        ]
        n = srv.n_requests
    chains = [
        g["chain"]
        for g in json.loads((out / "rounds" / "r1" / "synthesis.json").read_text())
        if g.get("chain")
    ]
    return {"out": out, "requests": n, "prompts": prompts, "chains": chains}


@pytest.fixture(scope="module")
def tiny() -> Any:
    return make_suite("tiny", seed=5)


@pytest.fixture(scope="module")
def first(tiny: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    resp = BuiltinResponder(list(tiny))
    resp.inject("chain_analyse", Fault.malformed(), _bad_quote)
    resp.inject("chain_mutate", _no_resolves, _no_resolves, _no_resolves)
    run = _run(tiny, tmp_path_factory.mktemp("llmchain") / "run1", resp)
    run["counts"] = dict(resp.counts)
    return run


def test_two_calls_per_step_with_refusals_and_an_invalid_node(first: dict[str, Any]) -> None:
    (chain,) = first["chains"]
    assert chain["label"] == "LLM chain" and chain["v0"]["node_id"] == "r1.g2.a1"
    s1, s2 = chain["nodes"]
    # step 1: analysis accepted on the third attempt (malformed, then a non-verbatim quote)
    assert s1["calls"]["analyse"] == {
        "calls": 3,
        "retries": 2,
        "replays": 0,
        "tokens": s1["calls"]["analyse"]["tokens"],
    }
    assert s1["analysis"]["delta_tracing"] and s1["category"] in "ABCDEFGHI"
    # ... and every mutation refused: an invalid node, nothing scored, the step spent
    assert s1["outcome"] == "invalid_reply" and "resolves is empty" in s1["violations"][0]
    assert s1["calls"]["mutate"]["calls"] == 3 and "repairs" not in s1
    # step 2 is clean and scored; tsevo wrote its changelog from the actions
    assert s2["calls"]["analyse"]["retries"] == 0 and s2["calls"]["mutate"]["retries"] == 0
    assert s2["outcome"] != "invalid_reply" and "repairs" in s2 and s2["axis"] == "llm"
    assert s2["subject"].startswith("llm: reading_rule: ")
    assert s2["context_chars"] <= CFG.marachain.context_chars
    assert first["counts"]["chain_analyse"] == 4 and first["counts"]["chain_mutate"] == 4


def test_each_node_folder_keeps_what_its_step_saw_and_concluded(first: dict[str, Any]) -> None:
    s1, s2 = first["chains"][0]["nodes"]
    folder = first["out"] / "rounds" / "r1" / "candidates"
    for node in (s1, s2):
        context = (folder / node["node_id"] / "context.md").read_text(encoding="utf-8")
        assert hashlib.sha256(context.encode("utf-8")).hexdigest()[:16] == node["context_sha"]
        analysis = json.loads((folder / node["node_id"] / "analysis.json").read_text())
        assert analysis == node["analysis"]  # the accepted one (step 1's edit was refused)


def test_the_ledger_books_every_call_once(first: dict[str, Any]) -> None:
    ledger = ChainLedger(first["out"] / "rounds" / "r1" / "chains" / "ledger.jsonl")
    assert ledger.calls_by_role() == {"chain_analyse": 4, "chain_mutate": 4}
    total = ledger.total()
    assert total.steps == 2 and total.invalid == 1 and total.retries == 5 and total.val_runs == 0
    assert first["chains"][0]["spend"]["calls"] == 8


def test_the_mutation_prompt_carries_the_accepted_analysis(first: dict[str, Any]) -> None:
    mut = [p for p in first["prompts"] if p.startswith("You edit one node of a Mara chain")]
    ana = first["chains"][0]["nodes"][1]["analysis"]
    shown = mut[-1].split("Analysis of the node to edit (accepted by tsevo's checks):\n", 1)[1]
    assert json.loads(shown.split("\n", 1)[0]) == ana


def test_no_validation_or_test_row_reaches_a_chain_prompt(first: dict[str, Any], tiny: Any) -> None:
    ids = ViewIds(list(tiny), str(CFG.seed))
    chain_prompts = [p for p in first["prompts"] if "of a Mara chain" in p]
    assert chain_prompts
    text = "\n".join(chain_prompts)
    held = [q for q in (*tiny.val, *tiny.test)]
    assert held and not [q.id for q in held if ids.opaque(q.id) in text]
    batch = first["chains"][0]["batch"]["qids"]
    assert all(ids.opaque(q) in text for q in batch)  # the batch rows are shown, by opaque id
    assert not [q for q in batch if q in text]  # never by source id


def test_a_cached_rerun_makes_zero_calls_and_writes_the_same_chain(
    first: dict[str, Any], tiny: Any, tmp_path: Path
) -> None:
    cache = first["out"] / "llm_cache.sqlite"
    again = _run(tiny, tmp_path / "run2", BuiltinResponder(list(tiny)), cache_path=str(cache))
    assert again["requests"] == 0

    def strip(chain: dict[str, Any]) -> dict[str, Any]:
        nodes = [{k: v for k, v in n.items() if k != "calls"} for n in chain["nodes"]]
        return {**chain, "nodes": nodes, "spend": None}

    assert [strip(c) for c in again["chains"]] == [strip(c) for c in first["chains"]]
    replays = sum(c["replays"] for n in again["chains"][0]["nodes"] for c in n["calls"].values())
    assert replays == 8
