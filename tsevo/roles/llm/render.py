"""How questions and series reach a model as text: one rendering shared by every LLM role.

A series becomes two lines: a summary (n, mean, std, min, max, first, last) and its values rounded
to ``sig`` significant digits. A series longer than ``max_points`` is downsampled by a fixed stride
(every k-th point from index 0), and the stride is stated, so the model knows what it sees.

A question renders as its text, its context, each series with its role (primary, covariate,
candidate) and the options lettered ``A)``, ``B)``, ... It never shows gold, metadata, the task,
the subtask, the source, the group or the id: answering roles see the question at hand only.

Token estimates are deliberately simple and documented: ``ceil((chars + digits) / 4)`` per text,
i.e. about four characters per token for prose and about two for digit runs (numbers split into
short tokens in common BPE vocabularies), plus 4 tokens per message. :func:`check_budget` raises
:class:`PromptTooLong` before a request is sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .config import LLMError

if TYPE_CHECKING:
    from tsevo.data import Question, QuestionView

__all__ = [
    "PromptTooLong",
    "check_budget",
    "estimate_message_tokens",
    "estimate_tokens",
    "format_number",
    "option_letter",
    "render_question",
    "render_series",
]

MESSAGE_OVERHEAD_TOKENS = 4


class PromptTooLong(LLMError):
    """The estimated prompt exceeds the per-prompt token budget (nothing was sent).

    Attributes:
        estimated: Estimated prompt tokens.
        limit: The budget.
    """

    def __init__(self, estimated: int, limit: int) -> None:
        self.estimated = estimated
        self.limit = limit
        super().__init__(
            f"prompt too long: about {estimated} tokens estimated, budget {limit}; "
            "render fewer points per series (max_points) or raise max_prompt_tokens"
        )


def format_number(v: float, sig: int = 4) -> str:
    """Round to ``sig`` significant digits, compactly (``1.235e6``, never ``-0``).

    Example:
        >>> format_number(1234567.0), format_number(0.000123456), format_number(-0.0)
        ('1.235e6', '0.0001235', '0')
    """
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    s = f"{float(v):.{sig}g}"
    if "e" in s:
        mant, exp = s.split("e")
        s = f"{mant}e{int(exp)}"
    return "0" if s in ("-0", "0") else s


def _ordinal(k: int) -> str:
    if 10 <= k % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def render_series(
    name: str,
    y: Sequence[float] | np.ndarray,
    *,
    max_points: int = 256,
    sig: int = 4,
    role: str | None = None,
) -> str:
    """Render one series as a summary line plus a values line.

    Args:
        name: Series name.
        y: Values.
        max_points: Most values shown; longer series are downsampled by a stated stride.
        sig: Significant digits of every number.
        role: Optional role shown after the name (``primary``, ``covariate``, ``candidate``).

    Returns:
        Two lines of text.

    Example:
        >>> print(render_series("x", [1.0, 2.0, 3.0, 4.0, 5.0], max_points=3))
        series "x": n=5, mean=3, std=1.414, min=1, max=5, first=1, last=5
        values (stride 2: every 2nd point from index 0, 3 of 5 shown, 4 significant digits): 1, 3, 5
    """
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points}")
    if sig < 1:
        raise ValueError(f"sig must be >= 1, got {sig}")
    arr = np.asarray(y, dtype=np.float64).ravel()
    n = int(arr.size)
    label = f'series "{name}"' + (f" ({role})" if role else "")
    if n == 0:
        return f"{label}: n=0 (empty)"

    def f(v: Any) -> str:
        return format_number(float(v), sig)

    finite = arr[np.isfinite(arr)]
    if finite.size:
        stats = (
            f"mean={f(finite.mean())}, std={f(finite.std())}, min={f(finite.min())}, "
            f"max={f(finite.max())}"
        )
    else:
        stats = "no finite values"
    head = f"{label}: n={n}, {stats}, first={f(arr[0])}, last={f(arr[-1])}"
    if n - finite.size:
        head += f", non-finite={n - finite.size}"
    stride = max(1, math.ceil(n / max_points))
    shown = arr[::stride]
    if stride == 1:
        how = f"all {n} points, {sig} significant digits"
    else:
        how = (
            f"stride {stride}: every {_ordinal(stride)} point from index 0, "
            f"{shown.size} of {n} shown, {sig} significant digits"
        )
    return f"{head}\nvalues ({how}): " + ", ".join(f(v) for v in shown)


def option_letter(i: int) -> str:
    """``0 -> "A"``, ``1 -> "B"``, ... (questions have at most 10 options)."""
    return chr(ord("A") + i)


def render_question(q: Question | QuestionView, *, max_points: int = 256, sig: int = 4) -> str:
    """Render what an answering role may see of a question.

    Shows the question text, its context, each series with its role and the lettered options.
    Never shows gold, metadata, task, subtask, source, group or id.

    Args:
        q: The question.
        max_points: Most values per series.
        sig: Significant digits.

    Returns:
        The question as text.
    """
    lines = [f"Question: {q.question.strip()}"]
    if q.context.strip():
        lines.append(f"Context: {q.context.strip()}")
    lines.append("Series:")
    roles: list[tuple[str, str]] = [(n, "primary") for n in q.primary]
    roles += [(n, "covariate") for n in q.covariates]
    roles += [(n, "candidate") for n in q.candidates]
    for name, role in roles:
        lines.append(render_series(name, q.series[name], max_points=max_points, sig=sig, role=role))
    lines.append("Options:")
    lines += [f"{option_letter(i)}) {opt}" for i, opt in enumerate(q.options)]
    return "\n".join(lines)


def estimate_tokens(text: str) -> int:
    """Estimate tokens as ``ceil((len(text) + number of digits) / 4)``.

    About four characters per token for prose, about two for digits. An estimate only: it is
    used to refuse prompts that are clearly too long, not to bill.
    """
    digits = sum(c.isdigit() for c in text)
    return math.ceil((len(text) + digits) / 4)


def estimate_message_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Estimated prompt tokens of a chat: each message's content plus 4 tokens of overhead."""
    return sum(
        estimate_tokens(str(m.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS for m in messages
    )


def check_budget(messages: Sequence[Mapping[str, Any]], max_prompt_tokens: int | None) -> int:
    """Check a chat against a per-prompt token budget before sending.

    Args:
        messages: Chat messages (``{"role", "content"}``).
        max_prompt_tokens: The budget; None checks nothing.

    Returns:
        The estimated prompt tokens.

    Raises:
        PromptTooLong: The estimate exceeds the budget.
    """
    est = estimate_message_tokens(messages)
    if max_prompt_tokens is not None and est > max_prompt_tokens:
        raise PromptTooLong(est, max_prompt_tokens)
    return est
