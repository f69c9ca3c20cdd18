"""A scripted-server responder that answers LLM role requests with what the builtin roles would say.

:class:`BuiltinResponder` plugs into :class:`tsevo.testing.FakeOpenAIServer`: it recognises which
role a request comes from by the prompt asset's fixed first line, reads the request's data blocks
(the rendered question, the JSON rows of errors, dossiers, cards, attempts and evidence), runs the
corresponding builtin role on the same inputs and replies with that role's JSON contract. A whole
round then runs through real HTTP deterministically: the tests of the LLM path, offline teaching
(record a cassette with it, replay it with no server) and a reference point for real models.

It needs the suite the run answers (questions are looked up by id, or by their rendering for the
answering roles, which never see ids). It keeps what it learned from earlier requests (category
centroids, the builtin cards behind each bucket) because the builtin roles pass backend detail
between stages that the JSON contracts do not carry. Faults can be injected per request kind with
:meth:`BuiltinResponder.inject`: a :class:`~tsevo.testing.fake_openai.Fault` or a function of the
correct reply.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from tsevo.data import Question, QuestionView
from tsevo.evolve.views import ViewIds
from tsevo.library.library import ScopedTool
from tsevo.library.tool import Contract, Guidance, ReadingRule, Tool, merge_scopes
from tsevo.roles.builtin import (
    ClusterTriage,
    GlobalSummaryAnswerer,
    MeasurementPlanner,
    MergeCoordinator,
    RuleReviewer,
    TemplateSynthesizer,
)
from tsevo.roles.llm.prompts import load_prompt
from tsevo.roles.llm.render import option_letter, render_question
from tsevo.roles.protocols import (
    AttemptFeedback,
    Category,
    ContractCard,
    Dossier,
    ErrorItem,
    Evidence,
    Example,
    WorkGroup,
)

from .chain_script import analyse_reply, mutate_reply

__all__ = ["KINDS", "BuiltinResponder"]

#: Request kind -> prompt asset whose first line identifies it.
KINDS: dict[str, str] = {
    "answer": "answerer",
    "icl": "answerer_icl",
    "refine": "answerer_refine",
    "choose": "tool_choice",
    "review": "reviewer",
    "read": "reader",
    "define": "triage_define",
    "assign": "triage_assign",
    "plan": "planner_local",
    "coordinate": "planner_global",
    "synthesize": "synthesizer",
    "repair": "synthesizer_repair",
    "chain_analyse": "chain_analyse",
    "chain_mutate": "chain_mutate",
}

Injected = Any  # a Fault, a str/dict reply, or a function of the correct reply dict


def _head(asset: str) -> str:
    first = load_prompt(asset).text.split("\n", 1)[0]
    return first.split("$", 1)[0]


def _json_after(text: str, marker: str) -> Any:
    i = text.index(marker) + len(marker)
    while text[i].isspace():
        i += 1
    obj, _ = json.JSONDecoder().raw_decode(text, i)
    return obj


def _question_key(block: str) -> str:
    return "\n".join(ln for ln in block.splitlines() if not ln.startswith("values ("))


@dataclass
class _Stored:
    categories: dict[tuple[str, str], Category]
    cards: dict[str, ContractCard]
    support: dict[str, list[str]]


class BuiltinResponder:
    """Answers LLM role requests with the builtin roles' output (a ``FakeOpenAIServer`` responder).

    Args:
        questions: Every question the run may ask about (the suite).
        roles: The builtin roles to delegate to (a fresh builtin set by default; any object with
            the builtin roles' attributes ``answerer``, ``reviewer``, ``triage``,
            ``local_planner``, ``global_planner``, ``synthesizer``).
        seed: The protocol seed of the run it serves: prompts name questions by the run's opaque
            ids (:class:`tsevo.evolve.views.ViewIds` with this seed as the salt), never by source id.

    Attributes:
        counts: Requests answered per kind (retries included).
    """

    def __init__(self, questions: Iterable[Question], roles: Any = None, *, seed: int = 0) -> None:
        if roles is None:
            roles = SimpleNamespace(
                answerer=GlobalSummaryAnswerer(),
                reviewer=RuleReviewer(),
                triage=ClusterTriage(),
                local_planner=MeasurementPlanner(),
                global_planner=MergeCoordinator(),
                synthesizer=TemplateSynthesizer(),
            )
        self.roles = roles
        qs = list(questions)
        ids = ViewIds(qs, str(seed))
        self.by_id: dict[str, Question] = {}
        self.views: dict[str, QuestionView] = {}
        self.by_render: dict[str, QuestionView] = {}
        for q in qs:
            v = ids.view(q)
            self.by_id[v.id] = q
            self.views[v.id] = v
            self.by_render[_question_key(render_question(v, max_points=1))] = v
        self.heads = {k: _head(a) for k, a in KINDS.items()}
        self.state = _Stored({}, {}, {})
        self.counts: Counter[str] = Counter()
        self._faults: dict[str, deque[Injected]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ faults
    def inject(self, kind: str, *faults: Injected) -> None:
        """Queue faults for the next requests of ``kind`` (one per request, in order).

        Args:
            kind: One of :data:`KINDS`.
            *faults: A ``Fault``/str/dict served instead of the reply, or a function
                ``correct_reply_dict -> reply`` (e.g. one that drops ids).
        """
        if kind not in KINDS:
            raise ValueError(f"unknown request kind {kind!r}; one of {sorted(KINDS)}")
        with self._lock:
            self._faults.setdefault(kind, deque()).extend(faults)

    def pending(self, kind: str) -> int:
        """Faults still queued for ``kind``."""
        with self._lock:
            return len(self._faults.get(kind, ()))

    # ------------------------------------------------------------------ dispatch
    def kind_of(self, prompt: str) -> str:
        """The request kind of a first user message."""
        for kind, head in self.heads.items():
            if prompt.startswith(head):
                return kind
        raise ValueError(f"not a tsevo role prompt: {prompt[:80]!r}")

    def __call__(self, body: Mapping[str, Any]) -> Any:
        """Answer one chat-completion request body (an injected fault first, when queued)."""
        msgs = [m for m in body.get("messages", []) if m.get("role") == "user"]
        prompt = str(msgs[0].get("content", ""))
        kind = self.kind_of(prompt)
        with self._lock:
            self.counts[kind] += 1
            queue = self._faults.get(kind)
            fault = queue.popleft() if queue else None
        handler: Callable[[str], dict[str, Any]] = getattr(self, f"_{kind}")
        if fault is not None and not callable(fault):
            return fault
        with self._lock:
            reply = handler(prompt)
        return fault(reply) if fault is not None else reply

    # ------------------------------------------------------------------ answering roles
    def _question(self, prompt: str) -> QuestionView:
        start = prompt.index("Question: ")
        end = prompt.find("\n\n", start)
        block = prompt[start : end if end >= 0 else len(prompt)]
        return self.by_render[_question_key(block)]

    def _answer(self, prompt: str) -> dict[str, Any]:
        q = self._question(prompt)
        a = self.roles.answerer.answer(q)
        return {"option": option_letter(a.option), "reason": a.reason}

    def _icl(self, prompt: str) -> dict[str, Any]:
        # the examples come first; the builtin answerer reads the question to answer only
        return self._answer(prompt[prompt.index("The question to answer") :])

    def _refine(self, prompt: str) -> dict[str, Any]:
        m = re.search(r"^First answer: ([A-J])$", prompt, re.MULTILINE)
        assert m is not None
        mine = self._answer(prompt)
        agrees = "agrees with" if mine["option"] == m.group(1) else "differs from"
        return {
            "critique": f"the builtin reading {agrees} the first answer {m.group(1)}",
            **mine,
        }

    def _review(self, prompt: str) -> dict[str, Any]:
        q = self._question(prompt)
        m = re.search(r"^Current answer: ([A-J?])$", prompt, re.MULTILINE)
        assert m is not None
        incoming = ord(m.group(1)) - ord("A")
        rows = _json_after(
            prompt, 'reading_rule", when present, is the machine-readable form of the guidance):'
        )
        rv = self.roles.reviewer.review(q, incoming, self._evidence(rows))
        if rv.decision == "replace" and rv.option is not None:
            return {
                "decision": "replace",
                "option": option_letter(rv.option),
                "tools": list(rv.responsible),
                "reason": rv.reason,
            }
        return {
            "decision": "keep",
            "option": None,
            "tools": list(rv.responsible),
            "reason": rv.reason,
        }

    def _choose(self, prompt: str) -> dict[str, Any]:
        # the catalog lists the candidates in the builtin's reading (matcher rank): its choice is
        # the first max_tools of them
        k = int(re.search(r"at most (\d+), most useful first", prompt).group(1))  # type: ignore[union-attr]
        start = prompt.index("Tool catalog (JSON")
        rows = _json_after(prompt[prompt.index("):\n", start) :], "):")
        return {"tools": [r["id"] for r in rows[:k]], "reason": "the builtin matcher's ranking"}

    def _read(self, prompt: str) -> dict[str, Any]:
        q = self._question(prompt)
        rows = _json_after(
            prompt, 'reading_rule", when present, is the machine-readable form of the guidance):'
        )
        rv = self.roles.reviewer.read(q, self._evidence(rows))
        letter = option_letter(rv.option) if rv.option is not None else None
        return {"option": letter, "tools": list(rv.responsible), "reason": rv.reason}

    def _evidence(self, rows: list[dict[str, Any]]) -> list[Evidence]:
        evidence = []
        for r in rows:
            rule = ReadingRule.from_dict(r["reading_rule"]) if r.get("reading_rule") else None
            tool = Tool(
                id=r["tool"],
                source="def evidence():\n    return None\n",
                guidance=Guidance(r.get("guidance", ""), rule),
            )
            evidence.append(Evidence(ScopedTool(tool, 0), r["status"], r.get("outputs")))
        return evidence

    # ------------------------------------------------------------------ triage
    def _error_items(self, rows: list[dict[str, Any]]) -> list[ErrorItem]:
        out = []
        for r in rows:
            q = self.views[r["id"]]
            tr = r.get("trace", {})
            out.append(
                ErrorItem(
                    qid=q.id,
                    text=q.question if not q.context else f"{q.question}\n{q.context}",
                    options=q.options,
                    n_primary=len(q.primary),
                    n_candidates=len(q.candidates),
                    n_covariates=len(q.covariates),
                    tool_fired=bool(tr.get("tool_fired")),
                    tools=tuple(tr.get("tools") or ()),
                    decision=tr.get("decision") or "",
                )
            )
        return out

    def _define(self, prompt: str) -> dict[str, Any]:
        k = int(re.search(r"into at most (\d+) failure categories", prompt).group(1))  # type: ignore[union-attr]
        errors = self._error_items(_json_after(prompt, "Errors (JSON):"))
        cats = self.roles.triage.define(errors, k)
        out = []
        seen: Counter[str] = Counter()
        for c in cats:
            seen[c.label] += 1
            label = c.label if seen[c.label] == 1 else f"{c.label} ({seen[c.label]})"
            self.state.categories[(label, c.criteria)] = c
            out.append({"label": label, "criteria": c.criteria})
        return {"categories": out}

    def _assign(self, prompt: str) -> dict[str, Any]:
        cat_rows = _json_after(prompt, "Categories (JSON):")
        cats = []
        for r in cat_rows:
            stored = self.state.categories.get((r["label"], r["criteria"]))
            centroid = dict(stored.centroid) if stored is not None else {}
            cats.append(Category(r["id"], r["label"], r["criteria"], centroid))
        errors = self._error_items(_json_after(prompt, "Errors (JSON):"))
        got = self.roles.triage.assign(cats, errors)
        return {"assignments": [{"id": e.qid, "category": got.get(e.qid)} for e in errors]}

    # ------------------------------------------------------------------ planning
    def _examples(self, rows: list[dict[str, Any]]) -> tuple[Example, ...]:
        out = []
        for r in rows:
            q = self.by_id[r["id"]]
            letter = r.get("agent_answer")
            rec = SimpleNamespace(
                final_answer=ord(letter) - ord("A") if letter else None,
                correct=bool(r.get("agent_correct")),
                tools_ok=tuple(r.get("tools_fired") or ()),
            )
            out.append(Example(self.views[r["id"]], q.gold, rec))
        return tuple(out)

    def _plan(self, prompt: str) -> dict[str, Any]:
        m = re.search(r"^Failure bucket (\S+) \(side: (\w+);", prompt, re.MULTILINE)
        assert m is not None
        bucket, side = m.group(1), m.group(2)
        label = re.search(r"^Category: (.*)$", prompt, re.MULTILINE).group(1)  # type: ignore[union-attr]
        criteria = re.search(r"^Criteria: (.*)$", prompt, re.MULTILINE).group(1)  # type: ignore[union-attr]
        support = self._examples(_json_after(prompt, "and its trace (JSON):"))
        background = self._examples(_json_after(prompt, "right or wrong (JSON):"))
        feedback: list[str] = []
        if "plan something different:" in prompt:
            block = prompt.split("plan something different:", 1)[1].split("\n\n", 1)[0]
            feedback = [ln[2:] for ln in block.strip().splitlines() if ln.startswith("- ")]
        d = Dossier(bucket, side, label, criteria, support, background)
        card = self.roles.local_planner.plan(d, feedback)
        self.state.support[bucket] = [e.question.question for e in support]
        if card is None:
            return _skip_card()
        self.state.cards[bucket] = card
        return _card_json(card)

    def _coordinate(self, prompt: str) -> dict[str, Any]:
        rows = _json_after(prompt, "Cards (JSON):")
        cards = [self.state.cards[r["bucket"]] for r in rows]
        texts = {c.bucket_id: self.state.support.get(c.bucket_id, []) for c in cards}
        groups = self.roles.global_planner.coordinate(cards, texts)
        return {
            "groups": [
                {
                    "buckets": list(g.bucket_ids),
                    "forbid": list(g.scope.matcher.forbid),
                    "reason": "",
                }
                for g in groups
            ]
        }

    # ------------------------------------------------------------------ synthesis
    def _group(self, prompt: str) -> WorkGroup:
        m = re.search(r"[Ww]ork group (\S+) \((?:serves )?failure buckets: ([^)]*)\)", prompt)
        assert m is not None
        cards = tuple(self.state.cards[b.strip()] for b in m.group(2).split(","))
        scope = cards[0].scope if len(cards) == 1 else merge_scopes([c.scope for c in cards])
        return WorkGroup(m.group(1), cards, cards[0].contract, scope)

    def _synthesize(self, prompt: str) -> dict[str, Any]:
        group = self._group(prompt)
        attempt = int(re.search(r"attempt (\d+) of at most", prompt).group(1))  # type: ignore[union-attr]
        history = []
        marker = "Earlier attempts for this group (do not repeat what failed):"
        if marker in prompt:
            for h in _json_after(prompt, marker):
                history.append(
                    AttemptFeedback(
                        h["attempt"], "", h["measurement"], h["outcome"], h["repairs"], h["harms"]
                    )
                )
        tool = self.roles.synthesizer.synthesize(group, attempt, history, [])
        return _tool_json(tool)

    def _repair(self, prompt: str) -> dict[str, Any]:
        group = self._group(prompt)
        violation = re.search(r"^Problem: (.*)$", prompt, re.MULTILINE).group(1)  # type: ignore[union-attr]
        d = _json_after(prompt, "The rejected tool (JSON):")
        contract = _json_after(prompt, "Contract:")
        cal = group.contract.calibration if contract.get("calibration") else None
        draft = Tool(
            id="draft.repair",
            source=d["source"] or "def x():\n    return None\n",
            contract=Contract(measurement=d.get("measurement", ""), calibration=cal),
            outputs=tuple(d.get("outputs") or ()),
        )
        fixed = self.roles.synthesizer.repair(group, draft, violation, [])
        return _tool_json(fixed)

    # ------------------------------------------------------------------ the Mara chain step
    def _chain_analyse(self, prompt: str) -> dict[str, Any]:
        return analyse_reply(prompt)

    def _chain_mutate(self, prompt: str) -> dict[str, Any]:
        return mutate_reply(prompt)


def _skip_card() -> dict[str, Any]:
    return {
        "action": "skip",
        "artifact_kind": "tool",
        "target_tool": "",
        "failure_type": "none",
        "root_cause": "no measurement recovers these answers",
        "focus": "",
        "measurement": "none",
        "signature": ["primary"],
        "success_criterion": "",
        "reading": None,
        "calibration": False,
        "params": {},
        "scope": {
            "tasks": [],
            "arity": "any",
            "options_kind": "any",
            "match_terms": [],
            "forbid_terms": [],
            "anti_tasks": [],
        },
    }


def _card_json(c: ContractCard) -> dict[str, Any]:
    params = {k: v for k, v in c.contract.params.items() if isinstance(v, int | float | str | bool)}
    return {
        "action": c.action,
        "artifact_kind": c.artifact_kind,
        "target_tool": c.target_tool,
        "failure_type": c.failure_type,
        "root_cause": c.root_cause,
        "focus": c.focus,
        "measurement": c.contract.measurement,
        "signature": list(c.contract.signature),
        "success_criterion": c.contract.success_criterion,
        "reading": c.plan.get("rule_kind") or None,
        "calibration": c.contract.calibration is not None,
        "params": params,
        "scope": {
            "tasks": list(c.scope.tasks),
            "arity": c.scope.arity,
            "options_kind": c.scope.options_kind,
            "match_terms": sorted(c.scope.matcher.terms),
            "forbid_terms": list(c.scope.matcher.forbid),
            "anti_tasks": list(c.scope.anti_tasks),
        },
    }


def _tool_json(tool: Tool | None) -> dict[str, Any]:
    if tool is None:
        return {
            "source": "",
            "function_name": "",
            "outputs": [],
            "measurement": "",
            "description": "",
            "guidance": "",
            "reading_rule": None,
            "give_up": True,
        }
    rule = tool.guidance.rule
    return {
        "source": tool.source,
        "function_name": tool.name,
        "outputs": list(tool.outputs),
        "measurement": tool.contract.measurement,
        "description": tool.description,
        "guidance": tool.guidance.text,
        "reading_rule": rule.to_dict() if rule is not None else None,
        "give_up": False,
    }
