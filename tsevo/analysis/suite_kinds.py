"""A suite's question kinds and the concept words they hit, before any round: ``tsevo data kinds``.

The builtin planner recovers question kinds from wording (:mod:`tsevo.roles.builtin.kinds`) and
searches each kind's measurement first in the catalog groups its words point at
(:mod:`tsevo.roles.builtin.concepts`); a kind whose words hit no lexicon stem is searched over the
whole catalog at a stricter bar, and a kind with fewer than three train questions is not learned
alone. :func:`suite_kinds` shows both for a researcher's own benchmark before a round is run, so
the lexicon can be extended for its words (``tsevo evolve --concepts FILE``) where it has none.

Kinds are recovered from the wording of every question of the suite (no gold, no answers); a round
recovers them from its train rows only, so a rare kind may split or merge differently there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from tsevo.data import QuestionView, Suite
from tsevo.roles.builtin.concepts import concept_entries, concept_stems, groups_for
from tsevo.roles.builtin.kindplan import KindPlanSettings, pooling_partners
from tsevo.roles.builtin.kinds import KindIndex

__all__ = ["SUITE_KINDS_COLUMNS", "suite_kinds", "suite_kinds_summary"]

SUITE_KINDS_COLUMNS = [
    "kind", "template", "shape", "questions", "train", "val", "test", "pooled_train", "partners",
    "concepts", "groups",
]  # fmt: skip

#: Fewest train questions a kind is learned from on its own (the planner's default).
MIN_ROWS: int = KindPlanSettings().min_rows


def suite_kinds(
    suite: Suite, concepts: Mapping[str, Sequence[str]] | Sequence[Any] = ()
) -> pd.DataFrame:
    """One row per question kind recovered from the suite's wording.

    Args:
        suite: Any suite; split columns count 0 where it has no splits.
        concepts: Lexicon additions, as ``tsevo evolve --concepts`` takes them
            (:func:`~tsevo.roles.builtin.concepts.extend`).

    Returns:
        Columns :data:`SUITE_KINDS_COLUMNS`: ``kind`` (content-derived id), ``template`` (masked
        wording, slots as ``*``), ``shape`` (option shape), ``questions`` and per split counts,
        ``pooled_train`` (its train questions and those of its ``partners``, the kinds it may pool
        rows with: same option shape and a specific option set or a shared stem,
        :func:`~tsevo.roles.builtin.kindplan.pooling_partners`; what a kind of one or two train
        questions is learned from; 0 for a kind without train questions, which no branch serves),
        ``concepts`` (the lexicon stems its shared words hit, sorted;
        empty: searched over the whole catalog at the strict bar), ``groups`` (the catalog groups
        they point at). Sorted by train questions, then questions, descending.
    """
    settings = KindPlanSettings(concepts=concept_entries(concepts))
    lexicon = settings.lexicon
    index = KindIndex(QuestionView.of(q, q.id) for q in suite)
    split = {k.id: Counter(suite.splits.get(m, "") for m in k.members) for k in index.kinds}
    with_train: dict[str, tuple[()]] = {kid: () for kid, c in split.items() if c["train"]}
    rows = []
    for k in index.kinds:
        own = split[k.id]["train"]
        partners = pooling_partners(
            index, k.id, with_train, settings.pool_option_sets, settings.option_rules, lexicon
        )
        rows.append(
            {
                "kind": k.id,
                "template": " ".join(k.template),
                "shape": k.shape,
                "questions": len(k.members),
                "train": own,
                "val": split[k.id]["val"],
                "test": split[k.id]["test"],
                "pooled_train": own + sum(split[p]["train"] for p in partners) if own else 0,
                "partners": len(partners),
                "concepts": sorted(concept_stems(k.anchor, lexicon)),
                "groups": sorted(groups_for(k.anchor, lexicon)),
            }
        )
    frame = pd.DataFrame(rows, columns=SUITE_KINDS_COLUMNS)
    return frame.sort_values(["train", "questions", "kind"], ascending=[False, False, True])


def suite_kinds_summary(frame: pd.DataFrame) -> dict[str, Any]:
    """Counts over :func:`suite_kinds`' rows: kinds, learnable ones, ones no lexicon word reaches.

    A kind is learnable with ``min_rows`` (:class:`KindPlanSettings`; two) or more train questions
    of its own (``learnable_kinds``), or with its pooling partners' (``learnable_pooled``).
    """
    none = frame[[not c for c in frame["concepts"]]]
    return {
        "kinds": len(frame),
        "questions": int(frame["questions"].sum()),
        "median_questions_per_kind": float(frame["questions"].median()) if len(frame) else 0.0,
        "min_rows": MIN_ROWS,
        "learnable_kinds": int((frame["train"] >= MIN_ROWS).sum()),
        "learnable_pooled": int((frame["pooled_train"] >= MIN_ROWS).sum()),
        "without_concepts": len(none),
        "without_concepts_learnable": int((none["train"] >= MIN_ROWS).sum()),
    }
