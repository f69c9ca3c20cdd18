"""What a question's words point at: a small lexicon from wording to measurement families.

A rule fitted on four examples is usually spurious when it is searched over hundreds of
measurements. A statistician reading "is the series stationary?" looks at unit-root tests and
autocorrelation first, not at spectral band ratios. This lexicon is that reading: general domain
vocabulary (word stems) mapped to the catalog groups of :mod:`tsevo.library.primitives` that
measure the concept. The builtin planner searches the groups a kind's words point at first, and
the whole catalog only with a stricter bar. It is written from the vocabulary of time-series
analysis, not from any benchmark's templates.

A researcher's benchmark has words of its own ("wobble", "plateau", "heartbeat"). :func:`extend`
adds or replaces stems (a stem mapped to no group is muted), :func:`load_concepts` reads such
entries from a JSON file (``tsevo evolve --concepts FILE``; ``tsevo data kinds FILE --concepts
FILE`` shows which question kinds they reach), and every lookup takes the resulting lexicon.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tsevo.library.primitives import CATALOG

__all__ = [
    "CONCEPTS",
    "ConceptEntries",
    "Lexicon",
    "catalog_groups",
    "concept_entries",
    "concept_stems",
    "extend",
    "groups_for",
    "load_concepts",
    "relevance",
]

#: Word stem -> catalog groups.
Lexicon = Mapping[str, tuple[str, ...]]
#: Lexicon entries as sorted ``(stem, groups)`` pairs (hashable: a frozen settings field).
ConceptEntries = tuple[tuple[str, tuple[str, ...]], ...]

_WORDS = re.compile(r"[a-z]+")

_TREND = ("trend", "trend_shape", "segments", "summary", "window")
_CYCLE = ("spectral", "seasonal", "cycle", "autocorr", "wavelet")
_ANOMALY = ("anomaly", "changepoint", "motif", "window", "summary")
_NOISE = ("noise", "entropy", "autocorr", "spectral", "wavelet")
_STATIONARY = ("stationarity", "autocorr", "trend", "window")
_MEMORY = ("autocorr", "stationarity", "noise")
_CAUSAL = ("causality", "lag", "correlation")
_SIMILAR = ("shape", "correlation", "distribution", "comparison", "transform")
_DISTRIBUTION = ("distribution", "summary", "comparison")
_REGIME = ("changepoint", "window", "segments", "trend_shape")
_SPREAD = ("window", "summary", "noise", "distribution")
_LEVEL = ("summary", "window", "trend")
_FUTURE = ("forecast", "trend", "summary")
_TRANSFORM = ("transform", "wavelet", "shape")
_COMPLEXITY = ("entropy", "autocorr", "noise")

#: Word stem -> catalog groups. A token matches a stem of five letters or more when it starts with
#: it; a shorter stem only as the word itself or with an inflection (:data:`_SUFFIXES`: ``cycle``,
#: ``cycles``, ``cyclic``; ``flipped``; ``drives``, ``driven``; ``causal``), never inside another
#: word (``red`` is not in ``reduced``, ``lag`` not in ``large``).
CONCEPTS: dict[str, tuple[str, ...]] = {
    # direction and shape of the overall movement
    "trend": _TREND,
    "upward": _TREND,
    "downward": _TREND,
    "increas": _TREND,
    "decreas": _TREND,
    "rising": _TREND,
    "rise": _TREND,
    "falling": _TREND,
    "slope": _TREND,
    "grow": _TREND,
    "declin": _TREND,
    "direction": _TREND,
    "linear": _TREND,
    "exponential": _TREND,
    "accelerat": _TREND,
    "decelerat": _TREND,
    "monoton": _TREND,
    "turn": _TREND,
    # cycles
    "season": _CYCLE,
    "cycl": _CYCLE,
    "period": _CYCLE,
    "oscillat": _CYCLE,
    "frequen": _CYCLE,
    "repeat": _CYCLE,
    "harmonic": _CYCLE,
    "sinus": _CYCLE,
    "wave": _CYCLE,
    "amplitude": ("seasonal", "cycle", "window", "summary", "spectral"),
    "swing": ("seasonal", "cycle", "window", "summary", "spectral"),
    # anomalies and events
    "anomal": _ANOMALY,
    "outlier": _ANOMALY,
    "spike": _ANOMALY,
    "unusual": _ANOMALY,
    "abnormal": _ANOMALY,
    "sudden": _ANOMALY,
    "glitch": _ANOMALY,
    "event": _ANOMALY,
    "irregular": _ANOMALY,
    "stuck": _ANOMALY,
    "flat": ("anomaly",),  # a flat-lined sensor; a trend that "stays flat" keeps its other words
    "extreme": ("anomaly", "distribution", "summary"),
    # noise
    "noise": _NOISE,
    "noisy": _NOISE,
    "noisi": _NOISE,
    "white": _NOISE,
    "red": _NOISE,
    "snr": _NOISE,
    "signal": _NOISE,
    "random": _NOISE,
    "smooth": ("noise", "entropy", "transform", "wavelet"),
    # stationarity and memory
    "stationar": _STATIONARY,
    "unit": _STATIONARY,
    "revert": _STATIONARY,
    "reversion": _STATIONARY,
    "integrat": _STATIONARY,
    "drift": _STATIONARY,
    "walk": _STATIONARY,
    "autoregress": _MEMORY,
    "autocorrelat": _MEMORY,
    "moving": _MEMORY,
    "memory": _MEMORY,
    "persist": _MEMORY,
    "arma": _MEMORY,
    # relations between series
    "granger": _CAUSAL,
    "caus": _CAUSAL,
    "lead": _CAUSAL,
    "lag": _CAUSAL,
    "delay": _CAUSAL,
    "influenc": _CAUSAL,
    "driv": _CAUSAL,
    "correlat": ("correlation", "lag", "causality", "shape"),
    "relationship": ("correlation", "lag", "causality"),
    "similar": _SIMILAR,
    "shape": _SIMILAR,
    "resembl": _SIMILAR,
    "match": _SIMILAR,
    "alike": _SIMILAR,
    "distance": _SIMILAR,
    "flip": _SIMILAR,
    "mirror": _SIMILAR,
    "invert": _SIMILAR,
    "pattern": _SIMILAR + _CYCLE,
    "distribut": _DISTRIBUTION,
    "histogram": _DISTRIBUTION,
    "tail": _DISTRIBUTION,
    # regimes, levels, spread
    "regime": _REGIME,
    "switch": _REGIME,
    "shift": _REGIME,
    "change": _REGIME,
    "break": _REGIME,
    "segment": _REGIME,
    "jump": _REGIME,
    "abrupt": _REGIME,
    "level": _LEVEL,
    "mean": _LEVEL,
    "average": _LEVEL,
    "median": _LEVEL,
    "moment": _SPREAD + _LEVEL,
    "varian": _SPREAD,
    "volatil": _SPREAD,
    "variab": _SPREAD,
    "fluctuat": _SPREAD,
    "spread": _SPREAD,
    "deviation": _SPREAD,
    "heterosced": _SPREAD,
    "multiplicative": ("seasonal", "noise", "window"),
    "additive": ("seasonal", "noise", "window"),
    # future, transforms, complexity
    "forecast": _FUTURE,
    "future": _FUTURE,
    "next": _FUTURE,
    "predict": _FUTURE + _COMPLEXITY,
    "transform": _TRANSFORM,
    "differenc": _TRANSFORM,
    "cumulative": _TRANSFORM,
    "entropy": _COMPLEXITY,
    "complex": _COMPLEXITY,
    "regular": _COMPLEXITY,
}


def groups_for(tokens: Iterable[str], lexicon: Lexicon = CONCEPTS) -> frozenset[str]:
    """Catalog groups the words point at (empty when no word is in the lexicon)."""
    out: set[str] = set()
    for t in tokens:
        for stem, groups in lexicon.items():
            if _hits(t, stem):
                out.update(groups)
    return frozenset(out)


def concept_stems(tokens: Iterable[str], lexicon: Lexicon = CONCEPTS) -> frozenset[str]:
    """The lexicon's stems the words hit (two phrasings of one question usually share one).

    A stem mapped to no group (muted by :func:`extend`) is not hit.
    """
    return frozenset(stem for t in tokens for stem, g in lexicon.items() if g and _hits(t, stem))


_STEM = re.compile(r"[a-z]{3,}")


def catalog_groups() -> frozenset[str]:
    """The catalog's group names (what a lexicon entry may point at)."""
    return frozenset(p.group for p in CATALOG.values())


def concept_entries(
    extra: Mapping[str, Sequence[str]] | Iterable[tuple[str, Sequence[str]]],
) -> ConceptEntries:
    """Lexicon entries, validated and sorted by stem (see :func:`extend`).

    Raises:
        ValueError: Naming the first bad entry.
    """
    items = list(extra.items()) if isinstance(extra, Mapping) else list(extra)
    if not items:
        return ()
    known = catalog_groups()
    out: dict[str, tuple[str, ...]] = {}
    for stem, groups in items:
        if not isinstance(stem, str) or not _STEM.fullmatch(stem):
            raise ValueError(
                f"concept entry {stem!r}: a stem is three or more lower-case letters a-z "
                "(a word's beginning: 'wobbl' for wobble, wobbly, wobbling)"
            )
        if isinstance(groups, str) or not isinstance(groups, Sequence):
            raise ValueError(
                f"concept entry {stem!r}: expected a list of catalog groups, got {groups!r}"
            )
        bad = [g for g in groups if g not in known]
        if bad:
            raise ValueError(
                f"concept entry {stem!r}: unknown catalog group {bad[0]!r}; one of {sorted(known)}"
            )
        if stem in out:
            raise ValueError(f"concept entry {stem!r} is given twice")
        out[stem] = tuple(dict.fromkeys(groups))
    return tuple(sorted(out.items()))


def extend(
    extra: Mapping[str, Sequence[str]] | Iterable[tuple[str, Sequence[str]]],
    base: Lexicon = CONCEPTS,
) -> dict[str, tuple[str, ...]]:
    """``base`` with ``extra``'s stems added; a stem already in ``base`` takes ``extra``'s groups.

    A stem given no groups is muted: its words point at nothing (e.g. ``{"flat": []}`` when a
    benchmark's "flat" means a trend, not a stuck sensor). As in the shipped lexicon, a stem of
    five letters or more matches every word it begins; a shorter one only the word itself and
    its inflections (``lag``: lags, lagged, lagging; not large).

    Example:
        >>> lex = extend({"wobbl": ["noise", "window"], "flat": []})
        >>> sorted(groups_for(["wobbly"], lex)), sorted(groups_for(["flat"], lex))
        (['noise', 'window'], [])

    Raises:
        ValueError: A stem that is not three or more lower-case letters, a group not in the
            catalog (:func:`catalog_groups`), or a stem given twice, naming the entry.
    """
    out = dict(base)
    out.update(concept_entries(extra))
    return out


def load_concepts(path: str | Path) -> ConceptEntries:
    """Lexicon entries from a JSON file: one object, stem -> list of catalog groups.

    Example file: ``{"wobbl": ["noise", "window"], "plateau": ["anomaly", "segments"]}``.

    Raises:
        FileNotFoundError: No such file.
        ValueError: Not a JSON object, or a bad entry (named, with the file).
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected one JSON object, stem -> list of catalog groups")
    try:
        return concept_entries(data)
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from exc


#: Endings a short stem may carry (inflections and the common derivations of the lexicon's words;
#: a doubled final consonant is allowed before a vowel: ``flipped``, ``lagging``).
_SUFFIXES = frozenset(
    {"", "s", "e", "es", "ed", "d", "ing", "er", "ers", "en", "al", "ality", "ic", "ical", "th"}
    | {"form", "forms"}
)


def _hits(token: str, stem: str) -> bool:
    if len(stem) >= 5:
        return token.startswith(stem)
    if not token.startswith(stem):
        return False
    rest = token[len(stem) :]
    if rest[:1] == stem[-1:] and rest[1:2] in ("e", "i"):
        rest = rest[1:]  # doubled consonant: flip-ped, lag-ging
    return rest in _SUFFIXES


_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "from",
        "with",
        "that",
        "this",
        "what",
        "which",
        "when",
        "where",
        "into",
        "over",
        "than",
        "then",
        "there",
        "their",
        "does",
        "series",
        "value",
        "values",
        "time",
        "each",
        "between",
        "first",
        "second",
        "more",
        "less",
        "most",
        "least",
    ]
)


def _stem(w: str) -> str:
    return w[:5]


def relevance(words: Iterable[str], name: str, summary: str = "") -> int:
    """How many of a question's words a measurement's name or summary speaks of (a prior tie-break).

    ``name`` is the measurement's description (primitive and output key, e.g.
    ``spikes.n_spikes``); ``summary`` the primitive's one-line summary. Words of four letters or
    more are compared by their first five letters; common words are ignored.
    """
    parts = {_stem(p) for p in _WORDS.findall(f"{name} {summary}".lower()) if len(p) >= 4}
    return sum(1 for w in set(words) if len(w) >= 4 and w not in _STOP and _stem(w) in parts)
