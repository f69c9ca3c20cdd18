"""Measurement specs for the builtin planner: what can be measured on rows of a given shape.

Every catalog primitive with its default parameters and each alternative of its declared grid, fed
from the primary series, from windows written in the question, from two primaries, from a mentioned
covariate, or per candidate series; numbers stated in the question bind to parameters a primitive
declares. Also the scope helpers the planner learns from a bucket (the question-word matcher, the
kind of a question: its task and option shape).
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tsevo.data import QuestionView
from tsevo.library.context import extract_numbers
from tsevo.library.primitives import CATALOG, PrimitiveSpec
from tsevo.library.tool import Contract, Matcher, Scope, options_kind, question_tokens

from ..protocols import ContractCard, Dossier
from .measure import LOCATION_KEY, PER_MODES, Spec, spec_values

__all__ = [
    "compute_pairs",
    "enumerate_specs",
    "fit_matcher",
    "kind_keys",
    "modes_for",
    "new_tool_card",
    "rows_kind",
    "with_words",
    "words_ok",
]


def _param_names(fn: Any) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


_NUMBER_PARAMS = ("h", "level_window", "lag", "max_lag", "period", "m", "w", "window", "n_windows")


MODE_SIGNATURE: dict[str, tuple[str, ...]] = {
    "primary": ("primary",),
    "window2": ("primary", "question_numbers"),
    "window4": ("primary", "question_numbers"),
    "qnum": ("primary", "question_numbers"),
    "dual_diff": ("primary", "primary"),
    "resid": ("primary", "primary"),
    "pair": ("primary", "primary"),
    "covariate": ("primary", "covariate"),
    "cand": ("reference", "candidates"),
    "cand_diff": ("reference", "candidates"),
}
"""What a tool of each feeding mode reads (a contract's input signature)."""


def _number_bindings(ps: PrimitiveSpec) -> list[tuple[tuple[str, Any], ...]]:
    """Parameter bindings to the question's numbers.

    Each bindable parameter (a count-like keyword parameter, or one the primitive declares in
    ``numbers``) binds alone to the first or the second number; the first two together bind to the
    first two numbers; and a primitive declaring three or more ``numbers`` also binds them all, in
    order, to the question's numbers in order (e.g. a sampling rate followed by band edges).
    """
    try:
        params = [
            p for p in inspect.signature(ps.fn).parameters.values() if p.kind == p.KEYWORD_ONLY
        ]
    except (TypeError, ValueError):
        return []
    declared = [n for n in ps.numbers if any(p.name == n for p in params)]
    names = declared + [
        p.name for p in params if p.name in _NUMBER_PARAMS and p.name not in declared
    ]
    out: list[tuple[tuple[str, Any], ...]] = []
    for n in names:
        out += [((n, "#0"),), ((n, "#1"),)]
    if len(names) >= 2:
        out.append(tuple(sorted(((names[0], "#0"), (names[1], "#1")))))
    if len(declared) >= 3:
        out.append(tuple(sorted((n, f"#{i}") for i, n in enumerate(declared))))
    return out


def enumerate_specs(modes: Sequence[str]) -> list[Spec]:
    """All specs for the given feeding modes (defaults plus one-at-a-time grid alternatives).

    ``per`` among ``modes`` (:func:`modes_for`) adds each ``primary`` and ``pair`` spec read per
    the question's first number as well (:attr:`~.measure.Spec.per`).
    """
    out: list[Spec] = []
    for name in sorted(CATALOG):
        ps = CATALOG[name]
        params = _param_names(ps.fn)
        variants: list[tuple[tuple[str, Any], ...]] = [()]
        for pname, values in sorted(ps.grid.items()):
            if pname in ("a", "b", "c", "d"):
                continue
            for v in values:
                if v is None:
                    continue
                variants.append(((pname, v),))
        qvariants = _number_bindings(ps)
        for mode in modes:
            if mode == "per":
                continue  # not a feeding mode: a copy of the primary and pair specs (below)
            if mode == "qnum":
                if ps.arity == "single":
                    out.extend(Spec(name, "qnum", v) for v in qvariants)
                continue
            if mode in ("primary", "dual_diff", "resid", "cand_diff") and ps.arity != "single":
                continue
            if mode in ("pair", "covariate", "cand") and ps.arity == "single":
                continue
            if mode == "window2" and not ({"a", "b"} <= params and ps.arity == "single"):
                continue
            if mode == "window4" and not ({"a", "b", "c", "d"} <= params and ps.arity == "single"):
                continue
            if mode == "resid" and not any(LOCATION_KEY.search(k) for k in ps.outputs):
                continue  # a residual is read as a location only (``spec_values``)
            vs = variants if mode in ("primary", "pair", "cand", "covariate") else [()]
            out.extend(Spec(name, mode, v) for v in vs)
            if "per" in modes and mode in PER_MODES:
                out.extend(Spec(name, mode, v, per=0) for v in vs)
                if mode == "primary":
                    out.extend(Spec(name, mode, v, per=0, per_len=True) for v in vs)
    return out


def fit_matcher(questions: Sequence[QuestionView], min_df: float = 0.6) -> Matcher:
    """A matcher from the words a bucket's questions share (numbers masked).

    Terms are tokens present in at least ``min_df`` of the questions, weighted by that fraction; the
    threshold is the lowest member score, so every member matches.
    """
    if not questions:
        return Matcher()
    toks = [question_tokens(q.question) for q in questions]
    df = Counter(t for ts in toks for t in ts)
    n = len(toks)
    terms = {t: round(c / n, 4) for t, c in sorted(df.items()) if c / n >= min_df and len(t) > 2}
    if not terms:
        return Matcher()
    m = Matcher(terms, 0.0)
    thr = min(m.score(ts) for ts in toks)
    return Matcher(terms, round(max(0.0, min(thr, 0.95) - 1e-6), 6))


def kind_keys(questions: Sequence[QuestionView]) -> dict[str, tuple[str, str]]:
    """Question kind per id: task plus option shape.

    Label questions of one task whose option texts overlap (transitively) share a kind, so each kind
    has one label vocabulary.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    out: dict[str, tuple[str, str]] = {}
    label_qs = []
    for q in questions:
        kind = options_kind(q.options, q.candidates)
        if kind == "label":
            opts = [f"{q.task}\x00{' '.join(o.lower().split())}" for o in q.options]
            for o in opts[1:]:
                parent[find(o)] = find(opts[0])
            label_qs.append((q, opts[0]))
        else:
            out[q.id] = (q.task, f"{kind}/{len(q.primary)}p/{'cov' if q.covariates else ''}")
    for q, o in label_qs:
        out[q.id] = (q.task, "label/" + find(o).split("\x00", 1)[1])
    return out


def compute_pairs(
    pairs: Sequence[tuple[Spec, QuestionView]],
) -> list[tuple[tuple[Spec, str], dict[str, float] | None]]:
    """Measure (spec, question) pairs: ``((spec, fingerprint), values)`` (run in worker processes)."""
    return [((spec, q.fingerprint), spec_values(spec, q)) for spec, q in pairs]


def words_ok(q: QuestionView, require: Sequence[str], forbid: Sequence[str]) -> bool:
    """True when the question has every ``require`` word and no ``forbid`` word."""
    toks = question_tokens(q.question)
    return all(w in toks for w in require) and not any(w in toks for w in forbid)


def with_words(m: Matcher, require: Sequence[str], forbid: Sequence[str]) -> Matcher:
    """The matcher with the given required and forbidden words added."""
    if not require and not forbid:
        return m
    terms = {t: w for t, w in m.terms.items() if t not in forbid}
    return Matcher(
        terms,
        m.threshold if terms else 0.0,
        tuple(sorted({*m.require, *require})),
        tuple(sorted({*m.forbid, *forbid})),
    )


def rows_kind(qs: Sequence[QuestionView]) -> tuple[str, str]:
    """The rows' prevailing option shape and input arity."""
    kinds = Counter(options_kind(q.options, q.candidates) for q in qs)
    okind = kinds.most_common(1)[0][0]
    if all(q.candidates for q in qs):
        arity = "candidates"
    elif all(len(q.primary) == 2 for q in qs):
        arity = "dual"
    elif all(q.covariates for q in qs):
        arity = "covariate"
    else:
        arity = "single"
    return okind, arity


def _quantities(q: QuestionView) -> bool:
    """Options that are numbers (with or without units), none of them a series' name."""
    return options_kind(q.options, q.candidates) == "numeric" and not any(
        "series" in o.lower() for o in q.options
    )


def modes_for(arity: str, qs: Sequence[QuestionView]) -> list[str]:
    """How series feed a measurement for rows of this arity (primary, windows, pair, candidates).

    Rows whose options are quantities (numbers that name no series) and whose questions all state
    a number also get ``per``: measurements read per the question's first number, a sampling
    interval or a span ("every 20 minutes ... in hours?", "the change per 7 days").
    """
    if arity == "candidates":
        return ["cand", "cand_diff"]
    counts = [len(extract_numbers(q.question)) for q in qs]
    per = ["per"] if counts and min(counts) >= 1 and all(map(_quantities, qs)) else []
    if arity == "dual":
        return ["pair", "dual_diff", "resid", *per]
    if arity == "covariate":
        return ["covariate", "primary"]
    modes = ["primary", *per]
    if counts and min(counts) >= 1:
        modes.append("qnum")
    if counts and min(counts) >= 2:
        modes.append("window2")
    if counts and min(counts) >= 4:
        modes.append("window4")
    return modes


def new_tool_card(
    dossier: Dossier,
    *,
    root_cause: str,
    focus: str,
    contract: Contract,
    scope: Scope,
    plan: dict[str, Any],
) -> ContractCard:
    """A card asking for a new tool for the dossier's bucket.

    Its failure type follows the bucket's side: a measurement the agent lacks where no tool ran,
    evidence misread where one did.
    """
    return ContractCard(
        bucket_id=dossier.bucket_id,
        action="create",
        artifact_kind="tool",
        target_tool="",
        failure_type="missing_measurement" if dossier.side == "no_tool" else "misread_evidence",
        root_cause=root_cause,
        focus=focus,
        contract=contract,
        scope=scope,
        plan=plan,
    )
