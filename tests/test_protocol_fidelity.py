"""Protocol details read against the paper (issue 14, "Protocol fidelity"), each on a small fixture.

* the prune removes only what is clearly harmful: dependents are the updates that target a harmful
  update and members of its own work group sharing its measurement (the group is recorded in each
  artifact's provenance);
* the retry policy is complete: the input signature is checked against the held-out errors and
  adapted between retries, and attempts rejected by the checks count as zero-repair outcomes;
* the synthesizer sees the current library rendered separately and the strongest previous attempt
  kept apart;
* a failed assign or re-split invalidates the round like a failed define (no silent drop);
* the diagnostic test runs on the best rejected candidate (the pruned library when its retest beat
  the full one) and only on valid rounds;
* at answer time the LLM answerer consults the scope catalog (names, scopes, one-line
  descriptions) and chooses the tools it inspects, at most three; the builtin keeps its matcher as
  its reading of the catalog;
* the builtin planner emits ``retire`` and anti-scopes beyond forbidden words (tasks, a term
  matcher) when its train evidence says so, and a retire card becomes a tombstone.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tsevo.agent import AnswerRecord
from tsevo.agent.records import StageStep, ToolRun
from tsevo.data import Question
from tsevo.evolve.config import ProtocolConfig
from tsevo.evolve.evaluate import gate_between
from tsevo.evolve.round import prune
from tsevo.evolve.steps import RoundContext
from tsevo.evolve.support import SupportConfig
from tsevo.evolve.synthesize import run_group
from tsevo.evolve.views import ViewIds
from tsevo.library.library import Library, Stage, library_from_tools
from tsevo.library.tool import Contract, Matcher, Provenance, Scope, Tool
from tsevo.roles import RoleSet
from tsevo.roles.protocols import AttemptFeedback, ContractCard, Dossier, WorkGroup

SRC = "def evidence():\n    return None\n"


# --------------------------------------------------------------------------- prune dependents
def _tool(tid: str, group: str, measurement: str, **prov: Any) -> Tool:
    return Tool(
        id=tid,
        kind=prov.pop("kind", "tool"),
        source=SRC if "target" not in prov else "",
        contract=Contract(measurement=measurement),
        provenance=Provenance.from_dict({"bucket": f"b.{group}", "group": group, **prov}),
    )


def _rec(qid: str, correct: bool, by: str = "") -> AnswerRecord:
    steps: tuple[StageStep, ...] = ()
    if by:
        run = ToolRun(by, "ok", {"x": 1.0})
        steps = (StageStep(1, (by,), (run,), "replace", "", 0, 1, (by,)),)
    ans = 1 if by else 0
    return AnswerRecord(qid, qid, "t", 0, "", steps, ans, correct)


class _Evaluator:
    """Answers every library with the base arm's records (the prune's retest then fails)."""

    def __init__(self, base: dict[str, AnswerRecord]) -> None:
        self.base = base

    def answer(self, split: str, library: Library, questions: Any) -> dict[str, AnswerRecord]:
        return dict(self.base)


def _prune_ctx(tools: list[Tool], harmed: dict[str, int], helped: dict[str, int]) -> RoundContext:
    """A rejected gate over ``tools``: each tool harms/helps the given numbers of questions."""
    base: dict[str, AnswerRecord] = {}
    cand: dict[str, AnswerRecord] = {}
    i = 0
    for tid, n in harmed.items():
        for _ in range(n):
            q = f"q{i:02d}"
            base[q], cand[q] = _rec(q, True), _rec(q, False, tid)
            i += 1
    for tid, n in helped.items():
        for _ in range(n):
            q = f"q{i:02d}"
            base[q], cand[q] = _rec(q, False), _rec(q, True, tid)
            i += 1
    for _ in range(40):  # unchanged questions
        q = f"q{i:02d}"
        base[q] = cand[q] = _rec(q, True)
        i += 1
    cfg = ProtocolConfig()
    lib = Library()
    ctx = RoundContext(
        1,
        lib,
        [],
        [],
        RoleSet.builtin(),
        cfg,
        _Evaluator(base),
        None,
        None,  # type: ignore[arg-type]
        lambda s: None,
        1,
        ViewIds([], "0"),
    )
    ctx.survivors = list(tools)
    ctx.candidate = lib.append_stage(Stage(1, tuple(tools), "round 1"))
    ctx.base_val, ctx.cand_val = base, cand
    ctx.gate = gate_between(base, cand, cfg)
    assert ctx.gate.path == "rejected", ctx.gate
    return ctx


def test_prune_keeps_a_helpful_tool_of_another_work_group_that_shares_the_measurement() -> None:
    harmful = _tool("r1.g1.a1", "g1", "acf.period")
    helpful = _tool("r1.g2.a1", "g2", "acf.period")  # another bucket's group, same measurement
    ctx = _prune_ctx([harmful, helpful], harmed={harmful.id: 3}, helped={helpful.id: 5})
    prune(ctx)
    assert ctx.prune is not None
    assert ctx.prune.plan.harmful == (harmful.id,)
    assert ctx.prune.plan.removed == (harmful.id,), ctx.prune.plan.reasons
    assert helpful.id in ctx.prune.plan.kept


def test_prune_removes_targets_and_group_mates_sharing_the_measurement_only() -> None:
    harmful = _tool("r1.g1.a1", "g1", "acf.period")
    mate = _tool("r1.g1.b1", "g1", "acf.period")  # its own group, same measurement: dependent
    other = _tool("r1.g1.c1", "g1", "snr.noise")  # its own group, another measurement: stays
    refine = _tool("r1.g3.a1", "g3", "acf.period", kind="usage_guidance", target=harmful.id)
    tools = [harmful, mate, other, refine]
    ctx = _prune_ctx(tools, harmed={harmful.id: 3}, helped={mate.id: 2, other.id: 2})
    prune(ctx)
    assert ctx.prune is not None
    assert set(ctx.prune.plan.removed) == {harmful.id, mate.id, refine.id}
    assert other.id in ctx.prune.plan.kept


def test_provenance_records_the_work_group_and_round_trips() -> None:
    t = _tool("r1.g2.a1", "g2", "m")
    assert t.provenance.to_dict()["group"] == "g2"
    assert Tool.from_dict(t.to_dict()).provenance.group == "g2"
    assert "group" not in Provenance().to_dict()  # artifacts without a group keep their bytes


def test_a_prune_that_removes_every_update_rolls_back_without_a_retest() -> None:
    a = _tool("r1.g1.a1", "g1", "m1")
    b = _tool("r1.g2.a1", "g2", "m2")
    ctx = _prune_ctx([a, b], harmed={a.id: 3, b.id: 3}, helped={})
    res = prune(ctx)
    assert ctx.prune is not None and ctx.prune.plan.removes_all
    assert ctx.prune.retest is None and not ctx.prune.accepted
    assert res.stop is not None and res.stop.status == "rejected"


# --------------------------------------------------------------------------- synthesis retries
def _question(i: int, *, covariate: bool = False) -> Question:
    y = np.sin(np.arange(48) / 3.0) + 0.01 * i
    series = {"x": y, **({"z": np.roll(y, 2)} if covariate else {})}
    return Question(
        id=f"h{i:02d}",
        source="synthetic",
        task="t",
        question="Does z lead x?" if covariate else "Is the series periodic?",
        options=("yes", "no"),
        series=series,
        primary=("x",),
        covariates=("z",) if covariate else (),
        gold=0,
    )


def _card(bucket: str, signature: tuple[str, ...]) -> ContractCard:
    return ContractCard(
        bucket,
        "create",
        "tool",
        "",
        "missing_measurement",
        "",
        "",
        Contract(measurement="lead.lag", signature=signature),
        Scope(),
    )


class _Synth:
    """Records what each call was given; drafts measure the group's contract."""

    name = "recording-synth"

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.bound: Any = None

    def synthesize(self, group: WorkGroup, attempt: int, history: Any, examples: Any) -> Tool:
        self.seen.append(
            {"attempt": attempt, "signature": group.contract.signature, "history": list(history)}
        )
        return Tool(
            id=f"draft.{attempt}",
            source=f"def tool_{attempt}():\n    return None\n",
            contract=group.contract,
            scope=group.scope,
            outputs=("v",),
        )

    def repair(self, group: Any, draft: Any, violation: str, examples: Any) -> None:
        return None


class _Planner:
    name = "recording-planner"

    def __init__(self) -> None:
        self.calls = 0

    def plan(self, dossier: Any, feedback: Any = ()) -> None:
        self.calls += 1
        return None


class _Sandbox:
    """The AST gate refuses every draft (``ok=False``) or accepts it and every run is ok."""

    def __init__(self, ok: bool) -> None:
        self.ok = ok

    def check(self, source: str) -> Any:
        return SimpleNamespace(ok=self.ok, reasons=[] if self.ok else ["refused by the gate"])

    def run(self, source: str, inputs: Any, check_determinism: bool = False) -> list[Any]:
        return [
            SimpleNamespace(
                status="ok", outputs={"v": 1.0}, error="", error_kind="", elapsed_ms=0.0
            )
            for _ in inputs
        ]


def _run_group(
    synth: Any,
    planner: Any,
    sandbox: Any,
    held: list[Question],
    cfg: ProtocolConfig,
    signature: tuple[str, ...] = ("primary",),
    evaluator: Any = None,
    base: dict[str, AnswerRecord] | None = None,
    library: Library | None = None,
) -> Any:
    card = _card("b1", signature)
    group = WorkGroup("g1", (card,), card.contract, card.scope)
    return run_group(
        group,
        1,
        library or Library(),
        dossiers={"b1": Dossier("b1", "no_tool", "c", "c", (), ())},
        held_out={"b1": [q.id for q in held]},
        train={q.id: q for q in held},
        base=base or {},
        synthesizer=synth,
        planner=planner,
        sandbox=sandbox,
        evaluator=evaluator,
        cfg=cfg,
        exclude={q.id for q in held},
        ids=ViewIds(held, "0"),
    )


def test_attempts_rejected_by_the_checks_count_as_zero_repair_and_trigger_the_replan() -> None:
    planner = _Planner()
    cfg = ProtocolConfig(max_synthesis_attempts=3, replan_after_zero_repair=2)
    out = _run_group(_Synth(), planner, _Sandbox(ok=False), [_question(i) for i in range(4)], cfg)
    assert [a.outcome for a in out.attempts] == ["rejected_check"] * 3
    assert out.replans == 1 and planner.calls == 1


def test_an_undeliverable_signature_is_adapted_to_what_the_held_out_errors_carry() -> None:
    synth = _Synth()
    held = [_question(i) for i in range(4)]  # one primary series, no covariate anywhere
    cfg = ProtocolConfig(max_synthesis_attempts=2)
    out = _run_group(synth, _Planner(), _Sandbox(ok=False), held, cfg, ("primary", "covariate"))
    assert [s["signature"] for s in synth.seen] == [("primary",), ("primary",)]
    assert out.adaptations and out.adaptations[0]["from"] == ["primary", "covariate"]
    assert out.adaptations[0]["to"] == ["primary"]
    # a deliverable signature is left alone
    synth2 = _Synth()
    held2 = [_question(i, covariate=True) for i in range(4)]
    out2 = _run_group(synth2, _Planner(), _Sandbox(ok=False), held2, cfg, ("primary", "covariate"))
    assert [s["signature"] for s in synth2.seen] == [("primary", "covariate")] * 2
    assert not out2.adaptations


class _PrefilterEvaluator:
    """Attempt 1 repairs two held-out errors, attempt 2 one, attempt 3 none."""

    def answer(self, split: str, library: Library, qs: Any) -> dict[str, AnswerRecord]:
        tid = library.stages[-1].tools[0].id
        fixes = {".a1": 2, ".a2": 1}.get(tid[-3:], 0)
        return {q.id: _rec(q.id, i < fixes, tid if i < fixes else "") for i, q in enumerate(qs)}


def test_the_synthesizer_sees_the_library_and_the_strongest_attempt_kept_apart() -> None:
    held = [_question(i) for i in range(5)]
    base = {q.id: _rec(q.id, False) for q in held}
    synth = _Synth()
    synth.for_library = lambda lib: (setattr(synth, "bound", lib), synth)[1]  # type: ignore[attr-defined]
    lib = library_from_tools("custom", [_tool("root.old", "", "old.measure")])
    cfg = ProtocolConfig(max_synthesis_attempts=3, prefilter_early_stop=1.0)
    _run_group(
        synth,
        _Planner(),
        _Sandbox(ok=True),
        held,
        cfg,
        evaluator=_PrefilterEvaluator(),
        base=base,
        library=lib,
    )
    assert synth.bound is lib
    hist = synth.seen[2]["history"]
    strongest = [h for h in hist if h.strongest]
    assert [h.attempt for h in strongest] == [1] and strongest[0].repairs == 2
    assert strongest[0].source.startswith("def tool_1")
    assert not any(h.source for h in hist if not h.strongest)


class _TiedEvaluator:
    """Attempts 1 and 2 repair the same two held-out errors; attempt 3 repairs one."""

    def answer(self, split: str, library: Library, qs: Any) -> dict[str, AnswerRecord]:
        tid = library.stages[-1].tools[0].id
        fixes = {".a1": 2, ".a2": 2, ".a3": 1}.get(tid[-3:], 0)
        return {q.id: _rec(q.id, i < fixes, tid if i < fixes else "") for i, q in enumerate(qs)}


class _NoRepairEvaluator:
    """Every attempt repairs nothing and harms nothing."""

    def answer(self, split: str, library: Library, qs: Any) -> dict[str, AnswerRecord]:
        return {q.id: _rec(q.id, False) for q in qs}


class _BranchSynth(_Synth):
    """Drafts a composite whose one branch takes the questions that ask about periodicity."""

    def synthesize(self, group: WorkGroup, attempt: int, history: Any, examples: Any) -> Tool:
        d = super().synthesize(group, attempt, history, examples)
        return replace(d, scope=Scope(kinds=(Matcher(require=("periodic",)),)))


@pytest.mark.parametrize(
    ("n_held", "n_in", "min_held", "counts", "want"),
    [
        (1, 1, 3, "in_contract", "passed"),
        (2, 2, 3, "in_contract", "passed"),
        (3, 3, 3, "in_contract", "no_repair"),
        (1, 1, 0, "in_contract", "no_repair"),
        # five held-out errors, two of a kind the composite has a branch for
        (5, 2, 3, "in_contract", "passed"),
        (5, 0, 3, "in_contract", "passed"),
        (5, 3, 3, "in_contract", "no_repair"),
        (5, 2, 3, "all", "no_repair"),
    ],
)
def test_no_repair_refuses_a_composite_only_where_enough_held_out_errors_are_of_its_kinds(
    n_held: int, n_in: int, min_held: int, counts: str, want: str
) -> None:
    # one or two held-out errors missed, or errors of kinds a composite has no branch for, say
    # nothing of a tool that serves many question kinds; the harm probe (empty here) and
    # execution errors still screen it. The count reads the composite's kinds, not its answers.
    held = [
        _question(i)
        if i < n_in
        else replace(_question(i), question="Does the series trend upward?")
        for i in range(n_held)
    ]
    base = {q.id: _rec(q.id, False) for q in held}
    support = SupportConfig(min_held_out=min_held, min_held_out_counts=counts)
    cfg = ProtocolConfig(max_synthesis_attempts=1, support=support)
    out = _run_group(
        _BranchSynth(),
        _Planner(),
        _Sandbox(ok=True),
        held,
        cfg,
        evaluator=_NoRepairEvaluator(),
        base=base,
    )
    assert [a.outcome for a in out.attempts] == [want]
    assert out.attempts[0].n_in_contract == n_in
    assert (out.survivor is not None) == (want == "passed")


class _NarrowSynth(_Synth):
    """Drafts a plain tool whose matcher takes only the questions that ask about periodicity."""

    def synthesize(self, group: WorkGroup, attempt: int, history: Any, examples: Any) -> Tool:
        d = super().synthesize(group, attempt, history, examples)
        return replace(d, scope=Scope(matcher=Matcher(require=("periodic",))))


def test_a_plain_tool_answers_for_every_held_out_error_of_its_bucket() -> None:
    # a plain tool is planned for its whole bucket: a matcher that takes none of its held-out
    # errors is a failure to serve them, not a reason to ask for nothing
    held = [replace(_question(i), question="Does the series trend upward?") for i in range(4)]
    base = {q.id: _rec(q.id, False) for q in held}
    out = _run_group(
        _NarrowSynth(),
        _Planner(),
        _Sandbox(ok=True),
        held,
        ProtocolConfig(max_synthesis_attempts=1),
        evaluator=_NoRepairEvaluator(),
        base=base,
    )
    assert [a.outcome for a in out.attempts] == ["no_repair"]
    assert out.attempts[0].n_in_contract is None


def test_a_retry_replaces_the_survivor_only_by_doing_better_on_the_prefilter() -> None:
    held = [_question(i) for i in range(5)]
    base = {q.id: _rec(q.id, False) for q in held}
    cfg = ProtocolConfig(max_synthesis_attempts=3, prefilter_early_stop=1.0)
    out = _run_group(
        _Synth(), _Planner(), _Sandbox(ok=True), held, cfg, evaluator=_TiedEvaluator(), base=base
    )
    assert [len(a.repairs) for a in out.attempts] == [2, 2, 1]
    # the survivor is the strongest attempt the synthesizer was told of: the earlier on ties
    assert out.survivor.id.endswith(".a1")


def test_the_llm_synthesizer_prompt_renders_the_library_and_the_strongest_attempt_apart() -> None:
    from tsevo.roles.llm.client import LLMClient
    from tsevo.roles.llm.config import LLMConfig, RoleConfigs
    from tsevo.roles.llm.roles import LLMSynthesizer, RoleContext

    cfg = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", cache_mode="off")
    ctx = RoleContext(LLMClient(RoleConfigs(cfg)))
    old = Tool(
        id="root.level_gap",
        source=SRC,
        description="level gap between two windows",
        contract=Contract(measurement="window_compare.level_gap"),
    )
    syn = LLMSynthesizer(ctx).for_library(library_from_tools("custom", [old]))
    card = _card("b1", ("primary",))
    group = WorkGroup("g1", (card,), card.contract, card.scope)
    strong_src = "def strong_tool():\n    return {'p': 1.0}\n"
    hist = [
        AttemptFeedback(
            1,
            "r1.g1.a1",
            "acf.period",
            "passed",
            3,
            0,
            "rate 0.3",
            strongest=True,
            source=strong_src,
        ),
        AttemptFeedback(2, "r1.g1.a2", "snr.noise", "no_repair", 0, 0, "rate 0.0"),
    ]
    p = syn.prompt(group, 3, hist, [])
    lib_at, strong_at = p.index("Current tool library"), p.index("Strongest attempt so far")
    assert "root.level_gap" in p[lib_at:] and "level gap between two windows" in p
    assert strong_src.strip() in p[strong_at:]
    earlier = p[p.index("Earlier attempts for this group") :]
    assert "def strong_tool" not in earlier.split("Strongest attempt so far")[0]
    # without a bound library the prompt says so instead of guessing
    assert "(no library bound)" not in p


# --------------------------------------------------------------------------- clustering failures
class _Triage:
    """Two categories; assign replies break in scripted ways."""

    name = "scripted-triage"

    def __init__(self, *, drop: str = "", define_fails_after: int = 99) -> None:
        self.drop, self.defines, self.define_fails_after = drop, 0, define_fails_after

    def define(self, errors: Any, k: int) -> list[Any]:
        from tsevo.roles.protocols import Category

        self.defines += 1
        if self.defines > self.define_fails_after:
            raise ValueError("malformed categories")
        return [Category("c1", "a", "first half"), Category("c2", "b", "second half")]

    def assign(self, cats: Any, batch: Any) -> dict[str, Any]:
        def cat(i: int) -> str:  # first define: by parity; a re-split: by the next bit
            return "c1" if (i if self.defines == 1 else i // 2) % 2 else "c2"

        return {e.qid: cat(int(e.qid[1:])) for e in batch if e.qid != self.drop}


def _items(n: int) -> list[Any]:
    from tsevo.roles.protocols import ErrorItem

    return [ErrorItem(f"e{i:03d}", f"question {i}", ("a", "b")) for i in range(n)]


def test_an_assign_batch_that_stays_invalid_invalidates_the_clustering() -> None:
    from tsevo.evolve.cluster import ClusteringError, cluster_errors

    cfg = ProtocolConfig()
    with pytest.raises(ClusteringError, match="assign"):
        cluster_errors(_items(10), _Triage(drop="e003"), cfg)  # every reply misses e003


def test_a_failed_resplit_invalidates_the_clustering_instead_of_keeping_the_bucket() -> None:
    from tsevo.evolve.cluster import ClusteringError, cluster_errors

    cfg = ProtocolConfig(resplit_above=4, define_retries=0)
    ok = cluster_errors(_items(12), _Triage(), cfg)  # both buckets (6 each) are re-split
    assert ok.splits
    with pytest.raises(ClusteringError, match=r"re-split of no_tool\.c"):
        cluster_errors(_items(12), _Triage(define_fails_after=1), cfg)


# --------------------------------------------------------------------------- diagnostic test run
def test_the_rejected_rounds_candidate_is_the_pruned_library_when_its_retest_was_better() -> None:
    harmful = _tool("r1.g1.a1", "g1", "m1")
    helpful = _tool("r1.g2.a1", "g2", "m2")
    ctx = _prune_ctx([harmful, helpful], harmed={harmful.id: 3}, helped={helpful.id: 5})
    res = prune(ctx)
    rec = ctx.prune
    assert rec is not None and rec.retest is not None and not rec.accepted
    assert rec.retest.delta_lb > rec.first.delta_lb  # better, but not passing
    assert res.stop is not None and res.stop.candidate is not None
    assert [t.id for t in res.stop.candidate.stages[-1].tools] == [helpful.id]


class _TestEvaluator:
    def __init__(self) -> None:
        self.libraries: list[str] = []

    def arm_name(self, split: str, library: Library) -> str:
        return f"{split}.{library.fingerprint()}"

    def answer(self, split: str, library: Library, qs: Any) -> dict[str, AnswerRecord]:
        self.libraries.append(library.fingerprint())
        return {q.id: _rec(q.id, True) for q in qs}


def test_the_diagnostic_test_run_is_made_for_rejected_rounds_only_not_invalid_ones() -> None:
    from tsevo.evolve.result import RoundResult
    from tsevo.evolve.run import report_test

    lib = Library()
    cand = lib.append_stage(Stage(1, (_tool("r1.g1.a1", "g1", "m"),), "round 1"))
    test = [SimpleNamespace(id=f"t{i}") for i in range(4)]
    cfg = ProtocolConfig()
    ev = _TestEvaluator()
    out = report_test(
        1,
        lib,
        RoundResult(1, "invalid", "measurement invalid", lib, candidate=cand),
        ev,
        test,
        cfg,
        None,
    )  # type: ignore[arg-type]
    assert "diagnostic" not in out and cand.fingerprint() not in ev.libraries
    ev2 = _TestEvaluator()
    out2 = report_test(
        1, lib, RoundResult(1, "rejected", "gate", lib, candidate=cand), ev2, test, cfg, None
    )  # type: ignore[arg-type]
    assert "diagnostic" in out2 and ev2.libraries[-1] == cand.fingerprint()


# --------------------------------------------------------------------------- the catalog at answer time
def _matcher_tool(tid: str, words: tuple[str, ...], description: str) -> Tool:
    from tsevo.library.tool import Guidance, Matcher, ReadingRule

    rule = ReadingRule("label", "v", (0.5,), ("no", "yes"), confidence=0.9)
    return Tool(
        id=tid,
        source=f"def {tid.replace('.', '_')}():\n    return {{'v': 1.0}}\n",
        description=description,
        scope=Scope(matcher=Matcher({w: 1.0 for w in words}, 0.0)),
        guidance=Guidance("1 means yes", rule),
        outputs=("v",),
    )


class _ChoosingReviewer:
    """A reviewer that reads the catalog and inspects only the tool it finds most relevant."""

    name = "choosing-reviewer"

    def __init__(self, pick: str) -> None:
        self.pick = pick
        self.catalogs: list[list[str]] = []

    def choose_tools(self, q: Any, candidates: Any, max_tools: int, scoped: bool) -> list[str]:
        self.catalogs.append([st.tool.id for st in candidates])
        return [self.pick]

    def review(self, q: Any, incoming: int, evidence: Any) -> Any:
        from tsevo.roles.builtin import RuleReviewer

        return RuleReviewer().review(q, incoming, evidence)


def test_an_answerer_with_the_catalog_chooses_which_tools_it_inspects() -> None:
    from tsevo.agent import Agent

    tools = [
        _matcher_tool(f"root.t{i}", ("periodic", "series"), f"tool number {i}") for i in range(5)
    ]
    lib = library_from_tools("custom", tools)
    rev = _ChoosingReviewer(pick="root.t4")  # ranked last by the matcher: never in its top three
    q = _question(0)
    agent = Agent(lib, reviewer=rev, executor=_Sandbox(ok=True), max_tools=3)
    rec = agent.answer(q)
    assert rev.catalogs == [[t.id for t in tools]]  # every in-scope tool is in the catalog
    assert rec.tools_run == ("root.t4",)
    # the builtin reads the catalog with its matcher: the top three by score, then id
    builtin = Agent(lib, executor=_Sandbox(ok=True), max_tools=3).answer(q)
    assert builtin.tools_run == ("root.t0", "root.t1", "root.t2")


def test_the_llm_reviewer_chooses_from_the_scope_catalog_and_falls_back_to_the_matcher() -> None:
    from tsevo.data import QuestionView
    from tsevo.library.library import ScopedTool
    from tsevo.roles.llm.client import LLMClient
    from tsevo.roles.llm.config import LLMConfig, RoleConfigs
    from tsevo.roles.llm.roles import LLMReviewer, RoleContext
    from tsevo.testing import FakeOpenAIServer

    tools = [_matcher_tool(f"root.t{i}", ("periodic",), f"measures thing {i}") for i in range(4)]
    cands = [ScopedTool(t, 0) for t in tools]
    q = QuestionView.of(_question(0), "v-1")
    script = [
        {"tools": ["root.t3", "root.t1"], "reason": "t3 and t1 measure what is asked"},
        {"tools": ["root.nope"], "reason": ""},
        {"tools": ["root.nope"], "reason": ""},
        {"tools": ["root.nope"], "reason": ""},
        {"tools": ["root.t2"], "reason": ""},
    ]
    with FakeOpenAIServer.llama_cpp(script) as srv:
        cfg = LLMConfig(base_url=srv.base_url, model="scripted", cache_mode="off", max_retries=0)
        rev = LLMReviewer(RoleContext(LLMClient(RoleConfigs(cfg))))
        assert rev.choose_tools(q, cands, 3, True) == ["root.t3", "root.t1"]
        prompt = srv.chat_requests()[0]["messages"][0]["content"]
        assert all(t.id in prompt and t.description in prompt for t in tools)
        assert tools[0].scope.describe() in prompt and "at most 3" in prompt
        # no valid choice within the retries: the matcher's reading of the catalog (first three)
        assert rev.choose_tools(q, cands, 3, True) == ["root.t0", "root.t1", "root.t2"]
        # w/o scope: the same catalog without the scope field
        assert rev.choose_tools(q, cands, 2, False) == ["root.t2"]
        unscoped = srv.chat_requests()[-1]["messages"][0]["content"]
        assert tools[0].scope.describe() not in unscoped and "root.t3" in unscoped


# --------------------------------------------------------------------------- planner lifecycle
def _lifecycle_dossier(rows: list[tuple[str, str, int, int]]) -> tuple[Dossier, Tool]:
    """A bucket of errors on which ``root.trend`` ran: rows are (task, text, gold, incoming).

    The tool always reads "up" (option 0) and replaced every incoming answer with it.
    """
    from tsevo.data import QuestionView
    from tsevo.library.tool import Guidance, ReadingRule
    from tsevo.roles.protocols import Example

    rule = ReadingRule("label", "v", (0.5,), ("down", "up"), confidence=0.8)
    tid = "root.trend"
    tool = Tool(
        id=tid,
        source=SRC,
        guidance=Guidance("1: up", rule),
        outputs=("v",),
        contract=Contract(measurement="trend.v"),
    )
    examples = []
    for i, (task, text, gold, incoming) in enumerate(rows):
        q = Question(
            id=f"l{i}",
            source="s",
            task=task,
            question=text,
            options=("up", "down", "flat"),
            series={"x": np.arange(30.0)},
            primary=("x",),
            gold=gold,
        )
        run = ToolRun(tid, "ok", {"v": 1.0})
        step = StageStep(
            0, (tid,), (run,), "replace" if incoming else "keep", "", incoming, 0, (tid,)
        )
        rec = AnswerRecord(q.id, q.fingerprint, task, incoming, "", (step,), 0, gold == 0)
        examples.append(Example(QuestionView.of(q, f"v{i}"), gold, rec))
    lib = library_from_tools("custom", [tool])
    d = Dossier("tool_fired.c1", "tool_fired", "c", "c", tuple(examples), (), library=lib)
    return d, tool


TEXT = "Is the trend of the series up, down or flat?"


def test_the_builtin_planner_retires_a_tool_that_only_breaks_answers() -> None:
    from tsevo.roles.builtin.lifecycle import lifecycle_card

    d, tool = _lifecycle_dossier([("T", TEXT, 1 + i % 2, 1 + i % 2) for i in range(8)])
    card = lifecycle_card(d)
    assert card is not None and (card.action, card.artifact_kind) == ("retire", "tombstone")
    assert card.target_tool == tool.id and card.plan["harmed"] == 8


def test_the_builtin_planner_rescopes_by_task_when_no_word_separates() -> None:
    from tsevo.library.library import scope_matches
    from tsevo.roles.builtin.lifecycle import lifecycle_card

    rows = [("A", TEXT, 0, 1)] * 3 + [("B", TEXT, 1 + i % 2, 1 + i % 2) for i in range(5)]
    d, _tool = _lifecycle_dossier(rows)
    card = lifecycle_card(d)
    assert card is not None and (card.action, card.artifact_kind) == ("rescope", "scope_override")
    assert card.scope.anti_tasks == ("B",) and not card.scope.matcher.forbid
    assert not scope_matches(card.scope, d.support[-1].question)
    assert scope_matches(card.scope, d.support[0].question)


def test_the_builtin_planner_rescopes_with_a_term_matcher_when_no_single_word_is_shared() -> None:
    from tsevo.library.library import scope_matches
    from tsevo.roles.builtin.lifecycle import lifecycle_card

    pairs = [
        ("weekly", "seasonal"),
        ("weekly", "cycle"),
        ("seasonal", "cycle"),
        ("weekly", "seasonal"),
        ("weekly", "cycle"),
    ]
    wrong = [
        ("T", f"Is the trend of the {a} {b} series up, down or flat?", 1 + i % 2, 1 + i % 2)
        for i, (a, b) in enumerate(pairs)
    ]
    d, _tool = _lifecycle_dossier([("T", TEXT, 0, 1)] * 3 + wrong)
    card = lifecycle_card(d)
    assert card is not None and card.action == "rescope"
    am = card.scope.anti_matcher
    assert set(am.terms) == {"weekly", "seasonal", "cycle"} and not card.scope.anti_tasks
    assert scope_matches(card.scope, d.support[0].question)  # where it reads right: still on
    assert sum(not scope_matches(card.scope, e.question) for e in d.support[3:]) >= 4


def test_a_retire_card_becomes_a_tombstone_without_synthesis() -> None:
    from tsevo.roles.builtin.lifecycle import lifecycle_card

    d, tool = _lifecycle_dossier([("T", TEXT, 1 + i % 2, 1 + i % 2) for i in range(8)])
    card = lifecycle_card(d)
    assert card is not None
    group = WorkGroup("g1", (card,), card.contract, card.scope)
    synth, seen = _Synth(), []

    class _Ev:
        def answer(self, split: str, library: Library, qs: Any) -> dict[str, AnswerRecord]:
            seen.append(library)
            return {q.id: _rec(q.id, False) for q in qs}

    held = [_question(i) for i in range(3)]
    bare = Dossier(d.bucket_id, d.side, d.label, d.criteria, (), (), library=d.library)
    out = run_group(
        group,
        1,
        d.library,
        dossiers={d.bucket_id: bare},
        held_out={d.bucket_id: [q.id for q in held]},
        train={q.id: q for q in held},
        base={q.id: _rec(q.id, False) for q in held},
        synthesizer=synth,
        planner=_Planner(),
        sandbox=_Sandbox(ok=True),
        evaluator=_Ev(),
        cfg=ProtocolConfig(max_synthesis_attempts=1),
        exclude=set(),
        ids=ViewIds(held, "0"),
    )
    assert not synth.seen, "a tombstone is built from the card, not synthesized"
    stone = seen[0].stages[-1].tools[0]
    assert (stone.kind, stone.target, stone.provenance.action) == ("tombstone", tool.id, "retire")
    assert all(st.tool.id != tool.id for row in seen[0].effective() for st in row)
    assert out.attempts[0].checked


class _TwoClassSandbox(_Sandbox):
    """Every run is ok; the output separates the two gold classes."""

    def run(self, source: str, inputs: Any, check_determinism: bool = False) -> list[Any]:
        return [
            SimpleNamespace(
                status="ok", outputs={"v": float(i % 2)}, error="", error_kind="", elapsed_ms=0.0
            )
            for i, _ in enumerate(inputs)
        ]


def test_a_calibration_request_on_a_forecasting_draft_is_refused_not_a_crash() -> None:
    """Found by the main-table study (default preset, seed 6113): the round crashed with
    CalibrationError when a tree was fitted for a draft that calls P.forecast; a calibrated tool
    may not forecast, so the tree is refused like one below the bar and the draft is repaired."""
    from dataclasses import replace as dc_replace

    from tsevo.evolve.checks import calibrate

    rows = [dc_replace(_question(i), id=f"c{i:02d}", gold=i % 2) for i in range(40)]
    base = _matcher_tool("r1.g1.a1", ("periodic",), "periodicity")
    source = "def r1_g1_a1():\n    f = P.forecast(S.x, 4)\n    return {'v': float(f[0])}\n"
    request = {"kind": "binary_decision_tree_v1", "features": ["v"]}
    draft = dc_replace(base, source=source, contract=dc_replace(base.contract, calibration=request))
    tool, record, why = calibrate(draft, rows, _TwoClassSandbox(True), ProtocolConfig(), None)
    assert tool is None and record["accepted"] is False
    assert "may not call the forecaster" in why and why.startswith("calibration refused")
    plain = dc_replace(draft, source="def r1_g1_a1():\n    return {'v': 1.0}\n")
    tool, record, why = calibrate(plain, rows, _TwoClassSandbox(True), ProtocolConfig(), None)
    assert tool is not None and record["accepted"] is True and why == ""
