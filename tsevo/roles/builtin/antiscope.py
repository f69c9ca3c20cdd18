"""Evidence for the lifecycle plans beyond a forbidden word: task anti-scopes, anti-matchers, retire.

The builtin planner's lifecycle step (:func:`~tsevo.roles.builtin.lifecycle.lifecycle_card`) looks at
the train rows where an earlier tool ran. When its readings are mostly wrong and no refit helps, the
evidence decides between:

* *rescope with an anti-scope* (a scope override): the tasks where it reads wrong on every row while
  it reads right elsewhere (``anti_tasks``), or a weighted term matcher over the words its wrong rows
  share and its right rows lack (``anti_matcher``) when no single word is shared by all of them;
* *retire* (a tombstone): its replacements on these rows are clearly harmful (it broke at least
  ``min_harm`` right answers and more than ``ratio`` times what it repaired: the prune's rule, on
  train) and it reads right nowhere, or nothing narrower separates where it reads right.

Every function reads train rows only (the dossier's support and background examples).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tsevo.library.tool import Matcher, question_tokens

__all__ = ["HarmCounts", "anti_matcher", "anti_tasks", "clearly_harmful_on_train", "harm_counts"]


@dataclass(frozen=True)
class HarmCounts:
    """What a tool's replacements did on train rows: repairs (helped) and breaks (harmed)."""

    helped: int = 0
    harmed: int = 0


def harm_counts(tool_id: str, records: Sequence[Any], golds: Sequence[int | None]) -> HarmCounts:
    """Count the rows where ``tool_id`` drove a replacement that fixed or broke the answer.

    Args:
        tool_id: The earlier tool.
        records: The current library's answer records of the rows (with their stage steps).
        golds: The rows' gold option indices (``None``: unlabeled, skipped).
    """
    helped = harmed = 0
    for rec, gold in zip(records, golds, strict=True):
        if gold is None:
            continue
        for s in getattr(rec, "steps", ()):
            if s.decision != "replace" or tool_id not in s.responsible:
                continue
            if s.answer_out == gold:
                helped += 1
            elif s.answer_in == gold:
                harmed += 1
    return HarmCounts(helped, harmed)


def clearly_harmful_on_train(c: HarmCounts, min_harm: int = 2, ratio: float = 2.0) -> bool:
    """The prune's *clearly harmful* rule applied to train rows: ``m >= 2`` and ``m > 2 h``."""
    return c.harmed >= min_harm and c.harmed > ratio * c.helped


def anti_tasks(tasks: Sequence[str], right: Sequence[bool], min_rows: int = 2) -> tuple[str, ...]:
    """Tasks where the tool reads wrong on every one of at least ``min_rows`` rows.

    Only when it reads right on some row of another task (otherwise the task says nothing about
    where the tool works, and retiring it is the honest plan).
    """
    if not any(right):
        return ()
    by_task: dict[str, list[bool]] = {}
    for t, ok in zip(tasks, right, strict=True):
        by_task.setdefault(t, []).append(ok)
    bad = sorted(t for t, oks in by_task.items() if len(oks) >= min_rows and not any(oks))
    if not bad or all(t in bad for t in by_task):
        return ()
    return tuple(bad)


def anti_matcher(
    texts: Sequence[str],
    right: Sequence[bool],
    *,
    min_wrong: int = 3,
    cover: float = 0.8,
    leak: float = 0.2,
) -> Matcher | None:
    """A weighted term matcher that accepts most wrong rows and few right ones (an anti-scope).

    Terms: words (longer than two letters) present in at least half the wrong rows and at most
    ``leak`` of the right rows, weighted by that difference. The threshold is the score of the
    wrong row at the ``cover`` quantile; the matcher is kept only when it accepts at most ``leak``
    of the right rows.

    Returns:
        The matcher, or ``None`` without enough wrong rows or separating words.
    """
    toks = [question_tokens(t) for t in texts]
    wrong = [t for t, ok in zip(toks, right, strict=True) if not ok]
    good = [t for t, ok in zip(toks, right, strict=True) if ok]
    if len(wrong) < min_wrong:
        return None
    df_w = Counter(w for t in wrong for w in t)
    df_r = Counter(w for t in good for w in t)
    terms: dict[str, float] = {}
    for w, c in sorted(df_w.items()):
        fw, fr = c / len(wrong), df_r.get(w, 0) / max(len(good), 1)
        if len(w) > 2 and fw >= 0.5 and fr <= leak:
            terms[w] = round(fw - fr, 6)
    if not terms:
        return None
    m = Matcher(terms, 0.0)
    scores = sorted((m.score(t) for t in wrong), reverse=True)
    thr = round(scores[max(0, math.ceil(cover * len(wrong)) - 1)], 6)
    if thr <= 0:
        return None
    m = Matcher(terms, thr)
    if sum(m.matches(t) for t in good) > leak * len(good):
        return None
    return m
