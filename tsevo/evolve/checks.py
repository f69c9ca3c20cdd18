"""Mechanical checks of a synthesis draft before it is scored, and train-only calibration.

1. the sandbox's AST gate (a single zero-argument function, allowlisted syntax);
2. a smoke call on synthetic inputs built from the contract's signature;
3. a context-selection check on the bucket's support rows (runs twice for determinism; no covariate
   read that the question does not mention; the outputs the reading rule needs are present);
4. calibration on request: a ``binary_decision_tree_v1`` fitted on in-scope TRAIN rows only (never a
   bucket's held-out rows) and compiled into the source.

Also: whether a contract's input signature is deliverable on a set of questions
and the signature they can deliver instead (:func:`deliverable_signature`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tsevo.data import Question
from tsevo.library.calibration import CalibrationError, attach_tree, fit_calibration
from tsevo.library.context import ToolInput
from tsevo.library.reading import norm_label
from tsevo.library.tool import Guidance, ReadingRule, Tool

from .config import ProtocolConfig

__all__ = ["calibrate", "check_draft", "deliverable_signature", "smoke_inputs"]


def smoke_inputs(signature: Sequence[str]) -> list[ToolInput]:
    """Synthetic inputs built from a contract signature (a smoke call must not error on them)."""
    rng = np.random.default_rng(0)
    n = 160
    t = np.arange(n)
    y = np.sin(2 * np.pi * t / 16) + 0.05 * t + 0.3 * rng.standard_normal(n)
    series: dict[str, np.ndarray] = {"series": y}
    primary: tuple[str, ...] = ("series",)
    cands: tuple[str, ...] = ()
    covs: tuple[str, ...] = ()
    text = "Smoke test question about the series from t=10 to t=50 and from t=60 to t=100."
    sig = set(signature)
    if list(signature).count("primary") >= 2:
        series["second"] = np.roll(y, 3) + 0.2 * rng.standard_normal(n)
        primary = ("series", "second")
    if "candidates" in sig or "reference" in sig:
        for c in "ABC":
            series[c] = (
                y[::-1] + rng.standard_normal(n) if c != "B" else y + 0.1 * rng.standard_normal(n)
            )
        cands = ("A", "B", "C")
    if "covariate" in sig:
        series["driver"] = np.roll(y, 5)
        covs = ("driver",)
        text += " Does driver lead the series?"
    return [ToolInput("smoke", "smoke", text, series, primary, covs, cands)]


def _rule_keys_present(
    rule: ReadingRule | None, outputs: Mapping[str, Any], candidates: Sequence[str]
) -> bool:
    return rule is None or rule.applies(outputs, candidates)


def check_draft(draft: Tool, sandbox: Any, support: Sequence[Question]) -> list[str]:
    """Mechanical checks before execution and on support rows; returns violations (empty = clean)."""
    if draft.kind != "tool":
        return []
    gate = sandbox.check(draft.source)
    if not gate.ok:
        return [f"gate: {'; '.join(gate.reasons)}"]
    for r in sandbox.run(draft.source, smoke_inputs(draft.contract.signature)):
        if r.status == "error":
            return [f"smoke call failed ({r.error_kind}): {r.error}"]
    if not support:
        return []
    res = sandbox.run(
        draft.source, [ToolInput.from_question(q) for q in support], check_determinism=True
    )
    problems = []
    kinds = {r.error_kind for r in res if r.status == "error"}
    if "covariate" in kinds:
        problems.append("context selection: reads a covariate the question does not mention")
    if "nondeterministic" in kinds:
        problems.append("determinism: two runs on the same question disagree")
    ok = [(q, r) for q, r in zip(support, res, strict=True) if r.status == "ok"]
    if not ok:
        errs = sorted({f"{r.error_kind}: {r.error[:80]}" for r in res if r.status == "error"})
        problems.append(
            f"no evidence on the bucket's support rows ({'; '.join(errs[:2]) or 'all abstained'})"
        )
    elif draft.contract.calibration is None and not any(
        _rule_keys_present(draft.guidance.rule, r.outputs or {}, q.candidates) for q, r in ok
    ):
        problems.append("outputs lack the key the reading rule reads")
    return problems


def calibrate(
    draft: Tool,
    rows: Sequence[Question],
    sandbox: Any,
    cfg: ProtocolConfig,
    split_guard: Callable[[str], str] | None,
) -> tuple[Tool | None, dict[str, Any], str]:
    """Fit and attach the requested calibration tree on train rows; returns (tool or None, record, reason)."""
    cal = draft.contract.calibration or {}
    feats = list(cal.get("features") or draft.outputs)
    res = sandbox.run(draft.source, [ToolInput.from_question(q) for q in rows])
    X, y, groups, ids = [], [], [], []
    for q, r in zip(rows, res, strict=True):
        if (
            r.status != "ok"
            or q.gold is None
            or not r.outputs
            or any(f not in r.outputs for f in feats)
        ):
            continue
        X.append([float(r.outputs[f]) for f in feats])
        y.append(norm_label(q.options[q.gold]))
        groups.append(q.fingerprint)
        ids.append(q.id)
    if len(X) < 2:
        return (
            None,
            {"accepted": False, "reason": "too few rows with evidence"},
            "calibration refused: too few rows",
        )
    if len(set(feats)) != len(feats):
        return (
            None,
            {"accepted": False, "reason": "duplicate feature names"},
            "calibration refused: duplicate feature names",
        )
    try:
        result = fit_calibration(
            np.asarray(X),
            y,
            groups,
            feature_names=feats,
            ids=ids,
            min_per_class=cfg.calibration_min_per_class,
            holdout=cfg.calibration_holdout,
            min_balanced_accuracy=cfg.calibration_min_bal_acc,
            seed=cfg.seed,
            split_guard=split_guard,
        )
    except ValueError as exc:  # a malformed request is a contract violation, not a crash
        return None, {"accepted": False, "reason": str(exc)}, f"calibration refused: {exc}"
    record = result.to_dict()
    if not result.accepted:
        return None, record, f"calibration refused: {result.reason}"
    try:
        source = attach_tree(draft.source, result, output_key="class_id")
    except CalibrationError as exc:  # e.g. a draft that forecasts: refused like a weak tree
        record = {**record, "accepted": False, "reason": str(exc)}
        return None, record, f"calibration refused: {exc}"
    k = len(result.classes)
    rule = ReadingRule(
        "label",
        "class_id",
        tuple(i + 0.5 for i in range(k - 1)),
        tuple(str(c) for c in result.classes),
        confidence=round(float(result.balanced_accuracy or 0.0), 4),
    )
    text = draft.guidance.text
    tool = replace(
        draft,
        source=source,
        outputs=(*draft.outputs, "class_id"),
        guidance=Guidance(text, rule),
        calibration=record,
    )
    return tool, record, ""


def _available(q: Question) -> dict[str, int]:
    """How many of each signature element a question can deliver to a tool."""
    inp = ToolInput.from_question(q)
    return {
        "primary": len(q.primary),
        "reference": 1 if q.primary else 0,
        "candidates": 1 if q.candidates else 0,
        "covariate": 1 if any(inp.mentions(c) for c in q.covariates) else 0,
        "question_numbers": 1 if inp.numbers() else 0,
    }


def _delivers(signature: Sequence[str], have: Mapping[str, int]) -> bool:
    return all(have.get(e, 1) >= list(signature).count(e) for e in set(signature))


def deliverable_signature(
    signature: Sequence[str], questions: Sequence[Question]
) -> tuple[str, ...] | None:
    """Check a contract's input signature against the questions a tool must repair.

    A signature is deliverable when at least one of the questions carries every input it names
    (two ``primary`` entries need two primary series, ``covariate`` a covariate the question
    mentions, ``candidates`` candidate series, ``question_numbers`` numbers in the text).

    Args:
        signature: The contract's signature, e.g. ``("primary", "covariate")``.
        questions: The work group's held-out errors.

    Returns:
        ``None`` when it is deliverable (or there are no questions); otherwise the adapted
        signature: each element kept as often as at least half of the questions can deliver it
        (``("primary",)`` when nothing is left).
    """
    if not questions:
        return None
    have = [_available(q) for q in questions]
    if any(_delivers(signature, h) for h in have):
        return None
    out: list[str] = []
    for e in signature:
        k = out.count(e) + 1
        if sum(h.get(e, 1) >= k for h in have) * 2 >= len(have):
            out.append(e)
    return tuple(out) or ("primary",)
