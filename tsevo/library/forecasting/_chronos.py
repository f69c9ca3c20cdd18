"""The ``chronos`` backend: find a model offline, load its pipeline once, predict in batches.

``chronos`` and ``torch`` are optional heavy imports (:data:`tsevo.optional.LAZY_IMPORTS`): they are
imported on first use, never when this module is imported.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._result import FloatArray, Forecast, frozen

__all__ = [
    "ENV_DEVICE",
    "ENV_MODEL",
    "ChronosModelRef",
    "ChronosUnavailableError",
    "chronos_predict",
    "configured_chronos_model",
    "loaded_pipelines",
    "resolve_chronos_model",
    "warm_up",
]

ENV_MODEL = "TSEVO_CHRONOS_MODEL"
ENV_DEVICE = "TSEVO_CHRONOS_DEVICE"
_CHRONOS_BATCH = 256
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


class ChronosUnavailableError(RuntimeError):
    """The chronos backend was requested but the model (or the package) is not available offline."""


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


def chronos_predict(
    ref: ChronosModelRef, ys: Sequence[FloatArray], h: int, levels: tuple[float, ...]
) -> list[Forecast]:
    """Forecasts of ``h`` steps for a batch of series (quantiles sorted across levels)."""
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
                    point=frozen(pa),
                    quantiles={lv: frozen(qa[:, j]) for j, lv in enumerate(levels)},
                    backend="chronos",
                    model=ref.model_id,
                    method=method,
                )
            )
    return out
