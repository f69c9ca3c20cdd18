"""Expert root vs bare agent, per synthetic family, on the report-only TEST split.

Run with ``python -m tests.bench roots``. The numbers are an honest baseline for the hand-written
``expert`` library (thresholds set by judgement, never fitted); they are not a target, and the
library must not be changed after looking at them.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping

from tsevo.agent import Agent, AnswerRecord
from tsevo.data.synthetic import make_suite
from tsevo.library.roots import make_root
from tsevo.library.sandbox import Sandbox

SIZE = "default"
SEED = 1


def _family(meta: object, task: str) -> str:
    if isinstance(meta, Mapping) and isinstance(meta.get("family"), str):
        return str(meta["family"])
    return task


def per_family_table(
    base: list[AnswerRecord], expert: list[AnswerRecord], families: list[str]
) -> list[dict[str, float | int | str]]:
    """Paired per-family counts: base and expert accuracy, delta, helped, harmed, fired.

    Args:
        base: Records of the bare agent (empty root).
        expert: Records of the expert-root agent, same questions in the same order.
        families: Family of each question, same order.

    Returns:
        One row per family (sorted) plus an ``ALL`` row.
    """
    groups: dict[str, list[tuple[AnswerRecord, AnswerRecord]]] = defaultdict(list)
    for b, e, f in zip(base, expert, families, strict=True):
        if b.qid != e.qid:
            raise ValueError("records are not paired")
        groups[f].append((b, e))
        groups["ALL"].append((b, e))
    rows: list[dict[str, float | int | str]] = []
    for fam in [*sorted(k for k in groups if k != "ALL"), "ALL"]:
        pairs = [(b, e) for b, e in groups[fam] if b.completed and e.completed]
        n = len(pairs)
        b_ok = sum(bool(b.correct) for b, _ in pairs)
        e_ok = sum(bool(e.correct) for _, e in pairs)
        rows.append(
            {
                "family": fam,
                "n": n,
                "base_acc": b_ok / n if n else float("nan"),
                "expert_acc": e_ok / n if n else float("nan"),
                "delta": (e_ok - b_ok) / n if n else float("nan"),
                "helped": sum(bool(e.correct) and not b.correct for b, e in pairs),
                "harmed": sum(bool(b.correct) and not e.correct for b, e in pairs),
                "fired": sum(e.tool_fired for _, e in pairs),
                "changed": sum(e.final_answer != b.final_answer for b, e in pairs),
            }
        )
    return rows


def main() -> None:
    """Answer the TEST split of ``make_suite("default", seed=1)`` with both roots; print the table."""
    t0 = time.perf_counter()
    suite = make_suite(SIZE, seed=SEED)
    test = list(suite.test)
    families = [_family(q.metadata, q.task) for q in test]
    print(
        f"suite {SIZE} seed {SEED}: {len(test)} test questions ({time.perf_counter() - t0:.1f} s)"
    )
    with Sandbox() as sb:
        t1 = time.perf_counter()
        base = Agent(make_root("empty"), executor=sb).answer_many(test)
        t2 = time.perf_counter()
        expert = Agent(make_root("expert"), executor=sb).answer_many(test)
        t3 = time.perf_counter()
    errors = sum(r.tool_errors for r in expert)
    print(f"base pass {t2 - t1:.1f} s; expert pass {t3 - t2:.1f} s; expert tool errors {errors}")
    rows = per_family_table(base, expert, families)
    head = (
        f"{'family':<26}{'n':>5}{'base':>8}{'expert':>8}{'delta':>8}"
        f"{'helped':>8}{'harmed':>8}{'fired':>7}{'changed':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['family']!s:<26}{r['n']:>5}{r['base_acc']:>8.3f}{r['expert_acc']:>8.3f}"
            f"{r['delta']:>+8.3f}{r['helped']:>8}{r['harmed']:>8}{r['fired']:>7}{r['changed']:>9}"
        )
    fired_by_tool: dict[str, int] = defaultdict(int)
    replaced_by_tool: dict[str, int] = defaultdict(int)
    for r in expert:
        for t in r.tools_ok:
            fired_by_tool[t] += 1
        for t in r.replaced_by:
            replaced_by_tool[t] += 1
    print("\nexpert tools: evidence returned / responsible for a replacement")
    for t in sorted(fired_by_tool, key=lambda k: -fired_by_tool[k]):
        print(f"  {t:<28}{fired_by_tool[t]:>6}{replaced_by_tool.get(t, 0):>6}")


if __name__ == "__main__":
    main()
