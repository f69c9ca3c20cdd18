"""The per-question score history and changelog a chain step is conditioned on.

A :class:`ScoreHistory` is one lineage path on a group's batch: the root ``L_{r-1}`` (0 on every
held-out error, 1 on every probe row), the chain's start v0 and each later node, every one with
its :class:`~tsevo.marachain.score.NodeScore` and the :class:`ChangeEntry` that produced it. From
it come the numbers the step sees and the frames show: per question the credited score at every
node, ``d_root`` (against the root) and ``d_prev`` (against the lineage parent), what each change
fixed and broke, the rows that flip twice or more (oscillations), the wins an earlier node had
and the current one lost, the residual held-out errors and the harms.

Changelog entries are written by tsevo, never by the model, and name their author node. Subjects
are one line of at most 72 characters; diffs are cut to 3,000 characters.

:meth:`ScoreHistory.render` gives the text for a prompt: the score table (never cut; identical
rows collapse), the flags, then the changelog from the newest entry back as far as
``max_chars`` allows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .score import BatchSpec, NodeScore

__all__ = ["DIFF_CHARS", "SUBJECT_CHARS", "ChangeEntry", "HistoryNode", "ScoreHistory"]

#: The longest changelog subject.
SUBJECT_CHARS = 72
#: The longest diff a changelog entry keeps.
DIFF_CHARS = 3_000
_CUT = "\n[... diff cut at 3,000 characters]"


@dataclass(frozen=True)
class ChangeEntry:
    """One changelog entry, written by tsevo for the node it produced (its author).

    Attributes:
        seq: Position in the lineage's changelog (1-based).
        node_id: The author: the node this change produced.
        type: What kind of change (``window``, ``normalization``, ``primitive``, ``reading_rule``,
            ``scope``, ``guidance``, ``revert``, ...).
        subject: One line, at most 72 characters.
        body: Free text (what was done and why).
        fields_changed: The artifact fields the change touched.
        diff: The source diff, at most 3,000 characters (:meth:`make` cuts longer ones).
        resolves: What the change targets (question ids or diagnosis ids); never empty for a
            chain step's action, may be empty for v0.
    """

    seq: int
    node_id: str
    type: str
    subject: str
    body: str = ""
    fields_changed: tuple[str, ...] = ()
    diff: str = ""
    resolves: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.seq < 1:
            raise ValueError(f"ChangeEntry {self.node_id}: seq must be >= 1")
        if not self.subject.strip() or "\n" in self.subject or len(self.subject) > SUBJECT_CHARS:
            raise ValueError(
                f"ChangeEntry {self.node_id}: subject must be one non-empty line of at most "
                f"{SUBJECT_CHARS} characters"
            )
        if len(self.diff) > DIFF_CHARS:
            raise ValueError(f"ChangeEntry {self.node_id}: diff over {DIFF_CHARS} characters")

    @classmethod
    def make(cls, seq: int, node_id: str, type: str, subject: str, **rest: Any) -> ChangeEntry:
        """Build an entry, cutting an over-long subject (first line) and diff to their limits."""
        line = subject.strip().splitlines()[0] if subject.strip() else ""
        if len(line) > SUBJECT_CHARS:
            line = line[: SUBJECT_CHARS - 1] + "…"
        diff = str(rest.pop("diff", ""))
        if len(diff) > DIFF_CHARS:
            diff = diff[: DIFF_CHARS - len(_CUT)] + _CUT
        for k in ("fields_changed", "resolves"):
            if k in rest:
                rest[k] = tuple(rest[k])
        return cls(seq, node_id, type, line, diff=diff, **rest)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        d = dict(self.__dict__)
        d["fields_changed"], d["resolves"] = list(self.fields_changed), list(self.resolves)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChangeEntry:
        """Inverse of :meth:`to_dict`."""
        data = dict(d)
        data["fields_changed"] = tuple(data.get("fields_changed", ()))
        data["resolves"] = tuple(data.get("resolves", ()))
        return cls(**data)


@dataclass(frozen=True)
class HistoryNode:
    """One node of the lineage path: its id, score and the change that produced it."""

    node_id: str
    score: NodeScore
    change: ChangeEntry | None = None


@dataclass(frozen=True)
class ScoreHistory:
    """The scores along one lineage path (root first) and its changelog.

    Build it with :meth:`start` and extend it with :meth:`extend` (each returns a new history).
    """

    batch: BatchSpec
    nodes: tuple[HistoryNode, ...] = field(default=())

    def __post_init__(self) -> None:
        for n in self.nodes:
            if n.score.qids != self.batch.qids or n.score.parts != self.batch.parts:
                raise ValueError(
                    f"ScoreHistory: node {n.node_id} is not scored on batch {self.batch.group_id}"
                )
            if n.change is not None and n.change.node_id != n.node_id:
                raise ValueError(
                    f"ScoreHistory: change of {n.node_id} names author {n.change.node_id}"
                )
        ids = [n.node_id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError("ScoreHistory: a node appears twice on the path")

    @classmethod
    def start(cls, batch: BatchSpec) -> ScoreHistory:
        """An empty path on ``batch`` (only the root)."""
        return cls(batch)

    def extend(
        self, node_id: str, score: NodeScore, change: ChangeEntry | None = None
    ) -> ScoreHistory:
        """The path with one more node (its change's ``seq`` must follow the last entry's)."""
        if change is not None:
            last = max((n.change.seq for n in self.nodes if n.change is not None), default=0)
            if change.seq != last + 1:
                raise ValueError(f"ScoreHistory: change seq {change.seq} after {last}")
        return ScoreHistory(self.batch, (*self.nodes, HistoryNode(node_id, score, change)))

    # ---- the numbers ---------------------------------------------------------------------
    @property
    def root(self) -> NodeScore:
        """The root's score (0 on ``H``, 1 on ``P``)."""
        return self.batch.root_score()

    @property
    def node_ids(self) -> tuple[str, ...]:
        """The path's node ids (root excluded), oldest first."""
        return tuple(n.node_id for n in self.nodes)

    def _index(self, node_id: str) -> int:
        for i, n in enumerate(self.nodes):
            if n.node_id == node_id:
                return i
        raise KeyError(f"node {node_id!r} is not on this path")

    def _scores(self) -> list[NodeScore]:
        return [self.root, *(n.score for n in self.nodes)]

    def fixed(self, node_id: str) -> tuple[str, ...]:
        """Rows whose credited score went 0 -> 1 from the lineage parent to this node."""
        i = self._index(node_id) + 1
        prev, cur = self._scores()[i - 1], self._scores()[i]
        return tuple(
            q for q, a, b in zip(self.batch.qids, prev.credited, cur.credited, strict=True) if b > a
        )

    def broke(self, node_id: str) -> tuple[str, ...]:
        """Rows whose credited score went 1 -> 0 from the lineage parent to this node."""
        i = self._index(node_id) + 1
        prev, cur = self._scores()[i - 1], self._scores()[i]
        return tuple(
            q for q, a, b in zip(self.batch.qids, prev.credited, cur.credited, strict=True) if b < a
        )

    def flips(self) -> dict[str, int]:
        """Per row, how often its credited score changed along the path (root included)."""
        scores = self._scores()
        return {
            q: sum(
                scores[i].credited[j] != scores[i - 1].credited[j] for i in range(1, len(scores))
            )
            for j, q in enumerate(self.batch.qids)
        }

    def oscillations(self) -> tuple[str, ...]:
        """Rows whose credited score flipped two or more times."""
        return tuple(q for q, k in self.flips().items() if k >= 2)

    def lost_wins(self) -> tuple[str, ...]:
        """``H`` rows some node on the path credited that the current node does not."""
        if not self.nodes:
            return ()
        cur = self.nodes[-1].score.credited
        return tuple(
            q
            for j, (q, p) in enumerate(zip(self.batch.qids, self.batch.parts, strict=True))
            if p == "H" and not cur[j] and any(n.score.credited[j] for n in self.nodes[:-1])
        )

    def residuals(self) -> tuple[str, ...]:
        """``H`` rows no node on the path has credited yet."""
        return tuple(
            q
            for j, (q, p) in enumerate(zip(self.batch.qids, self.batch.parts, strict=True))
            if p == "H" and not any(n.score.credited[j] for n in self.nodes)
        )

    def harms(self) -> tuple[str, ...]:
        """``P`` rows the current node answers wrong."""
        return self.nodes[-1].score.harms if self.nodes else ()

    def rows(self) -> list[dict[str, Any]]:
        """Long rows ``(node_id, step, qid, part, raw, credited, fact, d_root, d_prev)``.

        ``step`` is the position on the path (1 = v0); ``d_root`` and ``d_prev`` are credited
        differences against the root and the lineage parent (the ``chain_scores_df`` columns).
        """
        scores, out = self._scores(), []
        for i, n in enumerate(self.nodes, 1):
            s, prev = scores[i], scores[i - 1]
            for j, q in enumerate(self.batch.qids):
                out.append(
                    {
                        "node_id": n.node_id,
                        "step": i,
                        "qid": q,
                        "part": self.batch.parts[j],
                        "raw": s.raw[j],
                        "credited": s.credited[j],
                        "fact": s.facts[j],
                        "d_root": s.credited[j] - self.root.credited[j],
                        "d_prev": s.credited[j] - prev.credited[j],
                    }
                )
        return out

    def changelog(self) -> tuple[ChangeEntry, ...]:
        """The path's changelog entries, oldest first."""
        return tuple(n.change for n in self.nodes if n.change is not None)

    # ---- the text ------------------------------------------------------------------------
    def render(
        self, max_chars: int | None = None, label: Callable[[str], str] | None = None
    ) -> str:
        """The history as prompt text: score table, flags, changelog (newest first).

        Args:
            max_chars: Cap on the text; the table and flags are never cut, changelog entries
                are dropped oldest first (and said so) until the text fits.
            label: How a question id is shown (the engine passes the run's opaque view ids).
        """
        show = label or (lambda q: q)
        head = self._table(show) + self._flags(show)
        entries = [self._entry(c, show) for c in reversed(self.changelog())]
        if not entries:
            return head
        text, kept = head + "\n## Changelog (newest first)\n", 0
        for e in entries:
            if max_chars is not None and len(text) + len(e) > max_chars:
                break
            text, kept = text + e, kept + 1
        if kept < len(entries):
            text += f"[{len(entries) - kept} older changelog entries left out]\n"
        return text

    def table(self, label: Callable[[str], str] | None = None) -> str:
        """The score table and flags of :meth:`render` alone (the part that is never cut)."""
        show = label or (lambda q: q)
        return self._table(show) + self._flags(show)

    def entry_text(self, c: ChangeEntry, label: Callable[[str], str] | None = None) -> str:
        """One changelog entry as :meth:`render` shows it."""
        return self._entry(c, label or (lambda q: q))

    def _table(self, show: Callable[[str], str]) -> str:
        b = self.batch
        names = ["root", *(f"N{i}" for i in range(1, len(self.nodes) + 1))]
        lines = [
            f"## Score history of {b.group_id} (batch {b.n_held_out} held-out errors + "
            f"{b.n_probe} probe rows; credited 1 = attributable repair on H, right on P)",
            "nodes: root = current library"
            + "".join(f"; N{i} = {n.node_id}" for i, n in enumerate(self.nodes, 1)),
            "rows | part | " + " ".join(names) + " | flips",
        ]
        scores, flips = self._scores(), self.flips()
        groups: dict[tuple[str, tuple[int, ...]], list[str]] = {}
        for j, q in enumerate(b.qids):
            groups.setdefault((b.parts[j], tuple(s.credited[j] for s in scores)), []).append(q)
        for (part, vals), qs in groups.items():
            who = ", ".join(show(q) for q in qs) + (f" ({len(qs)} rows)" if len(qs) > 1 else "")
            cells = " ".join(str(v).rjust(len(n)) for v, n in zip(vals, names, strict=True))
            lines.append(f"{who} | {part} | {cells} | {flips[qs[0]]}")
        sums = [
            f"{n}: +{len(s.repairs)} -{len(s.harms)}"
            for n, s in zip(names[1:], scores[1:], strict=True)
        ]
        if sums:
            lines.append("repairs/harms: " + "; ".join(sums))
        return "\n".join(lines) + "\n"

    def _flags(self, show: Callable[[str], str]) -> str:
        def ids(qs: Sequence[str]) -> str:
            return ", ".join(show(q) for q in qs) if qs else "none"

        return (
            f"oscillating (flipped >= 2x): {ids(self.oscillations())}\n"
            f"lost wins: {ids(self.lost_wins())}\n"
            f"residual held-out errors: {ids(self.residuals())}\n"
            f"harms of the current node: {ids(self.harms())}\n"
        )

    def _entry(self, c: ChangeEntry, show: Callable[[str], str]) -> str:
        fixed = ", ".join(show(q) for q in self.fixed(c.node_id)) or "nothing"
        broke = ", ".join(show(q) for q in self.broke(c.node_id)) or "nothing"
        parts = [
            f"[{c.seq}] {c.node_id} ({c.type}): {c.subject}",
            f"  fixed: {fixed}; broke: {broke}",
        ]
        if c.fields_changed:
            parts.append("  fields: " + ", ".join(c.fields_changed))
        if c.resolves:
            parts.append("  resolves: " + ", ".join(c.resolves))
        if c.body:
            parts.append("  " + c.body.strip().replace("\n", "\n  "))
        if c.diff:
            parts.append("  diff:\n" + c.diff)
        return "\n".join(parts) + "\n"
