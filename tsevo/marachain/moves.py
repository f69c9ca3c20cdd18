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
group's *support* rows only (:func:`fit_on_support`); the batch ``B`` only decides the order of
families, through the per-question history (:func:`categories`, :func:`family_order`).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tsevo.library.library import scope_matches, slug
from tsevo.library.primitives import CATALOG
from tsevo.library.tool import Guidance, Matcher, ReadingRule, Scope, Tool, question_tokens
from tsevo.roles.builtin.composite import (
    Branch,
    branch_rule,
    composite_measurement,
    composite_source,
)
from tsevo.roles.builtin.measure import MODES, Spec, SpecCache, spec_source
from tsevo.roles.builtin.rules import Row, cross_validate, fit_rule, train_accuracy, tune_margin
from tsevo.roles.builtin.specs import words_ok

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
    "param_variants",
    "parse_measurement",
    "primitive_variants",
    "revert_genome",
    "row_facts",
    "scope_variants",
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
_SKIP_KEYS = frozenset(
    {"n", "n_bins", "h", "chronos", "df", "used_lag", "used_lags", "period_used"}
)
_SPEC_FAMILIES = ("window", "normalization", "primitive")


@dataclass(frozen=True)
class Genome:
    """The template fields a builtin draft was written from.

    Attributes:
        branches: The measurements (one for a single-measurement tool), each with its reading rule
            and, for a composite tool, the words that dispatch to it.
        composite: Whether the source is a composite tool's (one branch per question kind).
        scope: The artifact's scope.
    """

    branches: tuple[Branch, ...]
    composite: bool
    scope: Scope

    @property
    def measurement(self) -> str:
        """The contract measurement this genome computes."""
        if self.composite:
            return composite_measurement(self.branches)
        b = self.branches[0]
        return b.spec.describe(b.keys[0])

    @property
    def rule(self) -> ReadingRule:
        """The tool's reading rule."""
        return branch_rule(self.branches) if self.composite else self.branches[0].rule


def _single(spec: Spec, key: str, rule: ReadingRule) -> Branch:
    return Branch((), (), (), spec, (key,), rule)


def genome_draft(parent: Tool, g: Genome) -> Tool:
    """``parent`` rewritten from genome ``g``: same kind, signature and name, new source and rule."""
    measurement = g.measurement
    if g.composite:
        source = composite_source(
            g.branches, name=parent.name, doc=f"Evidence per question kind: {measurement}."
        )
        scope = replace(
            g.scope, kinds=tuple(Matcher(require=b.require, forbid=b.forbid) for b in g.branches)
        )
        outputs: tuple[str, ...] = ()
        text = "Computes one measurement per question kind (branch); how to read each: "
        text += g.rule.describe()
    else:
        b = g.branches[0]
        source = spec_source(
            [(b.spec, list(b.keys))], name=parent.name, doc=f"Evidence: {measurement}."
        )
        scope = g.scope
        outputs = tuple(b.keys) if b.rule.kind != "extremum" else ()
        text = f"Computes {measurement}. How to read it: {g.rule.describe()}."
    return replace(
        parent,
        source=source,
        description=f"measures {measurement}"[:400],
        scope=scope,
        contract=replace(parent.contract, measurement=measurement),
        guidance=Guidance(text, g.rule),
        outputs=outputs,
    )


def genome_of(
    draft: Tool, plan_rows: Sequence[Mapping[str, Any]], branches: Sequence[Branch]
) -> Genome | None:
    """The genome a builtin synthesizer wrote ``draft`` from, or ``None`` when it cannot be told.

    ``plan_rows`` are the group's ranked measurements (``card.plan["ranked"]``), ``branches`` its
    composite branches; the genome is accepted only when it writes ``draft``'s exact source.
    """
    if draft.kind != "tool" or not draft.source or draft.contract.calibration is not None:
        return None
    m = draft.contract.measurement
    found: Genome | None = None
    if m.startswith("composite(") and branches:
        keep = _composite_subset(m, branches)
        if keep is not None:
            rule = draft.guidance.rule if draft.guidance is not None else None
            if rule is not None and rule.kind == "branches" and len(rule.branches) == len(keep):
                keep = [
                    replace(b, rule=_unprefixed(r, f"b{i}_"))
                    for i, (b, r) in enumerate(zip(keep, rule.branches, strict=True), 1)
                ]
            found = Genome(tuple(keep), True, replace(draft.scope, kinds=()))
    elif draft.guidance is not None and draft.guidance.rule is not None:
        parsed = next(
            (
                (Spec.from_dict(row["spec"]), str(row["key"]))
                for row in plan_rows
                if row.get("measurement") == m
            ),
            None,
        )
        parsed = parsed or parse_measurement(m)  # an attempt of an earlier plan (a replan)
        if parsed is not None:
            found = Genome((_single(*parsed, draft.guidance.rule),), False, draft.scope)
    if found is None:
        return None
    try:
        again = genome_draft(draft, found)
    except (ValueError, KeyError):
        return None
    return found if again.source == draft.source and again.scope == draft.scope else None


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_measurement(m: str) -> tuple[Spec, str] | None:
    """The spec and output key a single measurement's name describes (inverse of ``describe``).

    ``forecast.delta_noise[qnum; h=#0,level_window=#1]`` gives ``Spec("forecast", "qnum",
    (("h", "#0"), ("level_window", "#1")))`` and ``delta_noise``; ``None`` when it does not parse
    or names no catalog primitive. :func:`genome_of` accepts the result only when it writes the
    draft's exact source.
    """
    head, _, rest = m.partition("[")
    prim, dot, key = head.partition(".")
    if not dot or prim not in CATALOG or not key or (rest and not rest.endswith("]")):
        return None
    mode, params = "primary", ""
    if rest:
        parts = rest[:-1].split("; ")
        if parts[0] in MODES and "=" not in parts[0]:
            mode = parts.pop(0)
        if len(parts) > 1:
            return None
        params = parts[0] if parts else ""
    kv: list[tuple[str, Any]] = []
    for item in filter(None, params.split(",")):
        k, eq, v = item.partition("=")
        if not eq:
            return None
        kv.append((k, _value(v)))
    return Spec(prim, mode, tuple(sorted(kv))), key


def _composite_subset(measurement: str, branches: Sequence[Branch]) -> list[Branch] | None:
    """The branches (in order) whose composite measurement is ``measurement``."""
    bars = sorted({float(b.stats.get("cv_acc", 0.0)) for b in branches} | {0.0})
    for bar in bars:
        keep = [b for b in branches if float(b.stats.get("cv_acc", 0.0)) >= bar]
        if keep and composite_measurement(keep) == measurement:
            return keep
    return None


def with_rule(g: Genome, rule: ReadingRule | None) -> Genome:
    """``g`` with the tool's reading rule ``rule`` (a composite's ``branches`` rule split back)."""
    if rule is None:
        return g
    if not g.composite:
        return replace(g, branches=(replace(g.branches[0], rule=rule),))
    if rule.kind != "branches" or len(rule.branches) != len(g.branches):
        return g
    return replace(
        g,
        branches=tuple(
            replace(b, rule=_unprefixed(r, f"b{i}_"))
            for i, (b, r) in enumerate(zip(g.branches, rule.branches, strict=True), 1)
        ),
    )


def _unprefixed(rule: ReadingRule, p: str) -> ReadingRule:
    if rule.kind == "extremum" and rule.prefix.startswith(p):
        return replace(rule, prefix=rule.prefix[len(p) :])
    if rule.kind in ("label", "nearest_number") and rule.key.startswith(p):
        return replace(rule, key=rule.key[len(p) :])
    return rule


# --------------------------------------------------------------------------- support fitting
@dataclass(frozen=True)
class Candidate:
    """A measurement fitted on support rows: its cross-validated and train accuracy."""

    spec: Spec
    key: str
    rule: ReadingRule
    cv: float
    train: float


def _support_rows(examples: Sequence[Any], g: Genome, b: Branch) -> list[Any]:
    """The labelled support rows a branch reads: in the genome's scope, with the branch's words."""
    return [
        e
        for e in examples
        if e.gold is not None
        and scope_matches(g.scope, e.question)
        and words_ok(e.question, b.require, b.forbid)
    ]


def fit_on_support(
    spec: Spec, key: str | None, kind: str, examples: Sequence[Any], cache: SpecCache
) -> list[Candidate]:
    """Fit ``kind`` rules reading ``spec`` on the support rows (``key``: that output only).

    The same arithmetic as the builtin planner (fit, grouped cross-validation, margin tuning), on
    train rows the batch never holds (the few-examples regime below twelve rows, as a question
    kind's branch often has). Returns candidates best first; none when the measurement does not
    cover at least half of the rows (and two) or is constant.
    """
    rows_e = [e for e in examples if e.gold is not None]
    if len(rows_e) < 2:
        return []
    vals = [cache.get(spec, e.question) for e in rows_e]
    present = [v for v in vals if v]
    if len(present) < max(2, len(rows_e) // 2):
        return []
    if kind == "extremum":
        keys = sorted({k.rsplit("_", 1)[0] for v in present for k in v if "_" in k})
    else:
        keys = sorted({k for v in present for k in v})
    if key is not None:
        keys = [k for k in keys if k == key]
    rows = [
        Row(
            e.question.id,
            v,
            e.question.options,
            e.question.candidates,
            int(e.gold),
            getattr(e.record, "final_answer", None),
            e.question.question,
        )
        for e, v in zip(rows_e, vals, strict=True)
    ]
    few = len(rows) < 12
    out = []
    for k in keys:
        if k in _SKIP_KEYS:
            continue
        if kind != "extremum":
            col = [v[k] for v in present if k in v]
            if len(col) < 2 or float(np.ptp(col)) == 0.0:
                continue
        try:
            rule = fit_rule(kind, rows, k, few=few)
            if rule is None:
                continue
            acc = train_accuracy(rule, rows)
            cv = cross_validate(kind, rows, k, few=few)
            rule = tune_margin(replace(rule, confidence=round(min(0.99, max(0.05, cv)), 4)), rows)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            continue
        out.append(Candidate(spec, k, rule, float(cv), float(acc)))
    out.sort(key=lambda c: (-c.cv, -c.train, c.spec.describe(c.key)))
    return out


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

    Branches are tried in ``order`` (the ones the batch blames first); within a branch, by
    cross-validated accuracy on that branch's support rows, then by name. A value whose rule
    recovers no support row out of fold is never proposed.
    """
    for i in order:
        b = g.branches[i]
        if len(b.keys) != 1 or b.rule.kind not in ("label", "nearest_number", "extremum"):
            continue
        support = _support_rows(examples, g, b)
        if family == "primitive":
            specs = primitive_variants(b.spec)
        else:
            specs = param_variants(b.spec, family)
        cands: list[Candidate] = []
        for s in specs:
            key = b.keys[0] if family != "primitive" else None
            for c in fit_on_support(s, key, b.rule.kind, support, cache):
                if family == "primitive" and s == b.spec and c.key == b.keys[0]:
                    continue
                if c.cv > 0:  # a value no support row supports is no value
                    cands.append(c)
        cands.sort(key=lambda c: (-c.cv, -c.train, c.spec.describe(c.key)))
        for c in cands:
            nb = replace(b, spec=c.spec, keys=(c.key,), rule=c.rule)
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
            b.spec, b.keys[0], b.rule.kind, _support_rows(examples, g, b), cache
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


#: Cross-validated accuracy on support rows from which a measurement's evidence counts as right.
EVIDENCE_CV = 2 / 3


def evidence_right(
    g: Genome | None, examples: Sequence[Any], cache: SpecCache, order: Sequence[int]
) -> bool:
    """Whether the blamed branch's measurement recovers gold on its support rows (design §3.2 I).

    The precondition of ``I`` ("a rule on the stored evidence picks gold") checked where the
    chain may look: a rule refit on the support rows cross-validates at :data:`EVIDENCE_CV` or
    better. Without a genome the evidence is taken as right (the design's default reading).
    """
    if g is None or not order:
        return True
    b = g.branches[order[0]]
    if len(b.keys) != 1 or b.rule.kind not in ("label", "nearest_number", "extremum"):
        return True
    fits = fit_on_support(b.spec, b.keys[0], b.rule.kind, _support_rows(examples, g, b), cache)
    return bool(fits) and fits[0].cv >= EVIDENCE_CV - 1e-9


def support_cv(g: Genome, examples: Sequence[Any], cache: SpecCache) -> float:
    """How well a genome's measurements recover gold on support rows (values for a step's choice).

    The mean over branches of the best cross-validated accuracy of a rule refit on each branch's
    support rows (0 for a branch that cannot be read).
    """
    vals = []
    for b in g.branches:
        if len(b.keys) != 1 or b.rule.kind not in ("label", "nearest_number", "extremum"):
            vals.append(0.0)
            continue
        fits = fit_on_support(b.spec, b.keys[0], b.rule.kind, _support_rows(examples, g, b), cache)
        vals.append(fits[0].cv if fits else 0.0)
    return float(np.mean(vals)) if vals else 0.0


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


def is_spec_family(family: str) -> bool:
    """Whether a family edits a branch's measurement (window, normalization, primitive)."""
    return family in _SPEC_FAMILIES


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


def tool_name(measurement: str) -> str:
    """A function name for a measurement (as the synthesizer names its tools)."""
    return "measure_" + slug(measurement, 40)
