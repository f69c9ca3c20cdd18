"""The builtin chain's move families: a deterministic, delta-guided search over template fields.

A builtin tool is generated from templates (:mod:`tsevo.roles.builtin.measure` for one measurement,
:mod:`tsevo.roles.builtin.composite` for one branch per question kind). A :class:`Genome` holds
those fields of a draft, so a chain step can edit one of them and write the source again:

* ``window``: a window-like parameter of a branch's primitive (a declared grid value, a binding to
  another number of the question, or the primitive's default);
* ``normalization``: a preprocessing parameter (``diff``, ``detrend``, ``regression``, ``model``);
* ``primitive``: another primitive of the same catalog group (the contract's family), or another
  output of the same primitive, fed the same way;
* ``scope``: the artifact's question matcher loosened or narrowed (tasks, arity and option shape,
  the contract's scope, never change);
* ``reading_rule``: the abstain band widened or narrowed, or the rule refitted;
* ``measurement``: the next measurement of the group's ranked plan (a second measurement);
* ``revert``: a field that lost a win set back to its value at the node that had it.

Every move keeps the branch's feeding mode, so the measurement signature and the artifact kind
stay the contract's (design §1.5). Values are chosen by cross-validated gold recovery on the
group's *support* rows only (:func:`~tsevo.marachain.genome.fit_on_support`); the batch ``B``
only decides the order of families, through the per-question history (:func:`categories`,
:func:`family_order`). The genome names are re-exported here.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tsevo.library.library import scope_matches
from tsevo.library.primitives import CATALOG
from tsevo.library.tool import Matcher, Scope, Tool, question_tokens
from tsevo.roles.builtin.measure import Spec, SpecCache

from .genome import (
    Candidate,
    Genome,
    evidence_right,
    fit_on_support,
    genome_draft,
    genome_of,
    parse_measurement,
    support_cv,
    support_rows,
    with_rule,
)
from .history import ScoreHistory
from .score import NodeScore

__all__ = [
    "CATEGORIES",
    "CATEGORY_FAMILIES",
    "FAMILIES",
    "NORMALIZATION_PARAMS",
    "WINDOW_PARAMS",
    "Candidate",
    "Genome",
    "categories",
    "evidence_right",
    "exhausted",
    "family_order",
    "fit_on_support",
    "genome_draft",
    "genome_of",
    "held_in_contract",
    "param_variants",
    "parse_measurement",
    "primitive_variants",
    "revert_genome",
    "row_facts",
    "scope_variants",
    "spec_moves",
    "support_cv",
    "with_rule",
]

#: Every move family, in the default order of a step with no signal.
FAMILIES: tuple[str, ...] = (
    "revert",
    "window",
    "normalization",
    "primitive",
    "measurement",
    "scope",
    "reading_rule",
)
#: Diagnosis categories the builtin chain sees, in tie order (design §3.3: H > A > I > B).
CATEGORIES: tuple[str, ...] = ("H", "A", "I", "B")
#: What each category asks for first.
CATEGORY_FAMILIES: dict[str, tuple[str, ...]] = {
    "H": ("revert",),
    "A": ("scope", "reading_rule"),
    "I": ("reading_rule",),
    "B": ("window", "normalization", "primitive", "measurement", "reading_rule", "scope"),
}
#: Parameters that set a window, a lag, a horizon or a count of a primitive.
WINDOW_PARAMS = frozenset(
    {
        "window",
        "w",
        "level_window",
        "m",
        "lag",
        "lags",
        "max_lag",
        "h",
        "n_windows",
        "period",
        "max_period",
        "delay",
        "max_window",
        "max_shift",
        "min_len",
        "min_size",
        "k",
        "kmax",
        "split",
        "q",
        "order",
    }
)
#: Parameters that set how a series is prepared before it is measured.
NORMALIZATION_PARAMS = frozenset({"diff", "detrend", "regression", "model"})
_SPEC_FAMILIES = ("window", "normalization", "primitive")
_ALONE: dict[str, Any] = {"peers": (), "quorum": 1.0, "weights": (), "lead_quorum": 0.0}  # no vote


def _kw_params(primitive: str) -> dict[str, Any]:
    try:
        return {
            p.name: p.default
            for p in inspect.signature(CATALOG[primitive].fn).parameters.values()
            if p.kind == p.KEYWORD_ONLY
        }
    except (TypeError, ValueError, KeyError):
        return {}


def param_variants(spec: Spec, family: str) -> list[Spec]:
    """``spec`` with one parameter of ``family`` (``window`` or ``normalization``) changed.

    Legal values are the primitive's declared grid, its default (the parameter dropped) and, in
    ``qnum`` mode for a window parameter, a binding to the question's first or second number.
    The feeding mode never changes.
    """
    names = WINDOW_PARAMS if family == "window" else NORMALIZATION_PARAMS
    ps = CATALOG.get(spec.primitive)
    if ps is None:
        return []
    kw = _kw_params(spec.primitive)
    cur = dict(spec.params)
    out: list[Spec] = []
    for name in sorted(set(kw) & names):
        values: list[Any] = [v for v in ps.grid.get(name, ()) if v is not None]
        if spec.mode == "qnum" and family == "window":
            values += ["#0", "#1"]
        values.append(None)  # the default
        for v in values:
            new = dict(cur)
            if v is not None and not isinstance(v, str) and kw.get(name) == v:
                v = None  # the default value is the parameter dropped
            if v is None:
                if name not in new:
                    continue
                new.pop(name)
            elif new.get(name) == v or (name not in new and kw.get(name) == v):
                continue
            else:
                new[name] = v
            if spec.mode == "qnum" and not any(
                isinstance(x, str) and x.startswith("#") for x in new.values()
            ):
                continue  # a qnum spec reads at least one number of the question
            s = Spec(spec.primitive, spec.mode, tuple(sorted(new.items())))
            if s != spec and s not in out:
                out.append(s)
    return out


def primitive_variants(spec: Spec) -> list[Spec]:
    """The catalog primitives of ``spec``'s group (its own first), fed the same way."""
    ps = CATALOG.get(spec.primitive)
    if ps is None:
        return []
    out = [spec]
    for name in sorted(CATALOG):
        other = CATALOG[name]
        if name == spec.primitive or other.group != ps.group or other.arity != ps.arity:
            continue
        kw = _kw_params(name)
        params = tuple((k, v) for k, v in spec.params if k in kw)
        if spec.mode in ("window2", "window4") and not {"a", "b"} <= set(kw):
            continue
        if spec.mode == "qnum" and not any(isinstance(v, str) for _, v in params):
            continue
        out.append(Spec(name, spec.mode, params))
    return out


def spec_moves(
    g: Genome, family: str, examples: Sequence[Any], cache: SpecCache, order: Sequence[int]
) -> Iterable[tuple[Genome, str, float]]:
    """Genomes one ``family`` edit away (window, normalization, primitive), best support fit first.

    An edit may also change which of the edited spec's outputs the branch reads (the one its
    support rows recover best; a parameter edit keeps the branch's own output on ties).

    Branches are tried in ``order`` (the ones the batch blames first); within a branch, by
    cross-validated accuracy on that branch's support rows, then by name. A value whose rule
    recovers no support row out of fold is never proposed.
    """
    for i in order:
        b = g.branches[i]
        if len(b.keys) != 1 or b.rule.kind not in ("label", "nearest_number", "extremum"):
            continue
        support = support_rows(examples, g, b)
        if family == "primitive":
            specs = primitive_variants(b.spec)
        else:
            specs = param_variants(b.spec, family)
        cands: list[Candidate] = []
        for s in specs:
            # every output of the edited spec (widening a search can make the peak's location,
            # not its height, the evidence); the branch's own reading is no edit
            for c in fit_on_support(s, None, b.rule.kind, support, cache):
                if s == b.spec and c.key == b.keys[0]:
                    continue
                if c.cv > 0:  # a value no support row supports is no value
                    cands.append(c)
        # a parameter edit keeps the branch's own output among equally supported ones
        own = family != "primitive"
        cands.sort(
            key=lambda c: (-c.cv, -c.train, own and c.key != b.keys[0], c.spec.describe(c.key))
        )
        for c in cands:
            nb = replace(b, spec=c.spec, keys=(c.key,), rule=c.rule, **_ALONE)
            branches = (*g.branches[:i], nb, *g.branches[i + 1 :])
            what = f"b{i + 1}: " if g.composite else ""
            yield (
                replace(g, branches=branches),
                f"{what}{c.spec.describe(c.key)} (support cv {c.cv:.2f})",
                c.cv,
            )


def refit_moves(
    g: Genome, examples: Sequence[Any], cache: SpecCache, order: Sequence[int]
) -> Iterable[tuple[Genome, str]]:
    """Each branch's reading rule refitted on its support rows (the measurement unchanged)."""
    for i in order:
        b = g.branches[i]
        if len(b.keys) != 1 or b.rule.kind not in ("label", "nearest_number", "extremum"):
            continue
        for c in fit_on_support(
            b.spec, b.keys[0], b.rule.kind, support_rows(examples, g, b), cache
        ):
            if c.rule != b.rule:
                nb = replace(b, rule=c.rule)
                yield (
                    replace(g, branches=(*g.branches[:i], nb, *g.branches[i + 1 :])),
                    f"refit the reading rule of {b.describe()} on support rows",
                )
            break


def scope_variants(scope: Scope, support: Sequence[Any], wider: bool) -> list[tuple[Scope, str]]:
    """The matcher loosened (``wider``) or narrowed, within the contract's scope.

    Tasks, arity, option shape and anti-scope never change. Loosening halves the threshold, then
    drops it and the required words; narrowing raises the threshold to the lower quartile, then
    the median, of the support rows' matcher scores (values from support rows only).
    """
    m = scope.matcher
    out: list[tuple[Matcher, str]] = []
    if wider:
        if m.threshold > 1e-6:
            out.append(
                (replace(m, threshold=round(m.threshold / 2, 6)), "halve the matcher threshold")
            )
            out.append((replace(m, threshold=0.0), "drop the matcher threshold"))
        if m.require:
            out.append((replace(m, require=()), "drop the matcher's required words"))
    else:
        scores = sorted(m.score(question_tokens(e.question.question)) for e in support)
        if m.terms and scores:
            for q, what in ((0.25, "lower quartile"), (0.5, "median")):
                t = round(float(np.quantile(scores, q)) - 1e-6, 6)
                if t > m.threshold + 1e-6:
                    out.append(
                        (
                            replace(m, threshold=t),
                            f"raise the matcher threshold to the support {what}",
                        )
                    )
    seen: set[str] = set()
    res = []
    for new, what in out:
        k = repr(new.to_dict())
        if k not in seen and new != m:
            seen.add(k)
            res.append((replace(scope, matcher=new), what))
    return res


# --------------------------------------------------------------------------- the signal
def row_facts(draft: Tool, questions: Sequence[Any], recs: Mapping[str, Any]) -> dict[str, str]:
    """What the draft did on each question (design §2.1's facts).

    O out of scope, S not shortlisted, A abstained, E error, K kept the incoming answer, R
    replaced it.
    """
    out = {}
    for q in questions:
        r = recs.get(q.id)
        fact = "O" if not scope_matches(draft.scope, q) else "S"
        if r is not None:
            for s in r.steps:
                if draft.id not in s.shortlisted:
                    continue
                runs = [x for x in s.runs if x.tool_id == draft.id]
                if any(x.status == "error" for x in runs):
                    fact = "E"
                elif draft.id in s.responsible and s.decision == "replace":
                    fact = "R"
                elif (
                    not runs
                    or all(x.status == "abstain" for x in runs)
                    or s.decision
                    in (
                        "no_decision",
                        "no_tool",
                    )
                ):
                    fact = "A"
                else:
                    fact = "K"
        out[q.id] = fact
    return out


def held_in_contract(draft: Tool, held_out: Sequence[Any]) -> int | None:
    """How many held-out errors lie inside a composite tool's contract (``None``: not a composite).

    A composite (its scope lists one kind matcher per branch) is planned for the question kinds
    among its bucket's support errors; a held-out error of another kind is outside its contract,
    and that it goes unrepaired says nothing of the branches. Every other artifact answers for
    all of its held-out errors.
    """
    if draft.kind != "tool" or not draft.scope.kinds:
        return None
    return sum(draft.scope.matches_kind(question_tokens(q.question)) for q in held_out)


def categories(
    score: NodeScore,
    lost_wins: Sequence[str],
    unreachable: Iterable[str] = (),
    evidence_right: bool = True,
) -> dict[str, int]:
    """Rows per diagnosis category on the batch (design §3.2's table, as the builtin chain sees it).

    ``H`` lost wins; ``A`` held-out errors the node never answered (facts O, S, A); ``I`` ones it
    ran on and kept the wrong answer (K); ``B`` wrong replacements and harmed probe rows.
    ``unreachable`` held-out errors lie outside the contract's scope (another task, input or
    option shape, a question kind without a branch): no move within the contract reaches them,
    so they count apart (``out_of_contract``) and lead nothing. A kept wrong answer is ``I``
    (the mechanism is too weak) only when the evidence is right (``evidence_right``: a rule refit
    on the measurement's support rows recovers gold, :func:`evidence_right`); otherwise the
    measurement is wrong and the row counts as ``B``.
    """
    out = dict.fromkeys(CATEGORIES, 0)
    out["H"] = len(lost_wins)
    away = set(unreachable)
    out["out_of_contract"] = 0
    for q, p, raw, cred, f in zip(
        score.qids, score.parts, score.raw, score.credited, score.facts, strict=True
    ):
        if p == "H" and not cred and q in away:
            out["out_of_contract"] += 1
        elif p == "H" and not cred:
            if f in ("O", "S", "A"):
                out["A"] += 1
            elif f == "K":
                out["I" if evidence_right else "B"] += 1
            elif f in ("R", "E") and not raw:
                out["B"] += 1
        elif p == "P" and not raw:
            out["B"] += 1
    return out


def exhausted(record: Sequence[tuple[str, int]]) -> set[str]:
    """Families changed at least twice on the lineage without credited gain (category F).

    ``record`` lists ``(family, gain)`` per change, gain = held-out rows fixed minus probe rows
    broken against the lineage parent.
    """
    n: dict[str, int] = {}
    s: dict[str, int] = {}
    for fam, gain in record:
        n[fam] = n.get(fam, 0) + 1
        s[fam] = s.get(fam, 0) + gain
    return {f for f in n if n[f] >= 2 and s[f] <= 0}


def family_order(
    cats: Mapping[str, int],
    record: Sequence[tuple[str, int]],
    harmful: bool,
    families: Sequence[str] = FAMILIES,
) -> tuple[list[str], str]:
    """The families a step tries, in order, and the category that leads.

    The category with the most rows leads (ties H > A > I > B); its families come first, then
    the other categories' by count, then the rest. Within a category, families whose earlier
    changes on the lineage gained more come first (delta-guided); exhausted families (F) are
    dropped. A harmful parent puts narrowing the scope and widening the band first among ``B``.
    """
    gains: dict[str, int] = {}
    for fam, g in record:
        gains[fam] = gains.get(fam, 0) + g
    dead = exhausted(record)
    ranked = sorted(
        (c for c in CATEGORIES if cats.get(c, 0) > 0),
        key=lambda c: (-cats[c], CATEGORIES.index(c)),
    )
    lead = ranked[0] if ranked else "B"
    out: list[str] = []
    for c in [*ranked, *(c for c in ("B",) if c not in ranked)]:
        fams = list(CATEGORY_FAMILIES[c])
        if c == "B" and harmful:
            fams = [
                "scope",
                "reading_rule",
                *(f for f in fams if f not in ("scope", "reading_rule")),
            ]
        fams.sort(key=lambda f: -gains.get(f, 0))  # stable: ties keep the category's order
        for f in fams:
            if f not in out and f in families and f not in dead:
                out.append(f)
    return out, lead


def revert_genome(
    g: Genome, history: ScoreHistory, genomes: Mapping[str, Genome | None]
) -> tuple[Genome, str, str] | None:
    """H: the field whose change lost a win, set back to its value at the node that had the win.

    Walks the lineage path back from the current node to the latest node that credited a row the
    current node lost, and reverts the change made right after it (a spec family's or the reading
    rule's: the branches; a scope change: the scope), keeping every other field. Returns the
    genome, the reverted family and the node whose change is undone, or ``None``.
    """
    lost = set(history.lost_wins())
    if not lost:
        return None
    nodes = history.nodes
    for k in range(len(nodes) - 2, -1, -1):
        if not any(q in lost for q in nodes[k].score.repairs):
            continue
        before, after = genomes.get(nodes[k].node_id), nodes[k + 1]
        if before is None or after.change is None:
            return None
        family = after.change.type
        if family == "scope":
            return replace(g, scope=before.scope), family, after.node_id
        if family in (*_SPEC_FAMILIES, "reading_rule", "revert"):
            if before.composite != g.composite or len(before.branches) != len(g.branches):
                return None
            return replace(g, branches=before.branches), family, after.node_id
        return None
    return None


def blame_order(g: Genome, score: NodeScore, outputs: Mapping[str, Mapping[str, Any]]) -> list[int]:
    """Branch indices, those that fired on wrong rows of the batch first.

    ``outputs`` maps a question id to the node's tool outputs there (keys ``b<i>_...`` for a
    composite tool).
    """
    n = len(g.branches)
    if n == 1:
        return [0]
    hits = [0] * n
    for q, p, raw, cred in zip(score.qids, score.parts, score.raw, score.credited, strict=True):
        wrong = (p == "H" and not cred) or (p == "P" and not raw)
        if not wrong:
            continue
        for k in outputs.get(q, {}):
            head = k.split("_", 1)[0]
            if head[:1] == "b" and head[1:].isdigit() and 1 <= int(head[1:]) <= n:
                hits[int(head[1:]) - 1] += 1
    return sorted(range(n), key=lambda i: (-hits[i], i))
