"""The public entry points: :func:`forecast` and :func:`forecast_many` (backend choice and cache)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from tsevo.hashing import series_hash

from ._cache import cache_key, get_cache
from ._chronos import (
    ENV_MODEL,
    ChronosModelRef,
    ChronosUnavailableError,
    chronos_predict,
    configured_chronos_model,
    resolve_chronos_model,
)
from ._result import FloatArray, Forecast
from ._stat import STAT_MODEL_ID, stat_forecast

__all__ = ["MIN_LENGTH", "Backend", "forecast", "forecast_many"]

Backend = Literal["auto", "stat", "chronos"]
MIN_LENGTH = 3


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
    keys = [cache_key(series_hash(a), h, model_key, levels) for a in arrs]
    results: list[Forecast | None] = [store.get(k) if store is not None else None for k in keys]
    todo = [i for i, r in enumerate(results) if r is None]
    if todo:
        if ref is None:
            fresh = [stat_forecast(arrs[i], h, levels) for i in todo]
        else:
            fresh = chronos_predict(ref, [arrs[i] for i in todo], h, levels)
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
