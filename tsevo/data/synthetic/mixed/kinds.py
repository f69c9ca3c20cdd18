"""The registry of ``mixed`` question kinds, by category."""

from __future__ import annotations

from . import (
    anomaly,
    anomaly_events,
    arma,
    causality,
    cycles,
    distribution,
    moments,
    noise,
    similarity,
    trend,
)
from ._kind import CATEGORIES, Kind

__all__ = ["KINDS", "MODULES"]

#: The kind modules, in category order.
MODULES = (
    trend,
    cycles,
    moments,
    arma,
    anomaly,
    anomaly_events,
    similarity,
    distribution,
    noise,
    causality,
)

KINDS: dict[str, Kind] = {k.name: k for m in MODULES for k in m.KINDS}

if len(KINDS) != sum(len(m.KINDS) for m in MODULES):
    raise RuntimeError("duplicate mixed kind names")
if any(k.category not in CATEGORIES for k in KINDS.values()):
    raise RuntimeError("unknown mixed category")
