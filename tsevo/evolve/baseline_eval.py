"""The paired comparison of an answering baseline with the base answerer: same questions, same library.

:func:`eval_baseline` answers a validation or test split twice on one agent setup, once with the
role set's own answerer (``base``) and once with the baseline's (:mod:`tsevo.evolve.baseline`), with
the same library, reviewer and question views, and reports the paired deltas the gate and the
report use (``paired_counts``: helped, harmed, delta and its paired lower bound).
"""

from __future__ import annotations

from typing import Any

from tsevo.agent import Agent, AnswerRecord
from tsevo.data import Suite
from tsevo.library.library import Library
from tsevo.library.sandbox import Sandbox
from tsevo.roles import RoleSet
from tsevo.taxonomy.config import TaxonomyConfig

from .baseline import AnswerConfig, baseline_answerer, baseline_name
from .evaluate import Evaluator, outcomes, task_table
from .gate import paired_counts
from .views import ViewIds

__all__ = ["eval_baseline"]


def eval_baseline(
    suite: Suite,
    roles: RoleSet,
    answer: AnswerConfig,
    *,
    library: Library | None = None,
    split: str = "test",
    seed: int = 0,
    sandbox: Any = None,
    z: float = 1.96,
    taxonomy: TaxonomyConfig | None = None,
) -> dict[str, Any]:
    """Answer ``split`` with the base answerer and with the baseline; report the paired deltas.

    Args:
        suite: A split suite.
        roles: The role set (its answerer is the base arm; the baseline wraps it: LLM only).
        answer: The baseline's settings (e.g. ``paper_baseline("self-consistency")``).
        library: The library both arms answer with (default: the empty root).
        split: ``val`` or ``test`` (few-shot examples come from train, so train is refused).
        seed: The protocol seed (question views and the few-shot draw).
        sandbox: Tool executor (default: one the agents start and this call closes).
        z: z of the paired lower bound.
        taxonomy: The pinned taxonomy a ``judge`` selection reads (``ProtocolConfig.taxonomy``).

    Returns:
        ``{"split", "n", "baseline", "answer", "tasks" (per task and ALL: n, base, baseline,
        delta, helped, harmed), "counts", "delta", "delta_lb", "refine_changed", "vote_ties"}``.

    Raises:
        ValueError: ``split`` is not val or test, or the answerer is not an LLM answerer.
    """
    if split not in ("val", "test"):
        raise ValueError(f"a baseline is compared on val or test, not {split!r}")
    lib = library if library is not None else Library()
    view = ViewIds(suite, str(seed)).view
    qs = list(getattr(suite, split))
    arms: dict[str, dict[str, AnswerRecord]] = {}
    wrapped = baseline_answerer(
        roles, answer, train=suite.train, seed=seed, view=view, taxonomy=taxonomy
    )
    sb = sandbox if sandbox is not None else Sandbox()
    try:
        for arm, answerer in (("base", roles.answerer), ("baseline", wrapped)):
            agent = Agent(
                lib, answerer, roles.reviewer, executor=sb, workers=roles.workers, views=view
            )
            arms[arm] = Evaluator(agent).answer(split, lib, qs)
    finally:
        if sandbox is None:
            sb.close()
    base, other = arms["base"], arms["baseline"]
    counts = paired_counts(outcomes(base), outcomes(other))
    details = [r.base_detail or {} for r in other.values()]
    return {
        "split": split,
        "n": len(qs),
        "baseline": baseline_name(answer),
        "answer": answer.to_dict(),
        "tasks": task_table(base, other, ("base", "baseline")),
        "counts": counts.to_dict(),
        "delta": round(counts.delta, 6) if counts.n else None,
        "delta_lb": round(counts.delta_lb(z), 6) if counts.n else None,
        "refine_changed": sum(bool(d.get("refine", {}).get("changed")) for d in details),
        "vote_ties": sum(bool(d.get("selection", {}).get("tied")) for d in details),
    }
