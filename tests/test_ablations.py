"""The ablation switches (issue 14): one config nested in the protocol, each switch changing a round.

Config: the switches validate, document and (de)serialize like the protocol's knobs, the paper's
names map to config values, a run records its ablation in the manifest (labelling a Chronos root on
the statistical fallback) and refuses to resume under other switches.

Behaviour, each on a small fixture (fake sandbox and evaluator where a step is enough):

* ``w/o cali.``: a draft requesting a tree gets none (refused, repaired, never fitted);
* ``w/o gate``: a candidate the gate rejects is deployed;
* ``w/o scope``: drafts carry no scope, every tool is a candidate ranked by its description, no
  scope reconciliation;
* ``w/o residual chain``: a tool's reading replaces the answer where the review would not;
* ``w/ chronos`` / ``w/ expert``: the root of the run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tsevo.evolve import ProtocolConfig
from tsevo.evolve.ablation import PAPER_ABLATIONS, AblationConfig, ablation_manifest


# --------------------------------------------------------------------------- the config
def test_switches_default_on_documented_and_validated() -> None:
    cfg = ProtocolConfig()
    assert cfg.ablation == AblationConfig() and cfg.ablation.is_default
    assert cfg.to_dict()["ablation"] == {
        "calibration": True,
        "gate": True,
        "scope": True,
        "residual_chain": True,
    }
    for row in cfg.ablation.describe():
        assert row["name"].startswith("ablation.") and len(row["doc"]) > 40
    assert "w/o residual chain" in ProtocolConfig.doc("ablation")
    with pytest.raises(TypeError, match=r"ProtocolConfig\.ablation\.gate"):
        AblationConfig(gate="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown switch"):
        ProtocolConfig(ablation={"gates": False})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown knob"):
        ProtocolConfig.from_params({"ablations.gate": "off"})


def test_named_ablations_map_to_config_values_and_round_trip(tmp_path: Path) -> None:
    seen = set()
    for name in PAPER_ABLATIONS:
        cfg = ProtocolConfig(seed=3).ablated(name)
        assert cfg.ablation_name == name and cfg.seed == 3
        assert ProtocolConfig.load(cfg.save(tmp_path / f"{len(seen)}.json")) == cfg
        assert ProtocolConfig.from_params({"ablation": name}) == ProtocolConfig().ablated(name)
        seen.add(cfg.fingerprint())
    assert len(seen) == len(PAPER_ABLATIONS)  # seven distinct configs
    assert ProtocolConfig().ablated("W/O Cali").ablation.calibration is False
    assert ProtocolConfig().ablated("w/ chronos").root == "chronos"
    p = ProtocolConfig.from_params({"ablation.gate": "off", "ABLATION.SCOPE": "0"})
    assert (p.ablation.gate, p.ablation.scope, p.ablation.calibration) == (False, False, True)
    assert p.ablation_name == "custom"
    with pytest.raises(ValueError, match="unknown ablation"):
        ProtocolConfig().ablated("w/o planner")
    with pytest.raises(ValueError, match="sets root"):
        ProtocolConfig.from_params({"ablation": "w/ expert", "root": "chronos"})


def test_the_chronos_root_is_labelled_when_it_runs_on_the_statistical_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TSEVO_CHRONOS_MODEL", raising=False)
    man = ablation_manifest("chronos", AblationConfig())
    assert man["name"] == "w/ chronos" and man["forecaster"]["backend"] == "stat"
    assert "statistical fallback" in man["label"]
    full = ablation_manifest("empty", AblationConfig())
    assert full["label"] == "full" and "forecaster" not in full


def test_a_root_ablation_runs_on_its_root_is_recorded_and_resumes_only_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests import round_fixtures as rf
    from tsevo.data.synthetic import make_suite
    from tsevo.evolve.run import evolve

    monkeypatch.delenv("TSEVO_CHRONOS_MODEL", raising=False)
    suite = make_suite(2, seed=rf.SEED)  # 2 questions per family: a cheap builtin round
    out = tmp_path / "run"
    cfg = ProtocolConfig(seed=rf.SEED).ablated("w/ chronos")
    res = evolve(suite, config=cfg, out=out, log=lambda s: None)
    assert res.root.root == "chronos" and res.root.ids == ["root.chronos_forecast"]
    man = json.loads((out / "manifest.json").read_text())
    assert man["ablation"]["name"] == "w/ chronos" and man["ablation"]["root"] == "chronos"
    assert "statistical fallback" in man["ablation"]["label"]
    assert json.loads((out / "config.json").read_text())["protocol"]["root"] == "chronos"
    with pytest.raises(ValueError, match="different config"):
        evolve(suite, config=cfg.ablated("w/ expert"), out=out, log=lambda s: None)
    with pytest.raises(ValueError, match="different config"):
        other = cfg.replace(ablation=AblationConfig(gate=False))
        evolve(suite, config=other, out=out, log=lambda s: None)
    evolve(suite, config=cfg, out=out, log=lambda s: None)  # the same switches resume


def test_a_run_folder_saved_before_the_switches_existed_resumes_under_the_defaults(
    tmp_path: Path,
) -> None:
    from tsevo.evolve.run import _protocol_record

    old = ProtocolConfig(seed=4).to_dict()
    del old["ablation"]
    (tmp_path / "config.json").write_text(json.dumps({"protocol": old}))
    assert _protocol_record(tmp_path, ProtocolConfig(seed=4), True) == old
    ablated = ProtocolConfig(seed=4).ablated("w/o scope")
    assert _protocol_record(tmp_path, ablated, True)["ablation"]["scope"] is False


# --------------------------------------------------------------------------- behaviour
def _records(task_flips: dict[str, tuple[int, int]], tool: str) -> tuple[dict, dict]:
    """Base and candidate records: per task, (helped, harmed) questions driven by ``tool``."""
    from tsevo.agent import AnswerRecord
    from tsevo.agent.records import StageStep, ToolRun

    def rec(qid: str, task: str, correct: bool, by: str = "") -> AnswerRecord:
        steps = ()
        if by:
            steps = (
                StageStep(1, (by,), (ToolRun(by, "ok", {"v": 1.0}),), "replace", "", 0, 1, (by,)),
            )
        return AnswerRecord(qid, qid, task, 0, "", steps, 1 if by else 0, correct)

    base, cand, i = {}, {}, 0
    for task, (helped, harmed) in task_flips.items():
        for k in range(helped + harmed):
            q = f"q{i:03d}"
            ok = k < helped
            base[q], cand[q] = rec(q, task, not ok), rec(q, task, ok, tool)
            i += 1
    for _ in range(40):
        q = f"q{i:03d}"
        base[q] = cand[q] = rec(q, "A", True)
        i += 1
    return base, cand


class _ArmEvaluator:
    """Answers the base library with ``base`` and any other library with ``cand``."""

    def __init__(self, base: dict, cand: dict, base_fp: str) -> None:
        self.base, self.cand, self.base_fp = base, cand, base_fp

    def arm_name(self, split: str, library: Any) -> str:
        return f"{split}.{library.fingerprint()}"

    def answer(self, split: str, library: Any, qs: Any) -> dict:
        return dict(self.base if library.fingerprint() == self.base_fp else self.cand)


def _ctx(cfg: ProtocolConfig, tool: Any, flips: dict[str, tuple[int, int]]) -> Any:
    from tsevo.evolve.steps import RoundContext
    from tsevo.evolve.views import ViewIds
    from tsevo.library.library import Library
    from tsevo.roles import RoleSet

    base, cand = _records(flips, tool.id)
    lib = Library()
    ev = _ArmEvaluator(base, cand, lib.fingerprint())
    ctx = RoundContext(
        1, lib, [], [], RoleSet.builtin(), cfg, ev, None, None, lambda s: None, 1, ViewIds([], "0")
    )
    ctx.survivors = [tool]
    return ctx


def test_without_the_gate_a_rejected_candidate_is_deployed() -> None:
    from tests.test_protocol_fidelity import _tool
    from tsevo.evolve.round import ROUND_STEPS
    from tsevo.evolve.steps import run_steps

    tool = _tool("r1.g1.a1", "g1", "m")
    steps = [s for s in ROUND_STEPS if s.name in ("gate", "prune", "reconcile")]
    flips = {"A": (2, 4)}  # harms more than it helps: the gate rejects, the prune removes it
    full = run_steps(_ctx(ProtocolConfig(), tool, flips), steps)
    assert full.status == "rejected" and full.library.ids == []
    forced = run_steps(_ctx(ProtocolConfig().ablated("w/o gate"), tool, flips), steps)
    assert forced.status == "accepted" and "force-accepted" in forced.reason
    assert forced.library.ids == [tool.id] and forced.deployed == (tool.id,)
    assert forced.gate is not None and forced.gate.path == "rejected"  # measured, not obeyed
    assert forced.prune is None


def test_without_scopes_nothing_is_reconciled() -> None:
    from tests.test_protocol_fidelity import _tool
    from tsevo.evolve.evaluate import gate_between
    from tsevo.evolve.round import reconcile
    from tsevo.library.library import Stage

    tool = _tool("r1.g1.a1", "g1", "m")
    flips = {"A": (6, 0), "B": (0, 2)}  # net harm on task B: reconciliation drops B
    out = {}
    for name in ("full", "w/o scope"):
        ctx = _ctx(ProtocolConfig().ablated(name), tool, flips)
        ctx.accepted = ctx.library.append_stage(Stage(1, (tool,), "round 1"))
        ctx.base_val = ctx.evaluator.base
        ctx.accepted_val = ctx.evaluator.cand
        ctx.decision = ctx.gate = gate_between(ctx.base_val, ctx.accepted_val, ctx.cfg)
        out[name] = reconcile(ctx).summary["edits"]
    assert out == {"full": 1, "w/o scope": 0}


def _calibrated_synth() -> Any:
    from tests.test_protocol_fidelity import _Synth

    class CalSynth(_Synth):
        """Drafts request a tree (as the builtin's combo drafts do); a repair drops the request."""

        def __init__(self) -> None:
            super().__init__()
            self.violations: list[str] = []

        def synthesize(self, group: Any, attempt: int, history: Any, examples: Any) -> Any:
            self.seen.append({"calibration": group.contract.calibration})
            d = super().synthesize(group, attempt, history, examples)
            cal = {"kind": "binary_decision_tree_v1", "features": ["v"]}
            return replace(d, contract=replace(d.contract, calibration=cal))

        def repair(self, group: Any, draft: Any, violation: str, examples: Any) -> Any:
            self.violations.append(violation)
            return replace(draft, contract=replace(draft.contract, calibration=None))

    return CalSynth()


def _group_run(cfg: ProtocolConfig, synth: Any, scope: Any = None, calibration: Any = None) -> Any:
    """One work group through run_group with fakes (every draft checks clean, repairs nothing)."""
    from tests.test_protocol_fidelity import _Planner, _question, _rec, _Sandbox
    from tsevo.evolve.synthesize import run_group
    from tsevo.evolve.views import ViewIds
    from tsevo.library.library import Library
    from tsevo.library.tool import Contract, Scope
    from tsevo.roles.protocols import ContractCard, Dossier, WorkGroup

    contract = Contract(measurement="m", calibration=calibration)
    card = ContractCard("b1", "create", "tool", "", "", "", "", contract, scope or Scope())
    held = [_question(i) for i in range(4)]
    saved: list[Any] = []

    class Ev:
        def answer(self, split: str, library: Any, qs: Any) -> dict:
            return {q.id: _rec(q.id, False) for q in qs}

    out = run_group(
        WorkGroup("g1", (card,), card.contract, card.scope),
        1,
        Library(),
        dossiers={"b1": Dossier("b1", "no_tool", "c", "c", (), ())},
        held_out={"b1": [q.id for q in held[:2]]},
        train={q.id: q for q in held},
        base={q.id: _rec(q.id, q.id in ("h02", "h03")) for q in held},
        synthesizer=synth,
        planner=_Planner(),
        sandbox=_Sandbox(ok=True),
        evaluator=Ev(),  # type: ignore[arg-type]
        cfg=cfg,
        exclude={"h00", "h01"},
        ids=ViewIds(held, "0"),
        on_candidate=lambda t, r: saved.append(t),
    )
    return out, saved


def test_without_calibration_a_requested_tree_is_refused_and_never_fitted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tsevo.evolve.synthesize as syn

    fitted: list[str] = []

    def fake_fit(draft: Any, rows: Any, sandbox: Any, cfg: Any, guard: Any) -> Any:
        fitted.append(draft.id)
        record = {"accepted": True, "reason": "fitted"}
        return replace(draft, calibration=record), record, ""

    monkeypatch.setattr(syn, "calibrate", fake_fit)
    cfg = ProtocolConfig(max_synthesis_attempts=1)
    request = {"kind": "binary_decision_tree_v1", "features": ["v"]}
    on, on_saved = _group_run(cfg, s1 := _calibrated_synth(), calibration=request)
    assert fitted == ["r1.g1.a1"] and on.attempts[0].calibration["accepted"] is True
    assert s1.seen[0]["calibration"] == request and on_saved[-1].calibration is not None
    fitted.clear()
    off, off_saved = _group_run(
        cfg.ablated("w/o cali."), s2 := _calibrated_synth(), calibration=request
    )
    assert fitted == [], "no tree is ever fitted"
    assert s2.seen[0]["calibration"] is None  # the synthesizer is not promised a tree
    assert "w/o cali." in s2.violations[0] and off.attempts[0].repaired
    assert off.attempts[0].checked and off_saved[-1].contract.calibration is None
    assert off_saved[-1].calibration is None


def test_without_scopes_drafts_carry_none_and_every_tool_is_a_candidate() -> None:
    from tests.test_protocol_fidelity import _matcher_tool, _question, _Sandbox, _Synth
    from tsevo.agent import Agent
    from tsevo.library.library import library_from_tools
    from tsevo.library.tool import Matcher, Scope

    narrow = Scope(tasks=("t",), matcher=Matcher({"periodic": 1.0}, 1.0))
    s_full, s_off = _Synth(), _Synth()
    _out, full = _group_run(ProtocolConfig(max_synthesis_attempts=1), s_full, scope=narrow)
    _out, off = _group_run(
        ProtocolConfig(max_synthesis_attempts=1).ablated("w/o scope"), s_off, scope=narrow
    )
    assert full[-1].scope == narrow and off[-1].scope == Scope()
    # answering: a tool out of scope runs only when scopes are off, ranked by its description
    far = replace(
        _matcher_tool("root.a", ("weekly",), "noise level"),
        scope=Scope(matcher=Matcher(require=("weekly",))),
    )
    near = replace(
        _matcher_tool("root.b", ("weekly",), "is the series periodic"),
        scope=Scope(matcher=Matcher(require=("weekly",))),
    )
    lib = library_from_tools("custom", [far, near])
    q = _question(0)  # "Is the series periodic?": in neither tool's scope
    scoped = Agent(lib, executor=_Sandbox(ok=True), max_tools=1).answer(q)
    unscoped = Agent(lib, executor=_Sandbox(ok=True), max_tools=1, scoped=False).answer(q)
    assert scoped.tools_run == () and unscoped.tools_run == ("root.b",)


def test_without_the_residual_chain_a_reading_overwrites_what_the_review_keeps() -> None:
    from tests.test_protocol_fidelity import _question, _Sandbox
    from tsevo.agent import Agent
    from tsevo.library.library import library_from_tools
    from tsevo.library.tool import Guidance, ReadingRule, Tool
    from tsevo.roles.builtin import RuleReviewer
    from tsevo.roles.protocols import Review

    q = _question(0)
    base = Agent().answer(q).final_answer
    assert base is not None
    other = q.options[1 - base]  # what the tool reads: the option the base answer is not
    labels = (q.options[base], other)  # v = 1.0 reads as ``other``

    def tool(tid: str, lab: tuple[str, ...], key: str = "v") -> Tool:
        rule = ReadingRule("label", key, (0.5,), lab, confidence=0.7)
        return Tool(
            id=tid,
            source=f"def {tid[5:]}():\n    return None\n",
            guidance=Guidance("", rule),
            outputs=(key,),
        )

    class Keeper(RuleReviewer):
        """A conservative review: never replaces (a reviewer judging the evidence unclear)."""

        def review(self, q: Any, incoming: int, evidence: Any) -> Review:
            return Review("keep", incoming, "evidence unclear")

    def final(lib: Any, mode: str, reviewer: Any = None) -> Any:
        return Agent(lib, reviewer=reviewer, executor=_Sandbox(ok=True), mode=mode).answer(q)

    one = library_from_tools("custom", [tool("root.reads", labels)])
    assert final(one, "residual", Keeper()).final_answer == base
    rec = final(one, "overwrite", Keeper())
    assert rec.final_answer == q.options.index(other) and rec.replaced_by == ("root.reads",)
    # equally confident tools that disagree: the review abstains, the reading takes the first
    two = library_from_tools(
        "custom", [tool("root.a_reads", labels), tool("root.b_reads", labels[::-1])]
    )
    assert final(two, "residual").final_answer == base
    assert final(two, "overwrite").final_answer == q.options.index(other)
    # a reading that abstains (the rule's output is missing) keeps the incoming answer
    silent = library_from_tools("custom", [tool("root.silent", labels, key="w")])
    assert final(silent, "overwrite").final_answer == base


def test_the_run_answers_through_the_agent_its_ablation_asks_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tsevo.evolve.run as run_mod
    from tests import round_fixtures as rf
    from tsevo.data.synthetic import make_suite
    from tsevo.evolve.result import RoundResult

    seen: list[tuple[str, bool]] = []

    def stub_round(r: int, lib: Any, train: Any, val: Any, **kw: Any) -> RoundResult:
        agent = kw["evaluator"].agent
        seen.append((agent.mode, agent.scoped))
        return RoundResult(r, "rejected", "stub", lib)

    monkeypatch.setattr(run_mod, "run_round", stub_round)
    suite = make_suite(1, seed=rf.SEED)
    for name in ("full", "w/o residual chain", "w/o scope"):
        run_mod.evolve(suite, config=ProtocolConfig().ablated(name), log=lambda s: None)
    assert seen == [("residual", True), ("overwrite", True), ("residual", False)]


def test_the_command_line_runs_a_named_ablation_and_the_report_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tsevo.cli import main

    out = tmp_path / "cli"
    argv = ["evolve", "--suite", "synthetic:1", "--seed", "6", "--out", str(out), "--quiet"]
    assert main([*argv, "--ablation", "w/o residual chain"]) == 0
    cfg = json.loads((out / "config.json").read_text())["protocol"]
    assert cfg["ablation"]["residual_chain"] is False and cfg["root"] == "empty"
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert "ablation: w/o residual chain" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="leave out --root"):
        main([*argv, "--ablation", "w/o gate", "--root", "expert"])
