"""The deterministic context of an LLM chain step, capped at ``context_chars`` (design §3.1).

:func:`step_context` fills the text in a fixed order and cuts only from the end:

1. the contract, the lineage path, the row classes the analysis must account for and the score
   table (never cut; identical rows collapse into one line of the table);
2. the node to edit (source, outputs, guidance, reading rule, scope) and the best node so far;
3. the last two analyses, then the changelog, newest first, with the diffs of the last two
   entries only;
4. raw records, one JSON line per (node, row): changed rows first, then lost wins, oscillating
   rows, harms and residuals, then the rest; each line holds the fields a citation may quote.

Whatever does not fit is left out and said so. Only train rows of the group's batch appear
(the caller builds the records from chain scoring, which answers train questions only); rows are
shown under the run's opaque ids. :func:`stored_fields` gives the citation map that
:class:`~tsevo.marachain.analysis.StepFacts` checks quotes against, from the same records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .analysis import CATEGORY_MEANINGS, StepFacts
from .history import ChangeEntry, ScoreHistory

__all__ = ["ROW_FIELDS", "NodeText", "step_context", "stored_fields"]

#: Per-row fields of a raw record a citation may quote.
ROW_FIELDS: tuple[str, ...] = ("question", "fact", "answer", "correct", "reason", "outputs")
#: Node-level fields a citation may quote.
NODE_FIELDS: tuple[str, ...] = ("source", "guidance", "subject")
#: Characters kept free for the line that says what was left out.
_TRAILER = 100


@dataclass(frozen=True)
class NodeText:
    """A node as the step's context shows it: its artifact fields and per-row records.

    Attributes:
        node_id: The node.
        source: The tool source.
        outputs: Output keys.
        guidance: Guidance text.
        rule: The reading rule as a dict (or ``None``).
        scope: The scope, described in words.
        subject: The changelog subject of the change that made it (empty for v0).
        counts: ``repairs``, ``harms``, ``net`` on the batch.
        rows: Shown row id -> fields (:data:`ROW_FIELDS`, all strings).
    """

    node_id: str
    source: str
    outputs: tuple[str, ...]
    guidance: str
    rule: Mapping[str, Any] | None
    scope: str
    subject: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)
    rows: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def artifact(self) -> dict[str, Any]:
        """The editable fields, as the mutation returns them."""
        return {
            "node_id": self.node_id,
            "source": self.source,
            "outputs": list(self.outputs),
            "guidance": self.guidance,
            "reading_rule": dict(self.rule) if self.rule is not None else None,
            "scope": self.scope,
            **dict(self.counts),
        }


def stored_fields(nodes: Sequence[NodeText]) -> dict[tuple[str, str, str], str]:
    """``(node_id, row or "", field) -> text`` for every node: what a citation may quote."""
    out: dict[tuple[str, str, str], str] = {}
    for n in nodes:
        out[(n.node_id, "", "source")] = n.source
        out[(n.node_id, "", "guidance")] = n.guidance
        if n.subject:
            out[(n.node_id, "", "subject")] = n.subject
        for q, row in n.rows.items():
            for k in ROW_FIELDS:
                if k in row:
                    out[(n.node_id, q, k)] = str(row[k])
    return out


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ": "))


def _records(
    nodes: Sequence[NodeText], facts: StepFacts, history: ScoreHistory, show: Callable[[str], str]
) -> list[str]:
    """Raw record lines, most telling rows first (changed, lost, oscillating, harmed, residual)."""
    changed = {show(q) for q in (*history.fixed(history.nodes[-1].node_id), *facts.regressed)}
    rank = [
        changed,
        set(facts.lost_wins),
        set(facts.oscillating),
        {r for r in facts.rows if facts.parts[r] == "P" and not facts.raw[r]},
        set(facts.residuals),
    ]

    def key(r: str) -> int:
        return next((i for i, s in enumerate(rank) if r in s), len(rank))

    order = sorted(facts.rows, key=lambda r: (key(r), facts.rows.index(r)))
    lines = []
    for r in order:
        for n in nodes:
            row = n.rows.get(r)
            if row is not None:
                rec = {"node_id": n.node_id, "qid": r, "part": facts.parts[r]}
                lines.append(_dump({**rec, **{k: row[k] for k in ROW_FIELDS if k in row}}))
    return lines


def step_context(
    *,
    contract: str,
    history: ScoreHistory,
    parent: NodeText,
    best: NodeText | None,
    analyses: Sequence[Mapping[str, Any]],
    facts: StepFacts,
    max_chars: int,
    label: Callable[[str], str] | None = None,
) -> str:
    """The step's context text (see the module docstring for the order and what is cut)."""
    show = label or (lambda q: q)
    budget = max_chars - _TRAILER
    head = [
        "## Contract (what every node must keep)",
        contract.strip(),
        "",
        "## Lineage (v0 first, the node to edit last)",
        " -> ".join(history.node_ids),
        "",
        "## Rows the analysis must account for",
        *(f"- {k}: {', '.join(v) if v else 'none'}" for k, v in facts.required().items()),
        "",
        "## Categories",
        *(f"- {c}: {m}" for c, m in CATEGORY_MEANINGS.items()),
        "",
        history.table(show),
    ]
    text = "\n".join(head)
    parts = ["## Node to edit\n" + _dump(parent.artifact())]
    if best is not None and best.node_id != parent.node_id:
        parts.append("## Best node so far (never displaced)\n" + _dump(best.artifact()))
    if analyses:
        parts.append(
            "## Earlier analyses (newest first)\n"
            + "\n".join(_dump(a) for a in reversed(list(analyses)[-2:]))
        )
    entries = list(reversed(history.changelog()))
    if entries:
        shown = []
        for i, c in enumerate(entries):
            e = c if i < 2 else _without_diff(c)
            shown.append(history.entry_text(e, show))
        parts.append("## Changelog (newest first; diffs of the last two)\n" + "".join(shown))
    left = 0
    for p in parts:
        if len(text) + len(p) + 2 > budget:
            left += 1
            continue
        text += "\n" + p + "\n"
    records = _records([n for n in (parent, best) if n is not None], facts, history, show)
    kept = 0
    header = "\n## Raw records (one JSON line per node and row)\n"
    if records and len(text) + len(header) < budget:
        text += header
        for line in records:
            if len(text) + len(line) + 1 > budget:
                break
            text, kept = text + line + "\n", kept + 1
    if left or kept < len(records):
        text += f"[left out to fit {max_chars} characters: {left} sections, "
        text += f"{len(records) - kept} raw records]\n"
    return text


def _without_diff(c: ChangeEntry) -> ChangeEntry:
    return replace(c, diff="")
