"""How many of a bucket's errors the planner sees: one frozen config nested in the protocol, ``support``.

The protocol splits each bucket's errors into support rows (shown to the planner, at most
``planner_support``, half the bucket when it is small) and held-out rows (the prefilter's alone).
The paper sized that for an LLM planner reading a dozen examples of one failure. On a benchmark of
many question kinds with a handful of training questions each, a bucket mixes a dozen kinds and
half of each kind's few errors are hidden from the planner: with every train row in view the
builtin learner's composite plan gains about twice what it gains after that split
(``python -m tests.bench.mixed_ceiling``, ``unsupervised_kinds`` against the same plan on half the
errors).

So a local planner may *ask* for a larger support share of a bucket from wording alone (never gold
or answers): an optional method ``support_request(members, train) -> tuple[float, int] | None``
(``members`` the bucket's question views, ``train`` the whole train split's) returning (share of
the members, most rows). The builtin planner asks for buckets that mix many question kinds with a
handful of errors each, and only when the train split itself has a handful of questions per kind
(a bucket of a large suite's rare stragglers keeps the protocol's split); the LLM planner never
asks. This config says whether asks are granted and bounds them; the rest of the bucket stays held
out for the prefilter, and the gate on validation questions is unchanged.

On by default. On fresh ``mixed`` seeds it lifts one builtin round from +2.8 to +8.5 pp, every seed
positive, with harm 1.4% -> 2.4% of test questions (``runs/bench/mixed-fresh-v3.json``,
``mixed-fresh-v3-support.json``); the ``default`` preset's rounds are unchanged (15 train questions
per kind: no ask). ``planner_requests = False`` is the paper's split; the stage notebooks use it, as
their tiny runs' stories were found under it.

The same regime thins the prefilter's screen: a bucket whose planner sees most of it holds out one
or two errors, and a composite tool that serves dozens of kinds and misses both was refused for "no
repair". The repair bar now applies from ``min_held_out`` (3) held-out errors; below, the harm probe
and execution errors screen alone (development seeds of ``mixed`` 104-111: +0.61 +- 0.53 pp, no more
harm; seed 108 kept a 27-kind composite with one held-out error). For a composite the harm probe is
no screen: every in-scope train row the library gets right outside support is in the planner's
background, which its branches were fitted on (checked row by row on 41 attempts, the log's session
30), so the plan's leave-one-out and the gate on validation are what screen it. And a composite tool
answers only for the held-out errors of question kinds it has a branch for (``min_held_out_counts =
"in_contract"``): the errors a bucket holds out are mostly of kinds whose only rows were held out,
so no branch serves them, and three to seven such errors refused whole composites on six of ten used
``mixed`` seeds (60011-61529, now development seeds: +1.7 pp, harm +0.3). A plain tool still answers
for all of its held-out errors.

With that, a granted request keeps all but one of a bucket's errors in support (``max_share`` 1.0,
``max_rows`` 200; before, 0.85 and 60 rows): the planner sees every kind's errors, and held-out
rows that no branch could serve taught nothing. On those ten seeds +3.3 pp, harm +0.0 (the log).

Such a bucket's planner then sees 27 to 71 errors of a dozen or more phrasings. The protocol's 48
background rows (the train rows most like the support in wording) already hold every other train row
of those phrasings (numbers masked, their words are the same); what 48 rows leave out is rows of
other phrasings that share a quarter to a half of their words with a support row on ``mixed``, which
pooling may take as partners (how the gain arises was not traced further). A widened bucket gets
``background`` rows instead (72). On the development seeds of ``mixed``, paired per seed:
60011-61529 +0.61 +- 0.26 pp, harm -0.18 +- 0.13; 104-111 +0.38 +- 0.35 pp, harm -0.08 +- 0.08; on
ten fresh seeds +0.49 +- 0.22 pp, harm -0.24 +- 0.13 (``runs/bench/mixed-dev10u-bg72.json``,
``mixed-dev8-bg72.json``, ``mixed-fresh-v42.json``; the ``-paired.json`` beside each). More is not
better: 160 or 400 rows lose (session 36's -0.68 and -0.32 pp), rows of distant kinds becoming
partners; nor is "as many as the support, at least 48" (+0.07 +- 0.15, -0.01 +- 0.26 pp), nor
pooling only with kinds whose words overlap by a fifth (-0.82 +- 0.63 pp, harm +0.31; the log).
Buckets of the paper's split (the ``default`` preset's, the stage notebooks') keep
``planner_background``.

The same regime bounds clustering (``triage_bound``): a triage role may lower ``max_categories``
from all of a side's errors (:mod:`tsevo.evolve.cluster`). The builtin triage asks for two
categories when the errors' question kinds hold a handful of errors each: eight buckets split each
kind's few rows among planners that each see a part. On the development seeds of ``mixed`` 104-107:
+8.5 +- 6.3 pp, harmed 4.0% -> +12.2 +- 4.6 pp, harmed 2.6% (with composite tools of up to 48
branches instead of 24). The stage notebooks turn it off with the asks (``support_asks``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tsevo.data import QuestionView
from tsevo.knobs import NestedKnobs, check_knobs, knob

__all__ = [
    "SUPPORT_DOC",
    "SupportConfig",
    "background_rows",
    "granted_support",
    "request_support",
    "support_params",
]

SUPPORT_DOC = (
    "Support a local planner may ask for (tsevo.evolve.support, support.<knob>): a planner's "
    "support_request for a bucket is granted up to max_share of its members and max_rows rows, "
    "with up to background rows of background (planner_requests = True, the default; False: "
    "the paper's split), a triage role may "
    "bound the number of categories (triage_bound), and the prefilter asks for a repair only "
    "from min_held_out held-out errors (a composite's: of kinds it has a branch for, "
    "min_held_out_counts). Saved only "
    "when not the default."
)


@dataclass(frozen=True, kw_only=True)
class SupportConfig(NestedKnobs):
    """Whether, and how far, a local planner's ask for more support is granted (default: granted)."""

    OWNER: ClassVar[str] = "ProtocolConfig.support"

    planner_requests: bool = knob(
        True,
        "Whether a local planner's support_request is honoured (True, the default; False: the "
        "paper's split, half of a small bucket and at most planner_support rows, for every bucket).",
    )
    max_share: float = knob(
        1.0,
        "Largest share of a bucket's members a request may put in its support; the rest (at "
        "least one member, at most prefilter_errors) is held out for the prefilter (1.0: all "
        "but one).",
        lo=0.5,
        hi=1.0,
    )
    max_rows: int = knob(200, "Most support rows a request may be granted.", lo=1)
    background: int = knob(
        72,
        "Background rows (at most) of a bucket whose request widened its support beyond the "
        "protocol's (planner_background for every other bucket): such a bucket holds errors of "
        "dozens of phrasings, and more rows reach other phrasings pooling may take as partners.",
        lo=0,
    )
    triage_bound: bool = knob(
        True,
        "Whether a triage role's bound on the number of categories (categories_for, read on all "
        "of a side's errors; tsevo.evolve.cluster) is honoured. The builtin triage asks for two "
        "in the few-examples regime, so each bucket keeps more of a kind's rows (False: the "
        "protocol's max_categories alone).",
    )

    min_held_out: int = knob(
        3,
        "Held-out errors (at least) the prefilter must run before it asks a candidate for "
        "prefilter_min_repairs: one or two missed errors say nothing of a composite serving many "
        "question kinds (execution errors, the plan's leave-one-out and the gate still screen it). "
        "0: always asked.",
        lo=0,
    )
    min_held_out_counts: str = knob(
        "in_contract",
        "Which held-out errors count toward min_held_out: those inside a tool's contract "
        "('in_contract': a composite tool answers only for the question kinds it has a branch "
        "for; an error of another kind says nothing of its branches) or every one ('all'). "
        "Every other artifact answers for all of its held-out errors.",
        choices=("in_contract", "all"),
    )

    def __post_init__(self) -> None:
        check_knobs(self, self.OWNER)

    @property
    def is_default(self) -> bool:
        """Whether these are the defaults (``config.json`` then omits the section)."""
        return self == SupportConfig()


def granted_support(
    n_members: int,
    planner_support: int,
    cfg: SupportConfig,
    request: tuple[float, int] | None,
) -> int:
    """Support rows of a bucket of ``n_members``: the protocol's, or a granted request.

    The protocol's is ``min(planner_support, ceil(n / 2))``. A request ``(share, rows)`` is
    clipped to ``cfg`` and never gives less than the protocol's nor leaves no member held out.
    """
    protocol = min(planner_support, math.ceil(n_members / 2))
    if request is None or not cfg.planner_requests or n_members < 2:
        return protocol
    share, rows = request
    if not (isinstance(share, int | float) and isinstance(rows, int)) or share <= 0 or rows < 1:
        raise ValueError(f"support_request must be (share > 0, rows >= 1), got {request!r}")
    asked = min(math.ceil(n_members * min(float(share), cfg.max_share)), rows, cfg.max_rows)
    return max(protocol, min(asked, n_members - 1))


def background_rows(
    n_members: int,
    n_support: int,
    planner_support: int,
    planner_background: int,
    cfg: SupportConfig,
) -> int:
    """Background rows of a bucket of ``n_members`` with ``n_support`` support rows.

    ``cfg.background`` where a granted request widened the support beyond the protocol's split
    (:func:`granted_support` without a request), ``planner_background`` otherwise (the paper's
    split, the ``default`` preset's buckets, a request that changed nothing).
    """
    protocol = granted_support(n_members, planner_support, cfg, None)
    widened = cfg.planner_requests and n_support > protocol
    return cfg.background if widened else planner_background


def request_support(
    planner: Any, members: Sequence[QuestionView], train: Sequence[QuestionView] = ()
) -> tuple[float, int] | None:
    """The planner's ``support_request`` for these members, or None when it has none.

    ``train``: the wording of the whole train split (views), for a planner that asks only in the
    few-examples regime.
    """
    ask = getattr(planner, "support_request", None)
    return ask(members, train) if callable(ask) else None


def support_params(
    lowered: dict[str, Any], start: Mapping[str, Any]
) -> tuple[dict[str, Any], SupportConfig | None]:
    """Take the ``support.<knob>`` and ``support`` keys out of loose protocol parameters."""
    return SupportConfig.take_params(lowered, start)
