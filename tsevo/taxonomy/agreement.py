"""Agreement statistics and the gate's status decision (design §4.5–4.6).

Annotators label the gate's confirmed errors with codes (phase 4). From those labels:

* ``cohen_area`` (the paper's metric; gates by default): labels collapse to areas
  (:func:`~tsevo.taxonomy.codes.area_of`: A system group, B role, C subdomain, MAST category).
  The items are the (confirmed error, area) cells, 1 where the annotator gave that error a code
  in that area. Cohen's κ per annotator pair, mean over the pairs; a pair whose chance agreement
  is 1 (both constant, the same constant) has no κ and is left out; none left: undefined.
* ``fleiss_code_macro`` (AdaMAST's released code): per code, a binary Fleiss κ over errors ×
  annotators, clipped to [−1, 1], chance agreement 1 with full agreement counted as 1; the mean
  over the codes some annotator used. Deviation from the released code: no used code is undefined
  (it reports 1.0).
* ``coverage``: the share of confirmed errors with at least one consolidated code.

:func:`gate_status` turns one κ and the coverage into a status: ``accepted`` iff κ ≥ target and
coverage ≥ floor (both rounded to 12 decimals first), else ``review_required``, which is also the
answer for an undefined value or a degenerate panel. Both κ are always reported; the result names
the one that gated. Undefined values are ``None``, never NaN.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from .codes import area_of
from .model import Taxonomy

__all__ = [
    "COVERAGE_FLOOR",
    "KAPPA_TARGET",
    "METRICS",
    "AgreementResult",
    "GateDecision",
    "PairKappa",
    "agreement",
    "area_matrix",
    "cohen_area",
    "cohen_kappa",
    "consolidate",
    "coverage",
    "fleiss_code_macro",
    "fleiss_kappa",
    "gate_status",
]

#: The paper's acceptance thresholds.
KAPPA_TARGET = 0.75
COVERAGE_FLOOR = 0.70
#: The agreement metrics, the gating default first.
METRICS: tuple[str, ...] = ("cohen_area", "fleiss_code_macro")

#: Phase-4 labels of one annotator: confirmed error key -> the code ids it assigned.
Labels = Mapping[str, Collection[str]]


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's κ of two raters over the same items (nominal labels), computed exactly.

    Args:
        a: The first rater's label per item.
        b: The second rater's label per item (same length).

    Returns:
        κ = (p_o − p_e) / (1 − p_e); ``None`` when undefined (no items, or p_e = 1: both raters
        gave every item the same single label).

    Example:
        >>> cohen_kappa([1, 1, 1, 0, 0, 0, 0, 0, 1, 0], [1, 1, 0, 0, 0, 0, 0, 1, 1, 0])
        0.5833333333333334
    """
    if len(a) != len(b):
        raise ValueError(f"raters labelled different numbers of items: {len(a)} vs {len(b)}")
    n = len(a)
    if n == 0:
        return None
    agree = sum(x == y for x, y in zip(a, b, strict=True))
    counts_a: dict[Any, int] = {}
    counts_b: dict[Any, int] = {}
    for x, y in zip(a, b, strict=True):
        counts_a[x] = counts_a.get(x, 0) + 1
        counts_b[y] = counts_b.get(y, 0) + 1
    expected = sum(c * counts_b.get(k, 0) for k, c in counts_a.items())  # p_e * n^2
    if expected == n * n:
        return None
    return float(Fraction(agree * n - expected, n * n - expected))


def fleiss_kappa(table: npt.ArrayLike) -> float | None:
    """Fleiss' κ from a subjects × categories table of counts, computed exactly.

    Args:
        table: ``table[i, j]`` = how many raters put subject ``i`` in category ``j``; every row
            sums to the same number of raters (at least 2).

    Returns:
        κ = (P̄ − P_e) / (1 − P_e); ``None`` when undefined (no subjects, or P_e = 1: every rating
        in one category).

    Raises:
        ValueError: Rows with different rater counts, fewer than two raters, negative counts.
    """
    t = np.asarray(table)
    if t.ndim != 2:
        raise ValueError("a subjects x categories table is required")
    if t.shape[0] == 0:
        return None
    if not np.all(t == np.round(t)) or np.any(t < 0):
        raise ValueError("counts must be non-negative integers")
    t = t.astype(np.int64)
    raters = t.sum(axis=1)
    n = int(raters[0])
    if n < 2 or np.any(raters != n):
        raise ValueError(f"every subject needs the same number (>= 2) of raters, got {raters}")
    subjects = t.shape[0]
    total = subjects * n
    p_bar = Fraction(int((t * t).sum()) - total, total * (n - 1))
    col = t.sum(axis=0)
    p_e = Fraction(int((col * col).sum()), total * total)
    if p_e == 1:
        return None
    return float((p_bar - p_e) / (1 - p_e))


def _known(labels: Sequence[Labels], taxonomy: Taxonomy) -> tuple[list[dict[str, set]], list]:
    """Labels restricted to the taxonomy's active ids; unknown ids dropped with a warning."""
    known = set(taxonomy.ids)
    dropped: list[tuple[int, str, str]] = []
    out = []
    for r, lab in enumerate(labels):
        keep: dict[str, set[str]] = {}
        for err, ids in lab.items():
            ids = {ids} if isinstance(ids, str) else set(ids)
            keep[err] = {i for i in ids if i in known}
            dropped += [(r, err, i) for i in sorted(ids - known)]
        out.append(keep)
    if dropped:
        warnings.warn(
            f"dropped {len(dropped)} label(s) naming codes not in the taxonomy: "
            f"{sorted({i for _, _, i in dropped})}",
            stacklevel=3,
        )
    return out, dropped


def area_matrix(
    labels: Sequence[Labels], errors: Sequence[str], taxonomy: Taxonomy
) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """The annotators × (error, area) 0/1 matrix ``cohen_area`` compares.

    Args:
        labels: One mapping per annotator: error key -> assigned code ids (unknown ids dropped).
        errors: The confirmed errors, in order.
        taxonomy: Gives each code its area; its areas (sorted) make the columns per error.

    Returns:
        The matrix and its column keys ``(error, area)``.
    """
    clean, _ = _known(labels, taxonomy)
    area = {c.id: area_of(c) for c in taxonomy.codes}
    areas = sorted(set(area.values()))
    cells = [(e, a) for e in errors for a in areas]
    mat = np.zeros((len(clean), len(cells)), dtype=np.int8)
    for r, lab in enumerate(clean):
        given = {(e, area[i]) for e in errors for i in lab.get(e, ())}
        mat[r] = [cell in given for cell in cells]
    return mat, cells


@dataclass(frozen=True)
class PairKappa:
    """Cohen's κ of one annotator pair (``None``: p_e = 1, left out of the mean)."""

    a: int
    b: int
    kappa: float | None


def cohen_area(
    labels: Sequence[Labels], errors: Sequence[str], taxonomy: Taxonomy
) -> tuple[float | None, tuple[PairKappa, ...]]:
    """Mean pairwise Cohen κ at the area level (the paper's gate metric; see the module doc).

    Returns:
        The mean over pairs with a defined κ (``None`` if none has one) and every pair's κ.

    Raises:
        ValueError: Fewer than two annotators.
    """
    if len(labels) < 2:
        raise ValueError(f"agreement needs at least two annotators, got {len(labels)}")
    mat, _ = area_matrix(labels, errors, taxonomy)
    pairs = tuple(
        PairKappa(i, j, cohen_kappa(mat[i].tolist(), mat[j].tolist()))
        for i, j in combinations(range(len(labels)), 2)
    )
    defined = [p.kappa for p in pairs if p.kappa is not None]
    return (float(np.mean(defined)) if defined else None), pairs


def fleiss_code_macro(
    labels: Sequence[Labels], errors: Sequence[str], taxonomy: Taxonomy
) -> tuple[float | None, dict[str, float]]:
    """Macro mean over used codes of a binary Fleiss κ per code (AdaMAST's released metric).

    Returns:
        The macro mean (``None`` when no code was used or there are no errors) and each used
        code's κ (clipped to [−1, 1]; full agreement with P_e = 1 counts as 1).

    Raises:
        ValueError: Fewer than two annotators.
    """
    if len(labels) < 2:
        raise ValueError(f"agreement needs at least two annotators, got {len(labels)}")
    clean, _ = _known(labels, taxonomy)
    n = len(clean)
    per_code: dict[str, float] = {}
    for code_id in taxonomy.ids:
        ones = np.array([sum(code_id in lab.get(e, ()) for lab in clean) for e in errors])
        if not errors or ones.sum() == 0:
            continue
        k = fleiss_kappa(np.column_stack([n - ones, ones]))
        per_code[code_id] = 1.0 if k is None else min(1.0, max(-1.0, k))
    value = float(np.mean(list(per_code.values()))) if per_code else None
    return value, per_code


def consolidate(labels: Sequence[Labels], errors: Sequence[str], *, quorum: int = 2) -> dict:
    """Per error, the codes at least ``quorum`` annotators assigned (the consolidated labels)."""
    out: dict[str, set[str]] = {}
    for e in errors:
        counts: dict[str, int] = {}
        for lab in labels:
            ids = lab.get(e, ())
            for i in {ids} if isinstance(ids, str) else set(ids):
                counts[i] = counts.get(i, 0) + 1
        out[e] = {i for i, c in counts.items() if c >= quorum}
    return out


def coverage(consolidated: Labels, errors: Sequence[str]) -> float | None:
    """Share of confirmed errors with at least one consolidated code (``None``: no errors)."""
    if not errors:
        return None
    return sum(bool(consolidated.get(e)) for e in errors) / len(errors)


def _defined(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


@dataclass(frozen=True)
class GateDecision:
    """A status decision and why.

    Attributes:
        status: ``accepted`` or ``review_required``.
        metric: The κ metric that gated (one of :data:`METRICS`).
        kappa: Its value (``None``: undefined).
        coverage: The coverage (``None``: undefined).
        reason: One line naming what passed or failed, with the metric's name.
    """

    status: str
    metric: str
    kappa: float | None
    coverage: float | None
    reason: str


def gate_status(
    kappa: float | None,
    coverage: float | None,
    *,
    metric: str = "cohen_area",
    kappa_target: float = KAPPA_TARGET,
    coverage_floor: float = COVERAGE_FLOOR,
    degenerate: bool = False,
) -> GateDecision:
    """The gate's status for one round's figures (``accepted`` iff both thresholds are met).

    Args:
        kappa: The gating κ (``None`` or NaN: undefined).
        coverage: The coverage (``None`` or NaN: undefined).
        metric: Which κ this is, named in the decision.
        kappa_target: κ needed (the paper: 0.75).
        coverage_floor: Coverage needed (the paper: 0.70).
        degenerate: The panel was degenerate (identical annotators): never ``accepted``.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; use one of {METRICS}")

    def fail(why: str) -> GateDecision:
        return GateDecision("review_required", metric, kappa, coverage, why)

    if degenerate:
        return fail(f"{metric}: degenerate panel (the annotators' requests were identical)")
    if not _defined(kappa):
        return fail(f"{metric} undefined (no pair/code with a defined kappa)")
    k = round(float(kappa), 12)  # type: ignore[arg-type]
    if not _defined(coverage):
        return fail(f"{metric} {k:.4f}, coverage undefined (no confirmed errors)")
    c = round(float(coverage), 12)  # type: ignore[arg-type]
    if k < kappa_target:
        return fail(f"{metric} {k:.4f} < {kappa_target}")
    if c < coverage_floor:
        return fail(f"{metric} {k:.4f} >= {kappa_target} but coverage {c:.4f} < {coverage_floor}")
    return GateDecision(
        "accepted",
        metric,
        kappa,
        coverage,
        f"{metric} {k:.4f} >= {kappa_target} and coverage {c:.4f} >= {coverage_floor}",
    )


@dataclass(frozen=True)
class AgreementResult:
    """One round's agreement: both κ, coverage, the decision and what was dropped.

    Attributes:
        cohen_area: Mean pairwise area-level Cohen κ (``None``: undefined).
        cohen_pairs: Every pair's κ.
        fleiss_code_macro: Macro per-code Fleiss κ (``None``: undefined).
        fleiss_per_code: Each used code's κ.
        coverage: Share of confirmed errors with a consolidated code.
        decision: The status decision, naming the metric that gated.
        n_errors: Confirmed errors labelled.
        dropped: ``(annotator, error, code)`` labels naming codes not in the taxonomy.
    """

    cohen_area: float | None
    cohen_pairs: tuple[PairKappa, ...]
    fleiss_code_macro: float | None
    fleiss_per_code: Mapping[str, float]
    coverage: float | None
    decision: GateDecision
    n_errors: int
    dropped: tuple[tuple[int, str, str], ...] = field(default=())

    @property
    def status(self) -> str:
        """The decided status."""
        return self.decision.status

    @property
    def metric(self) -> str:
        """The metric that gated."""
        return self.decision.metric

    def as_generation(self, rounds_completed: int) -> dict[str, Any]:
        """The ``generation.agreement`` record of ``taxonomy.json`` (AdaMAST's keys first)."""
        return {
            "final_kappa": self.decision.kappa,
            "final_coverage": self.coverage,
            "rounds_completed": rounds_completed,
            "metric": self.metric,
            "cohen_area": self.cohen_area,
            "fleiss_code_macro": self.fleiss_code_macro,
            "status": self.status,
            "reason": self.decision.reason,
        }


def agreement(
    labels: Sequence[Labels],
    errors: Sequence[str],
    taxonomy: Taxonomy,
    *,
    consolidated: Labels | None = None,
    metric: str = "cohen_area",
    kappa_target: float = KAPPA_TARGET,
    coverage_floor: float = COVERAGE_FLOOR,
    quorum: int = 2,
    degenerate: bool = False,
) -> AgreementResult:
    """Both κ, the coverage and the status decision for one round of labels.

    Args:
        labels: One mapping per annotator (at least two): confirmed error -> assigned code ids.
            Ids not in ``taxonomy`` are dropped with a warning (and listed in the result).
        errors: The confirmed errors (the items), in order.
        taxonomy: The version labelled.
        consolidated: The consolidated labels (after deliberation); default: the codes at least
            ``quorum`` annotators assigned (:func:`consolidate`).
        metric: The κ that gates (``cohen_area``, the paper's, or ``fleiss_code_macro``).
        kappa_target: See :func:`gate_status`.
        coverage_floor: See :func:`gate_status`.
        quorum: Votes a code needs to be consolidated when ``consolidated`` is not given.
        degenerate: See :func:`gate_status`.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; use one of {METRICS}")
    if len(labels) < 2:
        raise ValueError(f"agreement needs at least two annotators, got {len(labels)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warned once below, not once per statistic
        ck, pairs = cohen_area(labels, errors, taxonomy)
        fk, per_code = fleiss_code_macro(labels, errors, taxonomy)
    clean, dropped = _known(labels, taxonomy)
    if consolidated is None:
        cons = consolidate(clean, errors, quorum=quorum)
    else:
        known = set(taxonomy.ids)
        cons = {e: set(ids) & known for e, ids in consolidated.items()}
    cov = coverage(cons, errors)
    decision = gate_status(
        ck if metric == "cohen_area" else fk,
        cov,
        metric=metric,
        kappa_target=kappa_target,
        coverage_floor=coverage_floor,
        degenerate=degenerate,
    )
    return AgreementResult(
        cohen_area=ck,
        cohen_pairs=pairs,
        fleiss_code_macro=fk,
        fleiss_per_code=per_code,
        coverage=cov,
        decision=decision,
        n_errors=len(errors),
        dropped=tuple(dropped),
    )
