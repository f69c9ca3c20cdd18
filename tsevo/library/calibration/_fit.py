"""Fitting a calibration tree on train rows (leak guard, grouped holdout, acceptance bar)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.tree import DecisionTreeClassifier

from ._result import KIND, CalibrationResult, Label, LeakError

__all__ = ["fit_calibration", "split_guard_from_splits", "tree_to_json"]

_SALT = "tsevo-calibration-gold-v1"


def split_guard_from_splits(splits: Mapping[str, str]) -> Callable[[str], str]:
    """A guard for :func:`fit_calibration` from a row id -> split map (e.g. ``Suite.splits``).

    Ids missing from the map come back as ``"unknown"`` (which the fit refuses as a leak).
    """
    frozen = dict(splits)

    def guard(row_id: str) -> str:
        return frozen.get(row_id, "unknown")

    return guard


def _float32_cut(threshold: float) -> tuple[float, bool]:
    """Cut ``c`` and strictness with ``float32(x) <= threshold`` ⟺ ``x < c`` (or ``x <= c``)."""
    thr = float(threshold)
    t = np.float32(thr)
    if float(t) > thr:
        t = np.nextafter(t, np.float32(-np.inf))
    u = np.nextafter(t, np.float32(np.inf))
    if not (np.isfinite(t) and np.isfinite(u)):
        return thr, False  # outside float32 range: thresholds from finite data never land here
    cut = (float(t) + float(u)) / 2.0  # exact in float64
    t_even = int(np.array(t, dtype=np.float32).view(np.uint32)) & 1 == 0
    return cut, not t_even


def _labels(y: Sequence[Label]) -> list[Label]:
    out: list[Label] = []
    for v in y:
        if isinstance(v, bool):
            raise TypeError("gold labels must be str or int, not bool")
        if isinstance(v, (int, np.integer)):
            out.append(int(v))
        elif isinstance(v, str):
            out.append(v)
        else:
            raise TypeError(f"gold labels must be str or int, got {type(v).__name__}")
    kinds = {type(v) for v in out}
    if len(kinds) > 1:
        raise TypeError("gold labels mix str and int")
    return out


def _gold_hash(row_id: str, label: Label) -> str:
    blob = json.dumps([_SALT, row_id, label])
    return hashlib.sha256(blob.encode()).hexdigest()


def _group_split(groups: Sequence[str], holdout: float, seed: int) -> npt.NDArray[np.bool_]:
    sizes = Counter(groups)
    order = sorted(sizes, key=lambda g: hashlib.sha256(f"{seed}\x00{g}".encode()).hexdigest())
    target = holdout * len(groups)
    chosen: set[str] = set()
    acc = 0
    for g in order[:-1]:  # never all groups
        if chosen and acc >= target:
            break
        chosen.add(g)
        acc += sizes[g]
    return np.array([g in chosen for g in groups], dtype=bool)


def _balanced_accuracy(y_true: npt.NDArray[np.int64], y_pred: npt.NDArray[np.int64]) -> float:
    recalls = [float(np.mean(y_pred[y_true == c] == c)) for c in np.unique(y_true)]
    return float(np.mean(recalls))


def tree_to_json(est: Any, feature_names: Sequence[str]) -> dict[str, Any]:
    """A fitted ``DecisionTreeClassifier`` as nested dicts.

    Internal nodes: ``feature``, ``index`` (column), sklearn's ``threshold``, the exactly
    equivalent float64 ``cut`` and ``strict`` flag (go left iff ``x < cut`` when strict, else
    ``x <= cut``), ``samples``, ``left``, ``right``. Leaves: ``class`` (index into the
    estimator's ``classes_``: the argmax ``predict`` uses), ``samples``, ``dist`` (class
    weights, normalized and rounded to 4 decimals).
    """
    t = est.tree_

    def node(i: int) -> dict[str, Any]:
        left, right = int(t.children_left[i]), int(t.children_right[i])
        n = int(t.n_node_samples[i])
        if left == -1:
            val = np.asarray(t.value[i][0], dtype=np.float64)
            dist = val / val.sum() if val.sum() > 0 else val
            return {
                "class": int(np.argmax(val)),
                "samples": n,
                "dist": [round(float(v), 4) for v in dist],
            }
        f = int(t.feature[i])
        thr = float(t.threshold[i])
        cut, strict = _float32_cut(thr)
        return {
            "feature": str(feature_names[f]),
            "index": f,
            "threshold": thr,
            "cut": cut,
            "strict": strict,
            "samples": n,
            "left": node(left),
            "right": node(right),
        }

    return node(0)


def fit_calibration(
    X: npt.ArrayLike,
    y: Sequence[Label],
    groups: Sequence[str],
    *,
    feature_names: Sequence[str],
    ids: Sequence[str] | None = None,
    min_per_class: int = 16,
    max_depth: int = 3,
    min_samples_leaf: int = 4,
    holdout: float = 0.2,
    min_balanced_accuracy: float = 0.55,
    seed: int = 0,
    split_guard: Callable[[str], str] | None = None,
) -> CalibrationResult:
    """Fit a ``binary_decision_tree_v1`` calibration on train rows (see the module docstring).

    Args:
        X: Tool outputs, shape ``(n_rows, n_features)`` (booleans count as 0/1).
        y: Gold class per row (option text or option index; not mixed).
        groups: Input fingerprint per row (the unit of the internal split).
        feature_names: Tool output key per column of ``X``.
        ids: Question id per row for the leak guard and the gold hashes (default: ``groups``).
        min_per_class: Rows a class needs to be kept.
        max_depth: Tree depth.
        min_samples_leaf: Fewest rows per leaf.
        holdout: Fraction of rows in the internal holdout.
        min_balanced_accuracy: Acceptance bar on the holdout.
        seed: Seed of the grouped split and the tree.
        split_guard: Maps a row id to its split; any row not in ``"train"`` raises.

    Returns:
        The :class:`CalibrationResult` (accepted, rejected or refused).

    Raises:
        LeakError: A row is not a train row (checked before anything else).
        ValueError: Inconsistent shapes or settings.
        TypeError: Labels that are not all str or all int.
    """
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {A.shape}")
    n = A.shape[0]
    names = tuple(str(f) for f in feature_names)
    if len(names) != A.shape[1] or len(set(names)) != len(names):
        raise ValueError(f"need {A.shape[1]} distinct feature names, got {names}")
    grp = [str(g) for g in groups]
    row_ids = [str(i) for i in ids] if ids is not None else grp
    if len(y) != n or len(grp) != n or len(row_ids) != n:
        raise ValueError(f"X has {n} rows but y/groups/ids have {len(y)}/{len(grp)}/{len(row_ids)}")
    if not 0.0 < holdout < 1.0:
        raise ValueError(f"holdout must be in (0, 1), got {holdout}")
    if max_depth < 1 or min_per_class < 1 or min_samples_leaf < 1:
        raise ValueError("max_depth, min_per_class and min_samples_leaf must be >= 1")
    if split_guard is not None:
        bad = [(rid, sp) for rid in row_ids if (sp := split_guard(rid)) != "train"]
        if bad:
            rid, sp = bad[0]
            raise LeakError(
                f"calibration may read train rows only: {len(bad)} row(s) are not train "
                f"(first: {rid!r} is {sp!r})"
            )
    labels = _labels(y)
    params: dict[str, Any] = {
        "max_depth": int(max_depth),
        "min_per_class": int(min_per_class),
        "min_samples_leaf": int(min_samples_leaf),
        "holdout": float(holdout),
        "min_balanced_accuracy": float(min_balanced_accuracy),
        "seed": int(seed),
        "class_weight": "balanced",
        "refit": "all_rows",
    }

    finite = np.all(np.isfinite(A), axis=1)
    counts_all = Counter(lab for lab, ok in zip(labels, finite, strict=True) if ok)
    kept_classes = sorted(c for c, k in counts_all.items() if k >= min_per_class)
    dropped = tuple(sorted(c for c, k in counts_all.items() if k < min_per_class))
    keep = np.array(
        [ok and lab in kept_classes for lab, ok in zip(labels, finite, strict=True)], dtype=bool
    )
    idx = np.flatnonzero(keep)
    Xk = A[idx]
    gk = [grp[i] for i in idx]
    yk_lab = [labels[i] for i in idx]
    hashes = tuple(sorted(_gold_hash(row_ids[i], labels[i]) for i in idx))
    digest = hashlib.sha256("\n".join(hashes).encode()).hexdigest()
    cls_index = {c: k for k, c in enumerate(kept_classes)}
    yk = np.array([cls_index[c] for c in yk_lab], dtype=np.int64)
    counts = tuple(int(np.sum(yk == k)) for k in range(len(kept_classes)))
    n_groups = len(set(gk))

    def result(
        accepted: bool, reason: str, ba: float | None, n_hold: int, tree: Any, est: Any = None
    ) -> CalibrationResult:
        return CalibrationResult(
            kind=KIND,
            accepted=accepted,
            reason=reason,
            balanced_accuracy=ba,
            n_rows=len(idx),
            n_groups=n_groups,
            n_holdout=n_hold,
            classes=tuple(kept_classes),
            class_counts=counts,
            dropped_classes=dropped,
            feature_names=names,
            gold_hashes=hashes,
            gold_digest=digest,
            tree=tree,
            params=params,
            estimator=est,
        )

    if len(kept_classes) < 2:
        return result(
            False,
            f"refused: fewer than 2 classes with >= {min_per_class} rows "
            f"(counts {dict(counts_all)}, {int(np.sum(~finite))} non-finite rows dropped)",
            None,
            0,
            None,
        )
    if n_groups < 2:
        return result(False, "refused: fewer than 2 distinct input fingerprints", None, 0, None)

    def make() -> Any:
        return DecisionTreeClassifier(
            max_depth=max_depth,
            min_samples_leaf=min_samples_leaf,
            class_weight="balanced",
            random_state=seed,
        )

    hold = _group_split(gk, holdout, seed)
    n_hold = int(hold.sum())
    if len(np.unique(yk[~hold])) < 2 or len(np.unique(yk[hold])) < 2:
        return result(
            False,
            "rejected: the grouped internal split left fewer than 2 classes on one side",
            None,
            n_hold,
            None,
        )
    est = make().fit(Xk[~hold], yk[~hold])
    ba = _balanced_accuracy(yk[hold], est.predict(Xk[hold]).astype(np.int64))
    if ba < min_balanced_accuracy:
        return result(
            False,
            f"rejected: holdout balanced accuracy {ba:.3f} < {min_balanced_accuracy}",
            ba,
            n_hold,
            None,
        )
    final = make().fit(Xk, yk)
    return result(
        True,
        f"accepted: holdout balanced accuracy {ba:.3f} >= {min_balanced_accuracy}; refit on all rows",
        ba,
        n_hold,
        tree_to_json(final, names),
        final,
    )
