"""What validation reports: :class:`RecordError` for one bad record, :class:`LoadReport` for a load.

Validation is strict by default: a malformed record raises :class:`RecordError` naming the record id
and the field. Loaders that want to keep going collect these errors in a :class:`LoadReport`, so no
record disappears silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

__all__ = ["LoadReport", "RecordError"]

#: Rejected records listed by ``str(report)`` before it says how many more there are.
SHOWN_ERRORS = 20


class RecordError(ValueError):
    """A malformed question record.

    Attributes:
        record_id: The record's id (or ``"<record N>"`` when it has none).
        field: The offending field, e.g. ``"series.A"`` or ``"options"``.
        reason: What is wrong, in words.
    """

    def __init__(self, record_id: str, field: str, reason: str) -> None:
        self.record_id = record_id
        self.field = field
        self.reason = reason
        super().__init__(f"record {record_id!r}, field {field!r}: {reason}")

    def to_dict(self) -> dict[str, str]:
        """Return the error as a JSON-friendly dict."""
        return {"record_id": self.record_id, "field": self.field, "reason": self.reason}


@dataclass
class LoadReport:
    """What a lenient load kept and what it rejected (nothing disappears silently).

    Attributes:
        n_read: Records read from the input.
        n_kept: Records that became questions.
        errors: One :class:`RecordError` per rejected record.
        duplicates: Ids dropped because an earlier record had the same fingerprint.
    """

    n_read: int = 0
    n_kept: int = 0
    errors: list[RecordError] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no record was rejected."""
        return not self.errors

    def add(self, err: RecordError) -> None:
        """Record one rejected record."""
        self.errors.append(err)

    def to_frame(self) -> pd.DataFrame:
        """Return the rejected records as a DataFrame (record_id, field, reason)."""
        return pd.DataFrame(
            [e.to_dict() for e in self.errors], columns=["record_id", "field", "reason"]
        )

    def __str__(self) -> str:
        lines = [f"read {self.n_read}, kept {self.n_kept}, rejected {len(self.errors)}"]
        if self.duplicates:
            lines[0] += f", duplicates dropped {len(self.duplicates)}"
        lines += [f"  - {e}" for e in self.errors[:SHOWN_ERRORS]]
        if len(self.errors) > SHOWN_ERRORS:
            lines.append(f"  ... and {len(self.errors) - SHOWN_ERRORS} more")
        return "\n".join(lines)
