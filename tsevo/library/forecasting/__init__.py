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

from ._api import MIN_LENGTH, Backend, forecast, forecast_many
from ._cache import (
    DEFAULT_CACHE_SIZE,
    ENV_CACHE_DIR,
    ForecastCache,
    cache_info,
    clear_cache,
    get_cache,
    set_cache_dir,
)
from ._chronos import (
    ENV_DEVICE,
    ENV_MODEL,
    ChronosModelRef,
    ChronosUnavailableError,
    configured_chronos_model,
    loaded_pipelines,
    resolve_chronos_model,
    warm_up,
)
from ._result import Forecast
from ._stat import AR1_MAX_PHI, MAX_STAT_HISTORY, STAT_MODEL_ID, detect_period

__all__ = [
    "AR1_MAX_PHI",
    "DEFAULT_CACHE_SIZE",
    "ENV_CACHE_DIR",
    "ENV_DEVICE",
    "ENV_MODEL",
    "MAX_STAT_HISTORY",
    "MIN_LENGTH",
    "STAT_MODEL_ID",
    "Backend",
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
