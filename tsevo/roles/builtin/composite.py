"""Composite tools: one tool per work group that dispatches on the question's kind.

A real benchmark's bucket mixes many question kinds, and one measurement with one reading rule
serves at best one of them. A composite tool holds a *branch* per kind (or per group of kinds that
read the same measurement): a dispatch condition on the question's words (``ctx.question_tokens()``,
the kind's anchor words present and its neighbours' words absent), the measurement(s) it computes,
and its reading rule. Output keys are prefixed with the branch (``b1_``, ``b2_``...), so the one
:class:`~tsevo.library.tool.ReadingRule` of kind ``branches`` in the tool's guidance reads each
branch with its own rule. The branch list is the tool's measurement signature: it is what the
contract's ``measurement`` names, so merging, pruning and chain refinement treat it as one.

A branch may carry *peers*: other measurements that read its train rows as well as its own does
(``b3p1_``, ``b3p2_``... keys). Its rule is then a ``consensus``: the branch answers only where at
least its ``quorum`` of them (all, by default) name the same option, and keeps the agent's answer
otherwise. Of several measurements that fit a handful of rows, the ones fitting by chance disagree
on new questions, while the ones that measure what the question asks agree.

:func:`composite_source` writes real source: every branch guards its own computation (a primitive
that abstains leaves that branch out instead of voiding the tool), so overlapping branches can both
answer and the reviewer takes the first whose rule names an option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tsevo.library.sandbox.limits import SandboxLimits
from tsevo.library.tool import Contract, Matcher, ReadingRule, Scope

from ..protocols import ContractCard, Dossier
from .measure import WINDOW_ARGS, Spec, number_is_float, per_source
from .specs import MODE_SIGNATURE, new_tool_card

#: Most keys in a tool's result (the sandbox's default bound).
MAX_OUTPUTS = SandboxLimits().max_outputs

__all__ = [
    "Branch",
    "Peer",
    "branch_rule",
    "composite_branches",
    "composite_card",
    "composite_doc",
    "composite_measurement",
    "composite_source",
    "member_prefix",
    "within",
]


_PER_CANDIDATE = ("cand", "cand_diff")  # modes that return one output per candidate series


@dataclass(frozen=True)
class Peer:
    """Another measurement of a branch's question, with its own rule (see ``Branch.peers``)."""

    spec: Spec
    keys: tuple[str, ...]
    rule: ReadingRule

    def describe(self) -> str:
        """The measurement it reads."""
        if self.rule.kind == "extremum":
            return self.spec.describe(self.rule.prefix[:-1])
        return " + ".join(self.spec.describe(k) for k in self.keys)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {"spec": self.spec.to_dict(), "keys": list(self.keys), "rule": self.rule.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Peer:
        """Inverse of :meth:`to_dict`."""
        return cls(Spec.from_dict(d["spec"]), tuple(d["keys"]), ReadingRule.from_dict(d["rule"]))


@dataclass(frozen=True)
class Branch:
    """One branch of a composite tool.

    Attributes:
        kinds: Ids of the question kinds it serves.
        require: Words a question must hold for the branch to fire.
        forbid: Words that keep it from firing.
        spec: The measurement.
        keys: Output keys of the measurement it returns (base keys; ``cand`` modes return one per
            candidate).
        rule: The reading rule on the *unprefixed* keys.
        stats: Planner statistics (rows, cross-validated accuracy...), JSON-friendly.
        peers: Measurements that read the branch's train rows as well as its own does; the
            branch then answers only where at least ``quorum`` of its measurements name the same
            option (a ``consensus`` rule). Empty: the branch's own rule alone.
        quorum: Least share of its measurements (its own and its peers') that must agree, in
            (0.5, 1] (1: all of them).
        weights: Vote weight of each measurement (its own first, then its peers'); the quorum is
            then a share of their total. Empty: one each. Dropped with peers.
        lead_quorum: A lower share that suffices where its own measurement names the option, in
            (0.5, quorum) (0: none; :class:`~tsevo.library.tool.ReadingRule`). Kept when a long
            composite cuts the vote to unanimous peers (:func:`within`): the lead and one of two
            peers still answer.
    """

    kinds: tuple[str, ...]
    require: tuple[str, ...]
    forbid: tuple[str, ...]
    spec: Spec
    keys: tuple[str, ...]
    rule: ReadingRule
    stats: Mapping[str, Any] = field(default_factory=dict)
    peers: tuple[Peer, ...] = ()
    quorum: float = 1.0
    weights: tuple[float, ...] = ()
    lead_quorum: float = 0.0

    def describe(self) -> str:
        """The measurement it reads, e.g. ``trend.slope_sigma[window2]`` (peers after ``~``)."""
        return _MEMBER_SEP.join(m.describe() for m in self.members())

    def members(self) -> tuple[Peer, ...]:
        """Its own measurement and rule, then its peers'."""
        return (Peer(self.spec, self.keys, self.rule), *self.peers)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (what a card's plan carries)."""
        return {
            "kinds": list(self.kinds),
            "require": list(self.require),
            "forbid": list(self.forbid),
            "spec": self.spec.to_dict(),
            "keys": list(self.keys),
            "rule": self.rule.to_dict(),
            "stats": dict(self.stats),
            **({"peers": [p.to_dict() for p in self.peers]} if self.peers else {}),
            **({"quorum": self.quorum} if self.quorum != 1.0 else {}),
            **({"weights": list(self.weights)} if self.weights else {}),
            **({"lead_quorum": self.lead_quorum} if self.lead_quorum else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Branch:
        """Inverse of :meth:`to_dict`."""
        return cls(
            tuple(d["kinds"]),
            tuple(d["require"]),
            tuple(d["forbid"]),
            Spec.from_dict(d["spec"]),
            tuple(d["keys"]),
            ReadingRule.from_dict(d["rule"]),
            dict(d.get("stats") or {}),
            tuple(Peer.from_dict(p) for p in d.get("peers") or ()),
            float(d.get("quorum", 1.0)),
            tuple(float(w) for w in d.get("weights") or ()),
            float(d.get("lead_quorum", 0.0)),
        )


_BRANCH_SEP, _MEMBER_SEP = "; ", " ~ "


def composite_measurement(branches: Sequence[Branch]) -> str:
    """The contract measurement of a composite tool: its branch list, in order."""
    return "composite(" + _BRANCH_SEP.join(b.describe() for b in branches) + ")"


def composite_branches(measurement: str) -> list[list[str]] | None:
    """:func:`composite_measurement` read back: per branch, its members' measurements, in order.

    ``None`` where ``measurement`` is not a composite's. Separators inside a spec's brackets (its
    parameters, ``granger.p[pair; lag=2]``) are not split on.
    """
    if not (measurement.startswith("composite(") and measurement.endswith(")")):
        return None
    body = measurement[len("composite(") : -1]
    return [_top_level(b, _MEMBER_SEP) for b in _top_level(body, _BRANCH_SEP)]


def _top_level(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        depth += (c in "([{") - (c in ")]}")
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _prefixed(rule: ReadingRule, p: str) -> ReadingRule:
    if rule.kind == "extremum":
        return replace(rule, prefix=p + rule.prefix)
    if rule.kind == "tree":

        def walk(node: Any) -> Any:
            if isinstance(node, str):
                return node
            return (p + node[0], node[1], walk(node[2]), walk(node[3]))

        return replace(rule, tree=walk(rule.tree))
    return replace(rule, key=p + rule.key)


def member_prefix(branch: int, member: int) -> str:
    """Output key prefix of a branch's measurement (``b3_``) or of its peers (``b3p1_``...)."""
    return f"b{branch}_" if member == 0 else f"b{branch}p{member}_"


def _branch_sub(b: Branch, i: int) -> ReadingRule:
    rules = [_prefixed(m.rule, member_prefix(i, j)) for j, m in enumerate(b.members())]
    if len(rules) == 1:
        return rules[0]
    return ReadingRule(
        "consensus",
        branches=tuple(rules),
        confidence=rules[0].confidence,
        quorum=b.quorum,
        weights=b.weights if len(b.weights) == len(rules) else (),
        lead_quorum=b.lead_quorum if b.lead_quorum < b.quorum else 0.0,
    )


def branch_rule(branches: Sequence[Branch]) -> ReadingRule:
    """The tool's reading rule: each branch's rule on its prefixed keys (one branch: that rule)."""
    subs = tuple(_branch_sub(b, i) for i, b in enumerate(branches, 1))
    conf = max((r.confidence for r in subs), default=0.5)
    return ReadingRule("branches", branches=subs, confidence=conf)


def _words(ws: Sequence[str]) -> str:
    return "{" + ", ".join(repr(w) for w in ws) + "}"


def _cond(b: Branch) -> str:
    parts = [f"{_words(b.require)} <= toks"] if b.require else []
    parts += [f"not {_words(b.forbid)} & toks"] if b.forbid else []
    return " and ".join(parts) or "True"


def _call(spec: Spec, args: str) -> str:
    kw = ", ".join(
        f"{k}={v!r}" for k, v in spec.params if not (isinstance(v, str) and v[:1] == "#")
    )
    return f"P.{spec.primitive}({args}{', ' + kw if kw else ''})"


def _branch_lines(m: Peer, p: str, pad: str) -> list[str]:
    """Statements computing one measurement into ``out`` (nested guards, never an early return)."""
    s, keys = m.spec, m.keys
    lines: list[str] = []
    r = "r"  # members run one after another: one name serves them all

    stated, scale = per_source(s) if s.per is not None else ("", "")

    def put(src: str, ind: str) -> list[str]:
        return [f"{ind}out[{p + k!r}] = {src}[{k!r}]{scale}" for k in keys]

    if s.per is not None:  # read per the question's number: only where it states one above zero
        lines += [f"{pad}if {stated}:"]
        pad += "    "
    if s.mode == "primary":
        lines += [f"{pad}{r} = {_call(s, 'y')}", f"{pad}if {r} is not None:"]
        lines += put(r, pad + "    ")
    elif s.mode in WINDOW_ARGS:
        names = WINDOW_ARGS[s.mode]
        args = ", ".join(f"{n}=int(nums[{j}])" for j, n in enumerate(names))
        lines += [f"{pad}if len(nums) >= {len(names)}:"]
        lines += [f"{pad}    {r} = {_call(s, 'y, ' + args)}", f"{pad}    if {r} is not None:"]
        lines += put(r, pad + "        ")
    elif s.mode == "qnum":
        bound = {k: int(v[1:]) for k, v in s.params if isinstance(v, str) and v[:1] == "#"}
        need = max(bound.values()) + 1
        conds = [f"len(nums) >= {need}"]
        bound_args = []
        for k, i in sorted(bound.items()):
            if number_is_float(s.primitive, k):
                conds.append(f"nums[{i}] >= 0")
                bound_args.append(f"{k}=float(nums[{i}])")
            else:
                conds.append(f"nums[{i}] > 0 and nums[{i}] == int(nums[{i}])")
                bound_args.append(f"{k}=int(nums[{i}])")
        call = _call(s, "y, " + ", ".join(bound_args))
        lines += [f"{pad}if {' and '.join(conds)}:"]
        lines += [f"{pad}    {r} = {call}", f"{pad}    if {r} is not None:"]
        lines += put(r, pad + "        ")
    elif s.mode in ("dual_diff", "resid", "pair"):
        lines += [f"{pad}if ctx.n_primary() >= 2:", f"{pad}    y2 = ctx.primary(1)"]
        if s.mode == "resid":
            lines += [
                f"{pad}    if len(y2) == len(y):",
                f"{pad}        {r} = {_call(s, 'y2 - y')}",
                f"{pad}        if {r} is not None:",
            ]
            lines += put(r, pad + "            ")
        elif s.mode == "pair":
            lines += [f"{pad}    {r} = {_call(s, 'y, y2')}", f"{pad}    if {r} is not None:"]
            lines += put(r, pad + "        ")
        else:
            lines += [
                f"{pad}    {r}a = {_call(s, 'y')}",
                f"{pad}    {r}b = {_call(s, 'y2')}",
                f"{pad}    if {r}a is not None and {r}b is not None:",
            ]
            lines += [f"{pad}        out[{p + k!r}] = {r}b[{k!r}] - {r}a[{k!r}]" for k in keys]
    elif s.mode == "covariate":
        lines += [
            f"{pad}cov = None",
            f"{pad}for c in ctx.covariate_names():",
            f"{pad}    if cov is None and ctx.question_mentions(c):",
            f"{pad}        cov = c",
            f"{pad}if cov is not None:",
            f"{pad}    {r} = {_call(s, 'y, ctx.series(cov)')}",
            f"{pad}    if {r} is not None:",
        ]
        lines += put(r, pad + "        ")
    elif s.mode in _PER_CANDIDATE:
        lines += [f"{pad}cands = ctx.candidate_names()", f"{pad}if len(cands) >= 2:"]
        inner = pad + "    "
        if s.mode == "cand_diff":
            lines += [f"{inner}{r}ref = {_call(s, 'y')}", f"{inner}if {r}ref is not None:"]
            inner += "    "
        lines += [f"{inner}for c in cands:"]
        if s.mode == "cand":
            lines += [f"{inner}    {r} = {_call(s, 'y, ctx.series(c)')}"]
        else:
            lines += [f"{inner}    {r} = {_call(s, 'ctx.series(c)')}"]
        lines += [f"{inner}    if {r} is not None:"]
        for k in keys:
            val = f"{r}[{k!r}]" if s.mode == "cand" else f"abs({r}[{k!r}] - {r}ref[{k!r}])"
            lines += [f"{inner}        out[{p + k!r} + '_' + c] = {val}"]
    else:
        raise ValueError(f"unknown mode {s.mode!r}")
    return lines


def composite_doc(branches: Sequence[Branch]) -> str:
    """A composite tool's docstring (its measurements are in the contract: the source stays short)."""
    return f"Evidence per question kind: {len(branches)} branches, each its own measurement."


def _room(b: Branch, max_outputs: int, first: bool) -> str:
    """A guard that the branch's outputs still fit in the tool's result.

    ``""`` for a first branch of fixed size: its outputs always fit.
    """
    cand = sum(len(m.keys) for m in b.members() if m.spec.mode in _PER_CANDIDATE)
    fixed = sum(len(m.keys) for m in b.members()) - cand
    if cand:
        return f"len(out) + {cand} * len(ctx.candidate_names()) <= {max_outputs - fixed} and "
    return "" if first else f"len(out) <= {max_outputs - fixed} and "


def composite_source(
    branches: Sequence[Branch],
    name: str = "composite",
    doc: str = "",
    max_outputs: int = MAX_OUTPUTS,
) -> str:
    """Real source of a composite tool (one zero-argument function) for the given branches.

    Several branches may fire on one question; a later branch whose outputs would take the result
    past ``max_outputs`` keys (the sandbox's bound) is skipped, so a tool never breaks the contract
    however many of its branches' words a question holds. So is a first branch whose per-candidate
    measurements alone would (a vote of nine on many candidates).
    """
    if not branches:
        raise ValueError("a composite tool needs at least one branch")
    modes = {m.spec.mode for b in branches for m in b.members()}
    lines = [f"def {name}():"]
    if doc:
        lines.append(f'    """{doc}"""')
    lines += ["    toks = ctx.question_tokens()", "    y = ctx.primary()"]
    per = any(m.spec.per is not None for b in branches for m in b.members())
    if modes & {"window2", "window4", "qnum"} or per:
        lines.append("    nums = ctx.question_numbers()")
    lines.append("    out = {}")
    for i, b in enumerate(branches, 1):
        lines.append(f"    if {_room(b, max_outputs, i == 1)}{_cond(b)}:")
        members = list(enumerate(b.members()))
        # a vote of measurements on the primary series: one table, one guard (short source)
        table = [
            (j, m)
            for j, m in members
            if m.spec.mode == "primary" and m.spec.per is None and len(m.keys) == 1
        ]
        if len(table) > 1:
            lines.append("        for o, r, k in (")
            lines += [
                f"            ({member_prefix(i, j) + m.keys[0]!r}, {_call(m.spec, 'y')}, "
                f"{m.keys[0]!r}),"
                for j, m in table
            ]
            lines += [
                "        ):",
                "            if r is not None:",
                "                out[o] = r[k]",
            ]
            members = [(j, m) for j, m in members if (j, m) not in table]
        for j, m in members:
            lines += _branch_lines(m, member_prefix(i, j), "        ")
    lines += ["    if not out:", "        return None", "    return out"]
    return "\n".join(lines) + "\n"


def within(
    branches: Sequence[Branch],
    size: Callable[[Sequence[Branch]], int],
    limit: int,
    few_peers: int = 2,
) -> list[Branch]:
    """The branches, made to fit ``size(...) <= limit`` (the sandbox gate's bound on source).

    The last branches (those serving the fewest errors) first keep only their first ``few_peers``
    peers, all of which must then agree (a smaller vote of the same ties; a branch's
    ``lead_quorum`` still lets its own measurement and one of them answer), then lose their peers,
    then whole branches go from the end; one branch always stays.
    """
    out = list(branches)
    for keep in (few_peers, 0):
        for i in reversed(range(len(out))):
            if size(out) <= limit:
                return out
            if len(out[i].peers) > keep:
                out[i] = replace(out[i], peers=out[i].peers[:keep], quorum=1.0, weights=())
    while len(out) > 1 and size(out) > limit:
        out.pop()
    return out


def composite_card(
    dossier: Dossier, branches: Sequence[Branch], report: dict[str, Any]
) -> ContractCard:
    """The contract card of a composite tool serving ``branches``."""
    tasks = tuple(sorted({e.question.task for e in dossier.support}))
    sig: list[str] = []
    for m in (m for b in branches for m in b.members()):
        for s in MODE_SIGNATURE[m.spec.mode]:
            if s not in sig:
                sig.append(s)
    kinds = tuple(Matcher(require=b.require, forbid=b.forbid) for b in branches)
    scope = Scope(
        tasks=tasks,
        evidence=tuple(sorted({m.spec.primitive for b in branches for m in b.members()})),
        arity="any",
        options_kind="any",
        kinds=kinds,
    )
    measurement = composite_measurement(branches)
    rule = branch_rule(branches)
    contract = Contract(
        measurement=measurement,
        signature=tuple(sig),
        success_criterion=(
            f"each of {len(branches)} question kinds is read by its own measurement and rule "
            "(cross-validated on its train rows) and repairs held-out bucket errors"
        ),
    )
    return new_tool_card(
        dossier,
        root_cause=(
            f"the bucket mixes {len(report)} question kinds; the agent answers every one from a "
            "global summary"
        ),
        focus="one branch per question kind: " + measurement,
        contract=contract,
        scope=scope,
        plan={
            "composite": True,
            "rule_kind": "branches",
            "branches": [b.to_dict() for b in branches],
            "rule": rule.to_dict(),
            "kinds": report,
        },
    )
