"""Knob fields of the frozen configs: documentation and bounds in the field metadata, one validator.

:class:`~tsevo.evolve.config.ProtocolConfig` and the :class:`~tsevo.evolve.ablation.AblationConfig`
nested in it declare every field with :func:`knob`, validate in ``__post_init__`` with
:func:`check_knobs` and read loose parameters (papermill cells, ``--set KEY=VALUE``) with
:func:`coerce`; the nested configs share their JSON form and rows through :class:`NestedKnobs`. Thresholds with an exact protocol edge are compared through :func:`exact`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field, fields
from fractions import Fraction
from typing import Any, ClassVar, Self

__all__ = ["NestedKnobs", "check_knobs", "coerce", "exact", "knob", "settings_from_pairs"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def settings_from_pairs(items: Iterable[str]) -> dict[str, str]:
    """``KNOB=VALUE`` strings (a command line's ``--set``) as a dict for ``from_params``.

    Raises:
        ValueError: On an item without ``=`` or without a name, naming it.
    """
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"expected KNOB=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def exact(x: float | int) -> Fraction:
    """Return a number as an exact fraction of its shortest decimal form.

    ``exact(0.02) == Fraction(1, 50)``: comparisons against protocol thresholds are then exact at
    their edges instead of depending on binary floating point (``1 - 98/100 > 0.02`` is true in
    floats).

    Args:
        x: A finite int or float.

    Returns:
        The fraction equal to ``repr(x)`` read as a decimal.
    """
    if isinstance(x, bool):
        raise TypeError("exact() takes a number, not a bool")
    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


def knob(
    default: Any,
    doc: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple[str, ...] | None = None,
    gap: bool = False,
) -> Any:
    """A dataclass field with its documentation and validation bounds in the metadata."""
    meta: dict[str, Any] = {"doc": doc, "lo": lo, "hi": hi, "choices": choices, "gap": gap}
    return field(default=default, metadata=meta)


def check_knobs(obj: Any, owner: str) -> None:
    """Validate every knob of a frozen config against its default's type and its metadata.

    An int given for a float knob is stored as a float.

    Raises:
        TypeError: A value of the wrong type (named ``owner.field``).
        ValueError: A value out of bounds, not finite, or not among the choices.
    """
    for f in fields(obj):
        value: Any = getattr(obj, f.name)
        want: type = type(f.default)
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
            object.__setattr__(obj, f.name, value)
        if want is int and isinstance(value, bool):
            raise TypeError(f"{owner}.{f.name}: expected int, got bool {value!r}")
        if not isinstance(value, want):
            raise TypeError(
                f"{owner}.{f.name}: expected {want.__name__}, got {type(value).__name__} {value!r}"
            )
        meta = f.metadata
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{owner}.{f.name}: must be finite, got {value!r}")
        if meta["lo"] is not None and value < meta["lo"]:
            raise ValueError(f"{owner}.{f.name}: must be >= {meta['lo']}, got {value!r}")
        if meta["hi"] is not None and value > meta["hi"]:
            raise ValueError(f"{owner}.{f.name}: must be <= {meta['hi']}, got {value!r}")
        if meta["choices"] is not None and value not in meta["choices"]:
            raise ValueError(
                f"{owner}.{f.name}: must be one of {list(meta['choices'])}, got {value!r}"
            )


def coerce(owner: str, name: str, value: Any, want: type) -> Any:
    """Read a string parameter as the knob's type (``"false"``, ``"3"``, ``"0.4"``).

    Values that are not strings, and string knobs, are returned unchanged.

    Raises:
        TypeError: When the string cannot be read as ``want``.
    """
    if not isinstance(value, str) or want is str:
        return value
    text = value.strip()
    try:
        if want is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError(text)
        if want is int:
            return int(text)
        if want is float:
            return float(text)
    except ValueError:
        pass
    raise TypeError(f"{owner}.{name}: cannot read {value!r} as {want.__name__}")


class NestedKnobs:
    """What every config nested in the protocol shares: JSON form, strict construction, rows.

    A frozen dataclass whose fields are :func:`knob` s sets ``OWNER`` (its place in the protocol,
    e.g. ``"ProtocolConfig.ablation"``) and ``UNKNOWN`` (the noun its errors use for a name it
    does not know) and validates with :func:`check_knobs` in ``__post_init__``.
    """

    OWNER: ClassVar[str] = ""
    UNKNOWN: ClassVar[str] = "setting(s)"

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The knob names in declaration order."""
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """Every knob as a JSON-friendly dict (field order)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def _check_names(cls, names: Iterable[str]) -> None:
        unknown = sorted(set(names) - set(cls.field_names()))
        if unknown:
            raise TypeError(f"{cls.OWNER}: unknown {cls.UNKNOWN} {unknown}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Build from a dict such as :meth:`to_dict` returns (missing knobs take defaults).

        Raises:
            TypeError: On unknown names (all named) or values of the wrong type.
            ValueError: On values out of bounds or not among the choices.
        """
        cls._check_names(data)
        return cls(**dict(data))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Self:
        """Like :meth:`from_dict`, with strings read as the knobs' types (``"5"``, ``"false"``)."""
        cls._check_names(params)
        kinds = {f.name: type(f.default) for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: coerce(cls.OWNER, k, v, kinds[k]) for k, v in params.items()})

    @classmethod
    def take_params(
        cls,
        lowered: dict[str, Any],
        start: Mapping[str, Any],
        presets: Callable[[str], Self] | None = None,
    ) -> tuple[dict[str, Any], Self | None]:
        """Take this config's keys out of loose protocol parameters.

        The config's place (``answer`` for ``ProtocolConfig.answer``) may name a preset (when
        ``presets`` resolves names), a dict of knobs or an instance; ``<place>.<knob>`` keys apply
        on top, over ``start[<place>]``. Returns the remaining parameters and the resulting config
        (``None`` when no key named it and ``start`` has none).
        """
        place = cls.OWNER.rsplit(".", 1)[-1]
        settings = {
            k.split(".", 1)[1]: lowered.pop(k) for k in list(lowered) if k.startswith(place + ".")
        }
        named = lowered.pop(place, None)
        base = dict(start.get(place, {}))
        if isinstance(named, str) and presets is not None:
            base = presets(named).to_dict()
        elif isinstance(named, cls):
            base = named.to_dict()
        elif named is not None:
            base.update(dict(named))
        if not base and not settings:
            return lowered, None
        base.update(settings)
        return lowered, cls.from_params(base)

    def describe(self) -> list[dict[str, Any]]:
        """One row per knob: ``{"name", "value", "default", "doc"}`` (names ``<place>.<knob>``)."""
        prefix = self.OWNER.rsplit(".", 1)[-1]
        return [
            {
                "name": f"{prefix}.{f.name}",
                "value": getattr(self, f.name),
                "default": f.default,
                "doc": f.metadata["doc"],
            }
            for f in fields(self)  # type: ignore[arg-type]
        ]
