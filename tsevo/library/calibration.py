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

import ast
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

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

KIND = "binary_decision_tree_v1"
FORECASTER_NAMES = frozenset({"forecast", "forecast_many"})
"""Attribute or name uses that count as calling the forecaster (refused by :func:`attach_tree`)."""
_SALT = "tsevo-calibration-gold-v1"

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
        used = {n["index"] for n in _walk(_prune(self.tree)) if "index" in n}
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


def _prune(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """Collapse splits whose subtrees predict one class (same predictions, simpler code)."""
    if "class" in node:
        return node
    left, right = _prune(node["left"]), _prune(node["right"])
    if "class" in left and "class" in right and left["class"] == right["class"]:
        return {"class": left["class"], "samples": node["samples"]}
    return {**node, "left": left, "right": right}


def _walk(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out = [node]
    if "class" not in node:
        out += _walk(node["left"]) + _walk(node["right"])
    return out


# --------------------------------------------------------------------------------------- fitting
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

    from sklearn.tree import DecisionTreeClassifier

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


# --------------------------------------------------------------------------------------- compiling
def _default_vars(result: CalibrationResult) -> list[str]:
    return [f"calib_x{i}" for i in range(len(result.feature_names))]


def compile_tree(
    result: CalibrationResult,
    *,
    var_names: Sequence[str] | None = None,
    target: str = "calib_class",
) -> str:
    """Plain ``if/else`` source (no imports, no calls) assigning the class index to ``target``.

    The fragment reads one variable per feature (``var_names``, default ``calib_x0``,
    ``calib_x1``, … in ``feature_names`` order) and assigns an index into ``result.classes``, or
    ``-1`` when a feature the tree uses is NaN (``v == v`` is false only for NaN; infinities
    follow the comparisons). It is dedented (column 0); indent it to splice it into a function.

    Args:
        result: An accepted calibration.
        var_names: Variable holding each feature, aligned with ``result.feature_names``.
        target: Variable that receives the class index.

    Returns:
        Python source lines ending with a newline.

    Raises:
        CalibrationError: The result has no tree.
    """
    if not result.accepted or result.tree is None:
        raise CalibrationError(
            f"cannot compile a calibration that was not accepted ({result.reason})"
        )
    names = list(var_names) if var_names is not None else _default_vars(result)
    if len(names) != len(result.feature_names):
        raise ValueError("var_names must align with feature_names")
    for v in [*names, target]:
        if not v.isidentifier():
            raise ValueError(f"not an identifier: {v!r}")
    lines: list[str] = []

    def emit(node: Mapping[str, Any], depth: int) -> None:
        pad = "    " * depth
        if "class" in node:
            lines.append(f"{pad}{target} = {int(node['class'])}")
            return
        var = names[int(node["index"])]
        op = "<" if node["strict"] else "<="
        lines.append(f"{pad}if {var} {op} {float(node['cut'])!r}:")
        emit(node["left"], depth + 1)
        lines.append(f"{pad}else:")
        emit(node["right"], depth + 1)

    tree = _prune(result.tree)
    used = sorted({int(n["index"]) for n in _walk(tree) if "index" in n})
    if used:
        cond = " and ".join(f"{names[i]} == {names[i]}" for i in used)
        lines.append(f"if {cond}:")
        emit(tree, 1)
        lines.append("else:")
        lines.append(f"    {target} = -1")
    else:
        emit(tree, 0)
    return "\n".join(lines) + "\n"


def compile_tree_function(result: CalibrationResult, name: str = "calibrated_class") -> str:
    """A standalone function ``name(calib_x0, calib_x1, ...) -> int`` wrapping :func:`compile_tree`."""
    args = _default_vars(result)
    body = compile_tree(result, var_names=args, target="calib_class")
    indented = "".join(f"    {ln}\n" for ln in body.splitlines())
    return f"def {name}({', '.join(args)}):\n{indented}    return calib_class\n"


# --------------------------------------------------------------------------------------- attaching
def _single_function(tree: ast.Module) -> ast.FunctionDef:
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a module docstring is tolerated
    if len(body) != 1 or not isinstance(body[0], ast.FunctionDef):
        raise CalibrationError("tool source must define exactly one function")
    fn = body[0]
    a = fn.args
    if a.args or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
        raise CalibrationError("tool function must take no arguments")
    return fn


def _final_dict_return(fn: ast.FunctionDef) -> tuple[ast.Return, ast.Dict, list[str]]:
    last = fn.body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Dict)):
        raise CalibrationError(
            "attach_tree needs the tool function to end with `return {...}` (a dict literal)"
        )
    d = last.value
    keys: list[str] = []
    for k in d.keys:
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise CalibrationError("the final return dict must have string-literal keys only")
        keys.append(k.value)
    if len(set(keys)) != len(keys):
        raise CalibrationError("duplicate keys in the final return dict")
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and node is not last:
            v = node.value
            if v is not None and not (isinstance(v, ast.Constant) and v.value is None):
                raise CalibrationError(
                    "other returns must abstain (`return None`); only the final return may "
                    "return the measurement dict"
                )
    return last, d, keys


def _calls_forecaster(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FORECASTER_NAMES:
            return True
        if isinstance(node, ast.Name) and node.id in FORECASTER_NAMES:
            return True
    return False


def tool_output_keys(tool_source: str) -> tuple[str, ...]:
    """The keys of a tool's final ``return {...}`` dict literal (the calibratable outputs)."""
    fn = _single_function(ast.parse(tool_source))
    return tuple(_final_dict_return(fn)[2])


def attach_tree(
    tool_source: str, result: CalibrationResult, *, output_key: str = "class_id"
) -> str:
    """Insert the compiled tree into a tool just before its final return, adding ``output_key``.

    Assumed tool shape (checked; :class:`CalibrationError` otherwise): the source defines exactly
    one zero-argument function whose **last statement** is ``return {"k1": v1, "k2": v2, ...}``
    with string-literal keys (no ``**`` unpacking); any other ``return`` abstains with ``None``.
    The features are the dict's keys: every ``result.feature_names`` entry must be one of them.

    The final return is rewritten (by source position found with :mod:`ast`, so the rest of the
    text and its comments are kept) into: one assignment per dict value, evaluated once and in
    the original order (``calib_v0 = (v1)``, ...); the :func:`compile_tree` fragment over those
    variables; and ``return {"k1": calib_v0, ..., output_key: calib_class}``. ``output_key``
    holds an index into ``result.classes`` (``-1`` when a used feature is NaN). The generated
    names use a ``calib`` prefix made unique against the names already in the source, and contain
    no attribute access or call, so they pass the sandbox's AST gate.

    Args:
        tool_source: The tool's source.
        result: An accepted calibration over this tool's outputs.
        output_key: New key for the predicted class index.

    Returns:
        The new tool source (it parses; checked).

    Raises:
        CalibrationError: Not accepted, wrong tool shape, missing features, key clash, or the
            tool calls the forecaster (a calibrated tool may not).
    """
    if not result.accepted or result.tree is None:
        raise CalibrationError(
            f"cannot attach a calibration that was not accepted ({result.reason})"
        )
    mod = ast.parse(tool_source)
    fn = _single_function(mod)
    if _calls_forecaster(fn):
        raise CalibrationError("a calibrated tool may not call the forecaster (P.forecast)")
    ret, d, keys = _final_dict_return(fn)
    if output_key in keys:
        raise CalibrationError(f"the tool already returns {output_key!r}")
    missing = [f for f in result.feature_names if f not in keys]
    if missing:
        raise CalibrationError(f"calibration features not returned by the tool: {missing}")

    existing = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {fn.name}
    prefix = "calib"
    k = 0
    while any(e.startswith(prefix + "_") for e in existing):
        k += 1
        prefix = f"calib{k}"
    value_vars = [f"{prefix}_v{j}" for j in range(len(keys))]
    feat_vars = [value_vars[keys.index(f)] for f in result.feature_names]
    target = f"{prefix}_class"

    lines = tool_source.splitlines(keepends=True)
    start, end = ret.lineno - 1, (ret.end_lineno or ret.lineno) - 1
    first = lines[start]
    indent = first[: ret.col_offset]
    tail = lines[end][ret.end_col_offset or 0 :].strip()
    same_line = indent.strip() != "" or (tail != "" and not tail.startswith("#"))
    new_stmts: list[str] = []
    for var, val in zip(value_vars, d.values, strict=True):
        seg = ast.get_source_segment(tool_source, val)
        if seg is None:  # pragma: no cover - positions exist for parsed source
            seg = ast.unparse(val)
        new_stmts.append(f"{var} = ({seg})")
    new_stmts += compile_tree(result, var_names=feat_vars, target=target).splitlines()
    items = [f"{k_!r}: {v}" for k_, v in zip(keys, value_vars, strict=True)]
    items.append(f"{output_key!r}: {target}")
    new_stmts.append("return {" + ", ".join(items) + "}")

    if not same_line:
        block = "".join(f"{indent}{s}\n" for s in new_stmts)
        new_src = "".join(lines[:start]) + block + "".join(lines[end + 1 :])
    else:  # the return shares its line with other code: rebuild the function from the AST
        frag = ast.parse("\n".join(new_stmts)).body
        fn.body = fn.body[:-1] + frag
        new_src = ast.unparse(ast.fix_missing_locations(mod)) + "\n"
    check = ast.parse(new_src)
    _single_function(check)
    return new_src
