"""The result of a forecast: :class:`Forecast` (read-only arrays)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["FloatArray", "Forecast", "frozen"]

FloatArray = npt.NDArray[np.float64]


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


def frozen(a: npt.ArrayLike) -> FloatArray:
    """A read-only float64 copy."""
    arr = np.array(a, dtype=np.float64, copy=True)
    arr.flags.writeable = False
    return arr
