"""Calibration trees (``binary_decision_tree_v1``): map a tool's numeric outputs to an answer class.

A synthesized tool measures; calibration learns how its measurements map to the gold option on
**train rows only**, then compiles that mapping into plain ``if/else`` code inside the tool, so the
sandbox never needs scikit-learn.

Fit (:func:`fit_calibration`):

1. *Leak guard* first: with ``split_guard`` every row id is mapped to its split and any row that
   is not ``"train"`` raises :class:`LeakError` before a label is read. The round engine passes
   the suite's split map (:func:`split_guard_from_splits`).
2. Rows with a non-finite feature (a tool that abstained) are dropped.
3. Classes with fewer than ``min_per_class`` rows are **dropped** (their names are kept in
   ``dropped_classes``; the tree never predicts them). If fewer than two classes remain, or the
   rows come from fewer than two input fingerprints, the fit is **refused**: the result has
   ``accepted=False``, a ``reason`` and no tree (nothing raises: a refusal is a normal outcome).
4. Internal holdout grouped by input fingerprint: fingerprints are ordered by
   ``sha256(seed, fingerprint)`` and taken into the holdout until it holds ``holdout`` of the
   rows (at least one fingerprint, never all of them), so one fingerprint never sits on both sides
   and the holdout is always a prefix of the same seeded order.
5. A shallow ``DecisionTreeClassifier`` (``max_depth``, ``min_samples_leaf``,
   ``class_weight="balanced"``) is fitted on the internal train part; its balanced accuracy
   (mean per-class recall over the classes present in the holdout) is the reported estimate. The
   holdout must contain at least two classes, otherwise the fit is rejected.
6. Accepted iff that balanced accuracy ≥ ``min_balanced_accuracy``. An accepted tree is then
   **refit on all rows** with the same settings (more data for the deployed rule; the estimate
   stays the holdout one). A rejected fit stores no tree.

Gold answers: the record keeps class *names* (option texts, needed to map a class back to an
option) and per-class counts, never the per-row answers: those are stored as salted SHA-256
digests of ``(row id, label)`` (sorted, plus one digest over all of them) so a later refit can be
checked against the same gold. They keep raw answers out of the JSON an LLM or a notebook reads;
they are not a secret against someone who holds the question and its options.

Exactness: scikit-learn compares ``float32(x) <= threshold``. The compiled code compares the
float64 value with an exactly equivalent cut (the rounding boundary of the largest float32 not
above the threshold, strict or not by round-half-to-even), so compiled code and ``predict`` agree
on every finite input. A non-finite value of a feature the tree uses yields class ``-1``
("no prediction"); the sandbox's output contract would reject such a value anyway.
"""

from __future__ import annotations

from ._compile import (
    FORECASTER_NAMES,
    attach_tree,
    compile_tree,
    compile_tree_function,
    tool_output_keys,
)
from ._fit import fit_calibration, split_guard_from_splits, tree_to_json
from ._result import KIND, CalibrationError, CalibrationResult, LeakError

__all__ = [
    "FORECASTER_NAMES",
    "KIND",
    "CalibrationError",
    "CalibrationResult",
    "LeakError",
    "attach_tree",
    "compile_tree",
    "compile_tree_function",
    "fit_calibration",
    "split_guard_from_splits",
    "tool_output_keys",
    "tree_to_json",
]
