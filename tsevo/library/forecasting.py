"""Point and quantile forecasts with two backends and a result cache.

``forecast(y, h)`` returns a :class:`Forecast`: a point path of length ``h`` and one path per
requested quantile level. Two backends:

``"stat"`` (numpy only, always available)
    1. *Period detection.* The last :data:`MAX_STAT_HISTORY` points are linearly detrended and
       their autocorrelation function (biased estimator, so long lags are damped) is searched for
       local peaks at lags ``2 .. n//3`` (at least three cycles). A peak counts when its ACF is at least
       :data:`PERIOD_MIN_ACF` and it stands at least :data:`PERIOD_MIN_PROMINENCE` above the
       lowest ACF value at smaller lags (a real cycle dips between lag 0 and its period; a random
       walk's slowly decaying ACF does not). The dominant period is the smallest qualifying peak
       whose ACF is within 85 % of the best one (so a harmonic ``2p`` does not beat ``p``).
    2. *Seasonal naive with drift* when a period ``p`` is found:
       ``ŷ[n+k] = y[n+k-p·m] + m·d̄`` with ``m = ceil(k/p)`` and ``d̄`` the mean seasonal
       difference ``y[t] - y[t-p]`` (zero for a purely periodic series, which is therefore
       continued exactly). Residuals are the centred seasonal differences.
    3. Otherwise *exponential smoothing* in error-correction form, additive damped trend
       (``ŷ = l + φb; l ← l + φb + αe; b ← φb + βe``) selected together with simple exponential
       smoothing (no trend) and Holt's linear trend (``φ = 1``) on a fixed grid of
       ``(α, β, φ)`` by ``n·log(MSE) + 2k`` over the one-step in-sample errors (``k`` = number of
       fitted parameters incl. initial states; ties keep the simpler model), and against a
       *mean-reverting AR(1)* around the sample mean scored the same way (it wins only on a
       strictly lower criterion; smoothing cannot revert to a level).
    Quantiles: ``point + z_q · σ_k`` where ``z_q`` is the standard normal quantile, ``σ`` the
    robust scale (1.4826·MAD, falling back to the RMS) of the in-sample residuals, and ``σ_k``
    its growth with the horizon: ``σ·sqrt(m·(1 + m/T))`` for seasonal naive with drift
    (``m = ceil(k/p)``, ``T`` seasonal differences), and ``σ·sqrt(1 + Σ_{j<k} c_j²)``,
    ``c_j = α + β·(φ + … + φ^j)`` for exponential smoothing (the ETS(A,Ad,N) formula).
    Quantiles are therefore ordered and the 0.5 quantile equals the point path.

``"chronos"`` (Chronos-2 / Chronos-Bolt through ``chronos-forecasting``)
    The model is a local directory holding ``config.json`` and the weights, or a hub id
    (``"amazon/chronos-2"``, optionally ``"id@revision"``) that must already sit in the Hugging
    Face cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``).
    Nothing is ever downloaded: a missing model raises :class:`ChronosUnavailableError` at once,
    before torch is imported. ``chronos`` and ``torch`` are imported lazily on first use (≈5 s)
    and each pipeline is loaded once per process. The point path is the model's median; the
    quantile paths are sorted across levels at every step (monotone rearrangement), because an
    untrained or fine-tuned quantile head may cross. Device: ``$TSEVO_CHRONOS_DEVICE``
    (default ``"cpu"``).

``backend="auto"`` uses chronos when a model is configured (the ``model`` argument or the
environment variable ``TSEVO_CHRONOS_MODEL``), otherwise the stat backend.

Cache: results are keyed by (series hash, horizon, model key, quantile levels), where the model
key is ``"stat-v2"`` or ``"chronos:<id>:<fingerprint of config.json and weights>"``. An in-memory
LRU (:data:`DEFAULT_CACHE_SIZE` entries) is always on; an on-disk folder of ``.npz`` files is
used when configured with :func:`set_cache_dir` or ``$TSEVO_FORECAST_CACHE_DIR``, so a rerun in a
new process (or a sandbox worker) is free. Disk writes are best effort (a read-only or
size-limited process just skips them). Cached arrays are read-only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tsevo.hashing import series_hash

__all__ = [
    "AR1_MAX_PHI",
    "DEFAULT_CACHE_SIZE",
    "MAX_STAT_HISTORY",
    "STAT_MODEL_ID",
    "ChronosModelRef",
    "ChronosUnavailableError",
    "Forecast",
    "ForecastCache",
    "cache_info",
    "clear_cache",
    "configured_chronos_model",
    "detect_period",
    "forecast",
    "forecast_many",
    "get_cache",
    "loaded_pipelines",
    "resolve_chronos_model",
    "set_cache_dir",
    "warm_up",
]

Backend = Literal["auto", "stat", "chronos"]
FloatArray = npt.NDArray[np.float64]

STAT_MODEL_ID = "stat-v2"
"""Model key of the stat backend; bump it when the method changes (invalidates disk caches)."""
MAX_STAT_HISTORY = 1024
"""The stat backend fits on at most this many most recent points."""
AR1_MAX_PHI = 0.97
"""Largest lag-1 coefficient for which the stat backend considers a mean-reverting AR(1)."""
PERIOD_MIN_ACF = 0.3
PERIOD_MIN_PROMINENCE = 0.3
DEFAULT_CACHE_SIZE = 4096
ENV_MODEL = "TSEVO_CHRONOS_MODEL"
ENV_DEVICE = "TSEVO_CHRONOS_DEVICE"
ENV_CACHE_DIR = "TSEVO_FORECAST_CACHE_DIR"
MIN_LENGTH = 3
_CHRONOS_BATCH = 256
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


class ChronosUnavailableError(RuntimeError):
    """The chronos backend was requested but the model (or the package) is not available offline."""


# --------------------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False)
class Forecast:
    """A forecast of ``h`` steps.

    Attributes:
        point: Point path, shape ``(h,)`` (the median for chronos; the method's mean for stat).
        quantiles: Quantile level -> path of shape ``(h,)``; ordered across levels at every step.
        backend: ``"stat"`` or ``"chronos"``.
        model: Model id: ``"stat-v2"``, a resolved local path or a hub id.
        method: What produced it (``"seasonal_naive_drift"``, ``"damped_trend"``, ``"holt"``,
            ``"ses"``, ``"naive"`` or the chronos pipeline class).
        period: Detected period used by the stat backend (0 when none / chronos).
        params: Fitted parameters (stat) or empty.
    """

    point: FloatArray
    quantiles: Mapping[float, FloatArray]
    backend: str
    model: str
    method: str
    period: int = 0
    params: Mapping[str, float] = field(default_factory=dict)

    @property
    def h(self) -> int:
        """Forecast horizon."""
        return int(self.point.shape[0])

    @property
    def levels(self) -> tuple[float, ...]:
        """Quantile levels, ascending."""
        return tuple(sorted(self.quantiles))

    def quantile(self, level: float) -> FloatArray:
        """The path of one quantile level (must be one of :attr:`levels`)."""
        for lv, arr in self.quantiles.items():
            if abs(lv - level) < 1e-9:
                return arr
        raise KeyError(f"quantile {level} not computed; have {self.levels}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (lists of floats)."""
        return {
            "point": self.point.tolist(),
            "quantiles": {repr(lv): self.quantiles[lv].tolist() for lv in self.levels},
            "backend": self.backend,
            "model": self.model,
            "method": self.method,
            "period": self.period,
            "params": dict(self.params),
        }


def _frozen(a: npt.ArrayLike) -> FloatArray:
    arr = np.array(a, dtype=np.float64, copy=True)
    arr.flags.writeable = False
    return arr


# --------------------------------------------------------------------------------------- hashing
def _cache_key(s_hash: str, h: int, model_key: str, levels: tuple[float, ...]) -> str:
    blob = json.dumps([s_hash, int(h), model_key, [repr(float(q)) for q in levels]])
    return hashlib.sha256(blob.encode()).hexdigest()


# --------------------------------------------------------------------------------------- cache
class ForecastCache:
    """LRU memory cache plus an optional folder of ``.npz`` files, safe to share across threads.

    Args:
        maxsize: Most entries kept in memory.
        directory: Folder for the on-disk cache (created on first write), or None.
    """

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE, directory: str | Path | None = None):
        self.maxsize = int(maxsize)
        self.directory: Path | None = Path(directory) if directory is not None else None
        self._mem: OrderedDict[str, Forecast] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.disk_hits = 0
        self.misses = 0
        self.disk_errors = 0

    def _path(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / key[:2] / f"{key}.npz"

    def get(self, key: str) -> Forecast | None:
        """Return the cached forecast for ``key`` (memory first, then disk) or None."""
        with self._lock:
            fc = self._mem.get(key)
            if fc is not None:
                self._mem.move_to_end(key)
                self.hits += 1
                return fc
        path = self._path(key)
        if path is not None and path.is_file():
            fc = _read_npz(path)
            if fc is not None:
                with self._lock:
                    self.disk_hits += 1
                    self._put_mem(key, fc)
                return fc
        with self._lock:
            self.misses += 1
        return None

    def put(self, key: str, fc: Forecast) -> None:
        """Store a forecast in memory and (best effort) on disk."""
        with self._lock:
            self._put_mem(key, fc)
        path = self._path(key)
        if path is not None:
            try:
                _write_npz(path, fc)
            except OSError:
                with self._lock:
                    self.disk_errors += 1

    def _put_mem(self, key: str, fc: Forecast) -> None:
        self._mem[key] = fc
        self._mem.move_to_end(key)
        while len(self._mem) > self.maxsize:
            self._mem.popitem(last=False)

    def clear(self, *, disk: bool = False) -> None:
        """Empty the memory cache (and the disk folder's ``.npz`` files when ``disk``)."""
        with self._lock:
            self._mem.clear()
            self.hits = self.disk_hits = self.misses = self.disk_errors = 0
        if disk and self.directory is not None and self.directory.is_dir():
            for p in self.directory.glob("*/*.npz"):
                p.unlink(missing_ok=True)

    def info(self) -> dict[str, Any]:
        """Counters and sizes."""
        with self._lock:
            return {
                "hits": self.hits,
                "disk_hits": self.disk_hits,
                "misses": self.misses,
                "disk_errors": self.disk_errors,
                "size": len(self._mem),
                "maxsize": self.maxsize,
                "directory": str(self.directory) if self.directory is not None else None,
            }

    def __len__(self) -> int:
        return len(self._mem)


def _write_npz(path: Path, fc: Forecast) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    levels = np.asarray(fc.levels, dtype=np.float64)
    meta = json.dumps(
        {
            "backend": fc.backend,
            "model": fc.model,
            "method": fc.method,
            "period": fc.period,
            "params": dict(fc.params),
        }
    )
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(
                f,
                point=fc.point,
                levels=levels,
                quantiles=np.stack([fc.quantiles[lv] for lv in fc.levels]),
                meta=np.asarray(meta),
            )
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_npz(path: Path) -> Forecast | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            levels = [float(v) for v in z["levels"]]
            qs = z["quantiles"]
            return Forecast(
                point=_frozen(z["point"]),
                quantiles={lv: _frozen(qs[i]) for i, lv in enumerate(levels)},
                backend=str(meta["backend"]),
                model=str(meta["model"]),
                method=str(meta["method"]),
                period=int(meta["period"]),
                params={str(k): float(v) for k, v in meta.get("params", {}).items()},
            )
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        return None  # unreadable or partial file: recompute


_CACHE: ForecastCache | None = None
_CACHE_LOCK = threading.Lock()


def get_cache() -> ForecastCache:
    """The process-wide cache (its folder comes from ``$TSEVO_FORECAST_CACHE_DIR`` if set)."""
    global _CACHE
    with _CACHE_LOCK:
        if _CACHE is None:
            env = os.environ.get(ENV_CACHE_DIR) or None
            _CACHE = ForecastCache(directory=env)
        return _CACHE


def set_cache_dir(directory: str | Path | None) -> None:
    """Use ``directory`` as the on-disk cache (None: memory only). Keeps the memory entries."""
    get_cache().directory = Path(directory) if directory is not None else None


def clear_cache(*, disk: bool = False) -> None:
    """Empty the memory cache and reset its counters (and delete disk entries when ``disk``)."""
    get_cache().clear(disk=disk)


def cache_info() -> dict[str, Any]:
    """Hits, disk hits, misses, size and folder of the process-wide cache."""
    return get_cache().info()


# --------------------------------------------------------------------------------------- stat
def _robust_scale(e: FloatArray) -> float:
    if e.size == 0:
        return 0.0
    med = float(np.median(e))
    s = 1.4826 * float(np.median(np.abs(e - med)))
    if s <= 0.0:
        s = float(np.sqrt(np.mean((e - med) ** 2)))
    return s


def _acf(x: FloatArray, max_lag: int) -> FloatArray:
    n = x.shape[0]
    m = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(x, m)
    r = np.fft.irfft(f * np.conj(f), m)[: max_lag + 1]
    return np.asarray(r / r[0], dtype=np.float64)


def detect_period(y: npt.ArrayLike, *, max_period: int | None = None) -> int:
    """Dominant period of a series by ACF peak search (0 when there is none).

    Args:
        y: The series (finite values; only the last :data:`MAX_STAT_HISTORY` are used).
        max_period: Largest period considered (default and cap ``n // 3``: three cycles).

    Returns:
        The period in samples (≥ 2), or 0.
    """
    x = np.asarray(y, dtype=np.float64)[-MAX_STAT_HISTORY:]
    n = x.shape[0]
    if n < 8 or not np.all(np.isfinite(x)):
        return 0
    t = np.arange(n, dtype=np.float64)
    slope, icpt = np.polyfit(t, x, 1)
    r = x - (slope * t + icpt)
    if float(np.dot(r, r)) <= 1e-24 * max(1.0, float(np.dot(x, x))):
        return 0
    max_lag = n // 3 if max_period is None else min(n // 3, int(max_period))
    if max_lag < 3:
        return 0
    ac = _acf(r, max_lag + 1)
    peaks: list[tuple[int, float]] = []
    for k in range(2, max_lag + 1):
        v = ac[k]
        if v > ac[k - 1] and v >= ac[k + 1] and v >= PERIOD_MIN_ACF:
            trough = float(np.min(ac[1:k]))
            if v - trough >= PERIOD_MIN_PROMINENCE:
                peaks.append((k, float(v)))
    if not peaks:
        return 0
    best = max(v for _, v in peaks)
    for k, v in peaks:
        if v >= 0.85 * best:
            return k
    return 0  # pragma: no cover - the best peak always qualifies


def _normal_z(levels: Sequence[float]) -> FloatArray:
    nd = NormalDist()
    return np.array([0.0 if abs(q - 0.5) < 1e-12 else nd.inv_cdf(q) for q in levels])


def _seasonal_naive(
    x: FloatArray, h: int, p: int
) -> tuple[FloatArray, FloatArray, dict[str, float]]:
    n = x.shape[0]
    d = x[p:] - x[:-p]
    drift = float(np.mean(d))
    k = np.arange(1, h + 1)
    m = np.ceil(k / p).astype(np.int64)
    idx = n - p + ((k - 1) % p)
    point = x[idx] + m * drift
    sigma = _robust_scale(d - drift)
    T = max(d.shape[0], 1)
    sd = sigma * np.sqrt(m * (1.0 + m / T))
    return point, sd, {"drift_per_season": drift, "sigma": sigma}


def _ets_grid() -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Grid of (alpha, beta, phi, n_params); SES first, then Holt, then damped (tie order)."""
    alphas = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99]
    rows: list[tuple[float, float, float, int]] = [(a, 0.0, 0.0, 2) for a in alphas]
    for phi, k in ((1.0, 4), (0.98, 5), (0.95, 5), (0.9, 5), (0.8, 5)):
        for a in alphas:
            for bf in (0.02, 0.1, 0.3, 0.6, 1.0):
                rows.append((a, a * bf, phi, k))
    g = np.array(rows, dtype=np.float64)
    return g[:, 0], g[:, 1], g[:, 2], g[:, 3]


_GRID = _ets_grid()


def _ar1(
    x: FloatArray, h: int, burn: int, scale2: float
) -> tuple[FloatArray, FloatArray, dict[str, float], float] | None:
    """Mean-reverting AR(1) around the sample mean, scored like the ETS grid.

    ``x[t] - μ = φ·(x[t-1] - μ) + e`` with μ the mean and φ the lag-1 least-squares coefficient
    (at least -0.99; no candidate above :data:`AR1_MAX_PHI`); the criterion ``m·log(MSE) + 2k`` (k = 2: μ and φ) uses the same
    one-step errors after the same burn-in as the ETS grid. Exponential smoothing cannot revert to a
    level (a damped trend damps the slope, not the level), so without this candidate a series that
    ended far from its mean is forecast to stay there.
    """
    n = x.shape[0]
    if n < 8:
        return None
    mu = float(np.mean(x))
    xc = x - mu
    den = float(np.dot(xc[:-1], xc[:-1]))
    if den <= 0.0:
        return None
    phi = max(-0.99, float(np.dot(xc[1:], xc[:-1])) / den)
    if phi > AR1_MAX_PHI:
        return None  # near a unit root the sample mean is no level the series returns to
    errs = xc[1:] - phi * xc[:-1]
    m = max(n - 1 - burn, 1)
    mse = max(float(np.sum(errs[burn:] ** 2)) / m, scale2 * 1e-20)
    crit = m * float(np.log(mse)) + 2.0 * 2
    ks = np.arange(1, h + 1)
    point = mu + xc[-1] * phi**ks
    sigma = _robust_scale(errs[burn:])
    sd = sigma * np.sqrt(np.cumsum(phi ** (2 * (ks - 1))))
    return point, sd, {"mu": mu, "phi": phi, "sigma": sigma}, crit


def _ets(x: FloatArray, h: int) -> tuple[FloatArray, FloatArray, dict[str, float], str]:
    alpha, beta, phi, kpar = _GRID
    n = x.shape[0]
    trend = phi > 0.0
    b0 = float(np.mean(np.diff(x[: min(n, 5)])))
    lvl = np.full(alpha.shape, x[0])
    b = np.where(trend, b0, 0.0)
    burn = min(3, n // 4)
    sse = np.zeros(alpha.shape)
    errs = np.empty((n - 1, alpha.shape[0]))
    for t in range(1, n):
        yhat = lvl + phi * b
        e = x[t] - yhat
        errs[t - 1] = e
        if t > burn:
            sse += e * e
        lvl = yhat + alpha * e
        b = phi * b + beta * e
    m = max(n - 1 - burn, 1)
    scale2 = float(np.var(x)) + float(np.mean(x * x)) * 1e-12 + 1e-300
    mse = np.maximum(sse / m, scale2 * 1e-20)
    crit = m * np.log(mse) + 2.0 * kpar
    i = int(np.argmin(np.round(crit, 9)))
    ar = _ar1(x, h, burn, scale2)
    if ar is not None and round(ar[3], 9) < round(float(crit[i]), 9):
        return ar[0], ar[1], ar[2], "ar1"
    a, bt, ph = float(alpha[i]), float(beta[i]), float(phi[i])
    ks = np.arange(1, h + 1)
    if ph > 0.0:
        cum = ks.astype(np.float64) if ph == 1.0 else ph * (1 - ph**ks) / (1 - ph)
        point = lvl[i] + cum * b[i]
        j = np.arange(1, h)
        phisum = j.astype(np.float64) if ph == 1.0 else ph * (1 - ph**j) / (1 - ph)
        c = a + bt * phisum
    else:
        point = np.full(h, lvl[i])
        c = np.full(h - 1, a)
    sigma = _robust_scale(errs[burn:, i])
    var_mult = 1.0 + np.concatenate([[0.0], np.cumsum(c * c)])
    sd = sigma * np.sqrt(var_mult)
    method = "ses" if ph == 0.0 else ("holt" if ph == 1.0 else "damped_trend")
    return point, sd, {"alpha": a, "beta": bt, "phi": ph, "sigma": sigma}, method


def _stat_forecast(y: FloatArray, h: int, levels: tuple[float, ...]) -> Forecast:
    x = np.asarray(y, dtype=np.float64)[-MAX_STAT_HISTORY:]
    n = x.shape[0]
    p = detect_period(x)
    params: dict[str, float]
    if p >= 2 and n >= 3 * p:
        point, sd, params = _seasonal_naive(x, h, p)
        method = "seasonal_naive_drift"
    elif n >= 6:
        point, sd, params, method = _ets(x, h)
        p = 0
    else:
        point = np.full(h, x[-1])
        sigma = _robust_scale(np.diff(x))
        sd = sigma * np.sqrt(np.arange(1, h + 1, dtype=np.float64))
        params, method, p = {"sigma": sigma}, "naive", 0
    z = _normal_z(levels)
    qs = {lv: _frozen(point + z[i] * sd) for i, lv in enumerate(levels)}
    return Forecast(
        point=_frozen(point),
        quantiles=qs,
        backend="stat",
        model=STAT_MODEL_ID,
        method=method,
        period=int(p),
        params=params,
    )


# --------------------------------------------------------------------------------------- chronos
@dataclass(frozen=True)
class ChronosModelRef:
    """A chronos model found offline.

    Attributes:
        model_id: What the user named (a resolved local path or a hub id).
        path: Directory holding ``config.json`` and the weights.
        fingerprint: Short hash of ``config.json`` plus the weights' size and first/last MiB.
    """

    model_id: str
    path: Path
    fingerprint: str

    @property
    def cache_key(self) -> str:
        """Model part of the forecast cache key."""
        return f"chronos:{self.model_id}:{self.fingerprint}"


def configured_chronos_model() -> str | None:
    """The model named by ``$TSEVO_CHRONOS_MODEL`` (None when unset or empty)."""
    v = os.environ.get(ENV_MODEL, "").strip()
    return v or None


def _hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def _fingerprint_dir(path: Path) -> str:
    h = hashlib.sha256((path / "config.json").read_bytes())
    for name in _WEIGHT_FILES:
        f = path / name
        if f.is_file():
            size = f.stat().st_size
            h.update(f"{name}:{size}".encode())
            with f.open("rb") as fh:
                h.update(fh.read(1 << 20))
                if size > 2 << 20:
                    fh.seek(size - (1 << 20))
                    h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


def _has_weights(path: Path) -> bool:
    return any((path / n).is_file() for n in _WEIGHT_FILES)


def _snapshot_from_hf_cache(repo_id: str, revision: str | None) -> tuple[Path | None, Path]:
    cache = _hf_cache_dir()
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    snaps = repo_dir / "snapshots"
    if not snaps.is_dir():
        return None, repo_dir
    rev = revision or "main"
    commit: str | None = None
    if len(rev) == 40 and all(c in "0123456789abcdef" for c in rev):
        commit = rev
    elif (repo_dir / "refs" / rev).is_file():
        commit = (repo_dir / "refs" / rev).read_text().strip()
    elif revision is None:
        found = sorted(p for p in snaps.iterdir() if p.is_dir())
        if len(found) == 1:
            commit = found[0].name
    if commit is None or not (snaps / commit / "config.json").is_file():
        return None, repo_dir
    return snaps / commit, repo_dir


def resolve_chronos_model(model: str | os.PathLike[str]) -> ChronosModelRef:
    """Find a chronos model offline: a local directory, or a hub id already in the HF cache.

    Args:
        model: A directory path, or ``"org/name"`` / ``"org/name@revision"``.

    Returns:
        The reference used for loading and as cache key.

    Raises:
        ChronosUnavailableError: Nothing usable found offline (nothing is downloaded).
    """
    name = os.fspath(model).strip()
    if not name:
        raise ChronosUnavailableError("empty chronos model name")
    p = Path(name).expanduser()
    if p.is_dir():
        p = p.resolve()
        if not (p / "config.json").is_file() or not _has_weights(p):
            raise ChronosUnavailableError(
                f"chronos model directory {p} lacks config.json or weights "
                f"({' / '.join(_WEIGHT_FILES)})"
            )
        return ChronosModelRef(model_id=str(p), path=p, fingerprint=_fingerprint_dir(p))
    looks_like_path = name.startswith((".", "/", "~")) or os.sep in name.replace("/", "", 1)
    repo_id, _, revision = name.partition("@")
    if looks_like_path or repo_id.count("/") > 1:
        raise ChronosUnavailableError(f"chronos model path {name!r} does not exist")
    snap, repo_dir = _snapshot_from_hf_cache(repo_id, revision or None)
    if snap is None or not _has_weights(snap):
        raise ChronosUnavailableError(
            f"chronos model {name!r} is not available offline: it is neither a local directory "
            f"nor in the Hugging Face cache ({repo_dir} has no snapshot with config.json and "
            "weights). tsevo never downloads weights: on a connected machine run "
            f"`hf download {repo_id} --local-dir DIR` and pass DIR (or ${ENV_MODEL}=DIR), or "
            "copy a populated HF cache and point HF_HUB_CACHE/HF_HOME at it."
        )
    return ChronosModelRef(model_id=name, path=snap, fingerprint=_fingerprint_dir(snap))


_PIPELINES: dict[str, Any] = {}
_PIPELINE_LOCK = threading.Lock()


def loaded_pipelines() -> tuple[str, ...]:
    """Cache keys of the chronos pipelines loaded in this process."""
    return tuple(_PIPELINES)


def _load_pipeline(ref: ChronosModelRef) -> Any:
    with _PIPELINE_LOCK:
        pipe = _PIPELINES.get(ref.cache_key)
        if pipe is not None:
            return pipe
        try:
            from chronos import BaseChronosPipeline
        except ImportError as exc:  # pragma: no cover - chronos is a declared dependency
            raise ChronosUnavailableError(
                "the chronos backend needs the chronos-forecasting package (pip install "
                "chronos-forecasting)"
            ) from exc
        device = os.environ.get(ENV_DEVICE, "cpu") or "cpu"
        try:
            pipe = BaseChronosPipeline.from_pretrained(
                str(ref.path), device_map=device, local_files_only=True
            )
        except (OSError, ValueError, AssertionError, KeyError, AttributeError) as exc:
            raise ChronosUnavailableError(
                f"could not load chronos model {ref.model_id!r} from {ref.path}: {exc}"
            ) from exc
        _PIPELINES[ref.cache_key] = pipe
        return pipe


def warm_up(model: str | os.PathLike[str] | None = None) -> str | None:
    """Load the configured chronos pipeline now (e.g. in a worker before it forks).

    Args:
        model: Chronos model; default ``$TSEVO_CHRONOS_MODEL``.

    Returns:
        The model's cache key, or None when no chronos model is configured (nothing to do).

    Raises:
        ChronosUnavailableError: A model is configured but not available offline.
    """
    name = os.fspath(model) if model is not None else configured_chronos_model()
    if name is None:
        return None
    ref = resolve_chronos_model(name)
    _load_pipeline(ref)
    return ref.cache_key


def _chronos_predict(
    ref: ChronosModelRef, ys: Sequence[FloatArray], h: int, levels: tuple[float, ...]
) -> list[Forecast]:
    pipe = _load_pipeline(ref)
    import torch

    out: list[Forecast] = []
    method = type(pipe).__name__
    for start in range(0, len(ys), _CHRONOS_BATCH):
        chunk = ys[start : start + _CHRONOS_BATCH]
        ctx = [torch.as_tensor(np.asarray(y, dtype=np.float32)) for y in chunk]
        if method == "ChronosPipeline":  # the original sampling model: make it deterministic
            torch.manual_seed(0)
        with torch.inference_mode():
            q, mean = pipe.predict_quantiles(
                ctx, prediction_length=int(h), quantile_levels=list(levels)
            )
        for i in range(len(chunk)):
            qa = np.asarray(q[i].detach().float().cpu().numpy(), dtype=np.float64).reshape(
                h, len(levels)
            )
            qa = np.sort(qa, axis=1)
            pa = np.asarray(mean[i].detach().float().cpu().numpy(), dtype=np.float64).reshape(h)
            out.append(
                Forecast(
                    point=_frozen(pa),
                    quantiles={lv: _frozen(qa[:, j]) for j, lv in enumerate(levels)},
                    backend="chronos",
                    model=ref.model_id,
                    method=method,
                )
            )
    return out


# --------------------------------------------------------------------------------------- API
def _check_levels(quantiles: Sequence[float]) -> tuple[float, ...]:
    levels = tuple(sorted({float(q) for q in quantiles}))
    if not levels:
        raise ValueError("at least one quantile level is required")
    for q in levels:
        if not 0.0 < q < 1.0:
            raise ValueError(f"quantile levels must lie in (0, 1), got {q}")
    return levels


def _check_series(y: npt.ArrayLike) -> FloatArray:
    arr = np.asarray(y, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D series, got shape {arr.shape}")
    if arr.shape[0] < MIN_LENGTH:
        raise ValueError(f"series too short for a forecast: {arr.shape[0]} < {MIN_LENGTH}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("series contains NaN or infinite values")
    return arr


def _resolve_backend(
    backend: Backend, model: str | os.PathLike[str] | None
) -> ChronosModelRef | None:
    if backend == "stat":
        if model is not None:
            raise ValueError("a model was given with backend='stat'; use backend='chronos'")
        return None
    if backend not in ("auto", "chronos"):
        raise ValueError(f"unknown forecast backend {backend!r}; expected auto, stat or chronos")
    name = os.fspath(model) if model is not None else configured_chronos_model()
    if name is None:
        if backend == "chronos":
            raise ChronosUnavailableError(
                f"backend='chronos' needs a model: pass model=PATH_OR_HUB_ID or set ${ENV_MODEL}"
            )
        return None
    return resolve_chronos_model(name)


def forecast_many(
    ys: Sequence[npt.ArrayLike],
    h: int,
    *,
    backend: Backend = "auto",
    model: str | os.PathLike[str] | None = None,
    quantiles: Sequence[float] = (0.1, 0.5, 0.9),
    cache: bool = True,
) -> list[Forecast]:
    """Forecast many series at once; chronos runs the cache misses in batches.

    Args:
        ys: 1-D finite series (each at least 3 points).
        h: Horizon (≥ 1).
        backend: ``"auto"``, ``"stat"`` or ``"chronos"`` (see the module docstring).
        model: Chronos model (local directory or cached hub id); default ``$TSEVO_CHRONOS_MODEL``.
        quantiles: Quantile levels in (0, 1).
        cache: Read and write the process-wide cache.

    Returns:
        One :class:`Forecast` per series, in order.

    Raises:
        ValueError: Bad series, horizon or levels.
        ChronosUnavailableError: Chronos requested but not available offline.
    """
    h = int(h)
    if h < 1:
        raise ValueError(f"horizon must be >= 1, got {h}")
    levels = _check_levels(quantiles)
    arrs = [_check_series(y) for y in ys]
    ref = _resolve_backend(backend, model)
    model_key = STAT_MODEL_ID if ref is None else ref.cache_key
    store = get_cache() if cache else None
    keys = [_cache_key(series_hash(a), h, model_key, levels) for a in arrs]
    results: list[Forecast | None] = [store.get(k) if store is not None else None for k in keys]
    todo = [i for i, r in enumerate(results) if r is None]
    if todo:
        if ref is None:
            fresh = [_stat_forecast(arrs[i], h, levels) for i in todo]
        else:
            fresh = _chronos_predict(ref, [arrs[i] for i in todo], h, levels)
        for i, fc in zip(todo, fresh, strict=True):
            results[i] = fc
            if store is not None:
                store.put(keys[i], fc)
    return [r for r in results if r is not None]


def forecast(
    y: npt.ArrayLike,
    h: int,
    *,
    backend: Backend = "auto",
    model: str | os.PathLike[str] | None = None,
    quantiles: Sequence[float] = (0.1, 0.5, 0.9),
    cache: bool = True,
) -> Forecast:
    """Forecast ``h`` steps of one series (point plus quantiles), cached.

    Args:
        y: 1-D finite series (at least 3 points).
        h: Horizon (≥ 1).
        backend: ``"auto"`` (chronos when a model is configured, else stat), ``"stat"`` or
            ``"chronos"``.
        model: Chronos model: a local directory or a hub id already in the HF cache; default
            ``$TSEVO_CHRONOS_MODEL``. Never downloaded.
        quantiles: Quantile levels in (0, 1).
        cache: Read and write the process-wide cache.

    Returns:
        The :class:`Forecast`.

    Raises:
        ValueError: Bad series, horizon or levels.
        ChronosUnavailableError: Chronos requested but not available offline.
    """
    return forecast_many([y], h, backend=backend, model=model, quantiles=quantiles, cache=cache)[0]
