"""The forecast cache: an in-memory LRU plus an optional folder of ``.npz`` files."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from tsevo.fileio import atomic_writer

from ._result import Forecast, frozen

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "ENV_CACHE_DIR",
    "ForecastCache",
    "cache_info",
    "cache_key",
    "clear_cache",
    "get_cache",
    "set_cache_dir",
]

DEFAULT_CACHE_SIZE = 4096
ENV_CACHE_DIR = "TSEVO_FORECAST_CACHE_DIR"


def cache_key(s_hash: str, h: int, model_key: str, levels: tuple[float, ...]) -> str:
    """The cache key of one forecast: (series hash, horizon, model key, quantile levels)."""
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
    with atomic_writer(path) as f:
        np.savez(
            f,
            point=fc.point,
            levels=levels,
            quantiles=np.stack([fc.quantiles[lv] for lv in fc.levels]),
            meta=np.asarray(meta),
        )


def _read_npz(path: Path) -> Forecast | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            levels = [float(v) for v in z["levels"]]
            qs = z["quantiles"]
            return Forecast(
                point=frozen(z["point"]),
                quantiles={lv: frozen(qs[i]) for i, lv in enumerate(levels)},
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
