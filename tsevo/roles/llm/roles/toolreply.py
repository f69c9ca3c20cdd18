"""The tool reply contract the synthesizer and the LLM chain step share.

:class:`SynthReply` is a drafted tool as a model writes it (source, outputs, guidance and a
machine-readable :class:`RuleReply`); :func:`check_reply` finds what the model can fix (an empty
source, a source the sandbox gate refuses, an invalid reading rule, output keys the rule reads but
the tool does not return); :func:`rule_of` builds the :class:`~tsevo.library.tool.ReadingRule`.
"""

from __future__ import annotations

import re
from typing import Literal

import pydantic

from tsevo.library.sandbox import check_source
from tsevo.library.tool import ReadingRule

__all__ = ["RuleReply", "SynthReply", "check_reply", "rule_of"]


class RuleReply(pydantic.BaseModel):
    """A reading rule as the model writes it."""

    kind: Literal["label", "nearest_number", "extremum"]
    key: str = ""
    bins: list[float] = pydantic.Field(default_factory=list)
    labels: list[str] = pydantic.Field(default_factory=list)
    scale: float = 1.0
    offset: float = 0.0
    prefix: str = ""
    mode: Literal["min", "max"] = "min"
    margin: float = pydantic.Field(default=0.0, ge=0.0, description="abstain band")
    confidence: float = pydantic.Field(default=0.5, ge=0.0, le=1.0)


class SynthReply(pydantic.BaseModel):
    """The synthesizer's JSON contract."""

    source: str = pydantic.Field(max_length=16000)
    function_name: str = pydantic.Field(max_length=80)
    outputs: list[str] = pydantic.Field(max_length=32)
    measurement: str = pydantic.Field(max_length=160)
    description: str = pydantic.Field(max_length=300)
    guidance: str = pydantic.Field(max_length=800)
    reading_rule: RuleReply | None
    give_up: bool


def rule_of(r: RuleReply | None) -> ReadingRule | None:
    """The reading rule of a reply (``None`` when it gives none); raises ``ValueError`` if invalid."""
    if r is None:
        return None
    return ReadingRule(
        r.kind,
        key=r.key,
        bins=tuple(r.bins),
        labels=tuple(r.labels),
        scale=r.scale,
        offset=r.offset,
        prefix=r.prefix,
        mode=r.mode,
        margin=r.margin,
        confidence=r.confidence,
    )


def check_reply(r: SynthReply) -> str | None:
    """Problems of a synthesizer reply the model can fix (None when usable)."""
    if r.give_up:
        return None

    if not r.source.strip():
        return "source is empty; write the function (or set give_up to true)"
    gate = check_source(r.source)
    if not gate.ok:
        return "the source is refused by the sandbox gate: " + "; ".join(gate.reasons[:4])
    try:
        rule = rule_of(r.reading_rule)
    except ValueError as e:
        return f"reading_rule is invalid: {e}"
    bad = [k for k in r.outputs if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", k)]
    if bad:
        return f"output keys must be identifiers of at most 64 characters: {bad[:4]}"
    missing = [k for k in rule.read_keys() if k not in r.outputs] if rule is not None else []
    if missing:
        return f"reading_rule reads {missing} that are not among the outputs {r.outputs}"
    return None
