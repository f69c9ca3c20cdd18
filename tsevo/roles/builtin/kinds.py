"""Question kinds from wording alone: templates recovered from shared token structure.

A real benchmark has one task label and many question kinds (templates), a handful of training
questions each. The builtin roles recover the kinds without labels, ids or metadata, from what a
role sees (:class:`~tsevo.data.QuestionView`):

1. **Mask** the question text (not its context): lower-case word tokens, numbers become ``#`` and the names of the
   question's own series (``A``, ``B``, ``X``, ``Series 1``...) become ``@``; a question that names two
   series by number or letter ends with the order it names them in (``@21``: series 2 first).
2. **Shape** the options: ``candidate`` (options name candidate series), ``numeric`` (options are
   numbers, with the words they carry: ``numeric:seconds``) or the sorted set of normalized option
   texts (``label``).
3. **Recover templates**: masked texts of the same length and option shape that differ in at most
   one position in eight, the series order not among them, are one template, the differing
   positions being its slots (union-find over pairs). A kind is a template plus its option shape.

Each kind carries the tokens every member shares (``anchor``): a composite tool dispatches its
branches on them (``ctx.question_tokens()``), so a branch fires exactly on questions whose wording
holds its kind's anchor and none of the words that set it apart from its neighbours (``forbid``).
"""

from __future__ import annotations

import hashlib
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tsevo.data import QuestionView
from tsevo.library._scope import series_order
from tsevo.library.reading import norm_label, option_number
from tsevo.library.tool import options_kind, question_tokens

__all__ = [
    "Kind",
    "KindIndex",
    "Worded",
    "generic_shape",
    "induce_kinds",
    "masked_tokens",
    "median_kind_size",
    "option_shape",
]


class Worded(Protocol):
    """What kinds are induced from: a question's id, wording, options and series names.

    A :class:`~tsevo.data.QuestionView` is one; so is the triage's view of an error.
    """

    @property
    def id(self) -> str:
        """Opaque id."""
        ...

    @property
    def question(self) -> str:
        """Question text."""
        ...

    @property
    def options(self) -> Sequence[str]:
        """Option texts."""
        ...

    @property
    def series(self) -> Any:
        """Series by name (only the names are read)."""
        ...

    @property
    def candidates(self) -> Sequence[str]:
        """Candidate series names."""
        ...

    @property
    def fingerprint(self) -> str:
        """Content hash (orders questions deterministically)."""
        ...


_WORD = re.compile(r"[a-z0-9_]+(?:\.[0-9]+)?")
_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]+)?$")
_UNIT = re.compile(r"[a-z]+")


def masked_tokens(q: Worded) -> tuple[str, ...]:
    """The question's word tokens with numbers as ``#`` and its own series names as ``@``."""
    names = {n.lower() for n in q.series}
    name_words = {w for n in names for w in _WORD.findall(n)}
    out = []
    for w in _WORD.findall(q.question.lower()):
        if _NUMBER.match(w):
            out.append("#")
        elif w in names or (len(w) <= 2 and w in name_words):
            out.append("@")
        else:
            out.append(w)
    order = series_order(q.question)  # "series 2 ... series 1" is not "series 1 ... series 2"
    return (*out, order) if order else tuple(out)


def option_shape(q: Worded) -> str:
    """``candidate``, ``numeric[:<unit words>]`` or ``label:<sorted normalized options>``.

    Numeric options keep their words (``numeric:seconds`` for "6 seconds / 10 seconds",
    ``numeric:db`` for "12 dB"): a delay in seconds and a count of cycles are not one question.
    """
    kind = options_kind(q.options, q.candidates)
    if kind not in ("label", "numeric"):
        return kind
    if kind == "numeric" or all(option_number(o) is not None for o in q.options):
        units = sorted({w for o in q.options for w in _UNIT.findall(o.lower())})
        return "numeric:" + "|".join(units) if units else "numeric"
    return "label:" + "|".join(sorted(norm_label(o) for o in q.options))


@dataclass(frozen=True)
class Kind:
    """One recovered question kind.

    Attributes:
        id: Content-derived id (``k`` + a hash of the template and option shape).
        template: The masked token pattern; slots are ``*``.
        shape: The option shape (see :func:`option_shape`).
        anchor: Tokens every member's :func:`~tsevo.library.tool.question_tokens` contains.
        members: Ids of the questions of this kind (the views' opaque ids).
    """

    id: str
    template: tuple[str, ...]
    shape: str
    anchor: frozenset[str]
    members: tuple[str, ...]

    @property
    def option_labels(self) -> tuple[str, ...]:
        """The normalized option texts of a ``label`` kind (empty otherwise)."""
        return (
            tuple(self.shape.split(":", 1)[1].split("|")) if self.shape.startswith("label:") else ()
        )

    def describe(self) -> str:
        """The template as text, e.g. ``is there an upward trend in @ ? [label:no|yes]``."""
        return f"{' '.join(self.template)} [{self.shape}]"


_GENERIC = frozenset({("no", "yes"), ("false", "true")})
#: An option that only names a series: "series 1", "series b", "the second series".
_SERIES_ONLY = re.compile(r"(the )?(series [a-z0-9]+|(first|second) series)")


def generic_shape(shape: str) -> bool:
    """Whether an option shape names no property: Yes / No, True / False, or only which series.

    Such options say nothing of what is asked ("Series 1 / Series 2" answers "which is noisier?"
    and "which has heavier tails?" alike), so they make no pooling partners by themselves
    (:func:`~.kindplan.plan_kinds`).
    """
    if shape == "numeric:series":
        return True
    if not shape.startswith("label:"):
        return False
    labels = tuple(shape.split(":", 1)[1].split("|"))
    return labels in _GENERIC or all(_SERIES_ONLY.fullmatch(o) for o in labels)


def _close(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two masked texts are one template: at most one position in eight differs.

    The order in which a question names two series is never a slot: "does series 2 Granger-cause
    series 1?" asks the reverse of "does series 1 Granger-cause series 2?".
    """
    if len(a) != len(b):
        return False
    diff = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    if any(len(w) > 1 and w.startswith("@") for xy in diff for w in xy):
        return False  # the series order (``series_order``) differs
    return len(diff) <= max(1, len(a) // 8)


def induce_kinds(questions: Iterable[Worded]) -> list[Kind]:
    """Recover the kinds of a set of questions (deterministic: independent of input order)."""
    qs = sorted(questions, key=lambda q: q.fingerprint)
    by_key: dict[tuple[tuple[str, ...], str], list[Worded]] = defaultdict(list)
    for q in qs:
        by_key[(masked_tokens(q), option_shape(q))].append(q)
    keys = sorted(by_key)
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_shape: dict[tuple[int, str], list[int]] = defaultdict(list)
    for i, (toks, shape) in enumerate(keys):
        by_shape[(len(toks), shape)].append(i)
    for idx in by_shape.values():
        for a_pos, i in enumerate(idx):
            for j in idx[a_pos + 1 :]:
                if _close(keys[i][0], keys[j][0]):
                    parent[find(j)] = find(i)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(keys)):
        groups[find(i)].append(i)
    kinds = []
    for idx in groups.values():
        pats = [keys[i][0] for i in idx]
        shape = keys[idx[0]][1]
        template = tuple(pos[0] if len(set(pos)) == 1 else "*" for pos in zip(*pats, strict=True))
        members = [q for i in idx for q in by_key[keys[i]]]
        anchor = _anchor(members)
        kid = "k" + hashlib.sha256(f"{' '.join(template)}\x00{shape}".encode()).hexdigest()[:8]
        kinds.append(Kind(kid, template, shape, anchor, tuple(sorted(q.id for q in members))))
    kinds.sort(key=lambda k: (k.template, k.shape))
    return kinds


def median_kind_size(questions: Iterable[Worded]) -> float:
    """How many of ``questions`` share a question's kind, the median over the questions.

    The few-examples regime's measure: a public benchmark's many templates give 2-4, a suite of a
    dozen families with many phrasings each 10 or more.
    """
    return statistics.median([len(k.members) for k in induce_kinds(questions) for _ in k.members])


def _text(q: Worded) -> str:
    # the question alone: what a scope's matchers read (a tool's tokens add the context's words)
    return q.question


def _anchor(members: Sequence[Worded]) -> frozenset[str]:
    """The words every member's question holds (what a branch of their kind dispatches on)."""
    return frozenset.intersection(*(question_tokens(_text(q)) for q in members))


class KindIndex:
    """Kinds of a set of questions, with each question's kind and each kind's dispatch words.

    Args:
        questions: The questions (views) to index.
    """

    def __init__(
        self, questions: Iterable[QuestionView], kinds: Sequence[Kind] | None = None
    ) -> None:
        self.questions = {q.id: q for q in questions}
        self.kinds = list(kinds) if kinds is not None else induce_kinds(self.questions.values())
        self.by_id = {k.id: k for k in self.kinds}
        self.of = {m: k.id for k in self.kinds for m in k.members}

    @classmethod
    def from_groups(cls, questions: Iterable[QuestionView], group: Mapping[str, str]) -> KindIndex:
        """An index whose kinds are given (question id -> group name) instead of recovered.

        A diagnostic seam: the ``mixed`` ceiling bench plans with the generator's own kinds to
        tell what recovering kinds from wording costs. Roles never see such labels. A kind's id is
        its group name; its anchor, the words all its members share, as for a recovered kind.
        """
        qs = sorted(questions, key=lambda q: q.fingerprint)
        by: dict[str, list[QuestionView]] = defaultdict(list)
        for q in qs:
            by[group[q.id]].append(q)
        kinds = [
            Kind(
                name,
                masked_tokens(ms[0]),
                option_shape(ms[0]),
                _anchor(ms),
                tuple(sorted(q.id for q in ms)),
            )
            for name, ms in sorted(by.items())
        ]
        return cls(qs, kinds)

    def __len__(self) -> int:
        return len(self.kinds)

    def members(self, kind_id: str) -> list[QuestionView]:
        """The questions of one kind."""
        return [self.questions[m] for m in self.by_id[kind_id].members]

    def dispatch(
        self, kind_id: str, among: Sequence[str] = ()
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Words a question must hold (``require``) and must not hold (``forbid``) to be of this kind.

        ``require`` is the kind's anchor. ``forbid`` holds, for each other kind in ``among`` whose
        anchor contains this one's, one word of that kind's anchor that this kind's members never
        use, so the narrower kind's questions do not fire this kind's branch.
        """
        k = self.by_id[kind_id]
        used = frozenset().union(*(question_tokens(_text(q)) for q in self.members(kind_id)))
        forbid = set()
        for other in among or [x.id for x in self.kinds]:
            o = self.by_id.get(other)
            if o is None or o.id == k.id or not k.anchor < o.anchor:
                continue
            extra = sorted(o.anchor - used)
            if extra:
                forbid.add(extra[0])
        return tuple(sorted(k.anchor)), tuple(sorted(forbid))

    def matches(self, q: QuestionView, require: Sequence[str], forbid: Sequence[str]) -> bool:
        """Whether ``q``'s tokens hold every ``require`` word and no ``forbid`` word."""
        toks = question_tokens(_text(q))
        return all(w in toks for w in require) and not any(w in toks for w in forbid)


def shared_shapes(kinds: Iterable[Kind]) -> Mapping[str, list[str]]:
    """Kinds grouped by option shape (kinds that share an option set can pool their reading rules)."""
    out: dict[str, list[str]] = defaultdict(list)
    for k in kinds:
        out[k.shape].append(k.id)
    return dict(out)
