"""The ``mixed`` preset: many question kinds, one task label, a few training questions per kind.

``make_suite("mixed", seed=...)`` (or ``tsevo evolve --suite synthetic:mixed``) builds a development
suite shaped like a public TS-QA benchmark rather than like the twelve families: 69 question kinds
in five categories (pattern recognition 27, anomaly detection 16, similarity 11, noise 9, causality
6), every question under the one task label ``"mixed"`` and an opaque id (``mix-`` and a seeded
hash), 6-12 questions per kind of which 3-6 are in train, series of 128-300 points (mostly 128),
one series ``ts`` or a pair ``ts1``/``ts2``, 2-4 options.

A kind (:class:`Kind`) is one question template with two phrasings of the same question, one
option set and one generator. Kinds share option sets ("Yes / No" 23 kinds, "Series 1 / Series 2"
6, "Beginning / Middle / End" 4, "upward / downward / no clear trend", "upward / downward",
"increases / decreases / stays about the same", "additive / multiplicative" 2 each), and one concept
is asked under several option sets (a trend as a direction, as yes/no, inside a stated window and as
a numeric slope). Numeric options (periods in hours, delays in seconds, durations in minutes, SNR in
dB, a mean in °F of a series in °C, ...) need an affine step after the measurement; their gold rank
among the options is uniform. Sixteen kinds (``Kind.direct`` False) need two measurements combined
or a concept the primitives catalog lacks (does the level recover after the anomaly, is the second
half more predictable, flip or reversal, AR or MA, ...).

Gold comes from the latent parameters; each kind's identifying statistic is computed on the
finished series and the item is redrawn inside its dead band, so the oracle (``mixed_oracle``, the
kind's statistic read without a dead band) scores 100% by construction. ``subtask`` carries the
kind's name and ``metadata`` the kind, category, option set and latent parameters; no role reads
them. The generator is frozen (issue 11): its scores on the development seeds are in
``tests/bench/mixed_scores.py``'s JSON, and a change to it must be named with before/after scores.
"""

from ._kind import CATEGORIES, Kind
from .build import PRESET, TASK, kind_counts, make_mixed_suite, mixed_oracle
from .kinds import KINDS

__all__ = [
    "CATEGORIES",
    "KINDS",
    "PRESET",
    "TASK",
    "Kind",
    "kind_counts",
    "make_mixed_suite",
    "mixed_oracle",
]
