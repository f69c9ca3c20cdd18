"""The pinned taxonomy's round consumers (issue 12, design §5.2-5.3): coded triage, coded diagnoses.

The records are built by hand (:func:`tests.taxonomy_fixtures.planted_parts`: a one-tool library
that times out on planted questions, abstains on some, keeps the answer elsewhere; val and test
questions carry a sentinel). Expected categories and shares are counted from the records' raw
fields, not from the feature code under test. The round's cluster and plan steps run in memory
with the builtin roles; with every consumer off (even with a taxonomy pinned) their artifacts are
byte for byte those of the protocol.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.taxonomy_fixtures import SENTINEL, planted_parts
from tsevo.agent import AnswerRecord
from tsevo.data import Suite
from tsevo.evolve.cluster import error_item
from tsevo.evolve.config import ProtocolConfig
from tsevo.evolve.round import cluster, plan
from tsevo.evolve.run import evolve
from tsevo.evolve.steps import RoundContext
from tsevo.evolve.views import ViewIds
from tsevo.library.library import Library
from tsevo.library.tool import Contract, Scope
from tsevo.roles import RoleSet
from tsevo.roles.builtin.lifecycle import coded_prior
from tsevo.roles.builtin.planner import MeasurementPlanner
from tsevo.roles.llm.client import LLMClient
from tsevo.roles.llm.config import LLMConfig, RoleConfigs
from tsevo.roles.llm.roles import LLMLocalPlanner, LLMSynthesizer, RoleContext
from tsevo.roles.llm.roles.planner import CardReply, ScopeReply, card_from_reply
from tsevo.roles.protocols import Category, ContractCard, Dossier, Triage
from tsevo.store import RunStore
from tsevo.taxonomy import Code, Taxonomy, TaxonomyError, save_taxonomy
from tsevo.taxonomy.config import TaxonomyConfig
from tsevo.taxonomy.consumers import (
    CodedTriage,
    coded_diagnosis,
    error_trace,
    fire_codes,
)


def _det(*atoms: tuple[str, str, Any]) -> dict[str, Any]:
    return {"any": [{"all": [{"feature": f, "op": op, "value": v} for f, op, v in atoms]}]}


def _taxonomy() -> Taxonomy:
    codes = [
        Code(id="A.1", category="A", name="Tool_Timeout", severity="critical",
             description="a tool timed out, so no evidence reached the reviewer",
             detector=_det(("tool.error_timeout", "==", True)), outcome_blind=True),
        Code(id="B.1", category="B", name="Review_Without_Decision", severity="major",
             applies_to_role="reviewer", description="the reviewer took no decision",
             detector=_det(("review.no_decision", "==", True)), outcome_blind=True),
        # outcome-aware (allowed here: train errors): a wrong base answer kept, answered first
        Code(id="A.2", category="A", name="Wrong_First_Kept", severity="minor",
             description="the wrong first option was kept",
             detector=_det(("correct.base", "==", False), ("review.any_keep", "==", True),
                           ("answer.position", "==", "first")), outcome_blind=False),
        Code(id="C.1", category="C", name="Odd_Reason", severity="critical",
             detector=_det(("answer.reason_words", ">=", 7)), outcome_blind=True),
        Code(id="C.2", category="C", name="No_Detector", description="prose only"),
        # fires on every error (every question has three options): it separates nothing
        Code(id="C.3", category="C", name="Three_Options", severity="minor",
             detector=_det(("domain.n_options", "==", 3)), outcome_blind=True),
    ]  # fmt: skip
    return Taxonomy.create(codes, status="accepted")


def _parts(n: int = 90) -> tuple[dict, dict, dict, list[str]]:
    questions, records, splits, _ = planted_parts(n, 0, 0.2)
    errors = [
        q for q, s in splits.items() if s == "train" and records[q].correct is False
    ]  # fmt: skip
    odd = errors[0]  # one error with a long reason: C.1 fires on it alone
    records[odd] = dataclasses.replace(records[odd], base_reason="a b c d e f g h")
    return questions, records, splits, sorted(errors)


def _by_hand(rec: AnswerRecord) -> list[str]:
    """The codes that must fire, read off the record's raw fields (taxonomy order)."""
    run, step = rec.steps[0].runs[0], rec.steps[0]
    hit = []
    if run.status == "error" and run.error_kind == "timeout":
        hit.append("A.1")
    if step.decision == "no_decision":
        hit.append("B.1")
    if step.decision == "keep" and rec.base_answer == 0:  # errors only: the base was wrong
        hit.append("A.2")
    if len(rec.base_reason.split()) >= 7:
        hit.append("C.1")
    return [*hit, "C.3"]  # the fixture's questions all have three options


def test_triage_categories_are_the_codes_firing_on_two_or_more_errors() -> None:
    questions, records, splits, errors = _parts()
    train = {q: v for q, v in questions.items() if splits[q] == "train"}
    tax = _taxonomy()
    fired = fire_codes(tax, train, records, errors)
    hand = {q: _by_hand(records[q]) for q in errors}
    assert {q: [f.code for f in fired[q]] for q in errors} == hand
    counts = Counter(c for q in errors for c in hand[q])
    assert counts["C.1"] == 1 and min(counts[c] for c in ("A.1", "B.1", "A.2")) >= 2
    sev = {"A.1": 3, "B.1": 2, "A.2": 1}  # critical, major, minor: ties go to the severer
    assert counts["C.3"] == len(errors)  # on every error: not a category
    want = sorted(
        (c for c in counts if 2 <= counts[c] < len(errors)), key=lambda c: (-counts[c], -sev[c])
    )
    items = [error_item(questions[q], records[q]) for q in errors]
    inner = RoleSet.builtin().triage
    triage = CodedTriage(inner, tax, {q: hand[q] for q in errors})
    assert isinstance(triage, Triage)
    cats = triage.define(items, 8)
    rest = [i for i in items if not set(hand[i.qid]) & set(want)]
    assert rest, "the fixture has errors none of the category codes fires on"
    # the codes first, then the inner triage's categories of the rest in the slots left
    own = inner.define(rest, 8 - len(want))
    assert [c.id for c in cats] == [*want, *(c.id for c in own)]
    assert cats[len(want) :] == own
    assert cats[0].label == tax[want[0]].name and tax[want[0]].description in cats[0].criteria
    placed = triage.assign(cats, items)
    inner_placed = inner.assign(own, rest)
    for q in errors:  # the top code: the first category (rank order) whose code fires
        top = next((c for c in want if c in hand[q]), None)
        assert placed[q] == (top if top is not None else inner_placed[q])
    assert {placed[i.qid] for i in rest} <= {c.id for c in own}
    # at most max_categories: the last code gives its slot to the rest
    two = triage.define(items, 2)
    assert len(two) == 2 and two[0].id == want[0] and two[1].id not in want
    # no code but C.3 (on all) fires on these errors: the inner triage alone
    bare = [i for i in items if hand[i.qid] == ["C.3"]][:6]
    assert triage.define(bare, 3) == inner.define(bare, 3)
    assert triage.assign(inner.define(bare, 3), bare) == inner.assign(inner.define(bare, 3), bare)


class _Clash:
    """An inner triage whose category ids are code ids (they are renamed, and assigned back)."""

    name = "clash"

    def define(self, errors: Any, max_categories: int) -> list[Category]:
        return [Category("A.1", "clash", "an inner category named like a code")]

    def assign(self, categories: Any, batch: Any) -> dict[str, str | None]:
        return {e.qid: categories[0].id for e in batch}


def test_inner_category_ids_never_shadow_a_code() -> None:
    questions, records, _, errors = _parts()
    hand = {q: _by_hand(records[q]) for q in errors}
    items = [error_item(questions[q], records[q]) for q in errors]
    triage = CodedTriage(_Clash(), _taxonomy(), hand)
    cats = triage.define(items, 8)
    assert [c.id for c in cats].count("A.1") == 1 and cats[-1].id == "rA.1"
    placed = triage.assign(cats, items)
    assert all(placed[q] == "A.1" for q in errors if "A.1" in hand[q])
    assert {placed[q] for q in errors if not {"A.1", "B.1", "A.2"} & set(hand[q])} == {"rA.1"}


def test_diagnoses_quote_the_trace_verbatim_with_hand_counted_shares() -> None:
    questions, records, splits, errors = _parts()
    train = {q: v for q, v in questions.items() if splits[q] == "train"}
    tax = _taxonomy()
    fired = fire_codes(tax, train, records, errors)
    rows = errors[:12]
    codes = coded_diagnosis(tax, fired, rows, name=lambda q: f"v-{q}", top=6, evidence=3)
    hand = Counter(c for q in rows for c in _by_hand(records[q]))
    assert {c["id"]: c["n"] for c in codes} == dict(hand)
    assert [c["n"] for c in codes] == sorted((c["n"] for c in codes), reverse=True)
    for c in codes:
        assert c["of"] == len(rows) and c["share"] == round(c["n"] / len(rows), 4)
        assert c["taxonomy"] == tax.fingerprint and c["axis"] == c["id"][0]
        assert 1 <= len(c["evidence"]) <= min(3, c["n"])
        for ev in c["evidence"]:
            q = ev["row"].removeprefix("v-")
            assert c["id"] in _by_hand(records[q])
            text, lines = error_trace(records[q], questions[q])
            assert ev["quote"] in lines or text.startswith(ev["quote"])  # verbatim
    a1 = next(c for c in codes if c["id"] == "A.1")
    assert all("tool_error" in e["quote"] and "timeout" in e["quote"] for e in a1["evidence"])
    assert all("period_probe" in e["quote"] for e in a1["evidence"])  # real tool ids


# ------------------------------------------------------------------------- the round, in memory
class _Planner:
    """A local planner that writes one card per bucket from its dossier (fast, deterministic)."""

    name = "stub-planner"

    def plan(self, d: Dossier, feedback: Any = ()) -> ContractCard:
        return ContractCard(
            d.bucket_id, "create", "tool", "", "missing_measurement", f"the cause of {d.label}",
            "measure it", Contract(measurement=f"m.{d.bucket_id}"), Scope(),
        )  # fmt: skip


def _round(root: Path, taxonomy: TaxonomyConfig, parts: tuple) -> RoundContext:
    questions, records, splits, errors = parts
    cfg = ProtocolConfig(taxonomy=taxonomy)
    train = [q for q in questions.values() if splits[q.id] == "train"]
    val = [q for q in questions.values() if splits[q.id] == "val"]
    store = RunStore.create(root, {"seed": 0, "purpose": "consumers test"})
    ctx = RoundContext(
        1, Library(), train, val, RoleSet.builtin(local_planner=_Planner()), cfg, None, None, store,
        lambda s: None, 1, ViewIds(questions.values(), "0"),
    )  # fmt: skip
    ctx.base = {q.id: records[q.id] for q in train}
    ctx.errors = list(errors)
    assert cluster(ctx).stop is None
    plan(ctx)
    return ctx


def _bytes(ctx: RoundContext) -> dict[str, bytes]:
    p = ctx.paths
    assert p is not None
    return {f.name: f.read_bytes() for f in (p.buckets, p.splits, p.contracts, p.groups)}


@pytest.fixture(scope="module")
def rounds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RoundContext]:
    parts = _parts()
    root = tmp_path_factory.mktemp("consumers")
    path = str(save_taxonomy(_taxonomy(), root / "taxonomy.json"))
    arms = {
        "protocol": TaxonomyConfig(),
        "pinned_off": TaxonomyConfig(path=path),
        "beside": TaxonomyConfig(path=path, triage=True, diagnoses="beside"),
        "instead": TaxonomyConfig(path=path, diagnoses="instead"),
    }
    return {k: _round(root / k, cfg, parts) for k, cfg in arms.items()}


def test_off_leaves_the_round_bytes_as_the_protocol(rounds: dict[str, RoundContext]) -> None:
    base = _bytes(rounds["protocol"])
    assert _bytes(rounds["pinned_off"]) == base
    assert b"taxonomy" not in b"".join(base.values())
    assert all(not d.codes for d in rounds["pinned_off"].dossiers.values())
    assert all(not c.codes for g in rounds["pinned_off"].groups for c in g.cards)


def test_coded_round_records_the_fingerprint_and_carries_codes(
    rounds: dict[str, RoundContext],
) -> None:
    fp = _taxonomy().fingerprint
    ctx = rounds["beside"]
    assert ctx.paths is not None
    buckets = json.loads(ctx.paths.buckets.read_text())
    assert buckets["taxonomy"]["fingerprint"] == fp and buckets["taxonomy"]["triage"] == "codes"
    top = {b["category"]["id"] for b in buckets["buckets"] if not b["parent"]}
    codes = top & {"A.1", "B.1", "A.2"}  # C.3 fires on all: not a category
    assert codes and all(c[0] == "c" for c in top - codes)  # the cluster triage's for the rest
    contracts = json.loads(ctx.paths.contracts.read_text())
    assert contracts["diagnoses"]["fingerprint"] == fp
    assert set(contracts["diagnoses"]["buckets"]) == set(ctx.dossiers)
    for bid, d in ctx.dossiers.items():
        code = bid.split(".", 1)[1]
        if code in codes:  # a coded bucket's top code is its own
            assert d.codes[0]["id"] == code and d.codes[0]["share"] == 1.0
        support = {e.question.id for e in d.support}
        assert {e["row"] for c in d.codes for e in c["evidence"]} <= support
        assert d.criteria  # beside keeps the free text
    cards = [c for g in ctx.groups for c in g.cards]
    assert cards and all(c.codes == ctx.dossiers[c.bucket_id].codes for c in cards)
    assert all(c.root_cause for c in cards)
    inst = rounds["instead"]
    assert all(not d.criteria for d in inst.dossiers.values())
    assert any(d.codes for d in inst.dossiers.values())
    # the cards keep the planner's free text (and contracts.json); the codes say 'instead'
    coded = [c for g in inst.groups for c in g.cards if c.codes]
    assert coded and all(c.root_cause and c.codes[0]["mode"] == "instead" for c in coded)
    assert all(k["mode"] == "beside" for c in cards for k in c.codes)
    # the buckets are the protocol's (cluster triage); only the dossiers changed
    assert inst.paths is not None and rounds["protocol"].paths is not None
    assert inst.paths.buckets.read_bytes() == rounds["protocol"].paths.buckets.read_bytes()


def test_no_validation_content_reaches_the_consumers(rounds: dict[str, RoundContext]) -> None:
    for name in ("beside", "instead"):
        ctx = rounds[name]
        assert ctx.paths is not None
        for f in (ctx.paths.buckets, ctx.paths.contracts, ctx.paths.groups):
            assert SENTINEL not in f.read_text()
        assert SENTINEL not in repr([d.codes for d in ctx.dossiers.values()])
    questions, records, splits, _ = _parts()
    train = {q: v for q, v in questions.items() if splits[q] == "train"}
    val = next(q for q, s in splits.items() if s == "val")
    with pytest.raises(KeyError):  # a val id is not a train question: nothing fires on it
        fire_codes(_taxonomy(), train, records, [val])


def test_the_llm_planner_prompt_renders_codes_beside_or_instead_of_free_text(
    rounds: dict[str, RoundContext],
) -> None:
    cfg = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", cache_mode="off")
    planner = LLMLocalPlanner(RoleContext(LLMClient(RoleConfigs(cfg))))
    bid = next(b for b, d in rounds["beside"].dossiers.items() if d.codes)
    beside = rounds["beside"].dossiers[bid]
    off = dataclasses.replace(beside, codes=())
    code = beside.codes[0]
    quote = code["evidence"][0]["quote"]
    p_off, p_beside = planner.prompt(off), planner.prompt(beside)
    assert f"Criteria: {beside.criteria}" in p_off and "Coded diagnosis" not in p_off
    assert f"Criteria: {beside.criteria}" in p_beside and "Coded diagnosis" in p_beside
    assert f"- {code['id']} {code['name']} (axis {code['axis']}" in p_beside
    assert f'"{quote}"' in p_beside
    bid, inst = next((b, d) for b, d in rounds["instead"].dossiers.items() if d.codes)
    p_inst = planner.prompt(inst)
    free = rounds["protocol"].dossiers[bid].criteria  # the same bucket (cluster triage in both)
    assert (
        free
        and free not in p_inst
        and f"Criteria: {free}" in planner.prompt(rounds["protocol"].dossiers[bid])
    )
    assert "Criteria: (the coded diagnosis below)" in p_inst and "Coded diagnosis" in p_inst
    assert inst.codes[0]["evidence"][0]["quote"] in p_inst
    # without codes the prompt is the template's as before: the criteria line in its place
    assert f"Category: {off.label}\nCriteria: {off.criteria}\n\nCurrent tool library:" in p_off


def test_the_builtin_planner_records_its_coded_prior_as_a_mechanism_test(
    rounds: dict[str, RoundContext],
) -> None:
    d = next(d for d in rounds["beside"].dossiers.values() if d.codes and d.side == "no_tool")
    d = dataclasses.replace(d, background=d.background[:6])
    prior = coded_prior(d)
    assert prior is not None and prior["label"].startswith("mechanism test")
    assert prior["code"] == d.codes[0]["id"] and prior["prior"] == "lifecycle_first"
    on_c = dataclasses.replace(d, codes=({**d.codes[0], "axis": "C"},))
    assert coded_prior(on_c)["prior"] == "create"  # type: ignore[index]
    assert coded_prior(dataclasses.replace(d, codes=())) is None
    planner = MeasurementPlanner()
    coded, plain = planner.plan(d), planner.plan(dataclasses.replace(d, codes=()))
    assert coded is not None and plain is not None
    assert coded.plan["coded"] == prior and "coded" not in plain.plan
    # on a no_tool bucket the prior changes nothing but the record
    assert dataclasses.replace(coded, plan=plain.plan, codes=()) == plain


def test_the_llm_synthesizer_prompt_renders_codes_beside_or_instead_of_free_text(
    rounds: dict[str, RoundContext],
) -> None:
    cfg = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", cache_mode="off")
    synth = LLMSynthesizer(RoleContext(LLMClient(RoleConfigs(cfg)))).for_library(Library())
    g0 = rounds["protocol"].groups[0]
    g1 = next(g for g in rounds["beside"].groups if g.cards[0].codes)
    g2 = next(g for g in rounds["instead"].groups if g.cards[0].codes)
    p0, p1, p2 = (synth.prompt(g, 1, (), ()) for g in (g0, g1, g2))
    c0, c1, c2 = g0.cards[0], g1.cards[0], g2.cards[0]
    # off: the planners' free text as before, line for line
    assert f"- {c0.bucket_id}: {c0.failure_type}; root cause: {c0.root_cause}; focus:" in p0
    assert "coded diagnosis" not in p0
    assert f"; root cause: {c1.root_cause}; focus:" in p1 and "coded diagnosis" in p1
    assert f"{c1.codes[0]['id']} {c1.codes[0]['name']}" in p1
    assert f'"{c1.codes[0]["evidence"][0]["quote"]}"' in p1
    assert "root cause:" not in p2 and c2.root_cause not in p2 and "coded diagnosis" in p2
    assert f"- {c2.bucket_id}: focus: {c2.focus}" in p2
    assert f'"{c2.codes[0]["evidence"][0]["quote"]}"' in p2


def test_a_run_refuses_an_unusable_pinned_taxonomy_before_any_round(tmp_path: Path) -> None:
    questions, _, splits, _ = _parts(30)
    suite = Suite("planted", list(questions.values()), splits)
    draft = save_taxonomy(_taxonomy().with_status("draft"), tmp_path / "draft.json")
    cfg = ProtocolConfig(taxonomy=TaxonomyConfig(path=str(draft), diagnoses="beside"))
    with pytest.raises(TaxonomyError, match=r"draft\.json"):
        evolve(suite, config=cfg, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_planner_card_carries_its_dossiers_codes(rounds: dict[str, RoundContext]) -> None:
    # so a replan during synthesis (the engine's retry policy) keeps the coded diagnosis
    d = next(d for d in rounds["instead"].dossiers.values() if d.codes)
    reply = CardReply(
        action="create", artifact_kind="tool", target_tool="", failure_type="t",
        root_cause="free text", focus="f", measurement="trend.slope", signature=["primary"],
        success_criterion="s", reading="label", calibration=False, params={},
        scope=ScopeReply(tasks=[], arity="any", options_kind="any", match_terms=[],
                         forbid_terms=[], anti_tasks=[]),
    )  # fmt: skip
    card, problem = card_from_reply(reply, d)
    assert problem is None and card is not None and card.codes == d.codes
    plain, _ = card_from_reply(reply, dataclasses.replace(d, codes=()))
    assert plain is not None and plain.codes == () and dataclasses.replace(card, codes=()) == plain
