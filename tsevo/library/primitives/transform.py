"""Transform signature: which transformation T makes b ~ T(a) (group ``transform``)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from ._common import FloatArray, Result, as_series, finish, guarded
from ._registry import primitive
from .wavelet import haar_step

__all__ = ["TRANSFORMS", "transform_signature"]

TRANSFORMS = (
    "identity",
    "diff",
    "cumsum",
    "moving_average",
    "zscore",
    "minmax",
    "log",
    "fft_abs",
    "haar_approx",
    "haar_detail",
    "reverse",
    "shift",
    "negate",
)
CAP = 1000.0


def _res(cands: Iterable[FloatArray], b: FloatArray, fit_scale: bool = False) -> float:
    """Smallest normalized RMS residual of b against candidate outputs (head or tail aligned).

    A candidate whose length differs from len(b) by more than max(2, 2% of len(b)) scores ``CAP``.
    The residual is divided by max(std of the compared part of b, 1e-3 std(b), 1e-12).
    """
    best = CAP
    lb = b.size
    tol = max(2, int(0.02 * lb))
    fl = max(1e-3 * float(np.std(b)), 1e-12)
    for t in cands:
        if t.size == 0 or abs(t.size - lb) > tol:
            continue
        m = min(t.size, lb)
        for tt, bb in ((t[:m], b[:m]), (t[-m:], b[-m:])):
            if fit_scale:
                den = float(tt @ tt)
                tt = tt * (float(tt @ bb) / den) if den > 0 else tt
            s = max(float(np.std(bb)), fl)
            r = float(np.sqrt(np.mean((bb - tt) ** 2))) / s
            if np.isfinite(r):
                best = min(best, r)
    return best


def _moving(a: FloatArray, w: int) -> list[FloatArray]:
    c = np.concatenate(([0.0], np.cumsum(a)))
    valid = (c[w:] - c[:-w]) / w
    k = np.arange(1, a.size + 1)
    lo = np.maximum(0, k - w)
    trailing = (c[k] - c[lo]) / (k - lo)
    same = np.convolve(a, np.ones(w) / w, mode="same")
    return [valid, trailing, same]


class _Work:
    """Residuals of one (a, b) pair that every grid variant reads.

    The transforms without a searched parameter, and the moving-average windows and shifts
    searched so far (extended on demand, never recomputed).
    """

    def __init__(self, x: FloatArray, y: FloatArray) -> None:
        self.x, self.y = x.copy(), y.copy()  # the caller may reuse its arrays
        self.fixed: dict[str, float] | None = None
        self.ma: list[float] = []  # window w = 2 + i
        self.shift: list[tuple[float, float]] = []  # shift k = 1 + i: (b lags a, b leads a)

    def ma_upto(self, w_max: int) -> list[float]:
        for w in range(2 + len(self.ma), w_max + 1):
            self.ma.append(_res(_moving(self.x, w), self.y))
        return self.ma[: max(0, w_max - 1)]

    def shift_upto(self, k_max: int) -> list[tuple[float, float]]:
        a, b, n = self.x, self.y, self.x.size
        for k in range(1 + len(self.shift), k_max + 1):
            pair = []
            for sgn in (1, -1):
                if b.size == n:
                    cand = (a[:-k], b[k:]) if sgn > 0 else (a[k:], b[:-k])
                    r = _res([cand[0]], cand[1])
                elif b.size == n - k:
                    r = _res([a[:-k] if sgn > 0 else a[k:]], b)
                else:
                    r = CAP
                rolled = _res([np.roll(a, sgn * k)], b) if b.size == n else CAP
                pair.append(min(r, rolled))
            self.shift.append((pair[0], pair[1]))
        return self.shift[:k_max]


_MEMO_SIZE = 8
_LOCAL = threading.local()  # one memo per thread: a _Work is extended in place


def _memo() -> dict[tuple[bytes, bytes], _Work]:
    """This thread's memo of recent pairs (oldest first)."""
    memo: dict[tuple[bytes, bytes], _Work] | None = getattr(_LOCAL, "memo", None)
    if memo is None:
        memo = _LOCAL.memo = {}
    return memo


def _work(x: FloatArray, y: FloatArray) -> _Work:
    """The pair's shared residuals; the grid's variants of one pair usually run back to back."""
    memo = _memo()
    key = (x.tobytes(), y.tobytes())
    hit = memo.get(key)
    if hit is None:
        if len(memo) >= _MEMO_SIZE:
            del memo[next(iter(memo))]
        hit = memo[key] = _Work(x, y)
    return hit


def _shift(work: _Work, max_shift: int) -> tuple[float, int]:
    """Best residual over shifts 1..max_shift either way, compared on the overlap only."""
    best, best_k = CAP, 0
    for i, rs in enumerate(work.shift_upto(max(0, min(max_shift, work.x.size - 4)))):
        for sgn, r in zip((1, -1), rs, strict=True):
            if r < best:
                best, best_k = r, sgn * (i + 1)
    return best, best_k


def _fixed(x: FloatArray, y: FloatArray) -> dict[str, float]:
    """Residuals of the transforms that take no searched parameter."""
    n = x.size
    res: dict[str, float] = {}
    res["identity"] = _res([x], y)
    res["diff"] = _res([np.diff(x)], y)
    res["cumsum"] = _res([np.cumsum(x)], y)
    sd = float(np.std(x))
    rng = float(np.ptp(x))
    if sd > 0:
        zs = [(x - x.mean()) / sd, (x - x.mean()) / float(np.std(x, ddof=1))]
        res["zscore"] = _res(zs, y)
    else:
        res["zscore"] = CAP
    if rng > 0:
        mm = (x - x.min()) / rng
        res["minmax"] = _res([mm, 2.0 * mm - 1.0], y)
    else:
        res["minmax"] = CAP
    logs = [np.log(x - x.min() + 1.0)]
    if x.min() > 0:
        logs.append(np.log(x))
    if x.min() > -1:
        logs.append(np.log1p(x))
    res["log"] = _res(logs, y)
    res["fft_abs"] = _res([np.abs(np.fft.rfft(x)), np.abs(np.fft.fft(x))], y, fit_scale=True)
    ap, de = haar_step(x)
    if n % 2 == 1:
        last = x[-1] * np.sqrt(2.0)
        ap_c = [ap, np.concatenate((ap, [last]))]
        de_c = [de, np.concatenate((de, [0.0]))]
    else:
        ap_c, de_c = [ap], [de]
    res["haar_approx"] = _res(ap_c, y, fit_scale=True)
    res["haar_detail"] = _res(de_c, y, fit_scale=True)
    res["reverse"] = _res([x[::-1]], y)
    res["negate"] = _res([-x], y)
    return res


@primitive(
    group="transform",
    arity="pair",
    outputs=(
        *tuple(f"res_{t}" for t in TRANSFORMS),
        "best_index",
        "best_residual",
        "margin",
        "ma_window",
        "shift_k",
    ),
    grid={"max_window": (10, 20), "max_shift": (10, 50)},
)
@guarded
def transform_signature(a: Any, b: Any, *, max_window: int = 20, max_shift: int = 20) -> Result:
    """Normalized residual (RMS / std of b; 0 = exact, capped at 1000) of b ~ T(a) for each transform.

    Transforms (index order = :data:`TRANSFORMS`): identity; diff (np.diff); cumsum; moving average
    (best window 2..max_window; valid, trailing-expanding or zero-padded centred); z-score (ddof 0
    or 1); min-max (to [0, 1] or [-1, 1]); log (log, log1p, or log(a - min + 1)); |FFT| (rfft or
    full fft, with a least-squares scale for the normalization convention); Haar approximation and
    detail (least-squares scale and sign); reverse; shift (best lag 1..max_shift either way, on the
    overlap, or circular); negate. Length mismatches of up to max(2, 2%) samples are compared head-
    or tail-aligned; larger mismatches score the cap.

    Args:
        a: Original series.
        b: Transformed series.
        max_window: Largest moving-average window searched (2..200).
        max_shift: Largest shift searched (1..500).

    Returns:
        ``res_<name>`` for every transform, ``best_index`` (index into TRANSFORMS), ``best_residual``,
        ``margin`` (second-best minus best residual), ``ma_window`` (best moving-average window),
        ``shift_k`` (best shift; positive = b lags a).
    """
    x = as_series(a, 8)
    y = as_series(b, 4)
    if x is None or y is None:
        return None
    if not (2 <= int(max_window) <= 200 and 1 <= int(max_shift) <= 500):
        return None
    n = x.size
    work = _work(x, y)
    if work.fixed is None:
        work.fixed = _fixed(x, y)
    res = dict(work.fixed)
    best_ma, best_w = CAP, 0
    for i, r in enumerate(work.ma_upto(min(int(max_window), n // 2))):
        if r < best_ma:
            best_ma, best_w = r, i + 2
    res["moving_average"] = best_ma
    res["shift"], shift_k = _shift(work, int(max_shift))
    vals = np.array([min(res[t], CAP) for t in TRANSFORMS])
    order = np.argsort(vals, kind="stable")
    out: dict[str, Any] = {f"res_{t}": float(v) for t, v in zip(TRANSFORMS, vals, strict=True)}
    out.update(
        {
            "best_index": int(order[0]),
            "best_residual": float(vals[order[0]]),
            "margin": float(vals[order[1]] - vals[order[0]]),
            "ma_window": best_w,
            "shift_k": shift_k,
        }
    )
    return finish(out)
