"""Regime switching: a two-state Gaussian hidden Markov model fitted by EM (group ``regime``).

Hamilton (1989)'s Markov-switching model with a switching mean and variance and no autoregression,
fitted by the Baum-Welch algorithm (Baum et al. 1970; Rabiner 1989) in a scaled forward-backward
pass. tests/test_primitives_pins.py pins the fitted log-likelihood and state parameters to
``statsmodels.tsa.regime_switching.markov_regression.MarkovRegression(k_regimes=2,
switching_variance=True)``, which takes about a second per fit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._common import FloatArray, Result, as_series, finish, guarded, is_flat
from ._registry import primitive

__all__ = ["hmm2_fit", "regime_switch"]

MAX_POINTS = 600
_ITER = 60
_TOL = 1e-4  # relative change of the log-likelihood (0.04 nats at n = 300)
_VAR_FLOOR = 1e-4  # of the (unit) variance of the z-scored series


def _emissions(z: FloatArray, mu: FloatArray, var: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per-sample Gaussian densities of both states, scaled by their row maximum, and log scales."""
    lp = -0.5 * (np.log(2 * np.pi * var)[None, :] + (z[:, None] - mu[None, :]) ** 2 / var[None, :])
    mx = lp.max(axis=1)
    return np.exp(lp - mx[:, None]), mx


def _forward_backward(
    b: FloatArray, A: FloatArray, pi: FloatArray
) -> tuple[float, FloatArray, FloatArray]:
    """Scaled forward-backward for two states: (log-likelihood less scales, gamma, xi summed)."""
    n = b.shape[0]
    b0, b1 = b[:, 0].tolist(), b[:, 1].tolist()
    p00, p01, p10, p11 = float(A[0, 0]), float(A[0, 1]), float(A[1, 0]), float(A[1, 1])
    f0, f1 = [0.0] * n, [0.0] * n
    cs = [0.0] * n
    a0, a1 = float(pi[0]) * b0[0], float(pi[1]) * b1[0]
    for t in range(n):
        if t:
            a0, a1 = (a0 * p00 + a1 * p10) * b0[t], (a0 * p01 + a1 * p11) * b1[t]
        c = a0 + a1
        if not c > 0:
            raise ArithmeticError("zero likelihood")
        a0 /= c
        a1 /= c
        f0[t], f1[t], cs[t] = a0, a1, c
    g0, g1 = [0.0] * n, [0.0] * n
    x00 = x01 = x10 = x11 = 0.0
    r0 = r1 = 1.0
    g0[-1], g1[-1] = f0[-1], f1[-1]
    for t in range(n - 1, 0, -1):
        e0, e1 = b0[t] * r0, b1[t] * r1
        c = cs[t]
        u0, u1 = f0[t - 1], f1[t - 1]
        x00 += u0 * p00 * e0 / c
        x01 += u0 * p01 * e1 / c
        x10 += u1 * p10 * e0 / c
        x11 += u1 * p11 * e1 / c
        r0, r1 = (p00 * e0 + p01 * e1) / c, (p10 * e0 + p11 * e1) / c
        g0[t - 1], g1[t - 1] = u0 * r0, u1 * r1
    gamma = np.column_stack((g0, g1))
    gamma /= gamma.sum(axis=1, keepdims=True)
    ll = float(np.sum(np.log(cs)))
    return ll, gamma, np.array([[x00, x01], [x10, x11]])


def hmm2_fit(
    z: FloatArray, mu: FloatArray, var: FloatArray
) -> tuple[float, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Baum-Welch for a two-state Gaussian HMM from initial means and variances.

    Starts from a persistent chain (0.9 on the diagonal) and equal initial probabilities.

    Returns:
        (log-likelihood, means, variances, transition matrix, smoothed state probabilities).
    """
    A = np.array([[0.9, 0.1], [0.1, 0.9]])
    pi = np.array([0.5, 0.5])
    mu, var = mu.astype(np.float64).copy(), var.astype(np.float64).copy()
    prev = -np.inf
    ll, gamma = prev, np.full((z.size, 2), 0.5)
    for _ in range(_ITER):
        b, scale = _emissions(z, mu, var)
        lls, gamma, xi = _forward_backward(b, A, pi)
        ll = lls + float(np.sum(scale))
        w = gamma.sum(axis=0)
        if np.any(w < 1e-6):
            raise ArithmeticError("a state is empty")
        mu = (gamma * z[:, None]).sum(axis=0) / w
        var = np.maximum((gamma * (z[:, None] - mu[None, :]) ** 2).sum(axis=0) / w, _VAR_FLOOR)
        A = xi / np.maximum(xi.sum(axis=1, keepdims=True), 1e-300)
        A = np.clip(A, 1e-9, 1.0)
        A /= A.sum(axis=1, keepdims=True)
        pi = np.clip(gamma[0], 1e-9, 1.0)
        pi /= pi.sum()
        if ll - prev < _TOL * max(1.0, abs(ll)):
            break
        prev = ll
    b, scale = _emissions(z, mu, var)
    lls, gamma, _ = _forward_backward(b, A, pi)
    return lls + float(np.sum(scale)), mu, var, A, gamma


def _starts(z: FloatArray) -> list[tuple[FloatArray, FloatArray]]:
    """Deterministic initial (means, variances): a split by level and a split by local volatility."""
    lo, hi = z[z <= np.median(z)], z[z > np.median(z)]
    out = []
    if lo.size >= 2 and hi.size >= 2:
        out.append((np.array([lo.mean(), hi.mean()]), np.array([lo.var(), hi.var()])))
    w = max(3, z.size // 20)
    vol = np.convolve(np.abs(np.diff(z, prepend=z[0])), np.ones(w) / w, mode="same")
    q = vol > np.median(vol)
    if 2 <= int(q.sum()) <= z.size - 2:
        calm, wild = z[~q], z[q]
        out.append(
            (np.array([calm.mean(), wild.mean()]), np.array([calm.var(), wild.var()]) + _VAR_FLOOR)
        )
    return out


@primitive(
    group="regime",
    outputs=(
        "mean_gap_sigma",
        "log_sd_ratio",
        "persistence",
        "mean_duration_frac",
        "n_switches",
        "frac_high",
        "lr_stat",
        "bic_gain",
    ),
    grid={"diff": (False, True)},
)
@guarded
def regime_switch(y: Any, *, diff: bool = False) -> Result:
    """Two-regime Markov-switching model (switching mean and variance): gaps, persistence, switches.

    The z-scored series (or its first difference) is fitted from two deterministic starts (a split
    by level and one by local volatility) and the better likelihood is kept. Series over 600
    samples are decimated to at most 600 by taking every f-th sample (durations and switch counts
    are reported on the original length). Compared with one Gaussian, the model adds 4 parameters.

    Args:
        y: Series (at least 40 samples after differencing).
        diff: Model the first difference (growth-rate regimes of a level).

    Returns:
        ``mean_gap_sigma`` (mean of the high-mean state - mean of the low, over the pooled state
        sd; >= 0), ``log_sd_ratio`` (log of the larger state sd over the smaller; >= 0),
        ``persistence`` (mean probability of staying, (p00 + p11) / 2), ``mean_duration_frac``
        (mean expected stay 1 / (1 - p_ii) over the two states, as a fraction of the length),
        ``n_switches`` (changes of the most probable smoothed state), ``frac_high`` (share of time
        in the high-mean state), ``lr_stat`` (2 x log-likelihood gain over one Gaussian),
        ``bic_gain`` (lr_stat - 4 log n: > 0 when two regimes are preferred).
    """
    x = as_series(y, 8)
    if x is None:
        return None
    if diff:
        x = np.diff(x)
    if x.size < 40 or is_flat(x):
        return None
    f = math.ceil(x.size / MAX_POINTS)
    z = x[::f]
    if is_flat(z):
        return None
    z = (z - z.mean()) / z.std()
    n = z.size
    best = None
    for mu0, var0 in _starts(z):
        try:
            fit = hmm2_fit(z, mu0, np.maximum(var0, _VAR_FLOOR))
        except ArithmeticError:
            continue
        if best is None or fit[0] > best[0] + 1e-9:
            best = fit
    if best is None:
        return None
    ll, mu, var, A, gamma = best
    ll1 = -0.5 * n * (math.log(2 * math.pi) + 1.0)  # one Gaussian on a z-scored series
    hi = int(np.argmax(mu))
    state = np.argmax(gamma, axis=1)
    sd = np.sqrt(var)
    pooled = float(np.sqrt(np.sum(gamma.mean(axis=0) * var)))
    stay = np.diag(A)
    lr = max(0.0, 2.0 * (ll - ll1))
    return finish(
        {
            "mean_gap_sigma": float(abs(mu[0] - mu[1])) / pooled,
            "log_sd_ratio": float(abs(np.log(sd[0] / sd[1]))),
            "persistence": float(np.mean(stay)),
            "mean_duration_frac": float(np.mean(1.0 / np.maximum(1.0 - stay, 1.0 / n))) / n,
            "n_switches": int(np.count_nonzero(np.diff(state))),
            "frac_high": float(np.mean(state == hi)),
            "lr_stat": lr,
            "bic_gain": lr - 4.0 * math.log(n),
        }
    )
