"""Composite tools: one tool per work group that dispatches on the question's kind.

A real benchmark's bucket mixes many question kinds, and one measurement with one reading rule
serves at best one of them. A composite tool holds a *branch* per kind (or per group of kinds that
read the same measurement): a dispatch condition on the question's words (``ctx.question_tokens()``,
the kind's anchor words present and its neighbours' words absent), the measurement(s) it computes,
and its reading rule. Output keys are prefixed with the branch (``b1_``, ``b2_``...), so the one
:class:`~tsevo.library.tool.ReadingRule` of kind ``branches`` in the tool's guidance reads each
branch with its own rule. The branch list is the tool's measurement signature: it is what the
contract's ``measurement`` names, so merging, pruning and chain refinement treat it as one.

:func:`composite_source` writes real source: every branch guards its own computation (a primitive
that abstains leaves that branch out instead of voiding the tool), so overlapping branches can both
answer and the reviewer takes the first whose rule names an option.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tsevo.library.tool import ReadingRule

from .measure import Spec, number_is_float

__all__ = ["Branch", "branch_rule", "composite_measurement", "composite_source"]

_WINDOW = {"window2": ("a", "b"), "window4": ("a", "b", "c", "d")}


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
    """

    kinds: tuple[str, ...]
    require: tuple[str, ...]
    forbid: tuple[str, ...]
    spec: Spec
    keys: tuple[str, ...]
    rule: ReadingRule
    stats: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The measurement it reads, e.g. ``trend.slope_sigma[window2]``."""
        if self.rule.kind == "extremum":
            return self.spec.describe(self.rule.prefix[:-1])
        return " + ".join(self.spec.describe(k) for k in self.keys)

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
        )


def composite_measurement(branches: Sequence[Branch]) -> str:
    """The contract measurement of a composite tool: its branch list, in order."""
    return "composite(" + "; ".join(b.describe() for b in branches) + ")"


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


def branch_rule(branches: Sequence[Branch]) -> ReadingRule:
    """The tool's reading rule: each branch's rule on its prefixed keys (one branch: that rule)."""
    subs = tuple(_prefixed(b.rule, f"b{i}_") for i, b in enumerate(branches, 1))
    conf = max((r.confidence for r in subs), default=0.5)
    return ReadingRule("branches", branches=subs, confidence=conf)


def _cond(b: Branch) -> str:
    parts = [f"{w!r} in toks" for w in b.require] + [f"{w!r} not in toks" for w in b.forbid]
    return " and ".join(parts) or "True"


def _call(spec: Spec, args: str) -> str:
    kw = ", ".join(
        f"{k}={v!r}" for k, v in spec.params if not (isinstance(v, str) and v[:1] == "#")
    )
    return f"P.{spec.primitive}({args}{', ' + kw if kw else ''})"


def _branch_lines(b: Branch, p: str, pad: str) -> list[str]:
    """Statements computing one branch into ``out`` (nested guards, never an early return)."""
    s, keys = b.spec, b.keys
    lines: list[str] = []
    r = f"{p}r"

    def put(src: str, ind: str) -> list[str]:
        return [f"{ind}out[{p + k!r}] = {src}[{k!r}]" for k in keys]

    if s.mode == "primary":
        lines += [f"{pad}{r} = {_call(s, 'y')}", f"{pad}if {r} is not None:"]
        lines += put(r, pad + "    ")
    elif s.mode in _WINDOW:
        names = _WINDOW[s.mode]
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
    elif s.mode in ("dual_diff", "pair"):
        lines += [f"{pad}if ctx.n_primary() >= 2:", f"{pad}    y2 = ctx.primary(1)"]
        if s.mode == "pair":
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
    elif s.mode in ("cand", "cand_diff"):
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


def composite_source(branches: Sequence[Branch], name: str = "composite", doc: str = "") -> str:
    """Real source of a composite tool (one zero-argument function) for the given branches."""
    if not branches:
        raise ValueError("a composite tool needs at least one branch")
    modes = {b.spec.mode for b in branches}
    lines = [f"def {name}():"]
    if doc:
        lines.append(f'    """{doc}"""')
    lines += ["    toks = ctx.question_tokens()", "    y = ctx.primary()"]
    if modes & {"window2", "window4", "qnum"}:
        lines.append("    nums = ctx.question_numbers()")
    lines.append("    out = {}")
    for i, b in enumerate(branches, 1):
        lines.append(f"    if {_cond(b)}:")
        lines += _branch_lines(b, f"b{i}_", "        ")
    lines += ["    if not out:", "        return None", "    return out"]
    return "\n".join(lines) + "\n"
