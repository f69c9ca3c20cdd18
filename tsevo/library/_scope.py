"""Where an artifact applies: :class:`Scope` and its text :class:`Matcher` over question tokens."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "Arity",
    "Matcher",
    "Scope",
    "as_tuple",
    "merge_scopes",
    "option_number",
    "options_kind",
    "question_tokens",
    "series_order",
]

Arity = Literal["any", "single", "dual", "candidates", "covariate"]

_NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_TOKEN = re.compile(r"[a-z][a-z_]+")


_SERIES_REF = re.compile(r"\b[Ss]eries\s+([0-9]{1,2}|[A-Z])\b")


def series_order(text: str) -> str:
    """Which of two or more series named by number or capital letter the text names first.

    ``"@21"`` for "Does series 2 Granger-cause series 1?", ``"@12"`` for the reverse, ``"@ab"`` for
    "Series A ... Series B"; ``""`` when fewer than two distinct series are named. The word tokens
    of both questions are the same set, and numbers are masked out, so without it a matcher could
    not tell which way such a question asks.
    """
    ids: list[str] = []
    for m in _SERIES_REF.finditer(text):
        i = m.group(1).lower()
        if i not in ids:
            ids.append(i)
    return "@" + "".join(ids) if len(ids) >= 2 else ""


def question_tokens(text: str) -> frozenset[str]:
    """Lower-case word tokens of a question text, numbers masked out (what matchers read).

    One more token says which way a question about named series asks (:func:`series_order`):
    ``@21`` when series 2 is named before series 1.
    """
    words = _TOKEN.findall(text.lower())
    order = series_order(text)
    return frozenset([*words, order] if order else words)


def as_tuple(v: Any) -> tuple[Any, ...]:
    """A tuple of ``v`` (``()`` for None): how a JSON list becomes a frozen field."""
    return tuple(v) if v is not None else ()


@dataclass(frozen=True)
class Matcher:
    """A text matcher over question tokens (numbers masked), learned from a bucket or written by hand.

    The score is the weighted fraction of the matcher's terms present in the question:
    ``sum(w_t for t in terms if t in tokens) / sum(w_t)``. A question matches when the score is at
    least ``threshold``, every ``require`` token is present and no ``forbid`` token is.

    Attributes:
        terms: Term weights (positive).
        threshold: Minimum score in [0, 1]; 0 with no terms matches everything.
        require: Tokens that must all be present.
        forbid: Tokens that must all be absent.
    """

    terms: Mapping[str, float] = field(default_factory=dict)
    threshold: float = 0.0
    require: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()

    def score(self, tokens: frozenset[str]) -> float:
        """Weighted fraction of terms present (1.0 when there are no terms)."""
        total = sum(self.terms.values())
        if total <= 0:
            return 1.0
        return sum(w for t, w in self.terms.items() if t in tokens) / total

    def matches(self, tokens: frozenset[str]) -> bool:
        """True when the tokens satisfy require/forbid and the score threshold."""
        if any(t not in tokens for t in self.require):
            return False
        if any(t in tokens for t in self.forbid):
            return False
        return self.score(tokens) >= self.threshold - 1e-12

    @property
    def is_trivial(self) -> bool:
        """True when the matcher accepts every question."""
        return not self.terms and not self.require and not self.forbid

    def describe(self, top: int = 8) -> str:
        """Short text rendering for catalogs."""
        parts = []
        if self.terms:
            best = sorted(self.terms.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
            parts.append(
                "terms " + ", ".join(t for t, _ in best) + f" (score >= {self.threshold:.2f})"
            )
        if self.require:
            parts.append("requires " + ", ".join(self.require))
        if self.forbid:
            parts.append("never with " + ", ".join(self.forbid))
        return "; ".join(parts) or "any question"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "terms": {k: float(v) for k, v in sorted(self.terms.items())},
            "threshold": float(self.threshold),
            "require": list(self.require),
            "forbid": list(self.forbid),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Matcher:
        """Inverse of :meth:`to_dict`."""
        return cls(
            terms={str(k): float(v) for k, v in (d.get("terms") or {}).items()},
            threshold=float(d.get("threshold", 0.0)),
            require=as_tuple(d.get("require")),
            forbid=as_tuple(d.get("forbid")),
        )


@dataclass(frozen=True)
class Scope:
    """Where an artifact applies. Out-of-scope questions are never touched.

    Attributes:
        tasks: Task names it applies to (empty = any task).
        evidence: Evidence types it provides (descriptive, e.g. ``"level_gap"``).
        arity: Input shape: ``single`` (one primary), ``dual`` (two primaries), ``candidates``
            (reference plus named candidates), ``covariate`` (a named covariate), or ``any``.
        anti_tasks: Tasks it must never touch (anti-scope).
        matcher: Text matcher the question must satisfy.
        anti_matcher: Text matcher the question must NOT satisfy (anti-scope); ignored when trivial.
        options_kind: Required option shape: ``numeric``, ``label``, ``candidate`` or ``any``.
        kinds: Question kinds it serves, one matcher each (a composite tool's branches): when
            given, the question must satisfy at least one of them.
    """

    tasks: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    arity: Arity = "any"
    anti_tasks: tuple[str, ...] = ()
    matcher: Matcher = field(default_factory=Matcher)
    anti_matcher: Matcher = field(default_factory=Matcher)
    options_kind: str = "any"
    kinds: tuple[Matcher, ...] = ()

    def matches_kind(self, tokens: frozenset[str]) -> bool:
        """True when there are no kind matchers or the tokens satisfy one of them."""
        return not self.kinds or any(k.matches(tokens) for k in self.kinds)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (``kinds`` only when there are some: older scopes keep their bytes)."""
        d: dict[str, Any] = {
            "tasks": list(self.tasks),
            "evidence": list(self.evidence),
            "arity": self.arity,
            "anti_tasks": list(self.anti_tasks),
            "matcher": self.matcher.to_dict(),
            "anti_matcher": self.anti_matcher.to_dict(),
            "options_kind": self.options_kind,
        }
        if self.kinds:
            d["kinds"] = [k.to_dict() for k in self.kinds]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Scope:
        """Inverse of :meth:`to_dict`."""
        return cls(
            tasks=as_tuple(d.get("tasks")),
            evidence=as_tuple(d.get("evidence")),
            arity=d.get("arity", "any"),
            anti_tasks=as_tuple(d.get("anti_tasks")),
            matcher=Matcher.from_dict(d.get("matcher") or {}),
            anti_matcher=Matcher.from_dict(d.get("anti_matcher") or {}),
            options_kind=d.get("options_kind", "any"),
            kinds=tuple(Matcher.from_dict(k) for k in d.get("kinds") or ()),
        )

    def describe(self) -> str:
        """One-line text rendering for catalogs."""
        parts = [f"tasks: {', '.join(self.tasks) or 'any'}", f"input: {self.arity}"]
        if self.options_kind != "any":
            parts.append(f"options: {self.options_kind}")
        if self.evidence:
            parts.append(f"evidence: {', '.join(self.evidence)}")
        if not self.matcher.is_trivial:
            parts.append(f"when: {self.matcher.describe()}")
        if self.kinds:
            parts.append("kinds: " + " | ".join(k.describe(top=4) for k in self.kinds))
        anti = list(self.anti_tasks)
        if not self.anti_matcher.is_trivial:
            anti.append(self.anti_matcher.describe())
        if anti:
            parts.append(f"not for: {'; '.join(anti)}")
        return " | ".join(parts)


def option_number(option: str) -> float | None:
    """The first number written in an option, or None (what a numeric reading rule reads)."""
    m = _NUM.search(option)
    return float(m.group()) if m else None


def options_kind(options: Sequence[str], candidates: Sequence[str]) -> str:
    """Classify an option set: ``candidate`` (options name candidate series), ``numeric`` or ``label``.

    ``numeric`` when every option carries a number and the numbers differ: options that carry the
    same number are told apart by their words, so a numeric reading could not choose among them.
    """
    if candidates:
        cand = {c.lower() for c in candidates}
        if all(
            any(tok in cand for tok in re.findall(r"[A-Za-z0-9_]+", o.lower())) for o in options
        ):
            return "candidate"
    nums = [option_number(o) for o in options]
    if None not in nums and len(set(nums)) == len(options):
        return "numeric"
    # options named by words that share a number ("an AR(1) process" / "an MA(1) process")
    return "label"


def merge_scopes(scopes: Sequence[Scope]) -> Scope:
    """Union of tasks and evidence; matcher keeps the shared terms at the lowest threshold.

    Members must share their matcher's require/forbid words (the coordinator only merges such cards);
    those words are kept.
    """
    first = scopes[0]
    tasks = tuple(sorted({t for s in scopes for t in s.tasks}))
    evidence = tuple(sorted({e for s in scopes for e in s.evidence}))
    common = set(first.matcher.terms)
    for s in scopes[1:]:
        common &= set(s.matcher.terms)
    terms = {t: min(s.matcher.terms[t] for s in scopes) for t in sorted(common)}
    thr = min(s.matcher.threshold for s in scopes) if terms else 0.0
    matcher = Matcher(terms, thr, first.matcher.require, first.matcher.forbid)
    kinds: tuple[Matcher, ...] = ()
    if all(s.kinds for s in scopes):  # a scope without kind matchers serves every kind
        kinds = tuple(dict.fromkeys(k for s in scopes for k in s.kinds))
    return replace(first, tasks=tasks, evidence=evidence, matcher=matcher, kinds=kinds)
