"""The LLM panel's event-level phases (design §4.2) over the scripted server (real HTTP).

Discovery, vote and typing, assignment and deliberation are asked of four annotators, each reply
checked and re-asked; the scripted server (:class:`~tsevo.testing.taxonomy_responder.
TaxonomyResponder`) answers every kind from the request alone; nothing in tsevo is mocked.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from tests.taxonomy_fixtures import planted_run
from tsevo.roles.llm import LLMConfig
from tsevo.store import RunLayout
from tsevo.taxonomy.agreement import agreement
from tsevo.taxonomy.gate import GateConfig, gate_pool, sample_round
from tsevo.taxonomy.jsonio import load_taxonomy
from tsevo.taxonomy.llm import LLMOptions
from tsevo.taxonomy.llm_panel import ANNOTATORS, annotator_messages
from tsevo.taxonomy.llm_phases import eligible_codes
from tsevo.taxonomy.phases import split_error_id, type_of
from tsevo.taxonomy.runs import gate_run, induce_run
from tsevo.taxonomy.traces import read_traces
from tsevo.testing import FakeOpenAIServer, Fault
from tsevo.testing.taxonomy_responder import TaxonomyResponder

PHASES = ("discover", "vote", "assign", "deliberate")


def _cfg(srv: FakeOpenAIServer, **kw: object) -> LLMConfig:
    kw.setdefault("timeout_s", 5.0)
    return LLMConfig(base_url=srv.base_url, model="scripted", backoff_base_s=0.01, **kw)  # type: ignore[arg-type]


def _drafted(root: Path) -> Path:
    """A planted run with an LLM-induced draft (A codes and a reviewer B code)."""
    planted_run(root, n=160)
    with FakeOpenAIServer(TaxonomyResponder()) as srv:
        induce_run(root, backend="llm", llm=_cfg(srv, cache_mode="off"))
    return root


def _agreement_files(root: Path) -> dict[str, bytes]:
    d = RunLayout(root).taxonomy.agreement_dir
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*.json"))}


def _kinds(chats: list[dict]) -> list[str]:
    resp = TaxonomyResponder()
    return [resp.kind_of(b["messages"][0]["content"]) for b in chats]


@pytest.fixture(scope="module")
def event_run(tmp_path_factory):
    """One event-level LLM gate with noisy annotators; the server's record kept."""
    root = _drafted(tmp_path_factory.mktemp("txphases") / "run")
    with FakeOpenAIServer(TaxonomyResponder(noise=0.3)) as srv:
        res = gate_run(root, backend="llm", llm=_cfg(srv))
        chats = srv.chat_requests()
    return {"root": root, "gate": res, "chats": chats, "files": _agreement_files(root)}


def test_four_distinct_requests_per_item_and_phase(event_run):
    chats, rounds = event_run["chats"], event_run["gate"].rounds
    kinds = _kinds(chats)
    asked = [(b, k) for b, k in zip(chats, kinds, strict=True) if k in PHASES]
    assert {k for _, k in asked} == set(PHASES)
    for i in range(0, len(asked), 4):
        group = asked[i : i + 4]
        assert len({k for _, k in group}) == 1  # one phase, one item, the four annotators
        assert [b["seed"] for b, _ in group] == [0, 1, 2, 3]
        names = [b["messages"][0]["content"].split("\n")[1].split(".")[0] for b, _ in group]
        assert names == [f"You are annotator {n.capitalize()}" for n in ANNOTATORS]
        assert len({json.dumps(b, sort_keys=True) for b, _ in group}) == 4
    # as many requests per phase as the records name items: every trace, the traces with
    # voted keys, the confirmed errors with codes of their type, the split errors per round
    n = Counter(k for _, k in asked)
    assert n["discover"] == 4 * sum(len(r["traces"]) for r in rounds)
    voted = [{split_error_id(e)[0] for e in r["phases"]["reconciliation"]["voted"]} for r in rounds]
    assert n["vote"] == 4 * sum(map(len, voted))
    assert n["assign"] == 4 * sum(len(r["annotators"]["alpha"]["assign"]) for r in rounds)
    delib = [d for r in rounds for d in r["phases"]["deliberation"]]
    assert n["deliberate"] == 4 * sum(len(d["deliberated"]) for d in delib) > 0
    for r in rounds:
        for name in ANNOTATORS:
            rec = r["annotators"][name]
            assert set(rec["discover"]) == set(r["traces"])
            assert all(
                c["error"] is None and c["invalid"] == 0 for p in PHASES for c in rec[p].values()
            )
        assert not r["degenerate"]


def test_phases_record_follows_the_quorums(event_run):
    root, rounds = event_run["root"], event_run["gate"].rounds
    cfg = GateConfig()
    draft = load_taxonomy(RunLayout(root).taxonomy.draft)
    traces = {t.problem_id: t for t in read_traces(RunLayout(root).taxonomy.traces("train"))}
    dropped = changed = 0
    for r in rounds:
        ph = r["phases"]
        rec = ph["reconciliation"]
        for e, v in rec["voted"].items():
            assert len(v["proposers"]) >= cfg.quorum_propose
            assert set(v["proposers"]) <= set(v["confirm"])  # a proposer's vote is a confirm
            assert (e in rec["confirmed"]) == (v["tally"] >= cfg.quorum_confirm)
        for e, who in rec["dropped"].items():
            assert len(who) < cfg.quorum_propose and e not in rec["voted"]
        dropped += len(rec["dropped"])
        proposed = {
            p["trace_id"] + "#" + str(p["event_seq"]) for ps in ph["proposals"].values() for p in ps
        }
        assert proposed == set(rec["voted"]) | set(rec["dropped"])
        assert r["errors"] == rec["confirmed"] == list(ph["types"])
        for t in ph["types"].values():
            assert t["type"] == type_of(list(t["by"].values()))
        # deliberation reads only split phase-4 labels; consolidated = codes >= 2 hold after it
        first = ph["deliberation"][0]["deliberated"] if ph["deliberation"] else []
        split = [e for e in r["errors"] if len({tuple(r["labels"][n][e]) for n in ANNOTATORS}) > 1]
        assert first == split
        changed += sum(len(d["changed"]) for d in ph["deliberation"])
        assert len(ph["deliberation"]) <= cfg.deliberation_rounds
        for e in r["errors"]:
            held = Counter(i for n in ANNOTATORS for i in ph["final_labels"][n][e])
            assert r["consolidated"][e] == sorted(i for i, c in held.items() if c >= cfg.quorum)
        # kappa on the phase-4 labels, coverage on the consolidated ones
        if r["fingerprint"] == draft.fingerprint:
            labels = [{e: set(v) for e, v in r["labels"][n].items()} for n in ANNOTATORS]
            cons = {e: set(v) for e, v in r["consolidated"].items()}
            res = agreement(labels, r["errors"], draft, consolidated=cons)
            assert (res.cohen_area, res.coverage) == (r["cohen_area"], r["coverage"])
            for e in r["errors"]:  # asked only where the error's type has codes
                tid, seq = split_error_id(e)
                has = bool(eligible_codes(draft, ph["types"][e]["type"], traces[tid], seq))
                assert (e in r["annotators"]["beta"]["assign"]) == has
    assert dropped and changed  # the noisy panel exercised both quorums and deliberation
    # the shared base only grows; a later round's assignment prompts show its anchors
    bases = [r["phases"]["base"] for r in rounds]
    for a, b in pairwise(bases):
        assert a["anchors"].items() <= b["anchors"].items()
    assert bases[0]["anchors"] and bases[0]["added"]["anchors"] == bases[0]["anchors"]
    shown = [b["messages"][0]["content"] for b in event_run["chats"]]
    assign = [c for c, k in zip(shown, _kinds(event_run["chats"]), strict=True) if k == "assign"]
    assert any('"anchors":[{' in c for c in assign)


def test_cached_rerun_makes_zero_calls_and_writes_identical_agreement_files(event_run):
    root = event_run["root"]
    with FakeOpenAIServer(default=Fault.server_error(500)) as srv:
        rerun = gate_run(root, backend="llm", llm=_cfg(srv))
        assert srv.n_chat == 0
    assert _agreement_files(root) == event_run["files"]
    assert rerun.taxonomy.fingerprint == event_run["gate"].taxonomy.fingerprint


def test_each_phase_reasks_a_malformed_or_invalid_reply(tmp_path):
    root = _drafted(tmp_path / "run")
    resp = TaxonomyResponder(noise=0.3)

    def missing_vote(reply):  # one voted id left out of votes
        return {**reply, "votes": reply["votes"][1:]}

    def other_error(reply):  # a revision for an error id that was not asked about
        return {"revisions": [{**reply["revisions"][0], "error_id": "nope#1"}]}

    def unknown_code(reply):  # a valid reply naming an id the taxonomy does not have
        return {"codes": [*reply["codes"], {"id": "Z.9", "quote": ""}]}

    for kind in PHASES:
        resp.inject(kind, Fault.malformed())
    resp.inject("vote", missing_vote)
    resp.inject("deliberate", other_error)
    resp.inject("assign", unknown_code)
    cfg = GateConfig(max_rounds=2)
    with FakeOpenAIServer(resp) as srv, pytest.warns(UserWarning, match="unknown code ids"):
        res = gate_run(root, backend="llm", llm=_cfg(srv, cache_mode="off"), config=cfg)
        fed = [c["messages"][-1]["content"] for c in srv.chat_requests() if len(c["messages"]) > 1]
    calls = {
        p: [c for r in res.rounds for n in ANNOTATORS for c in r["annotators"][n][p].values()]
        for p in PHASES
    }
    for p in PHASES:
        bad = [c for c in calls[p] if c["invalid"]]
        assert bad and all(c["reply"] is not None and c["error"] is None for c in bad), p
        assert sum(c["invalid"] for c in calls[p]) == (2 if p in ("vote", "deliberate") else 1)
    errors = [e for p in PHASES for c in calls[p] for e in c["errors"]]
    assert any("every id exactly once" in e for e in errors)
    assert any("exactly one entry" in e for e in errors)
    assert sum("could not be used" in m for m in fed) == 6  # every problem went back to the model
    # an unknown id is no contract error: dropped with a warning, recorded, in no label
    drops = [d for r in res.rounds for n in ANNOTATORS for d in r["annotators"][n]["dropped"]]
    assert drops == [{"item": drops[0]["item"], "ids": ["Z.9"]}]
    assert not any(
        "Z.9" in v for r in res.rounds for lab in r["labels"].values() for v in lab.values()
    )


def test_a_quote_not_verbatim_in_its_event_is_refused(tmp_path):
    root = _drafted(tmp_path / "run")
    resp = TaxonomyResponder()
    state = {"n": 0, "quote": None}

    def reworded(reply):  # the first annotator call with an error, on all three attempts
        if not reply["errors"] or state["n"] >= 3:
            return reply
        state["n"] += 1
        bad = dict(reply["errors"][0])
        bad["quote"] = state["quote"] = bad["quote"].replace("] ", "]  ", 1)  # not verbatim
        return {"errors": [bad, *reply["errors"][1:]]}

    resp.inject("discover", *([reworded] * 8))
    with FakeOpenAIServer(resp) as srv:
        res = gate_run(
            root, backend="llm", llm=_cfg(srv, cache_mode="off"), config=GateConfig(max_rounds=1)
        )
    first = res.rounds[0]
    failed = {t: c for t, c in first["annotators"]["alpha"]["discover"].items() if c["error"]}
    assert len(failed) == 1 and state["n"] == 3
    ((tid, call),) = failed.items()
    assert call["attempts"] == 3 and all("not verbatim" in e for e in call["errors"])
    assert not [p for p in first["phases"]["proposals"]["alpha"] if p["trace_id"] == tid]
    beta = [p for p in first["phases"]["proposals"]["beta"] if p["trace_id"] == tid]
    assert beta and state["quote"] not in [p["quote"] for p in beta]


def test_trace_unit_keeps_the_old_request_sequence(tmp_path):
    root = _drafted(tmp_path / "run")
    cfg = GateConfig(unit="trace")
    with FakeOpenAIServer(TaxonomyResponder(noise=0.3)) as srv:
        res = gate_run(root, backend="llm", llm=_cfg(srv, cache_mode="off"), config=cfg)
        chats = srv.chat_requests()
    kinds = _kinds(chats)
    per_round = [
        ["annotate"] * 4 * bool(r["errors"]) + ["edits"] * ("edits" in r) for r in res.rounds
    ]
    assert kinds == [k for ks in per_round for k in ks]
    lay = RunLayout(root).taxonomy
    traces = read_traces(lay.traces("train"))
    batch = sample_round(gate_pool(traces), set(), 1, cfg.per_round, cfg.seed)
    errs = [t for t in batch if t.failed]
    draft = load_taxonomy(lay.draft)
    for name, body in zip(ANNOTATORS, chats[:4], strict=True):  # round 1, as before the phases
        assert body["messages"][0]["content"].startswith(
            annotator_messages(name, draft, errs, LLMOptions())[0]["content"]
        )
    by_id = {t.problem_id: t for t in traces}
    for r in res.rounds:  # the sampled failed traces are the errors, no phase record
        assert not {"unit", "consolidated", "phases"} & set(r)
        failed = [by_id[t] for t in r["traces"] if by_id[t].failed]
        assert r["errors"] == [f"{t.problem_id}#{t.events[-1]['seq']}" for t in failed]
