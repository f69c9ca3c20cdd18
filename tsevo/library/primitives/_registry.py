"""The registry behind ``P``: every primitive is a plain function registered with its metadata.

A primitive is deterministic numpy/scipy code. It takes one or more float arrays plus explicit
keyword parameters (windows, lags, periods) and returns a flat ``dict`` of named results, or
``None`` to abstain (too short, zero scale, non-finite input). Scalar results (float, int, bool)
are what planners measure and tools return; a few primitives also return arrays under documented
keys (e.g. a forecast path) for use inside tool code.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CATALOG", "Arity", "PrimitiveSpec", "primitive"]

Arity = Literal["single", "pair", "reference_candidates"]


@dataclass(frozen=True)
class PrimitiveSpec:
    """Metadata of one primitive.

    Attributes:
        name: Attribute name under ``P`` (e.g. ``"trend"`` -> ``P.trend(y)``).
        fn: The function.
        group: Catalog group ("summary", "trend", "spectral", "window", "anomaly", ...).
        arity: ``"single"`` takes one series, ``"pair"`` two (a, b), ``"reference_candidates"``
            a reference and one candidate at a time.
        outputs: Names of the scalar keys of the result dict (what a tool may return).
        grid: Alternative parameterizations a planner may try, name -> list of values.
        summary: One line saying what it measures and in which units.
        numbers: Keyword parameters a planner may read from the numbers a question states, in the
            order a question usually states them (e.g. sampling rate, then band edges).
    """

    name: str
    fn: Callable[..., Any]
    group: str
    arity: Arity
    outputs: tuple[str, ...]
    grid: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    summary: str = ""
    numbers: tuple[str, ...] = ()


CATALOG: dict[str, PrimitiveSpec] = {}


def primitive(
    *,
    group: str,
    outputs: tuple[str, ...],
    arity: Arity = "single",
    grid: Mapping[str, tuple[Any, ...]] | None = None,
    numbers: tuple[str, ...] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a function as a primitive under its own name.

    Args:
        group: Catalog group.
        outputs: Scalar keys of its result dict.
        arity: How many series it takes (see :class:`PrimitiveSpec`).
        grid: Parameter alternatives for planners.
        numbers: Parameters that may be bound to the question's stated numbers, in order.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        name = fn.__name__
        params = inspect.signature(fn).parameters
        unknown = [p for p in numbers if p not in params]
        if unknown:
            raise ValueError(f"primitive {name!r}: numbers name unknown parameters {unknown}")
        if name in CATALOG and CATALOG[name].fn is not fn:
            raise ValueError(f"primitive {name!r} registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()
        CATALOG[name] = PrimitiveSpec(
            name=name,
            fn=fn,
            group=group,
            arity=arity,
            outputs=tuple(outputs),
            grid={k: tuple(v) for k, v in (grid or {}).items()},
            summary=doc[0] if doc else "",
            numbers=tuple(numbers),
        )
        return fn

    return deco
