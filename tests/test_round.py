"""The evolution round end to end, checked from what the run store holds.

One shared three-round run on the tiny suite (``round_fixtures.main_run``; round 1 is accepted through
the strict path, later rounds admit less or are rejected) feeds most tests; a few small rounds on a
three-family subset exercise the test-split guard and the rollback paths.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests import round_fixtures as rf
from tsevo.agent import Agent, AnswerRecord
from tsevo.evolve.config import ProtocolConfig
from tsevo.evolve.evaluate import Evaluator
from tsevo.evolve.evaluate import TestSplitLeak as SplitLeak
from tsevo.evolve.gate import ArmOutcome, GateDecision, decide_gate, paired_counts
from tsevo.evolve.round import run_round
from tsevo.evolve.support import granted_support
from tsevo.library.library import Library, Stage
from tsevo.library.tool import Tool
from tsevo.roles import RoleSet
from tsevo.store import RunStore

SMALL_FAMILIES = ("distribution", "matching", "trend")


# --------------------------------------------------------------------------- fixtures and helpers
@pytest.fixture(scope="module")
def main() -> rf.Run:
    return rf.main_run()


@pytest.fixture(scope="module")
def small_suite() -> Any:
    from tsevo.data.synthetic import make_suite

    return make_suite("tiny", seed=rf.SEED, families=list(SMALL_FAMILIES))


def _cfg(run: Path) -> ProtocolConfig:
    return ProtocolConfig.from_dict(RunStore.open(run).config["protocol"])


def _rounds(run: Path) -> list[int]:
    out = []
    while (run / f"rounds/r{len(out) + 1}/round.json").exists():
        out.append(len(out) + 1)
    return out


def _read(run: Path, rel: str) -> Any:
    return json.loads((run / rel).read_text(encoding="utf-8"))


def _records(run: Path, arm: str) -> dict[str, AnswerRecord]:
    return {
        json.loads(ln)["qid"]: AnswerRecord.from_dict(json.loads(ln))
        for ln in rf.jsonl_lines(run / "evals" / f"{arm}.jsonl")
    }


def _library_before(run: Path, r: int) -> Library:
    """The deployed library a round started from (root, or the last accepted round's library)."""
    for k in range(r - 1, 0, -1):
        if _read(run, f"rounds/r{k}/round.json")["status"] == "accepted":
            return Library.load(run / f"rounds/r{k}/library")
    return Library()


def _candidate_tool(run: Path, r: int, tool_id: str) -> Tool:
    d = run / f"rounds/r{r}/candidates/{tool_id}"
    meta = _read(run, f"rounds/r{r}/candidates/{tool_id}/meta.json")["tool"]
    src = (d / "tool.py").read_text(encoding="utf-8") if (d / "tool.py").exists() else ""
    return Tool.from_dict(meta, source=src)


# --------------------------------------------------------------------------- 1. test-split guard
def test_evaluator_refuses_any_test_question_and_answers_nothing(tmp_path: Path, small_suite: Any):
    store = RunStore.create(tmp_path / "run", {"x": 1})
    test_ids = [q.id for q in small_suite.test]
    ev = Evaluator(Agent(Library()), store, forbidden=test_ids)
    val = list(small_suite.val)
    with pytest.raises(SplitLeak):
        ev.answer("val", Library(), [small_suite.test[test_ids[0]]])
    with pytest.raises(SplitLeak):  # one test question hidden in a val batch
        ev.answer("val", Library(), [*val[:5], small_suite.test[test_ids[-1]], *val[5:]])
    assert ev.answered == 0
    assert not list((tmp_path / "run").glob("evals/*.jsonl")), "nothing may be stored for a leak"
    # the same evaluator still answers val; the report evaluator (no forbidden ids) answers test
    assert len(ev.answer("val", Library(), val[:4])) == 4
    reporter = Evaluator(Agent(Library()), None)
    assert len(reporter.answer("test", Library(), list(small_suite.test)[:3])) == 3


def test_evolve_hands_the_round_only_train_and_val(monkeypatch, small_suite: Any):
    from tsevo.evolve import run as run_mod
    from tsevo.evolve.result import RoundResult

    seen: dict[str, Any] = {}

    def fake_round(r, library, train, val, *, evaluator, **kw):  # type: ignore[no-untyped-def]
        seen["train"] = {q.id for q in train}
        seen["val"] = {q.id for q in val}
        seen["forbidden"] = set(evaluator.forbidden)
        with pytest.raises(SplitLeak):
            evaluator.answer("val", library, list(small_suite.test)[:1])
        return RoundResult(r, "rejected", "fake", library)

    monkeypatch.setattr(run_mod, "run_round", fake_round)
    res = run_mod.evolve(small_suite, config=ProtocolConfig(seed=rf.SEED), log=lambda s: None)
    test_ids = {q.id for q in small_suite.test}
    assert seen["train"] == {q.id for q in small_suite.train}
    assert seen["val"] == {q.id for q in small_suite.val}
    assert seen["forbidden"] == test_ids
    assert not (seen["train"] | seen["val"]) & test_ids
    # the report step still answered test, through its own evaluator, for reporting only
    assert res.tests[0]["report_only"] is True
    assert res.tests[0]["tasks"][-1]["n"] == len(test_ids)


def _decision_evaluator(suite: Any, roles: RoleSet) -> Evaluator:
    agent = Agent(Library(), roles.answerer, roles.reviewer)
    return Evaluator(agent, None, forbidden=[q.id for q in suite.test])


def test_round_raises_when_a_test_question_reaches_the_base_pass(small_suite: Any):
    roles = RoleSet.builtin()
    ev = _decision_evaluator(small_suite, roles)
    leak = next(iter(small_suite.test)).id
    train = small_suite.filter(lambda q: small_suite.splits[q.id] == "train" or q.id == leak)
    with pytest.raises(SplitLeak):
        run_round(
            1, Library(), train, small_suite.val, roles=roles, cfg=ProtocolConfig(), evaluator=ev,
            sandbox=None,
        )  # fmt: skip
    assert ev.answered == 0


def test_round_raises_when_a_stage_smuggles_a_test_question_into_the_prefilter(
    monkeypatch, small_suite: Any
):
    """A stage that puts a test question in front of the decision evaluator must fail loudly."""
    from tsevo.evolve import synthesize
    from tsevo.library.sandbox import Sandbox

    real_probe = synthesize._probe
    leak = next(iter(small_suite.test))
    calls = Counter[str]()

    def leaky_probe(*a, **kw):  # type: ignore[no-untyped-def]
        calls["probe"] += 1
        return [*real_probe(*a, **kw), leak]

    monkeypatch.setattr(synthesize, "_probe", leaky_probe)
    roles = RoleSet.builtin()
    ev = _decision_evaluator(small_suite, roles)
    sb = Sandbox()
    try:
        with pytest.raises(SplitLeak):
            run_round(
                1, Library(), small_suite.train, small_suite.val, roles=roles,
                cfg=ProtocolConfig(seed=rf.SEED), evaluator=ev, sandbox=sb,
            )  # fmt: skip
    finally:
        sb.close()
    assert calls["probe"] >= 1, "the round never reached the prefilter"
    assert ev.answered == len(small_suite.train), "only the base pass may have been answered"


def test_decision_logs_hold_no_test_ids_and_test_ids_only_in_test_arms(main: rf.Run):
    suite = main.suite
    test_ids = {q.id for q in suite.test}
    split_of = dict(suite.splits)
    logs = rf.eval_logs(main.path)
    assert any(a.startswith("test.") for a in logs) and any(a.startswith("val.") for a in logs)
    for arm, lines in logs.items():
        split = arm.split(".")[0]
        ids = rf.qids(lines)
        assert ids, arm
        assert {split_of[q] for q in ids} == {split}, f"{arm} mixes splits"
        if split != "test":
            assert not set(ids) & test_ids, f"decision arm {arm} answered test questions"
    # every arm a round used for a decision is a train or val arm
    for r in _rounds(main.path):
        for name, arm in _read(main.path, f"rounds/r{r}/round.json")["arms"].items():
            assert arm.split(".")[0] in ("train", "val"), (r, name, arm)
            assert (main.path / "evals" / f"{arm}.jsonl").exists()


def test_roles_see_train_rows_only_and_never_held_out_rows(main: rf.Run):
    """Evolution roles see train rows only, under opaque ids; planners never see held-out rows."""
    train = {q.id for q in main.suite.train}
    ids = rf.view_ids(main)
    triage = main.roles.triage
    planner = main.roles.local_planner
    synth = main.roles.synthesizer
    for d in triage.defines:
        assert not set(d["qids"]) & {q.id for q in main.suite}, "roles see opaque ids only"
        assert {ids.real(q) for q in d["qids"]} <= train
        assert "task" not in d["fields"] and "gold" not in d["fields"]
    assert all({ids.real(q) for q in a["qids"]} <= train for a in triage.assigns)
    rounds = _rounds(main.path)
    for r in rounds:
        held = {q for s in _read(main.path, f"rounds/r{r}/splits.json") for q in s["held_out"]}
        seen = [d for d in planner.seen if d["round"] == r]
        assert seen, f"no planner call recorded for round {r}"
        for d in seen:
            shown = {ids.real(q) for q in [*d["support"], *d["background"]]}
            assert shown <= train
            assert not shown & held, (
                f"round {r}: held-out rows shown to the planner ({d['bucket']})"
            )
        shown_synth = {ids.real(q) for k, q in synth.shown if k == r}
        assert shown_synth and shown_synth <= train and not shown_synth & held
    assert {d["round"] for d in planner.seen} == set(rounds)


# --------------------------------------------------------------------------- 2. protocol limits
def test_clustering_limits_and_accounting(main: rf.Run):
    cfg = _cfg(main.path)
    ids = rf.view_ids(main)
    triage = main.roles.triage
    di = ai = 0
    checked = 0
    for r in _rounds(main.path):
        base = pd.read_parquet(main.path / f"rounds/r{r}/base_pass.parquet")
        errors = set(base.qid[(base.completed) & (base.correct == False)])  # noqa: E712
        fired = set(base.qid[base.tool_fired])
        b = _read(main.path, f"rounds/r{r}/buckets.json")
        assert b["invalid_replies"] == 0  # builtin triage honours the contract
        defines = triage.defines[di : di + b["define_calls"]]
        assigns = triage.assigns[ai : ai + b["assign_calls"]]
        di, ai = di + b["define_calls"], ai + b["assign_calls"]
        for d in defines:
            assert len(d["qids"]) <= min(150, cfg.define_sample)
            assert d["k"] <= cfg.max_categories <= 8
            assert 1 <= d["n_categories"] <= d["k"]
            assert {ids.real(q) for q in d["qids"]} <= errors
        for a in assigns:
            assert 1 <= len(a["qids"]) <= cfg.assign_batch <= 32
        assert {ids.real(q) for a in assigns for q in a["qids"]} == errors, (
            "assign must cover every error"
        )
        assert max(b["passes"].values()) <= cfg.assign_passes
        members = [q for bk in b["buckets"] for q in bk["members"]]
        assert len(members) == len(set(members))
        kept, un, small = set(members), set(b["unassigned"]), set(b["dropped_small"])
        assert not (kept & un or kept & small or un & small)
        assert kept | un | small == errors, "every error is in a bucket, unassigned or dropped"
        assert len(members) + len(un) + len(small) == len(errors)
        for bk in b["buckets"]:
            assert len(bk["members"]) >= cfg.min_bucket
            want_fired = bk["side"] == "tool_fired"
            assert all((q in fired) == want_fired for q in bk["members"]), bk["id"]
        checked += 1
    assert di == len(triage.defines) and ai == len(triage.assigns)
    assert checked == 3


def test_bucket_splits_dossiers_and_synthesis_limits(main: rf.Run):
    cfg = _cfg(main.path)
    planner = main.roles.local_planner.seen
    for r in _rounds(main.path):
        buckets = {b["id"]: b for b in _read(main.path, f"rounds/r{r}/buckets.json")["buckets"]}
        splits = _read(main.path, f"rounds/r{r}/splits.json")
        assert sorted(s["bucket_id"] for s in splits) == sorted(buckets)
        for s in splits:
            sup, held = s["support"], s["held_out"]
            n = len(buckets[s["bucket_id"]]["members"])
            protocol = granted_support(n, cfg.planner_support, cfg.support, None)
            asked = granted_support(n, cfg.planner_support, cfg.support, (1.0, n))
            assert len(sup) >= 1 and len(sup) in {protocol, asked}  # the planner's ask, granted
            assert protocol <= cfg.planner_support <= 12
            assert len(held) <= cfg.prefilter_errors <= 32
            assert not set(sup) & set(held)
            assert set(sup) | set(held) <= set(buckets[s["bucket_id"]]["members"])
        for d in planner:
            if d["bucket"] in buckets:
                assert len(d["background"]) <= cfg.planner_background <= 48
        syn = _read(main.path, f"rounds/r{r}/synthesis.json")
        ids = [a["tool_id"] for g in syn for a in g["attempts"]]
        assert len(ids) == len(set(ids)), "tool ids must be unique"
        assert all(i.startswith(f"r{r}.") for i in ids)
        for g in syn:
            atts = g["attempts"]
            assert 1 <= len(atts) <= cfg.max_synthesis_attempts <= 3
            assert [a["attempt"] for a in atts] == list(range(1, len(atts) + 1))
            for i, a in enumerate(atts):
                assert a["n_held_out"] <= 32 and a["n_probe"] <= cfg.prefilter_harm_probe
                assert (main.path / f"rounds/r{r}/candidates/{a['tool_id']}/meta.json").exists()
                if a["passed"] and a["repair_rate"] >= cfg.prefilter_early_stop:
                    assert i == len(atts) - 1, "early stop at repair rate >= 0.40"
            if g["survivor"] is not None:
                surv = next(a for a in atts if a["tool_id"] == g["survivor"])
                # the repair bar applies from support.min_held_out held-out errors in its scope
                n_in = (
                    surv["n_held_out"] if surv["n_in_contract"] is None else surv["n_in_contract"]
                )
                assert 0 <= n_in <= surv["n_held_out"]
                asked = n_in >= cfg.support.min_held_out
                assert surv["passed"] and (
                    not asked or len(surv["repairs"]) >= cfg.prefilter_min_repairs
                )
                best = max(
                    (len(a["repairs"]) - len(a["harms"]), len(a["repairs"]))
                    for a in atts
                    if a["passed"]
                )
                assert (len(surv["repairs"]) - len(surv["harms"]), len(surv["repairs"])) == best
            else:
                assert not any(a["passed"] for a in atts)
        pf = pd.read_parquet(main.path / f"rounds/r{r}/prefilter.parquet")
        assert (pf.n_held_out <= 32).all() and len(pf) == len(ids)


def test_prefilter_repairs_are_attributable_in_the_stored_traces(main: rf.Run):
    """Every counted repair: base wrong, candidate right, the draft responsible in the trace."""
    run = main.path
    checked = 0
    for r in _rounds(run):
        lib = _library_before(run, r)
        base = _records(run, f"train.{lib.fingerprint()}")
        for g in _read(run, f"rounds/r{r}/synthesis.json"):
            for a in g["attempts"]:
                if not a["checked"]:
                    continue
                tool = _candidate_tool(run, r, a["tool_id"])
                cand = lib.append_stage(Stage(r, (tool,), f"candidate {tool.id}"))
                recs = _records(run, f"train.{cand.fingerprint()}")
                assert len(recs) == a["n_held_out"] + a["n_probe"]
                for q in a["repairs"]:
                    assert base[q].correct is False and recs[q].correct is True
                    assert tool.id in recs[q].replaced_by
                for q in a["harms"]:
                    assert base[q].correct is True and recs[q].correct is False
                checked += 1
    assert checked >= 10


def test_every_stored_answer_ran_at_most_three_tools(main: rf.Run):
    cfg = _cfg(main.path)
    n = 0
    for arm, lines in rf.eval_logs(main.path).items():
        for ln in lines:
            d = json.loads(ln)
            runs = [x for s in d["steps"] for x in s["runs"]]
            short = [t for s in d["steps"] for t in s["shortlisted"]]
            assert len(runs) <= cfg.max_tools_per_question <= 3, (arm, d["qid"])
            assert len(short) <= 3 and len(set(short)) == len(short)
            n += 1
    assert n > 1000


def test_gate_json_recomputes_from_val_paired(main: rf.Run):
    cfg = _cfg(main.path)
    for r in _rounds(main.path):
        if not (main.path / f"rounds/r{r}/gate.json").exists():
            continue
        g = GateDecision.from_dict(_read(main.path, f"rounds/r{r}/gate.json"))
        vp = pd.read_parquet(main.path / f"rounds/r{r}/val_paired.parquet")
        assert len(vp) == len({q.id for q in main.suite.val}) == g.n_attempted
        h = int((vp.flip == "helped").sum())
        m = int((vp.flip == "harmed").sum())
        n = int(vp.flip.notna().sum())
        assert (g.h, g.m, g.n) == (h, m, n)
        assert g.delta == pytest.approx((h - m) / n)
        assert g.delta_lb == pytest.approx((h - m) / n - 1.96 * math.sqrt(max(h + m, 1)) / n)
        assert g.error_rate == pytest.approx(1 - n / len(vp))
        outs = {
            row.qid: (
                ArmOutcome(row.qid, True, bool(row.base_correct), row.base_answer),
                ArmOutcome(row.qid, True, bool(row.cand_correct), row.cand_answer),
            )
            for row in vp.itertuples()
        }
        again = decide_gate(
            paired_counts({q: o[0] for q, o in outs.items()}, {q: o[1] for q, o in outs.items()}),
            config=cfg,
            rounds=cfg.rounds,
        )
        assert (again.path, again.passed, again.invalid) == (g.path, g.passed, g.invalid)
        assert g.rounds == cfg.rounds == 3 and not g.single_round_applies
        # the paired frame agrees with the stored arm records
        arms = _read(main.path, f"rounds/r{r}/round.json")["arms"]
        base, cand = (
            _records(main.path, arms["val_base"]),
            _records(main.path, arms["val_candidate"]),
        )
        for row in vp.itertuples():
            assert base[row.qid].final_answer == row.base_answer
            assert cand[row.qid].final_answer == row.cand_answer
            assert list(cand[row.qid].replaced_by) == list(row.replaced_by)


def test_deployed_library_on_disk_is_the_accepted_rounds_library(main: rf.Run):
    run = main.path
    accepted = [
        r for r in _rounds(run) if _read(run, f"rounds/r{r}/round.json")["status"] == "accepted"
    ]
    assert accepted and accepted[0] == 1
    last = accepted[-1]
    assert rf.tree_bytes(run / "library") == rf.tree_bytes(run / f"rounds/r{last}/library")
    lib = Library.load(run / "library")
    assert lib.fingerprint() == _read(run, f"rounds/r{last}/round.json")["library_fingerprint"]
    assert lib.fingerprint() == main.result.library.fingerprint()
    assert RunStore.open(run).events("finished")[-1]["library"] == lib.fingerprint()
    deployed = _read(run, f"rounds/r{last}/round.json")["deployed"]
    assert [t.id for t in lib.stages[-1].tools] == deployed
    assert sorted(p.name for p in (run / "library" / lib.stages[-1].folder).glob("*.py")) == sorted(
        f"{i}.py" for i in deployed
    )


# --------------------------------------------------------------------------- 3. residual chain
def _check_chain(rec: AnswerRecord, targets: dict[str, str] | None = None) -> None:
    """Chain invariants; ``targets`` maps lifecycle artifact ids to the tool they amend."""
    targets = targets or {}
    prev = rec.base_answer
    for s in rec.steps:
        assert s.answer_in == prev, rec.qid
        ok = [x.tool_id for x in s.runs if x.status == "ok"]
        assert len(s.runs) == len(s.shortlisted)
        if s.decision == "no_tool":
            assert not ok
        if s.answer_out != s.answer_in:
            assert s.decision == "replace" and ok, f"{rec.qid}: answer changed without a tool"
            # the tools that read the evidence, plus artifacts that amended one of them
            ran = [t for t in s.responsible if t in s.shortlisted]
            assert ran, rec.qid
            for t in s.responsible:
                assert t in s.shortlisted or targets.get(t) in ran, (rec.qid, t)
        if s.decision != "replace":
            assert s.answer_out == s.answer_in
        prev = s.answer_out
    assert rec.final_answer == prev
    if not rec.steps:
        assert rec.final_answer == rec.base_answer


def test_residual_chain_invariants_on_every_stored_record(main: rf.Run):
    gold = {q.id: q.gold for q in main.suite}
    # lifecycle artifacts of every library the run stored, and of every prefilter candidate
    tools = [
        t
        for lib_json in sorted(main.path.rglob("library.json"))
        for st in Library.load(lib_json.parent).stages
        for t in st.tools
    ]
    targets = {t.id: t.target for t in tools if t.target}
    for m in sorted(main.path.glob("rounds/r*/candidates/*/meta.json")):
        d = json.loads(m.read_text())["tool"]
        if d.get("provenance", {}).get("target"):
            targets[d["id"]] = d["provenance"]["target"]
    n = changed = 0
    for lines in rf.eval_logs(main.path).values():
        for ln in lines:
            rec = AnswerRecord.from_dict(json.loads(ln))
            assert rec.completed
            _check_chain(rec, targets)
            assert rec.correct == (rec.final_answer == gold[rec.qid])
            n += 1
            changed += rec.changed
    assert changed > 0 and n > changed


def test_out_of_scope_questions_keep_the_base_answer(main: rf.Run):
    run = main.path
    arms = _read(run, "rounds/r1/round.json")["arms"]
    lib = Library.load(run / "rounds/r1/library")
    # the deployed library is the gated candidate unless reconciling its scopes changed it (then
    # it passed the gate once more, on its own val answers)
    edits = [e for e in _read(run, "rounds/r1/reconcile.json")["edits"] if not e.get("discarded")]
    assert (arms["val_candidate"] == f"val.{lib.fingerprint()}") == (not edits)
    cand = _records(run, f"val.{lib.fingerprint()}")
    base = _records(run, arms["val_base"])
    out_of_scope = 0
    for q in main.suite.val:
        short = lib.shortlist(q, 3)
        ids = [[st.tool.id for st in row] for row in short]
        rec = cand[q.id]
        assert [list(s.shortlisted) for s in rec.steps] == [row for row in ids if row], q.id
        if not any(ids):
            out_of_scope += 1
            assert not rec.steps and rec.final_answer == rec.base_answer == base[q.id].final_answer
    assert 0 < out_of_scope < len(cand)


def test_flip_ledger_matches_change_in_correct_counts(main: rf.Run):
    run = main.path
    for r in _rounds(run):
        if not (run / f"rounds/r{r}/val_paired.parquet").exists():
            continue
        vp = pd.read_parquet(run / f"rounds/r{r}/val_paired.parquet")
        helped, harmed = int((vp.flip == "helped").sum()), int((vp.flip == "harmed").sum())
        assert helped - harmed == int(vp.cand_correct.sum()) - int(vp.base_correct.sum())
        test = _read(run, f"rounds/r{r}/test.json")
        tp = pd.read_parquet(run / f"rounds/r{r}/test.parquet")
        for row in test["tasks"]:
            sub = tp if row["task"] == "ALL" else tp[tp.task == row["task"]]
            assert row["n"] == len(sub)
            d = int(sub.after_correct.sum()) - int(sub.before_correct.sum())
            assert row["helped"] - row["harmed"] == d
            assert row["delta"] == pytest.approx(d / len(sub), abs=1e-6)
        assert test["report_only"] is True


# --------------------------------------------------------------------------- 4. determinism
def test_same_seed_gives_byte_identical_library_and_tables(main: rf.Run):
    """The 3-round in-process run and the 1-round CLI subprocess share round 1 byte for byte.

    Only the gate's record of the run's round count differs (it decides whether the single-round
    rule applies); every other artifact of round 1, and the deployed library, must be identical.
    The resume test compares two 1-round runs artifact for artifact as well.
    """
    cli = rf.cli_run()
    # the deployed chain up to round 1's stage is shared (later rounds may append stages)
    assert (cli.path / "library" / "stage_1" / "stage.json").is_file()  # round 1 was accepted
    for stage in ("stage_0", "stage_1"):
        assert rf.tree_bytes(main.path / "library" / stage) == rf.tree_bytes(
            cli.path / "library" / stage
        )
    assert rf.tree_bytes(main.path / "rounds/r1/library") == rf.tree_bytes(
        cli.path / "rounds/r1/library"
    )
    for rel in (
        "rounds/r1/base_pass.parquet",
        "rounds/r1/val_paired.parquet",
        "rounds/r1/buckets.json",
        "rounds/r1/contracts.json",
        "rounds/r1/splits.json",
        "rounds/r1/groups.json",
        "rounds/r1/synthesis.json",
        "rounds/r1/prefilter.parquet",
        "rounds/r1/test.parquet",
        "suite.parquet",
    ):
        a, b = (main.path / rel).read_bytes(), (cli.path / rel).read_bytes()
        assert a == b, f"{rel} differs: {rf.digest(a)} vs {rf.digest(b)}"
    assert rf.tree_bytes(main.path / "rounds/r1/candidates") == rf.tree_bytes(
        cli.path / "rounds/r1/candidates"
    )
    g1, g2 = _read(main.path, "rounds/r1/gate.json"), _read(cli.path, "rounds/r1/gate.json")
    varying = {"rounds", "single_round_applies", "single_round_passed", "reasons"}
    assert {k: v for k, v in g1.items() if k not in varying} == {
        k: v for k, v in g2.items() if k not in varying
    }
    assert (g1["rounds"], g2["rounds"]) == (3, 1)


def test_timings_live_beside_not_inside_the_compared_artifacts(main: rf.Run):
    timings = _read(main.path, "rounds/r1/timings.json")
    assert {"base_pass", "cluster", "plan", "synthesize", "gate"} <= set(timings)
    for rel in rf.COMPARED_TABLES:
        p = main.path / rel
        text = (
            " ".join(pd.read_parquet(p).columns) if p.suffix == ".parquet" else p.read_text("utf-8")
        )
        assert "elapsed" not in text and "timings" not in text, rel
    for ln in rf.jsonl_lines(
        main.path
        / "evals"
        / f"{_read(main.path, 'rounds/r1/round.json')['arms']['val_base']}.jsonl"
    )[:1]:
        assert "elapsed_ms" in ln  # raw logs keep timings; compared tables do not


# --------------------------------------------------------------------------- 6. multi-round
def test_later_rounds_admit_less_or_are_rejected(main: rf.Run):
    rounds = main.result.rounds
    assert [r.round for r in rounds] == [1, 2, 3]
    assert rounds[0].status == "accepted" and rounds[0].final_gate.path == "strict"
    first = len(rounds[0].deployed)
    for r in rounds[1:]:
        assert r.status == "rejected" or (r.status == "accepted" and len(r.deployed) < first)


def test_rejected_round_leaves_the_library_untouched(main: rf.Run):
    run = main.path
    before = Library()
    stages = [0]
    for r in _rounds(run):
        d = _read(run, f"rounds/r{r}/round.json")
        if d["status"] == "accepted":
            lib = Library.load(run / f"rounds/r{r}/library")
            assert lib.stages[:-1] == before.stages and lib.stages[-1].round == r
            assert lib.fingerprint() != before.fingerprint()
            before = lib
            stages.append(r)
        else:
            assert d["library_fingerprint"] == before.fingerprint()
            assert not (run / f"rounds/r{r}/library").exists()
            # the next round starts from the same library: its base pass is the same arm
            assert d["arms"]["train_base"] == f"train.{before.fingerprint()}"
    final = Library.load(run / "library")
    assert [s.round for s in final.stages] == stages
    assert final.fingerprint() == before.fingerprint()
    rejected = [r for r in main.result.rounds if r.status == "rejected"]
    assert rejected, "the three-round run should show a rejected round"


def test_stages_carry_their_round_and_ids_are_never_reused(main: rf.Run):
    run = main.path
    final = Library.load(run / "library")
    for s in final.stages[1:]:
        for t in s.tools:
            assert t.round == s.round and t.id.startswith(f"r{s.round}.")
    seen: dict[str, int] = {}
    for r in _rounds(run):
        cdir = run / f"rounds/r{r}/candidates"
        for p in cdir.iterdir() if cdir.exists() else []:
            assert p.name not in seen, f"{p.name} reused in round {r} (first in {seen.get(p.name)})"
            seen[p.name] = r
            assert _candidate_tool(run, r, p.name).round == r
    assert set(final.ids) <= set(seen)


# --------------------------------------------------------------------------- 7. rollback paths
class _FailingDefine:
    name = "failing-define"

    def __init__(self) -> None:
        self.calls = 0

    def define(self, errors: Any, max_categories: int) -> Any:
        self.calls += 1
        raise RuntimeError("triage is down")

    def assign(self, categories: Any, batch: Any) -> Any:  # pragma: no cover - never reached
        raise AssertionError("assign without categories")


def test_clustering_failure_marks_the_round_invalid_and_changes_nothing(
    tmp_path: Path, small_suite: Any
):
    from tsevo.evolve.run import evolve

    roles = RoleSet.builtin()
    bad = _FailingDefine()
    roles.triage = bad  # type: ignore[assignment]
    cfg = ProtocolConfig(seed=rf.SEED)
    res = evolve(small_suite, config=cfg, out=tmp_path / "run", roles=roles, log=lambda s: None)
    r = res.rounds[0]
    assert r.status == "invalid" and "clustering failed" in r.reason
    assert bad.calls == 1 + cfg.define_retries
    assert res.library.fingerprint() == res.root.fingerprint() == Library().fingerprint()
    run = tmp_path / "run"
    assert (run / "rounds/r1/clustering_error.json").exists()
    assert _read(run, "rounds/r1/round.json")["status"] == "invalid"
    assert not (run / "rounds/r1/library").exists() and not (run / "rounds/r1/gate.json").exists()
    assert Library.load(run / "library").fingerprint() == Library().fingerprint()
    assert not [a for a in rf.eval_logs(run) if a.startswith("val.")], "no gate may have run"
    test = _read(run, "rounds/r1/test.json")
    assert test["status"] == "invalid" and test["tasks"][-1]["delta"] == 0


class _FlakyAnswerer:
    """The builtin answerer, failing (raising) on a fixed set of questions (by content: a role
    never sees a question's own id)."""

    def __init__(self, inner: Any, fail: set[str]) -> None:
        self.inner = inner
        self.name = inner.name
        self.fail = fail

    def answer(self, q: Any) -> Any:
        if q.fingerprint in self.fail:
            raise RuntimeError("answerer crashed")
        return self.inner.answer(q)


def test_invalid_gate_measurement_is_a_rollback_not_a_rejection(tmp_path: Path, small_suite: Any):
    from tsevo.evolve.run import evolve

    val = sorted(q.id for q in small_suite.val)
    failing = set(val[::10])  # 10 % of val questions never complete
    fail = {small_suite[q].fingerprint for q in failing}
    assert len(fail) / len(val) > 0.02
    roles = RoleSet.builtin()
    roles.answerer = _FlakyAnswerer(roles.answerer, fail)  # type: ignore[assignment]
    res = evolve(
        small_suite,
        config=ProtocolConfig(seed=rf.SEED),
        out=tmp_path / "run",
        roles=roles,
        log=lambda s: None,
    )
    r = res.rounds[0]
    run = tmp_path / "run"
    assert r.funnel.survivors >= 1, "the round must reach the gate for this test to mean anything"
    assert r.status == "invalid", r.reason
    assert r.gate is not None and r.gate.invalid and r.gate.path == "invalid" and not r.gate.passed
    assert r.gate.n == len(val) - len(fail) and r.gate.n_attempted == len(val)
    assert r.gate.error_rate == pytest.approx(len(fail) / len(val))
    g = _read(run, "rounds/r1/gate.json")
    assert g["path"] == "invalid" and g["invalid"] is True
    assert not (run / "rounds/r1/prune.json").exists(), "an invalid measurement is never pruned"
    assert not (run / "rounds/r1/library").exists()
    assert res.library.fingerprint() == Library().fingerprint()
    assert Library.load(run / "library").fingerprint() == Library().fingerprint()
    vp = pd.read_parquet(run / "rounds/r1/val_paired.parquet")
    assert set(vp.qid[vp.flip.isna()]) == failing
