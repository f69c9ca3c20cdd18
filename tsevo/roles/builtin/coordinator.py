"""The builtin global planner: merge cards asking for the same measurement, narrow overlapping scopes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from tsevo.library.tool import merge_scopes, question_tokens

from ..protocols import ContractCard, WorkGroup

__all__ = ["MergeCoordinator"]


class MergeCoordinator:
    """Group cards by (measurement, rule kind, arity, option shape); narrow scopes that overlap.

    Narrowing: when a group's matcher also accepts another group's support questions in a shared
    task, the other group's most distinctive word (present in all its support questions and in none
    of this group's) is added to this group's forbidden words.
    """

    name = "builtin-merge-coordinator"

    def coordinate(
        self, cards: Sequence[ContractCard], support_texts: Mapping[str, Sequence[str]]
    ) -> list[WorkGroup]:
        """Return work groups covering every card exactly once."""
        keyed: dict[tuple[object, ...], list[ContractCard]] = {}
        for c in cards:
            # a merged scope is the members' union; a matcher cannot express the union of different
            # word constraints, so cards whose require/forbid words differ are not merged
            key = (
                c.contract.measurement,
                str(c.plan.get("rule_kind", "")),
                c.scope.arity,
                c.scope.options_kind,
                tuple(c.scope.matcher.require),
                tuple(c.scope.matcher.forbid),
            )
            keyed.setdefault(key, []).append(c)
        groups: list[WorkGroup] = []
        for i, members in enumerate(keyed.values(), 1):
            scope = (
                merge_scopes([m.scope for m in members]) if len(members) > 1 else members[0].scope
            )
            groups.append(WorkGroup(f"g{i}", tuple(members), members[0].contract, scope))
        return self._narrow(groups, support_texts)

    def _narrow(
        self, groups: list[WorkGroup], support_texts: Mapping[str, Sequence[str]]
    ) -> list[WorkGroup]:
        toks = {
            g.id: [question_tokens(t) for b in g.bucket_ids for t in support_texts.get(b, ())]
            for g in groups
        }
        out = []
        for g in groups:
            forbid = set(g.scope.matcher.forbid)
            mine = toks[g.id]
            for h in groups:
                if h.id == g.id or not (set(g.scope.tasks) & set(h.scope.tasks)) or not toks[h.id]:
                    continue
                theirs = toks[h.id]
                if not any(g.scope.matcher.matches(t) for t in theirs):
                    continue
                shared = set.intersection(*(set(t) for t in theirs))
                distinctive = sorted(
                    w for w in shared if not any(w in t for t in mine) and len(w) > 2
                )
                if distinctive:
                    forbid.add(distinctive[0])
            if forbid != set(g.scope.matcher.forbid):
                m = replace(g.scope.matcher, forbid=tuple(sorted(forbid)))
                g = replace(g, scope=replace(g.scope, matcher=m))
            out.append(g)
        return out
