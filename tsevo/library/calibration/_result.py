"""The record of one calibration fit: :class:`CalibrationResult` (JSON round-trip, prediction)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "KIND",
    "CalibrationError",
    "CalibrationResult",
    "Label",
    "LeakError",
    "prune_tree",
    "walk_tree",
]

KIND = "binary_decision_tree_v1"
Label = str | int


class LeakError(RuntimeError):
    """A calibration fit was handed a row that is not a train row."""


class CalibrationError(ValueError):
    """A tree cannot be compiled or attached (not accepted, bad tool shape, forecaster call)."""


# --------------------------------------------------------------------------------------- result
@dataclass(frozen=True)
class CalibrationResult:
    """Outcome of one calibration fit; JSON round-trips with :meth:`to_dict` / :meth:`from_dict`.

    Attributes:
        kind: Always ``"binary_decision_tree_v1"``.
        accepted: True when the tree passed the holdout bar (only then ``tree`` is set).
        reason: Why it was accepted, rejected or refused (one line).
        balanced_accuracy: Internal-holdout balanced accuracy (None when refused before fitting).
        n_rows: Rows used (after the guard, dropping non-finite rows and rare classes).
        n_groups: Distinct input fingerprints among them.
        n_holdout: Rows in the internal holdout.
        classes: Class names the tree predicts; a compiled tree returns an index into this.
        class_counts: Rows per class, aligned with ``classes``.
        dropped_classes: Classes dropped for having fewer than ``min_per_class`` rows.
        feature_names: Tool output keys, in the column order of ``X``.
        gold_hashes: Sorted salted SHA-256 digests of ``(row id, gold label)`` of the rows used.
        gold_digest: SHA-256 over ``gold_hashes``.
        tree: The fitted tree as nested dicts (see :func:`compile_tree`), or None.
        params: The fit settings (max_depth, min_per_class, holdout, ...).
    """

    kind: str
    accepted: bool
    reason: str
    balanced_accuracy: float | None
    n_rows: int
    n_groups: int
    n_holdout: int
    classes: tuple[Label, ...]
    class_counts: tuple[int, ...]
    dropped_classes: tuple[Label, ...]
    feature_names: tuple[str, ...]
    gold_hashes: tuple[str, ...]
    gold_digest: str
    tree: Mapping[str, Any] | None
    params: Mapping[str, Any] = field(default_factory=dict)
    estimator: Any = field(default=None, compare=False, repr=False)
    """The fitted scikit-learn tree (in-process only; not serialized, None after from_dict)."""

    @property
    def features_used(self) -> tuple[str, ...]:
        """Feature names the tree's decisions depend on, in column order.

        Splits whose two sides predict the same class are ignored (they are pruned when compiled).
        """
        if self.tree is None:
            return ()
        used = {n["index"] for n in walk_tree(prune_tree(self.tree)) if "index" in n}
        return tuple(f for i, f in enumerate(self.feature_names) if i in used)

    def predict_index(self, X: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Class index per row of ``X`` (columns = ``feature_names``), by walking the JSON tree.

        Rows with a non-finite used feature get ``-1``.
        """
        if self.tree is None:
            raise CalibrationError(f"no tree to predict with ({self.reason})")
        A = np.asarray(X, dtype=np.float64)
        if A.ndim != 2 or A.shape[1] != len(self.feature_names):
            raise ValueError(f"expected shape (n, {len(self.feature_names)}), got {A.shape}")
        used = [self.feature_names.index(f) for f in self.features_used]
        out = np.empty(A.shape[0], dtype=np.int64)
        for r in range(A.shape[0]):
            row = A[r]
            if not all(np.isfinite(row[i]) for i in used):
                out[r] = -1
                continue
            node = self.tree
            while "class" not in node:
                v = float(row[node["index"]])
                go_left = v < node["cut"] if node["strict"] else v <= node["cut"]
                node = node["left"] if go_left else node["right"]
            out[r] = int(node["class"])
        return out

    def predict(self, X: npt.ArrayLike) -> list[Label | None]:
        """Class name per row (None where :meth:`predict_index` gives -1)."""
        return [None if i < 0 else self.classes[i] for i in self.predict_index(X)]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (no per-row gold answers, only their hashes)."""
        return {
            "kind": self.kind,
            "accepted": self.accepted,
            "reason": self.reason,
            "balanced_accuracy": self.balanced_accuracy,
            "n_rows": self.n_rows,
            "n_groups": self.n_groups,
            "n_holdout": self.n_holdout,
            "classes": list(self.classes),
            "class_counts": list(self.class_counts),
            "dropped_classes": list(self.dropped_classes),
            "feature_names": list(self.feature_names),
            "gold_hashes": list(self.gold_hashes),
            "gold_digest": self.gold_digest,
            "tree": json.loads(json.dumps(self.tree)) if self.tree is not None else None,
            "params": dict(self.params),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CalibrationResult:
        """Inverse of :meth:`to_dict`."""
        if d.get("kind") != KIND:
            raise ValueError(f"not a {KIND} record: kind={d.get('kind')!r}")
        ba = d.get("balanced_accuracy")
        return cls(
            kind=KIND,
            accepted=bool(d["accepted"]),
            reason=str(d.get("reason", "")),
            balanced_accuracy=None if ba is None else float(ba),
            n_rows=int(d["n_rows"]),
            n_groups=int(d["n_groups"]),
            n_holdout=int(d["n_holdout"]),
            classes=tuple(d["classes"]),
            class_counts=tuple(int(c) for c in d["class_counts"]),
            dropped_classes=tuple(d.get("dropped_classes", ())),
            feature_names=tuple(str(f) for f in d["feature_names"]),
            gold_hashes=tuple(str(h) for h in d["gold_hashes"]),
            gold_digest=str(d["gold_digest"]),
            tree=d.get("tree"),
            params=dict(d.get("params", {})),
        )


def prune_tree(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """Collapse splits whose subtrees predict one class (same predictions, simpler code)."""
    if "class" in node:
        return node
    left, right = prune_tree(node["left"]), prune_tree(node["right"])
    if "class" in left and "class" in right and left["class"] == right["class"]:
        return {"class": left["class"], "samples": node["samples"]}
    return {**node, "left": left, "right": right}


def walk_tree(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every node of a tree, depth first (the node, then its left and right subtrees)."""
    out = [node]
    if "class" not in node:
        out += walk_tree(node["left"]) + walk_tree(node["right"])
    return out
