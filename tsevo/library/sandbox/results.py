"""What one tool produced on one question: :class:`ToolResult`, its status and error kinds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .contract import Outputs

__all__ = ["ErrorKind", "SandboxError", "Status", "ToolResult"]

Status = Literal["ok", "abstain", "error"]
ErrorKind = Literal[
    "gate", "timeout", "cpu", "memory", "exception", "contract", "nondeterministic", "covariate", ""
]


class SandboxError(RuntimeError):
    """The worker process could not be started (not a tool failure)."""


@dataclass(frozen=True)
class ToolResult:
    """What one tool produced on one question.

    Attributes:
        qid: Question id.
        status: ``"ok"`` (outputs hold evidence), ``"abstain"`` (the tool returned None) or
            ``"error"``.
        outputs: Flat dict of finite numbers/booleans when ``status == "ok"``, else None.
        error: Human-readable reason when ``status == "error"``.
        error_kind: ``"gate"``, ``"timeout"``, ``"cpu"``, ``"memory"``, ``"exception"``,
            ``"contract"``, ``"nondeterministic"``, ``"covariate"``, or ``""`` when no error.
        elapsed_ms: Time spent in the tool function (first run), as measured in the child.
        covariates_read: Covariates the tool read (each mentioned by the question).
    """

    qid: str
    status: Status
    outputs: Outputs | None
    error: str = ""
    error_kind: ErrorKind = ""
    elapsed_ms: float = 0.0
    covariates_read: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the tool returned evidence."""
        return self.status == "ok"


def clean(msg: Any, limit: int = 400) -> str:
    """A printable, UTF-8-safe, bounded error message."""
    return str(msg)[:limit].encode("utf-8", "replace").decode("utf-8")


def error_result(qid: str, kind: ErrorKind, msg: str, ms: float = 0.0) -> ToolResult:
    """An error result with a cleaned message."""
    return ToolResult(qid, "error", None, clean(msg), kind, ms)


_new_result = object.__new__


def fast_result(qid: str, status: Status, outputs: Outputs | None, ms: float) -> ToolResult:
    """A ToolResult without an error or covariates (the hot path of a batch).

    Equal to ``ToolResult(qid, status, outputs, "", "", ms)``, built without the per-field
    checks of a frozen dataclass.
    """
    r = _new_result(ToolResult)
    r.__dict__.update(
        qid=qid,
        status=status,
        outputs=outputs,
        error="",
        error_kind="",
        elapsed_ms=ms,
        covariates_read=(),
    )
    return r


def brief(r: ToolResult) -> str:
    """A short rendering of a result (for the message of two disagreeing runs)."""
    if r.status == "ok":
        return json.dumps(r.outputs, sort_keys=True)[:150]
    return r.status if r.status == "abstain" else f"{r.error_kind}: {r.error[:100]}"
