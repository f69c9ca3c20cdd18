"""Building the synthetic suite, and the oracle/naive solver report that certifies it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tsevo.data.question import Question
from tsevo.data.suite import SPLITS, Suite

from . import (
    anomaly,
    distribution,
    forecast,
    lag,
    matching,
    nearmiss,
    noise,
    regimes,
    seasonality,
    spectral,
    transform,
    trend,
    window,
)
from ._base import DIFFICULTIES, Family, family_key
from .mixed import CATEGORIES, make_mixed_suite, mixed_oracle
from .mixed import PRESET as MIXED
from .naive import naive_answer

__all__ = [
    "FAMILIES",
    "PRESETS",
    "SIZES",
    "make_suite",
    "oracle_answer",
    "resolve_size",
    "solver_report",
    "summary_text",
]

FAMILIES: dict[str, Family] = {
    m.FAMILY.name: m.FAMILY
    for m in (
        trend,
        seasonality,
        window,
        regimes,
        anomaly,
        noise,
        matching,
        distribution,
        lag,
        spectral,
        transform,
        forecast,
    )
}

#: Families a suite holds only when asked for by name (never in the default list).
OPT_IN: dict[str, Family] = dict(nearmiss.FAMILIES)

SIZES: dict[str, int] = {"tiny": 24, "default": 200, "large": 800}
#: The near-miss presets (design §8.14 of the Mara chains): family and questions per suite.
NEAR_MISS: dict[str, tuple[str, int]] = {
    "nearmiss": ("nearmiss", 400),
    "nearmiss1": ("nearmiss1", 400),
}
#: Presets that are not a size of the 12 families (``make_suite(PRESETS[0], seed)``).
PRESETS: tuple[str, ...] = (MIXED, *NEAR_MISS)
SPLIT_FRACTIONS = (0.5, 0.25, 0.25)


def resolve_size(size: str | int) -> int:
    """Questions per family for a preset name (``tiny``/``default``/``large``) or a count.

    Raises:
        ValueError: for an unknown preset or a count below 1.
    """
    if isinstance(size, bool):
        raise ValueError(f"size must be a preset or a positive int, got {size!r}")
    if isinstance(size, int | np.integer):
        n = int(size)
    elif isinstance(size, str) and size.strip().isdigit():
        n = int(size.strip())
    elif isinstance(size, str) and size in SIZES:
        n = SIZES[size]
    else:
        raise ValueError(f"unknown size {size!r}: use one of {sorted(SIZES)} or a positive int")
    if n < 1:
        raise ValueError(f"size must be at least 1 question per family, got {n}")
    return n


def make_suite(
    size: str | int = "default",
    seed: int = 0,
    families: Sequence[str] | None = None,
) -> Suite:
    """Generate the synthetic suite, already split train/val/test by group (stratified by task).

    Item ``i`` of family ``f`` is drawn from its own generator seeded by ``(seed, f, i)``, so a
    suite is reproducible byte for byte and a larger size extends a smaller one. Even indices are
    ``easy``, odd indices ``hard``; subtasks rotate so every subtask appears at both difficulties.

    ``size="mixed"`` is a different preset (:mod:`tsevo.data.synthetic.mixed`): about 70
    question kinds in five categories, one task label, opaque ids and 3-6 training questions per
    kind, the regime of public TS-QA benchmarks. ``size="nearmiss"`` (``"nearmiss1"``) is the
    near-miss family alone (:mod:`tsevo.data.synthetic.nearmiss`), 400 questions, whose separating
    measurement is two (one) template moves from the builtin planner's reach.

    Args:
        size: ``"tiny"`` (24 per family), ``"default"`` (200), ``"large"`` (800), an int, or
            ``"mixed"``.
        seed: Generation and split seed.
        families: Family names to include (default: all, in ``FAMILIES`` order; not with
            ``"mixed"``).

    Returns:
        A :class:`~tsevo.data.Suite` named ``synthetic-<size>-s<seed>`` with splits assigned.
    """
    if isinstance(size, str) and size == MIXED:
        if families is not None:
            raise ValueError(f"the {MIXED!r} preset has no families to choose")
        return make_mixed_suite(int(seed))
    label: str | None = None
    if isinstance(size, str) and size in NEAR_MISS:
        if families is not None:
            raise ValueError(f"the {size!r} preset has no families to choose")
        label = size
        families, size = [NEAR_MISS[size][0]], NEAR_MISS[size][1]
    n = resolve_size(size)
    names = list(FAMILIES) if families is None else list(families)
    known = {**FAMILIES, **OPT_IN}
    unknown = [f for f in names if f not in known]
    if unknown:
        raise ValueError(f"unknown families {unknown}; available: {sorted(known)}")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate family names in {names}")
    questions: list[Question] = []
    for name in names:
        fam = known[name]
        for i in range(n):
            rng = np.random.default_rng(np.random.SeedSequence([int(seed), family_key(name), i]))
            questions.append(fam.generate(rng, DIFFICULTIES[i % 2], i))
    if label is None:
        label = size if isinstance(size, str) and not size.strip().isdigit() else str(n)
    suite = Suite(f"synthetic-{label}-s{seed}", questions)
    return suite.split(fractions=SPLIT_FRACTIONS, seed=int(seed), stratify=True)


def oracle_answer(q: Question) -> int:
    """The family oracle's answer (the family is read from ``q.metadata["family"]``).

    Questions of the ``mixed`` preset are answered by their kind's solver.

    Raises:
        KeyError: when the question is not a synthetic-family question.
    """
    fam = q.metadata.get("family")
    if fam == MIXED:
        return mixed_oracle(q)
    if fam in OPT_IN:
        return OPT_IN[str(fam)].oracle(q)
    if fam not in FAMILIES:
        raise KeyError(f"question {q.id!r} has no known synthetic family (metadata family={fam!r})")
    return FAMILIES[str(fam)].oracle(q)


def _report_key(q: Question) -> str | None:
    """The row a question counts in: its family, or ``mixed/<category>``; None if neither."""
    fam = q.metadata.get("family")
    if fam in FAMILIES or fam in OPT_IN:
        return str(fam)
    if fam == MIXED:
        return f"{MIXED}/{q.metadata.get('category', '')}"
    return None


def _report_order(key: str) -> tuple[int, int]:
    if key in FAMILIES:
        return 0, list(FAMILIES).index(key)
    if key in OPT_IN:
        return 0, len(FAMILIES) + list(OPT_IN).index(key)
    cat = key.split("/", 1)[1]
    return 1, CATEGORIES.index(cat) if cat in CATEGORIES else len(CATEGORIES)


def solver_report(suite: Suite) -> pd.DataFrame:
    """Oracle and naive accuracy per (family, difficulty).

    Questions of the ``mixed`` preset count per category, as family ``mixed/<category>``.

    Returns:
        A DataFrame with columns family, task, difficulty, n, oracle, naive, chance (accuracies
        in [0, 1]; chance is the mean of ``1 / n_options``).
    """
    rows: dict[tuple[str, str], list[Question]] = {}
    for q in suite:
        key = _report_key(q)
        if q.gold is None or key is None:
            continue
        rows.setdefault((key, str(q.metadata.get("difficulty", ""))), []).append(q)
    out = []
    for fam, diff in sorted(rows, key=lambda k: (_report_order(k[0]), k[1])):
        qs = rows[(fam, diff)]
        out.append(
            {
                "family": fam,
                "task": qs[0].task,
                "difficulty": diff,
                "n": len(qs),
                "oracle": float(np.mean([oracle_answer(q) == q.gold for q in qs])),
                "naive": float(np.mean([naive_answer(q) == q.gold for q in qs])),
                "chance": float(np.mean([1.0 / q.n_options for q in qs])),
            }
        )
    return pd.DataFrame(
        out, columns=["family", "task", "difficulty", "n", "oracle", "naive", "chance"]
    )


def summary_text(suite: Suite) -> str:
    """A printable summary: families, sizes, splits, and oracle vs naive accuracy."""
    report = solver_report(suite)
    lines = [f"{suite.name}: {len(suite)} questions, {len(suite.tasks)} tasks"]
    if suite.splits:
        counts = {sp: sum(1 for v in suite.splits.values() if v == sp) for sp in SPLITS}
        lines.append("splits: " + ", ".join(f"{sp}={counts[sp]}" for sp in SPLITS))
    lines.append("")
    fw = max([15] + [len(f) + 1 for f in report["family"]])
    head = f"{'family':<{fw}}{'diff':<6}{'n':>5}{'train':>7}{'val':>5}{'test':>6}"
    lines.append(head + f"{'oracle':>8}{'naive':>7}{'chance':>8}")
    for r in report.itertuples(index=False):
        ids = [
            q.id
            for q in suite
            if _report_key(q) == r.family and q.metadata.get("difficulty") == r.difficulty
        ]
        sp = [suite.splits.get(i) for i in ids]
        lines.append(
            f"{r.family:<{fw}}{r.difficulty:<6}{r.n:>5}{sp.count('train'):>7}{sp.count('val'):>5}"
            f"{sp.count('test'):>6}{r.oracle:>8.3f}{r.naive:>7.3f}{r.chance:>8.3f}"
        )
    if len(report):
        w = report["n"].to_numpy(dtype=float)
        lines.append(
            f"{'all':<{fw - 4}}{'':<6}{int(w.sum()):>9}{'':>18}"
            f"{np.average(report['oracle'], weights=w):>8.3f}"
            f"{np.average(report['naive'], weights=w):>7.3f}"
            f"{np.average(report['chance'], weights=w):>8.3f}"
        )
    return "\n".join(lines)
