"""Opaque per-run ids: the engine's side of "roles see a view, not the record".

:class:`ViewIds` assigns every question of a run an opaque id (after the split, from the question's
content fingerprint and the run's salt), builds the :class:`~tsevo.data.QuestionView` a role sees,
and maps ids back. The engine's own orderings (the define sample, assign batches, bucket splits,
background and probe rows) hash each question's content fingerprint with the round seed
(:meth:`ViewIds.key`): they depend neither on how a source named a question nor on the opaque ids,
so renaming every source id gives the same library. Stored records, tables and events keep the
questions' own ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from tsevo.agent import AnswerRecord
from tsevo.data import Question, QuestionView, opaque_id
from tsevo.roles import ErrorItem, Example

__all__ = ["ViewIds"]


class ViewIds:
    """The opaque ids of one run's questions, both ways.

    Args:
        questions: Every question of the run.
        salt: The run's salt (its protocol seed): the same run always gets the same ids.
    """

    def __init__(self, questions: Iterable[Question], salt: str) -> None:
        self.salt = salt
        self._to: dict[str, str] = {}
        self._from: dict[str, str] = {}
        self._content: dict[str, str] = {}
        # duplicate content (equal fingerprints) is disambiguated deterministically
        for q in sorted(questions, key=lambda q: (q.fingerprint, q.id)):
            base = oid = opaque_id(q.fingerprint, salt)
            k = 1
            while oid in self._from:
                k += 1
                oid = f"{base}-{k}"
            self._to[q.id] = oid
            self._from[oid] = q.id
            self._content[q.id] = self._content[oid] = q.fingerprint

    def __len__(self) -> int:
        return len(self._to)

    def opaque(self, qid: str) -> str:
        """The opaque id of a question id."""
        return self._to[qid]

    def key(self, qid: str) -> str:
        """The engine's ordering key of a question (by its id or its opaque id): its content.

        The engine's samples and splits hash this key with the round seed, so they depend neither
        on how a source named a question nor on the opaque ids a role sees.
        """
        return self._content[qid]

    def real(self, oid: str) -> str:
        """The question id behind an opaque id (``KeyError`` for an id the run never issued)."""
        return self._from[oid]

    def view(self, q: Question) -> QuestionView:
        """The view a role sees of ``q``."""
        return QuestionView.of(q, self._to[q.id])

    def trace(self, rec: AnswerRecord) -> AnswerRecord:
        """An answer record under the question's opaque id (what an evolution role sees)."""
        return replace(rec, qid=self._to[rec.qid])

    def example(self, q: Question, rec: AnswerRecord) -> Example:
        """A train row for an evolution role: the view, its gold beside it, the trace."""
        return Example(self.view(q), q.gold, self.trace(rec))

    def items(self, items: Sequence[ErrorItem]) -> list[ErrorItem]:
        """Triage items under opaque ids."""
        return [replace(e, qid=self._to[e.qid]) for e in items]
