"""Regularity: sample entropy, permutation entropy, spectral entropy (group ``entropy``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._common import Result, as_series, finish, guarded, is_flat
from ._registry import primitive
from .spectral import prepare

__all__ = ["permutation_entropy", "sample_entropy", "spectral_entropy"]

MAX_ANCHORS = 2048


@primitive(
    group="entropy",
    outputs=("sampen", "matches_m", "matches_m1", "bounded"),
    grid={"m": (2, 3), "r": (0.1, 0.2, 0.3)},
)
@guarded
def sample_entropy(y: Any, *, m: int = 2, r: float = 0.2) -> Result:
    """Sample entropy -log(A/B) in nats (higher = less regular); tolerance r in units of std(y).

    B counts pairs of length-m templates within Chebyshev distance r * std, A the same for length
    m + 1 (self-matches excluded, n - m templates for both). For n - m > 2048, 2048 evenly spaced
    anchor templates are compared with all templates (deterministic subsample); each anchor then
    tests only the templates whose first value lies within the tolerance (found in sorted order),
    which gives the same counts as testing all of them in a fraction of the time on long series.

    Args:
        y: Series.
        m: Template length (1..5).
        r: Tolerance as a fraction of the standard deviation (> 0).

    Returns:
        ``sampen``; ``matches_m`` (B) and ``matches_m1`` (A) as counted over anchors;
        ``bounded`` (True when A = 0, and sampen is then the upper bound log(B), or log(1) = 0 when
        B = 0 too).
    """
    x = as_series(y, 10)
    if x is None or is_flat(x) or not (1 <= int(m) <= 5) or not float(r) > 0:
        return None
    mm = int(m)
    n = x.size
    tol = float(r) * float(np.std(x))
    N = n - mm
    if N < 3:
        return None
    cols = [x[c : c + N] for c in range(mm + 1)]
    if N <= MAX_ANCHORS:
        B, A = _matches_dense(cols, np.arange(N), mm, tol)
    else:
        anchors = np.unique(np.linspace(0, N - 1, MAX_ANCHORS).astype(np.int64))
        B, A = _matches_sorted(cols, anchors, mm, tol)
    bounded = A == 0
    se = math.log(B) if bounded and B > 0 else (0.0 if bounded else -math.log(A / B))
    return finish({"sampen": se, "matches_m": B, "matches_m1": A, "bounded": bounded})


def _matches_dense(
    cols: list[np.ndarray], anchors: np.ndarray, mm: int, tol: float
) -> tuple[int, int]:
    """(B, A) template matches of each anchor against all templates, by full comparison blocks."""
    B = 0
    A = 0
    for s in range(0, anchors.size, 512):
        ai = anchors[s : s + 512]
        ok = np.abs(cols[0][ai][:, None] - cols[0][None, :]) <= tol
        for c in range(1, mm):
            ok &= np.abs(cols[c][ai][:, None] - cols[c][None, :]) <= tol
        ok[np.arange(ai.size), ai] = False
        B += int(np.count_nonzero(ok))
        ok &= np.abs(cols[mm][ai][:, None] - cols[mm][None, :]) <= tol
        A += int(np.count_nonzero(ok))
    return B, A


def _matches_sorted(
    cols: list[np.ndarray], anchors: np.ndarray, mm: int, tol: float
) -> tuple[int, int]:
    """The counts of :func:`_matches_dense`, testing only templates near each anchor's first value.

    A template can match only if its first value is within ``tol`` of the anchor's; those are a
    contiguous run of the first values in sorted order. The run is widened by a relative 1e-9 (so
    rounding never drops a match) and every candidate then gets the same test as the dense count,
    so the counts are equal; the work per anchor is the run's length instead of all templates.
    """
    first = cols[0]
    order = np.argsort(first, kind="stable")
    srt = first[order]
    pad = 1e-9 * (np.abs(first[anchors]) + tol) + 1e-300
    lo = np.searchsorted(srt, first[anchors] - tol - pad, side="left")
    hi = np.searchsorted(srt, first[anchors] + tol + pad, side="right")
    B = 0
    A = 0
    for a, i, j in zip(anchors.tolist(), lo.tolist(), hi.tolist(), strict=True):
        cand = order[i:j]
        ok = np.abs(first[a] - first[cand]) <= tol
        for c in range(1, mm):
            ok &= np.abs(cols[c][a] - cols[c][cand]) <= tol
        ok &= cand != a
        B += int(np.count_nonzero(ok))
        ok &= np.abs(cols[mm][a] - cols[mm][cand]) <= tol
        A += int(np.count_nonzero(ok))
    return B, A


@primitive(
    group="entropy",
    outputs=("pe", "forbidden_frac", "n_patterns"),
    grid={"order": (3, 4, 5), "delay": (1, 2)},
)
@guarded
def permutation_entropy(y: Any, *, order: int = 3, delay: int = 1) -> Result:
    """Normalized permutation entropy in [0, 1] (1 = all ordinal patterns equally likely).

    Ties are broken by position (stable sort), so a constant series has entropy 0.

    Args:
        y: Series.
        order: Embedding dimension (2..7).
        delay: Embedding delay in samples (>= 1).

    Returns:
        ``pe`` (Shannon entropy of ordinal patterns / log(order!)), ``forbidden_frac`` (share of the
        order! patterns never observed), ``n_patterns`` (distinct patterns seen).
    """
    x = as_series(y, 4)
    if x is None or not (2 <= int(order) <= 7) or int(delay) < 1:
        return None
    o, d = int(order), int(delay)
    span = (o - 1) * d + 1
    if x.size < span + 1:
        return None
    emb = np.lib.stride_tricks.sliding_window_view(x, span)[:, ::d]
    ranks = np.argsort(emb, axis=1, kind="stable")
    codes = ranks @ (o ** np.arange(o))
    _, counts = np.unique(codes, return_counts=True)
    p = counts / counts.sum()
    h = float(-np.sum(p * np.log(p)))
    total = math.factorial(o)
    return finish(
        {
            "pe": min(1.0, max(0.0, h / math.log(total))),
            "forbidden_frac": 1.0 - counts.size / total,
            "n_patterns": int(counts.size),
        }
    )


@primitive(
    group="entropy",
    outputs=("spectral_entropy", "top_share_10pct"),
    grid={"detrend": (True, False)},
)
@guarded
def spectral_entropy(y: Any, *, detrend: bool = False) -> Result:
    """Normalized Shannon entropy of the periodogram in [0, 1] (1 = white noise, ~0 = pure tone).

    Args:
        y: Series.
        detrend: Remove a least-squares line first (else only the mean).

    Returns:
        ``spectral_entropy`` (entropy of the non-DC power distribution / log(bins)),
        ``top_share_10pct`` (share of power in the strongest 10% of bins).
    """
    x = as_series(y, 8)
    if x is None:
        return None
    dd = prepare(x, bool(detrend))
    if dd is None:
        return None
    p = np.abs(np.fft.rfft(dd))[1:] ** 2
    tot = float(p.sum())
    if not tot > 0 or p.size < 2:
        return None
    q = p / tot
    nz = q[q > 0]
    h = float(-np.sum(nz * np.log(nz))) / math.log(q.size)
    k = max(1, round(0.1 * q.size))
    return finish(
        {"spectral_entropy": min(1.0, max(0.0, h)), "top_share_10pct": float(np.sort(q)[-k:].sum())}
    )
