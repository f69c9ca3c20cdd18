"""The synthetic suite: tsevo's embedded default data (12 families, gold by construction).

Each family is a small module with a seeded generator (latent parameters -> series, question text,
shuffled options, gold), a dead band enforced by rejection sampling (the family's identifying
statistic is computed on the finished series and the item is redrawn when it is ambiguous), and an
oracle that reads only the series, the question text and the options.

``make_suite("mixed", seed)`` is a second preset (:mod:`tsevo.data.synthetic.mixed`): about 70
question kinds under one task label with a few training questions each, the regime of public TS-QA
benchmarks.

>>> from tsevo.data.synthetic import make_suite, summary_text
>>> suite = make_suite("tiny", seed=0)        # already split train/val/test
>>> print(summary_text(suite))                # doctest: +SKIP
"""

from ._base import DIFFICULTIES, Family, GenerationError
from .naive import global_summary, naive_answer
from .suite import (
    FAMILIES,
    PRESETS,
    SIZES,
    make_suite,
    oracle_answer,
    resolve_size,
    solver_report,
    summary_text,
)

__all__ = [
    "DIFFICULTIES",
    "FAMILIES",
    "PRESETS",
    "SIZES",
    "Family",
    "GenerationError",
    "global_summary",
    "make_suite",
    "naive_answer",
    "oracle_answer",
    "resolve_size",
    "solver_report",
    "summary_text",
]
