"""The paired taxonomy study (issue 12, design taxonomy.md §5.5): arms that differ only in consumers.

One base run per seed (the protocol, every consumer off: the ``none`` arm) gives the train traces a
taxonomy is induced from, gated and pinned; the other arms rerun the same round on the same suite,
split and seed with the pinned taxonomy read by the diagnoses (and, in ``coded_triage``, the
triage). Their base passes answer with the same library, so they pair question by question.

* :func:`taxonomy_arm_params`: an arm as loose protocol parameters (``taxonomy.<knob>``);
* :func:`taxonomy_arm_row`: one arm's round as one row (what the gate admitted, the consumers it
  ran with, the report-only test, tokens on the LLM backend) and its label;
* :func:`taxonomy_answer_rows`: one arm's report-only test answers, one row per question (what a
  study cell records, so arms of different cells still pair);
* :func:`taxonomy_arms_df`: paired deltas per seed, arm and task against the reference arm;
* :func:`taxonomy_buckets_df`: the per-bucket repair rate of each arm beside the reference's (the
  buckets match when the arms share the cluster triage, i.e. all but ``coded_triage``).

Labels: builtin roles make a **mechanism test** (the builtin planner's use of codes is a recorded
prior, the builtin synthesizer reads none of them); the scripted server's replies are computed by
the builtin roles, not a model's (**scripted**); only a real endpoint makes the LLM contrast coded
vs free-text diagnosis. The test split is report-only: nothing here feeds a decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ._runs import Run, load_records, open_run, run_suite
from .chain_arms import chain_arm_row, group_admissions
from .failures import failures_df

__all__ = [
    "SCRIPTED_MODEL_ID",
    "TAXONOMY_ARMS",
    "TAXONOMY_ARMS_COLUMNS",
    "TAXONOMY_ARM_KEYS",
    "TAXONOMY_BUCKETS_COLUMNS",
    "arm_label",
    "taxonomy_answer_rows",
    "taxonomy_arm_params",
    "taxonomy_arm_row",
    "taxonomy_arms_df",
    "taxonomy_buckets_df",
]

#: Arm -> the consumers it switches on (``none``: every consumer off, the protocol itself).
TAXONOMY_ARMS: dict[str, dict[str, Any]] = {
    "none": {},
    "coded": {"diagnoses": "instead"},
    "beside": {"diagnoses": "beside"},
    "coded_triage": {"diagnoses": "instead", "triage": True},
}

#: The model id the scripted server serves (``tsevo.testing.SCRIPTED_MODEL``, a face this layer
#: may not import; a test checks they are equal).
SCRIPTED_MODEL_ID = "tsevo-builtin-roles-computed-not-a-model"

#: The keys of :func:`taxonomy_arm_row`.
TAXONOMY_ARM_KEYS = (
    "seed", "suite", "arm", "label", "backend", "triage", "diagnoses", "fingerprint",
    "taxonomy_status", "cards", "coded_buckets", "status", "n_admitted", "delta", "delta_lb",
    "tools", "gain", "helped", "harmed", "tokens",
)  # fmt: skip

#: The columns of :func:`taxonomy_arms_df`.
TAXONOMY_ARMS_COLUMNS = [
    "seed", "arm", "reference", "label", "task", "n", "reference_acc", "arm_acc", "delta_pp",
    "helped", "harmed", "reference_gain_pp", "arm_gain_pp", "base_shared",
]  # fmt: skip


#: The columns of :func:`taxonomy_buckets_df`.
TAXONOMY_BUCKETS_COLUMNS = [
    "arm", "reference", "bucket", "held_out", "repaired", "repair_rate", "admitted",
    "reference_held_out", "reference_repaired", "reference_repair_rate", "reference_admitted",
    "same_errors",
]  # fmt: skip


def taxonomy_arm_params(
    arm: str, path: str = "", fingerprint: str = "", *, allow_unaccepted: bool = False
) -> dict[str, Any]:
    """One arm as loose protocol parameters (``ProtocolConfig.from_params``).

    ``none`` gives no key at all (the protocol's bytes, so the stage run serves as the arm); the
    others pin ``path`` (with its ``fingerprint``) and switch their consumers on.

    Raises:
        ValueError: An unknown arm, or a coded arm without a taxonomy path.
    """
    if arm not in TAXONOMY_ARMS:
        raise ValueError(f"unknown taxonomy arm {arm!r}; one of {list(TAXONOMY_ARMS)}")
    switches = TAXONOMY_ARMS[arm]
    if not switches:
        return {}
    if not path:
        raise ValueError(f"arm {arm!r} reads a pinned taxonomy: give its path")
    params: dict[str, Any] = {"taxonomy.path": path}
    if fingerprint:
        params["taxonomy.fingerprint"] = fingerprint
    if allow_unaccepted:
        params["taxonomy.allow_unaccepted"] = True
    params.update({f"taxonomy.{k}": v for k, v in switches.items()})
    return params


def arm_label(backend: str, models: Iterable[str] = ()) -> str:
    """What an arm's contrast can show, from the run's backend and the models that replied.

    ``mechanism test`` (builtin roles), ``scripted`` (the scripted server: replies computed by the
    builtin roles, not a model's) or ``llm`` (a model's replies).
    """
    if backend != "llm":
        return "mechanism test"
    ids = set(models)
    return "scripted" if ids and ids <= {SCRIPTED_MODEL_ID} else "llm"


def _models(manifest: Mapping[str, Any]) -> list[str]:
    models = (manifest.get("llm") or {}).get("models") or []
    return [str(m) for m in (models.values() if isinstance(models, Mapping) else models)]


def taxonomy_arm_row(run: Run, arm: str, round_: int = 1) -> dict[str, Any]:
    """One arm's round as one row (:data:`TAXONOMY_ARM_KEYS`).

    ``triage`` (``codes`` or ``inner`` from ``buckets.json``; ``off`` when the codes were no
    categories), ``diagnoses`` and ``fingerprint`` (from ``contracts.json``/``buckets.json``, empty
    when off), ``cards`` (contract cards) and ``coded_buckets`` (buckets whose coded diagnosis
    holds at least one code, from ``contracts.json``), then
    :func:`chain_arm_row`'s gate and report-only test figures, and ``tokens`` (prompt plus
    completion tokens of the round on the LLM backend, else ``None``).
    """
    store = open_run(run)
    paths = store.layout.round(round_)
    buckets = store.read_json_or(paths.buckets, {}) or {}
    contracts = store.read_json_or(paths.contracts, {}) or {}
    tri = buckets.get("taxonomy") or {}
    diag = contracts.get("diagnoses") or {}
    cards = contracts.get("cards") or []
    acc = store.read_json_or(paths.llm_accounting)
    tokens = None
    if acc is not None:  # {role: {stage: counters}}
        stages = [c for role in acc.get("accounting", {}).values() for c in role.values()]
        tokens = sum(
            int(c.get("prompt_tokens", 0)) + int(c.get("completion_tokens", 0)) for c in stages
        )
    base = chain_arm_row(store, round_)
    manifest = store.manifest
    return {
        "seed": int(store.config["protocol"]["seed"]),
        "suite": str(store.config["suite"]["name"]),
        "arm": arm,
        "label": arm_label(str(manifest.get("backend", "builtin")), _models(manifest)),
        "backend": str(manifest.get("backend", "builtin")),
        "triage": str(tri.get("triage", "off")),
        "diagnoses": str(diag.get("diagnoses", "off")),
        "fingerprint": str(diag.get("fingerprint") or tri.get("fingerprint") or ""),
        "taxonomy_status": str(diag.get("status") or tri.get("status") or ""),
        "cards": len(cards),
        "coded_buckets": sum(bool(v) for v in (diag.get("buckets") or {}).values()),
        **{k: base[k] for k in ("status", "n_admitted", "delta", "delta_lb", "tools")},
        **{k: base[k] for k in ("gain", "helped", "harmed")},
        "tokens": tokens,
    }


def taxonomy_answer_rows(run: Run, arm: str, round_: int = 1) -> list[dict[str, Any]]:
    """One arm's report-only test answers: one row per test question the round answered.

    Keys: ``seed, arm, label, qid, task, base_correct`` (the incoming library's answer) and
    ``final_correct`` (the library the round left: the candidate's answer when the round was
    accepted, else the incoming one), booleans; sorted by ``qid``.
    """
    store = open_run(run)
    paths = store.layout.round(round_)
    test = store.read_json(paths.test)
    summary = store.read_json(paths.summary)
    accepted = summary.get("status") == "accepted"
    before = load_records(store, test["arms"]["before"])
    after = load_records(store, test["arms"]["after"]) if accepted else before
    suite = {q.id: q for q in run_suite(store)}
    seed = int(store.config["protocol"]["seed"])
    label = arm_label(str(store.manifest.get("backend", "builtin")), _models(store.manifest))
    rows = []
    for qid in sorted(set(before) & set(after) & set(suite)):
        rows.append(
            {
                "seed": seed,
                "arm": arm,
                "label": label,
                "qid": qid,
                "task": suite[qid].task,
                "base_correct": bool(before[qid].correct),
                "final_correct": bool(after[qid].correct),
            }
        )
    return rows


def _pct(x: pd.Series) -> float:
    return round(100.0 * float(x.mean()), 2) if len(x) else float("nan")


_COLS = ["qid", "base_correct", "final_correct"]


def _task(f: pd.DataFrame, task: str) -> pd.DataFrame:
    return f[f["task"] == task]


def _paired(ref: pd.DataFrame, arm: pd.DataFrame) -> dict[str, Any]:
    m = ref.merge(arm, on="qid", suffixes=("_r", "_a"))
    return {
        "n": len(m),
        "reference_acc": _pct(m["final_correct_r"]),
        "arm_acc": _pct(m["final_correct_a"]),
        "delta_pp": round(_pct(m["final_correct_a"]) - _pct(m["final_correct_r"]), 2),
        "helped": int((m["final_correct_a"] & ~m["final_correct_r"]).sum()),
        "harmed": int((~m["final_correct_a"] & m["final_correct_r"]).sum()),
        "reference_gain_pp": round(_pct(m["final_correct_r"]) - _pct(m["base_correct_r"]), 2),
        "arm_gain_pp": round(_pct(m["final_correct_a"]) - _pct(m["base_correct_a"]), 2),
        "base_shared": bool((m["base_correct_r"] == m["base_correct_a"]).all()),
    }


def taxonomy_arms_df(rows: Iterable[Mapping[str, Any]], reference: str = "none") -> pd.DataFrame:
    """Paired deltas per seed, arm and task: each arm's test answers against the reference arm's.

    Args:
        rows: :func:`taxonomy_answer_rows` of the arms (of one run each, or a study's cells).
        reference: The arm every other arm is paired with (default ``none``).

    Columns (:data:`TAXONOMY_ARMS_COLUMNS`): ``seed, arm, reference, label, task`` (then an ``ALL``
    row per seed and arm), ``n`` (questions both arms answered), ``reference_acc``, ``arm_acc``
    (test accuracy in % of the library each round left), ``delta_pp`` (arm minus reference),
    ``helped`` / ``harmed`` (answers right under the arm and wrong under the reference / the
    reverse), ``reference_gain_pp`` / ``arm_gain_pp`` (each round's gain over its own base
    agent), ``base_shared`` (the two base agents answered every paired question alike: the shared
    base pass held). Report-only: the test split is used in no decision.

    Raises:
        ValueError: Two rows for one seed, arm and question, or arms of one seed under different
            labels (a builtin reference beside an LLM arm does not pair).
    """
    f = pd.DataFrame(list(rows))
    if f.empty:
        return pd.DataFrame(columns=TAXONOMY_ARMS_COLUMNS)
    if f.duplicated(["seed", "arm", "qid"]).any():
        raise ValueError("two answers for one seed, arm and question")
    out = []
    for seed, by_seed in f.groupby("seed", sort=True):
        if by_seed["label"].nunique() > 1:
            raise ValueError(
                f"seed {seed}: arms under different labels {sorted(set(by_seed['label']))}"
            )
        ref = by_seed[by_seed["arm"] == reference]
        if ref.empty:
            continue
        for arm in sorted(set(by_seed["arm"]) - {reference}):
            a = by_seed[by_seed["arm"] == arm]
            label = str(a["label"].iloc[0])
            head = {"seed": int(seed), "arm": arm, "reference": reference, "label": label}
            for task in [*sorted(set(a["task"])), "ALL"]:
                r, x = (ref, a) if task == "ALL" else (_task(ref, task), _task(a, task))
                out.append({**head, "task": task, **_paired(r[_COLS], x[_COLS])})
    return pd.DataFrame(out, columns=TAXONOMY_ARMS_COLUMNS)


def _bucket_repairs(run: Run, round_: int) -> dict[str, dict[str, Any]]:
    f = failures_df(run, round_=round_)
    held = f[f["role"] == "held_out"]
    admitted = set(group_admissions(run, round_)["admitted"])
    out: dict[str, dict[str, Any]] = {}
    for bucket, rows in held.groupby("bucket", sort=True):
        repaired = int(sum(bool(r) for r in rows["repaired_by"]))
        out[str(bucket)] = {
            "qids": frozenset(rows["qid"]),
            "held_out": len(rows),
            "repaired": repaired,
            "repair_rate": round(repaired / len(rows), 4),
            "admitted": str(rows["group"].iloc[0]) in admitted,
        }
    return out


def taxonomy_buckets_df(
    runs: Mapping[str, Run], reference: str = "none", round_: int = 1
) -> pd.DataFrame:
    """Per-bucket repair rate of each arm beside the reference arm's (train side, one seed).

    A bucket's held-out train errors are the ones its candidates were scored on; ``repaired``
    counts those with an attributable repair by some candidate (:func:`failures_df`), ``admitted``
    whether the gate admitted the bucket's work group. Rows pair by bucket id; ``same_errors``
    says the two arms' buckets held the same held-out errors (true whenever both ran the cluster
    triage, since the arms share the base pass). A bucket only one arm has leaves the other
    side's columns empty.

    Columns: :data:`TAXONOMY_BUCKETS_COLUMNS`.
    """
    if reference not in runs:
        raise ValueError(f"no reference arm {reference!r} among {sorted(runs)}")
    ref = _bucket_repairs(runs[reference], round_)
    rows = []
    for arm, run in runs.items():
        if arm == reference:
            continue
        mine = _bucket_repairs(run, round_)
        for bucket in sorted(set(mine) | set(ref)):
            a, r = mine.get(bucket), ref.get(bucket)
            row: dict[str, Any] = {"arm": arm, "reference": reference, "bucket": bucket}
            for prefix, d in (("", a), ("reference_", r)):
                for k in ("held_out", "repaired", "repair_rate", "admitted"):
                    row[prefix + k] = None if d is None else d[k]
            row["same_errors"] = a is not None and r is not None and a["qids"] == r["qids"]
            rows.append(row)
    return pd.DataFrame(rows, columns=TAXONOMY_BUCKETS_COLUMNS)
