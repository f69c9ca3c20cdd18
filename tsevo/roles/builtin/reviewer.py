"""The builtin reviewer: applies each tool's reading rule and replaces only on an explicit reading."""

from __future__ import annotations

from collections.abc import Sequence

from tsevo.data import QuestionView
from tsevo.library.reading import Reading, apply_rule

from ..protocols import Evidence, Review

__all__ = ["RuleReviewer"]


class RuleReviewer:
    """Reads each ran tool's evidence with its guidance rule.

    The incoming answer is the default. With several readings, the most confident one wins; when
    readings of equal confidence disagree the reviewer makes no decision. A replacement is made only
    when a tool actually ran (status ``ok``) and its rule proposed an option different from the
    incoming answer.
    """

    name = "builtin-rule-reviewer"

    def _readings(
        self, q: QuestionView, evidence: Sequence[Evidence]
    ) -> list[tuple[float, str, Reading]]:
        readings = []
        for ev in evidence:
            rule = ev.tool.tool.guidance.rule
            if ev.status != "ok" or rule is None:
                continue
            r = apply_rule(rule, ev.outputs, q.options, q.candidates, q.question)
            if r.option is not None:
                readings.append((r.confidence, ev.tool.tool.id, r))
        readings.sort(key=lambda x: (-x[0], x[1]))
        return readings

    def read(self, q: QuestionView, evidence: Sequence[Evidence]) -> Review:
        """The evidence's own reading, with no incoming answer to review (``overwrite`` mode).

        The most confident reading names the option (ties: the first tool id), even where
        equally confident tools disagree; no reading (every rule abstains) gives no decision.
        """
        readings = self._readings(q, evidence)
        if not readings:
            return Review("no_decision", None, "no tool evidence could be read")
        _conf, tid, reading = readings[0]
        support = tuple(sorted(x[1] for x in readings if x[2].option == reading.option))
        return Review("replace", reading.option, f"{tid}: {reading.reason}", support)

    def review(self, q: QuestionView, incoming: int, evidence: Sequence[Evidence]) -> Review:
        """Return keep / replace / no_decision for one stage."""
        readings = self._readings(q, evidence)
        if not readings:
            return Review("no_decision", None, "no tool evidence could be read")
        top_conf = readings[0][0]
        top = [x for x in readings if abs(x[0] - top_conf) < 1e-9]
        opts = {x[2].option for x in top}
        if len(opts) > 1:
            ids = tuple(x[1] for x in top)
            return Review("no_decision", None, "equally confident tools disagree", ids)
        _conf, tid, reading = readings[0]
        support = tuple(sorted(x[1] for x in readings if x[2].option == reading.option))
        if reading.option == incoming:
            return Review("keep", incoming, f"{tid}: {reading.reason} agrees", support)
        return Review("replace", reading.option, f"{tid}: {reading.reason}", support)
