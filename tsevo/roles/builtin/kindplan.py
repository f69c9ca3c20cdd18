"""Planning for a bucket of many question kinds with a few training questions each: a composite card.

For every kind among the bucket's errors (recovered from wording, :mod:`.kinds`), the planner
searches a measurement and a reading rule on the train rows of that kind it sees (support errors
and background rows, right or wrong), in two passes:

0. when the options name positions or directions, the rule they fix on every catalog measurement
   (:mod:`.optsem`; nothing to fit, so a handful of rows is real evidence); a Yes / No kind's test
   verdict (a p-value of the tests its words name, read at 5%) instead competes with pass 1 and is
   kept when it reads the rows at least as well out of sample as the best learned rule (source
   ``tests``); where a learned rule wins, the kind is left to the agent (``yes_no_learned``, off by
   default: learned Yes / No rules help about two questions for each they harm);
1. the catalog groups the kind's words point at (:mod:`.concepts`), with the normal bar;
2. the whole catalog, with a stricter bar (a rule picked among hundreds on a handful of rows is
   usually spurious).

A kind is served when the best rule's cross-validated accuracy on its rows clears the bar and it
recovers at least ``min_gain`` more rows than the agent's current answers. The served kinds become
the branches of one composite tool (:mod:`.composite`), its scope the union of their kind matchers.
A branch carries as peers the measurements that tie with its own in the search (``peers``) and
answers only where enough of them agree (``quorum``), each vote weighted by how steadily the
member reads noisy copies of the kind's train rows (:mod:`.stability`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from tsevo.data import QuestionView
from tsevo.library.reading import apply_rule

from ..protocols import Dossier, Example
from .composite import Branch, Peer
from .concepts import (
    CONCEPTS,
    ConceptEntries,
    Lexicon,
    concept_entries,
    concept_stems,
    extend,
    groups_for,
)
from .kinds import KindIndex, generic_shape, median_kind_size
from .measure import SpecCache
from .optsem import option_semantics, semantic_rank, yes_no
from .stability import stability

__all__ = ["KindPlanSettings", "plan_kinds", "pooling_partners", "support_request"]


class _Ranker(Protocol):
    cache: SpecCache

    def rank(
        self,
        examples: Sequence[Example],
        exclude: Sequence[str] = (),
        groups: frozenset[str] | None = None,
        few: bool = False,
        words: frozenset[str] = frozenset(),
    ) -> tuple[str, str, list[Any]]: ...


@dataclass(frozen=True)
class KindPlanSettings:
    """The bars a kind's best rule must clear.

    Attributes:
        min_rows: Fewest train rows of a kind (its own, or pooled) to learn from. On two rows
            leave-one-out admits only readings one row fits (a sign, a test's verdict, an extremum,
            a number as is or scaled), no threshold; against three, +1.24 ± 0.47 pp at +0.19 ± 0.19
            harm on ``mixed``'s fresh 84017-85529 (``runs/bench/mixed-fresh-v44-paired.json``).
        bar: Least cross-validated accuracy of a rule from the groups the words point at.
        strict_bar: Least cross-validated accuracy of a rule found in the whole catalog.
        min_gain: Least number of rows the rule must recover beyond the agent's current answers.
        max_branches: Most branches one composite tool holds.
        max_kind_share: Composite planning is for buckets that mix many kinds: when one kind holds
            more than this share of the bucket's support errors, the bucket is planned one
            measurement per bucket, focused on that kind.
        few_errors: A bucket whose kinds hold at most this many of its errors (median) is in the
            few-examples regime: the planner asks for most of it as support (:func:`support_request`).
        few_rows: ... and so is a train split whose questions' kinds hold at most this many of its
            questions (median over questions): a suite of many kinds with a handful of training
            questions each. A split with many questions per kind (the ``default`` preset: 15)
            keeps the protocol's split even for a bucket of its rare stragglers.
        option_rules: Options that name positions, directions or which of two series
            ("Beginning / Middle / End", "upward / downward", "Series 1 / Series 2") are first
            read by the rule they fix (:mod:`.optsem`); kinds under the same such options pool
            their rows (``pool``), unless the options only name series.
        option_bar: Least leave-one-out accuracy of such a rule.
        pool: Pool a kind's rows with those of kinds that share its option shape and either a
            specific option set or a concept word (two phrasings of one question, or one concept
            under one option set; see ``pooling_partners``); the pooled rule
            is used when it reads the kind's own rows at least as well as the kind's own rule does
            out of sample (shrinkage toward the pooled rule).
        peers: Most other measurements a branch's rule must agree with (0: none). They are the
            ones that read the kind's rows exactly as well out of sample as the chosen one does
            (ties of the same search); the branch answers only where at least ``quorum`` of them
            (its own measurement counted) name the same option (:class:`~.composite.Peer`), so a
            measurement that fits a handful of rows by chance is caught out on new questions where
            its equals read otherwise. Variants of the measurement the question asks for agree
            with each other; flukes disagree with them and among themselves.
        quorum: Least share of a branch's measurements that must name its option, in (0.5, 1]
            (1: all). 0.7 lets one of three to six, two of seven to nine, disagree or abstain.
        number_lead_quorum: A branch reading numeric options (a nearest-number rule) also answers
            where this share of the vote names its own measurement's option (0: the quorum alone):
            measurements of other quantities rarely land on one number together.
        min_peers: Fewest such peers a kind's rule needs to be served (0: a rule with no equal
            is read alone).
        pool_option_sets: A specific option set alone (labels other than Yes / No, numbers in
            one unit) makes pooling partners; off, only options that name positions or
            directions do (the stage notebooks' tiny runs were found that way).
        stability_copies: Noisy copies of each train row a branch's rule and peers read to weight
            their votes (0: every vote weighs one). A member's weight is the share of copies it
            reads right (:func:`.stability.stability`) to the power ``stability_power``; the
            quorum is then a share of the total weight. A measurement of the asked-for property
            keeps its answers under a little noise; one that fits a handful of rows by chance
            sits near its threshold and flips, and loses its say.
        stability_noise: The copies' added noise, in units of each series' own noise level.
        stability_power: Exponent on the share read right (2: a member right on 70% of copies
            weighs half as much as one always right).
        yes_no_learned: Whether a Yes / No kind may be served by a learned rule (its own or a pooled
            one); False (the default): only where a test's verdict wins the kind's search
            (``tests``), and a kind whose best reading is learned is left to the agent. Two options
            make flukes cheap: on development seeds of ``mixed`` learned Yes / No branches helped
            about two test questions for each they harmed, every other branch about ten. Off, harm
            falls by 2.1 pp of test questions for 1.0 pp of gain on 60011-61529 (3.7% -> 1.6%), by
            1.1 pp for 2.3 pp on 104-111, and by 1.4 pp for 1.6 pp on ten fresh seeds, 64013-65527
            (3.4% -> 2.0%; ``runs/bench/mixed-dev10u-noyn.json``, ``mixed-dev8-noyn.json``,
            ``mixed-fresh-v30-noyn.json``, ``mixed-fresh-v30b-noyn.json``). Keeping the incoming
            answer is the safe default, and only off does ``mixed``'s harm come near the issue's 2%
            of test questions. A test verdict that loses the search to a learned rule is no
            substitute: served anyway, it harms as much as the learned rule
            (``mixed-dev10u-noyn-tests.json``). Nor is one the shrinkage step sets aside for a
            pooled learned rule: kept, those verdicts add about one point of harm for each two to
            three of gain (``mixed-dev10u-keeptests.json``, ``mixed-dev8-keeptests.json``).
        concepts: Entries added to the concept lexicon for a benchmark's own words, a mapping or
            :func:`~.concepts.load_concepts`' pairs (stem -> catalog groups, :func:`~.concepts.extend`;
            empty: the shipped :data:`~.concepts.CONCEPTS`).
    """

    min_rows: int = 2
    option_rules: bool = True
    option_bar: float = 0.6
    bar: float = 0.6
    strict_bar: float = 0.85
    min_gain: int = 1
    max_branches: int = 48
    pool: bool = True
    pool_option_sets: bool = True
    peers: int = 8
    quorum: float = 0.7
    number_lead_quorum: float = 0.55
    min_peers: int = 0
    max_kind_share: float = 0.25
    few_errors: float = 3.0
    few_rows: float = 6.0
    stability_copies: int = 3
    stability_noise: float = 0.5
    stability_power: float = 2.0
    yes_no_learned: bool = False
    concepts: ConceptEntries = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "concepts", concept_entries(self.concepts))
        if self.min_rows < 2:
            raise ValueError(f"min_rows: {self.min_rows}, need >= 2 (leave-one-out needs two rows)")
        if self.stability_copies < 0:
            raise ValueError(f"stability_copies: {self.stability_copies} copies, need >= 0")
        if not 0.0 <= self.stability_noise < float("inf"):
            raise ValueError(f"stability_noise: {self.stability_noise}, need a finite level >= 0")
        if not 0.0 < self.stability_power < float("inf"):
            raise ValueError(f"stability_power: {self.stability_power}, need a finite power > 0")
        if self.number_lead_quorum and not 0.5 < self.number_lead_quorum <= 1.0:
            raise ValueError(f"number_lead_quorum: {self.number_lead_quorum}, need 0 or (0.5, 1]")

    def recorded(self) -> dict[str, Any]:
        """What a run records of these settings beside its protocol: the lexicon's additions."""
        return {"concepts": {s: list(g) for s, g in self.concepts}} if self.concepts else {}

    @cached_property
    def lexicon(self) -> Lexicon:
        """The concept lexicon the kinds' words are looked up in (the shipped one + ``concepts``)."""
        return extend(self.concepts) if self.concepts else CONCEPTS


def _labelled(dossier: Dossier) -> list[Example]:
    seen: set[str] = set()
    out = []
    for e in [*dossier.support, *dossier.background]:
        if e.question.id not in seen and e.gold is not None:
            seen.add(e.question.id)
            out.append(e)
    return out


def pooling_partners(
    index: KindIndex,
    kid: str,
    by_kind: Mapping[str, Sequence[Example]],
    option_sets: bool = True,
    named_ok: bool = True,
    lexicon: Lexicon = CONCEPTS,
) -> list[str]:
    """Kinds with the same option shape that may ask ``kid``'s question (pooling partners).

    A partner either shares the option set when that set is specific (any labels but a bare
    Yes / No, True / False or names of series, :func:`~.kinds.generic_shape`: "sine / square /
    sawtooth wave" or "Beginning / Middle / End" is one question, or one reading, however it is
    worded; numbers in the same unit, "6 seconds / 10 seconds", where both kinds' concept words, if
    each has some, point at a shared catalog group: a cycle's period and a level shift's time, both
    in hours, are two questions), or shares a concept word with ``kid``
    (:func:`~.concepts.concept_stems`). Partners are candidates only: a pooled rule must still
    read this kind's own rows (see :func:`plan_kinds`). ``option_sets`` False: a shared option
    set makes partners only under options that name positions or directions (:mod:`.optsem`),
    and only when ``named_ok`` (the option rules are on).
    """
    k = index.by_id[kid]
    if option_sets:
        specific = bool(k.option_labels) or k.shape.startswith("numeric:")
    else:
        specific = named_ok and option_semantics(k.option_labels) is not None
    specific = specific and not generic_shape(k.shape)
    stems = concept_stems(k.anchor, lexicon)
    if not stems and not specific:
        return []
    unit = specific and bool(stems) and k.shape.startswith("numeric:")
    # a unit's partners: one family of words
    family = groups_for(k.anchor, lexicon) if unit else frozenset()

    def shares(o: Any) -> bool:
        theirs = concept_stems(o.anchor, lexicon)
        if unit and theirs:
            return bool(family & groups_for(o.anchor, lexicon))
        return specific or bool(stems & theirs)

    return sorted(
        o.id
        for o in index.kinds
        if o.id != kid and o.id in by_kind and o.shape == k.shape and shares(o)
    )


def _ties(ranked: Sequence[Any], n: int) -> tuple[Any, ...]:
    """The first ``n`` measurements after ``ranked[0]`` that cross-validate exactly as well."""
    best = ranked[0]
    return tuple(r for r in ranked[1:] if r.cv_acc >= best.cv_acc - 1e-9)[:n]


def _search(
    ranker: _Ranker,
    ex: Sequence[Example],
    words: frozenset[str],
    settings: KindPlanSettings,
    entry: dict[str, Any],
    tag: str = "",
) -> tuple[Any, str, tuple[Any, ...]] | None:
    """The best measurement and rule on ``ex``: concept groups first, then the whole catalog.

    Returns it with its source and its peers (its first ``settings.peers`` ties in that search).
    """
    prior = groups_for(words, settings.lexicon)
    # a Yes / No kind's test verdict competes with the learned rules of its concept groups
    test: Any = None
    if settings.option_rules:
        named = semantic_rank(ranker.cache, ex, None, words, prefer=prior or frozenset())
        if named and named[0].cv_acc >= settings.option_bar:
            test = named[0], _ties(named, settings.peers)
            if yes_no(ex[0].question.options) is None:
                return named[0], "options", test[1]
    passes = [(prior, settings.bar), (None, settings.strict_bar)] if prior else []
    for groups, bar in passes or [(None, settings.strict_bar)]:
        _, _, ranked = ranker.rank(ex, groups=groups, few=True, words=words)
        if not ranked:
            continue
        best = ranked[0]
        if test is not None and test[0].cv_acc >= best.cv_acc:
            return test[0], "tests", test[1]
        if best.cv_acc >= bar:
            return best, "concepts" if groups else "catalog", _ties(ranked, settings.peers)
        entry.setdefault("rejected", []).append(
            {
                "measurement": best.spec.describe(best.key),
                "cv_acc": round(best.cv_acc, 4),
                **({"rows": tag} if tag else {}),
            }
        )
    return (test[0], "tests", test[1]) if test is not None else None


def _accuracy(ranker: _Ranker, best: Any, ex: Sequence[Example]) -> float:
    """In-sample accuracy of a ranked measurement's rule on ``ex``."""
    if not ex:
        return 0.0
    hits = 0
    for e in ex:
        q = e.question
        rd = apply_rule(
            best.rule,
            ranker.cache.get(best.spec, q),
            q.options,
            q.candidates,
            q.question,
            explain=False,
        )
        hits += int(rd.option is not None and rd.option == e.gold)
    return hits / len(ex)


def support_request(
    settings: KindPlanSettings,
    members: Sequence[QuestionView],
    train: Sequence[QuestionView] = (),
) -> tuple[float, int] | None:
    """Ask for most of a bucket as support when it mixes many question kinds with few examples each.

    Such a bucket is planned one branch per kind, and when each kind holds a handful of its errors
    (``few_errors``, the median over kinds) every error held out for the prefilter is a row its rule
    is not fitted on (:mod:`tsevo.evolve.support`; the protocol config bounds what is granted). A
    bucket one kind dominates (planned one measurement per bucket), or whose kinds each have many
    errors, keeps the protocol's split; so does every bucket when ``train`` (the whole train split)
    has many questions per kind (``few_rows``): there a kind's errors are many even when one
    bucket collects a few of them. Reads wording only, never gold or answers.
    """
    if len(members) < 2:
        return None
    sizes = [len(k.members) for k in KindIndex(members).kinds]
    if max(sizes) > settings.max_kind_share * len(members):
        return None
    if statistics.median(sizes) > settings.few_errors:
        return None
    # the whole split's index last: only the few buckets that would ask pay for it
    if train and median_kind_size(train) > settings.few_rows:
        return None
    return 1.0, len(members)


def plan_kinds(
    ranker: _Ranker,
    dossier: Dossier,
    settings: KindPlanSettings = KindPlanSettings(),
    kinds: Callable[[Iterable[QuestionView]], KindIndex] = KindIndex,
) -> tuple[list[Branch], dict[str, Any]]:
    """Branches for the bucket's kinds, and a report of every kind considered (JSON-friendly).

    ``kinds`` indexes the dossier's questions by kind: recovered from wording (the default), or
    given, for a diagnostic (:meth:`~.kinds.KindIndex.from_groups`).
    """
    rows = _labelled(dossier)
    index = kinds(e.question for e in rows)
    err_kinds: dict[str, int] = {}
    for e in dossier.support:
        k = index.of.get(e.question.id)
        if k is not None:
            err_kinds[k] = err_kinds.get(k, 0) + 1
    by_kind: dict[str, list[Example]] = {}
    for e in rows:
        by_kind.setdefault(index.of[e.question.id], []).append(e)
    branches: list[Branch] = []
    report: dict[str, Any] = {}
    if not err_kinds or max(err_kinds.values()) > settings.max_kind_share * len(dossier.support):
        # one kind dominates the bucket's errors: one measurement per bucket, focused on it
        return branches, report
    for kid in sorted(err_kinds, key=lambda k: (-err_kinds[k], k)):
        entry, branch = _plan_kind(ranker, index, kid, by_kind, err_kinds[kid], settings)
        report[kid] = entry
        if branch is None:
            continue
        branches.append(branch)
        entry["outcome"] = (
            f"branch b{len(branches)}: {branch.describe()} ({branch.stats['source']})"
        )
        if len(branches) >= settings.max_branches:
            break
    return branches, report


def _plan_kind(
    ranker: _Ranker,
    index: KindIndex,
    kid: str,
    by_kind: Mapping[str, Sequence[Example]],
    errors: int,
    settings: KindPlanSettings,
) -> tuple[dict[str, Any], Branch | None]:
    """One kind's search: its report entry, and its branch where it is served."""
    ex = by_kind.get(kid, [])
    kind = index.by_id[kid]
    current = sum(bool(getattr(e.record, "correct", False)) for e in ex)
    sibs = (
        pooling_partners(
            index,
            kid,
            by_kind,
            settings.pool_option_sets,
            settings.option_rules,
            settings.lexicon,
        )
        if settings.pool
        else []
    )
    pooled = [*ex, *(e for s in sibs for e in by_kind[s])]
    entry: dict[str, Any] = {
        "template": kind.describe(),
        # none: the whole catalog, at the strict bar
        "concepts": sorted(concept_stems(kind.anchor, settings.lexicon)),
        "rows": len(ex),
        "errors": errors,
        "current_correct": current,
    }
    if sibs:
        entry["pooled_with"] = sibs
        entry["pooled_rows"] = len(pooled)
    if len(pooled) < settings.min_rows:
        entry["outcome"] = "too few rows"
        return entry, None
    own = (
        _search(ranker, ex, kind.anchor, settings, entry) if len(ex) >= settings.min_rows else None
    )
    chosen = own
    if sibs:
        pool_words = kind.anchor.union(*(index.by_id[s].anchor for s in sibs))
        shared = _search(ranker, pooled, pool_words, settings, entry, tag="pooled")
        if shared is not None:
            own_acc = _accuracy(ranker, shared[0], ex)
            # shrinkage toward the pooled rule: it reads this kind's own rows at least as well
            # as the kind's own best rule does out of sample
            if own is None or own_acc >= own[0].cv_acc - 1e-9:
                chosen = (shared[0], shared[1] + "+pooled", shared[2])
                entry["pooled_own_acc"] = round(own_acc, 4)
    if chosen is None:
        entry["outcome"] = "no rule clears the bar"
        return entry, None
    best, source, ties = chosen
    if not (
        settings.yes_no_learned
        or source.startswith("tests")
        or yes_no(ex[0].question.options) is None
    ):
        entry["outcome"] = "a Yes / No kind read by a learned rule (yes_no_learned off)"
        return entry, None
    if len(ties) < settings.min_peers:
        entry["outcome"] = (
            f"{len(ties)} measurements read the rows as well, fewer than {settings.min_peers}"
        )
        return entry, None
    # own rule: its out-of-sample accuracy; pooled rule: how it reads the kind's rows
    acc = _accuracy(ranker, best, ex) if source.endswith("+pooled") else best.cv_acc
    recovered = round(acc * len(ex))
    if recovered - current < settings.min_gain:
        entry["outcome"] = f"recovers {recovered} of {len(ex)} rows, the agent {current}"
        return entry, None
    require, forbid = index.dispatch(kid)
    branch = Branch(
        (kid,),
        require,
        forbid,
        best.spec,
        (best.key,),
        best.rule,
        {
            "rows": len(ex),
            "pooled_rows": len(pooled) if source.endswith("+pooled") else len(ex),
            "cv_acc": round(best.cv_acc, 4),
            "current_correct": current,
            "source": source,
            "template": kind.describe(),
        },
        tuple(Peer(t.spec, (t.key,), t.rule) for t in ties),
        settings.quorum if ties else 1.0,
        _weights(
            ranker.cache,
            [best, *ties],
            pooled if source.endswith("+pooled") else ex,
            settings,
        )
        if ties
        else (),
        settings.number_lead_quorum
        if ties and best.rule.kind == "nearest_number" and settings.quorum < 1.0
        else 0.0,
    )
    return entry, branch


def _weights(
    cache: SpecCache, members: Sequence[Any], ex: Sequence[Example], settings: KindPlanSettings
) -> tuple[float, ...]:
    """Vote weights of a branch's members: their stability on noisy copies of ``ex``, powered."""
    if settings.stability_copies <= 0:
        return ()
    shares = stability(
        cache, members, ex, noise=settings.stability_noise, copies=settings.stability_copies
    )
    out = tuple(s**settings.stability_power for s in shares)
    return out if sum(out) > 0 else ()
