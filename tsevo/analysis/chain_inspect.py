"""Mara chain inspection frames (issue 13): what :class:`tsevo.widgets.ChainView` shows.

Four frames with fixed columns, read from the ``chain`` records of each round's
``synthesis.json`` (present only for groups where a chain ran), empty (same columns) for a
chain-off run:

* :func:`chains_df`: one row per chain (start, stop reason, winner, spend against the bound);
* :func:`chain_lineage_df`: the lineage tree of every chained group, its direct attempts and
  its chain nodes, with repairs, harms, net, the move, categories and why a node is invalid;
* :func:`chain_records_df`: per node and batch question, the node arm's answer record (question,
  answers, review decision, evidence) and what the node's artifact did there (``fact``);
* :func:`chain_diffs_df`: per node, its source and spec beside its lineage parent's, with
  unified diffs.

and :func:`chain_depth`, the run's configured chain depth (for the empty state). All of them are
re-exported by :mod:`tsevo.analysis.marachain`, which also holds the per-node score frames.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tsevo.agent import AnswerRecord
from tsevo.library.library import Library, Stage
from tsevo.library.roots import make_root
from tsevo.library.tool import Tool
from tsevo.store import RunStore

from ._runs import Run, flip_of, library_or_none, load_records, open_run, rounds_in, run_suite

__all__ = [
    "CHAINS_COLUMNS",
    "CHAIN_DIFFS_COLUMNS",
    "CHAIN_LINEAGE_COLUMNS",
    "CHAIN_RECORDS_COLUMNS",
    "chain_depth",
    "chain_diffs_df",
    "chain_lineage_df",
    "chain_records_df",
    "chain_walks",
    "chains_df",
]

CHAINS_COLUMNS = [
    "round", "group", "chain_id", "label", "acceptance", "start_node", "start_reason",
    "n_held_out", "n_probe", "n_nodes", "stopped", "winner", "winner_reason", "survivor",
    "steps", "invalid", "rollouts", "calls", "tokens", "val_runs", "bound_steps",
    "bound_rollouts", "bound_calls",
]  # fmt: skip
CHAIN_LINEAGE_COLUMNS = [
    "round", "group", "chain_id", "node_id", "kind", "parent_id", "depth", "attempt",
    "measurement", "axis", "subject", "outcome", "valid", "invalid_reason", "scored_on",
    "repairs", "harms", "net", "sum_d_prev", "n_fixed", "n_broke", "categories", "is_start",
    "kept_parent", "winner", "survivor",
]  # fmt: skip
CHAIN_RECORDS_COLUMNS = [
    "round", "group", "chain_id", "node_id", "qid", "part", "task", "subtask", "question",
    "options", "gold", "base_answer", "final_answer", "base_correct", "final_correct", "flip",
    "fact", "tools_run", "tools_ok", "replaced_by", "decision", "reason", "evidence_json",
    "error", "arm",
]  # fmt: skip
CHAIN_DIFFS_COLUMNS = [
    "round", "group", "chain_id", "node_id", "parent_id", "source", "parent_source",
    "source_diff", "spec", "parent_spec", "spec_diff",
]  # fmt: skip


def _chains(run: Run) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """``(round, group record, chain record)`` for every chain of the run, in order."""
    store = open_run(run)
    out = []
    for r in rounds_in(store):
        path = store.layout.round(r).synthesis
        if not path.exists():
            continue
        for g in store.read_json(path):
            if g.get("chain"):
                out.append((r, g, g["chain"]))
    return out


def chain_walks(ch: Mapping[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(chain id, nodes)`` of chain 1 and of the further chains and polish runs after it."""
    out = [(str(ch["chain_id"]), list(ch.get("nodes", [])))]
    out += [(str(w["chain_id"]), list(w.get("nodes", []))) for w in ch.get("further", [])]
    return out


def _spend(ch: Mapping[str, Any]) -> dict[str, int]:
    """The ledger spend of every walk of a group's chains, summed."""
    total: dict[str, int] = {}
    for s in [ch.get("spend", {}), *(w.get("spend", {}) for w in ch.get("further", []))]:
        for k, v in s.items():
            total[k] = total.get(k, 0) + int(v)
    return total


def chains_df(run: Run) -> pd.DataFrame:
    """One row per chain, columns :data:`CHAINS_COLUMNS`.

    ``start_node``/``start_reason``: v0 and why it was chosen; ``n_nodes`` the nodes after v0
    (chain 1's, then those of further chains and polish runs, ``marachain.chains_per_group`` and
    ``polish_steps``); spends are summed over every walk;
    ``stopped`` why the chain ended; ``winner`` the node the acceptance variant chose (``""``
    for none) and ``winner_reason``; ``survivor`` the group's candidate sent to the gate (``""``
    for none); ``steps`` … ``val_runs`` the chain's ledger spend (``val_runs`` is always 0: a
    chain never reads validation); ``bound_*`` the analytic per-group bound.
    """
    rows = []
    for r, g, ch in _chains(run):
        spend, bound = _spend(ch), ch.get("bound", {})
        won, start = ch.get("winner") or {}, ch.get("start") or {}
        rows.append(
            {
                "round": r,
                "group": g["group_id"],
                "chain_id": ch["chain_id"],
                "label": ch.get("label", ""),
                "acceptance": ch.get("acceptance", ""),
                "start_node": start.get("node_id") or ch["v0"]["node_id"],
                "start_reason": start.get("reason", ""),
                "n_held_out": int(ch["batch"]["n_held_out"]),
                "n_probe": int(ch["batch"]["n_probe"]),
                "n_nodes": sum(len(nodes) for _c, nodes in chain_walks(ch)),
                "stopped": ch.get("stopped", ""),
                "winner": won.get("node_id") or "",
                "winner_reason": won.get("reason", ""),
                "survivor": g.get("survivor") or "",
                **{k: int(spend.get(k, 0)) for k in ("steps", "invalid", "rollouts", "calls")},
                **{k: int(spend.get(k, 0)) for k in ("tokens", "val_runs")},
                **{f"bound_{k}": int(bound.get(k, 0)) for k in ("steps", "rollouts", "calls")},
            }
        )
    return pd.DataFrame(rows, columns=CHAINS_COLUMNS)


def _bits_sum(a: str, b: str | None) -> int | None:
    """Σ (a − b) over two 0/1 strings of one batch (``None`` when either is missing)."""
    if not a or b is None or len(a) != len(b):
        return None
    return sum(int(x) - int(y) for x, y in zip(a, b, strict=True))


def _categories(node: Mapping[str, Any]) -> str:
    """A node's analysis categories as text: the leading one first, then each with its rows.

    Reads ``category`` (the leading category) and ``categories`` (a list of codes, or codes
    mapped to their row counts) when the chain recorded them; ``""`` otherwise.
    """
    cats = node.get("categories") or {}
    lead = str(node.get("category") or "")
    if isinstance(cats, Mapping):
        items = [f"{k} {v}" for k, v in cats.items() if v]
    else:
        items = [str(c) for c in cats]
    if lead:
        items = [f"lead {lead}", *items]
    return ", ".join(items)


def chain_lineage_df(run: Run) -> pd.DataFrame:
    """The lineage tree of every chained group, columns :data:`CHAIN_LINEAGE_COLUMNS`.

    One row per direct attempt of the group (``kind`` ``direct``, ``depth`` 0, ``parent_id``
    ``""``: a child of the root library; ``scored_on`` ``own probe`` except v0, which the chain
    rescored on its ``batch``) and per chain node (``kind`` ``chain``, ``chain_id`` its walk: chain
    1, a further chain ``c2``.. or a polish run ``p1``.., ``depth`` its step in that walk,
    ``parent_id`` the node it edited, ``axis``/``subject`` the move). ``net`` is repairs − harms;
    ``sum_d_prev`` Σ ``d_prev`` over the batch (NaN off the batch); ``categories`` the diagnosis
    categories of the step that produced the node (the leading one, then each with its rows;
    ``""`` where the chain recorded none); ``invalid_reason`` the failed checks
    of a node that was never scored (``valid`` false).
    """
    rows = []
    for r, g, ch in _chains(run):
        gid, cid = g["group_id"], ch["chain_id"]
        v0 = ch["v0"]
        won = (ch.get("winner") or {}).get("node_id")
        survivor = g.get("survivor")
        root_bits = "0" * int(ch["batch"]["n_held_out"]) + "1" * int(ch["batch"]["n_probe"])
        credited: dict[str, str] = {}
        base = {"round": r, "group": gid, "chain_id": cid}
        for a in g.get("attempts", []):
            nid = a["tool_id"]
            is_v0 = nid == v0["node_id"]
            src = v0 if is_v0 else a
            reps = src["repairs"] if isinstance(src["repairs"], int) else len(src["repairs"])
            harms = src["harms"] if isinstance(src["harms"], int) else len(src["harms"])
            if is_v0 and v0.get("credited"):
                credited[nid] = v0["credited"]
            rows.append(
                {
                    **base,
                    "node_id": nid,
                    "kind": "direct",
                    "parent_id": "",
                    "depth": 0,
                    "attempt": int(a.get("attempt", 0)),
                    "measurement": a.get("measurement", ""),
                    "axis": "start" if is_v0 else "",
                    "subject": "v0 (chain start)" if is_v0 else f"direct attempt {a['attempt']}",
                    "outcome": src.get("outcome", a.get("outcome", "")),
                    "valid": bool(a.get("checked", False)),
                    "invalid_reason": "; ".join(a.get("violations", [])),
                    "scored_on": "batch" if is_v0 else "own probe",
                    "repairs": reps,
                    "harms": harms,
                    "net": reps - harms,
                    "sum_d_prev": _bits_sum(v0.get("credited", ""), root_bits) if is_v0 else None,
                    "n_fixed": 0,
                    "n_broke": 0,
                    "categories": _categories(a),
                    "is_start": is_v0,
                    "kept_parent": False,
                    "winner": nid == won,
                    "survivor": nid == survivor,
                }
            )
        for walk_id, n, step in [
            (w, n, step) for w, nodes in chain_walks(ch) for step, n in enumerate(nodes, 1)
        ]:
            nid, valid = n["node_id"], "credited" in n
            if valid:
                credited[nid] = n["credited"]
            rows.append(
                {
                    **base,
                    "chain_id": walk_id,
                    "node_id": nid,
                    "kind": "chain",
                    "parent_id": n.get("parent_id", ""),
                    "depth": step,
                    "attempt": 0,
                    "measurement": n.get("measurement", ""),
                    "axis": n.get("axis", ""),
                    "subject": n.get("subject", ""),
                    "outcome": n.get("outcome", ""),
                    "valid": valid,
                    "invalid_reason": "; ".join(n.get("violations", [])),
                    "scored_on": "batch" if valid else "",
                    "repairs": int(n.get("repairs", 0)),
                    "harms": int(n.get("harms", 0)),
                    "net": int(n.get("repairs", 0)) - int(n.get("harms", 0)),
                    "sum_d_prev": _bits_sum(
                        n.get("credited", ""), credited.get(n.get("parent_id", ""), root_bits)
                    ),
                    "n_fixed": len(n.get("fixed", [])),
                    "n_broke": len(n.get("broke", [])),
                    "categories": _categories(n),
                    "is_start": False,
                    "kept_parent": bool(n.get("kept_parent", False)),
                    "winner": nid == won,
                    "survivor": nid == survivor,
                }
            )
    return pd.DataFrame(rows, columns=CHAIN_LINEAGE_COLUMNS)


def _candidate(store: RunStore, r: int, node_id: str) -> Tool | None:
    """A node's artifact as saved under ``candidates/<node_id>/`` (``None`` when absent)."""
    c = store.layout.round(r).candidate(node_id)
    if not c.meta.is_file():
        return None
    meta = store.read_json(c.meta)["tool"]
    src = store.read_text(c.source) if c.source.is_file() else ""
    return Tool.from_dict(meta, source=src)


def _library_before(store: RunStore, r: int) -> Library | None:
    """``L_{r-1}``: the library of the last accepted round before ``r``, else the root."""
    for k in range(r - 1, 0, -1):
        summary = store.read_json_or(store.layout.round(k).summary) or {}
        if summary.get("status") == "accepted":
            return library_or_none(store.layout.round(k).library)
    cfg = store.read_json_or(store.layout.config) or {}
    try:
        return make_root(str(cfg.get("protocol", {}).get("root", "empty")))
    except ValueError:
        return None


def _fact(rec: AnswerRecord, node_id: str) -> str:
    """What the node's artifact did on one question (:data:`tsevo.marachain.FACTS`).

    ``O`` when no stage shortlisted it (out of its scope; a record cannot tell this from a stage
    cap leaving it out), ``E`` an errored run, ``A`` it abstained, ``R`` the review replaced the
    answer on its evidence, ``K`` the answer was kept.
    """
    for s in rec.steps:
        if node_id not in s.shortlisted:
            continue
        status = next((x.status for x in s.runs if x.tool_id == node_id), "abstain")
        if status == "error":
            return "E"
        if status != "ok":
            return "A"
        return "R" if s.decision == "replace" and node_id in s.responsible else "K"
    return "O"


def chain_records_df(run: Run) -> pd.DataFrame:
    """Per chain node (v0 included) and batch question: the node arm's answer record.

    Columns :data:`CHAIN_RECORDS_COLUMNS`. The node arm is ``L_{r-1}`` plus the node's artifact
    as one stage (how the prefilter scored it), read from ``evals/<arm>.jsonl``; ``base_*`` come
    from the round's train base arm (``L_{r-1}`` alone) and ``flip`` compares the two (helped |
    harmed | unchanged-right | unchanged-wrong). ``fact`` is what the node's artifact did
    (:data:`tsevo.marachain.FACTS`): the chain's stored per-row facts when it recorded them,
    otherwise read from the record (``O`` not shortlisted, ``E`` error, ``A`` abstained, ``R``
    replaced, ``K`` kept). Question
    text, options, gold, task and subtask come from the run's suite (train rows only). Nodes whose
    arm cannot be rebuilt (no saved candidate, or ``L_{r-1}`` not matching the stored base arm)
    have no rows.
    """
    store = open_run(run)
    chains = _chains(store)
    if not chains:
        return pd.DataFrame(columns=CHAIN_RECORDS_COLUMNS)
    suite = run_suite(store)
    rows = []
    for r, g, ch in chains:
        arms = (store.read_json_or(store.layout.round(r).summary) or {}).get("arms", {})
        prev = _library_before(store, r)
        if prev is None or arms.get("train_base") != f"train.{prev.fingerprint()}":
            continue
        base = load_records(store, arms["train_base"])
        qids = list(ch["batch"].get("qids", []))
        parts = ["H"] * int(ch["batch"]["n_held_out"]) + ["P"] * int(ch["batch"]["n_probe"])
        for cid, n in [(ch["chain_id"], ch["v0"])] + [
            (w, n) for w, nodes in chain_walks(ch) for n in nodes
        ]:
            nid = n["node_id"]
            tool = _candidate(store, r, nid) if "credited" in n else None
            if tool is None:
                continue
            arm = f"train.{prev.append_stage(Stage(r, (tool,))).fingerprint()}"
            recs = load_records(store, arm)
            stored = str(n.get("facts") or "")
            for j, (q, part) in enumerate(zip(qids, parts, strict=False)):
                if q not in recs or q not in suite:
                    continue
                head = {"round": r, "group": g["group_id"], "chain_id": cid}
                head.update(node_id=nid, part=part, arm=arm)
                if len(stored) == len(qids):
                    head["fact"] = stored[j]
                rows.append(_record_row(head, suite[q], base.get(q), recs[q]))
    return pd.DataFrame(rows, columns=CHAIN_RECORDS_COLUMNS)


def _record_row(
    head: Mapping[str, Any], q: Any, b: AnswerRecord | None, a: AnswerRecord
) -> dict[str, Any]:
    """One row of :func:`chain_records_df`: ``head`` (round … part), the question and records."""
    nid = str(head["node_id"])
    last = a.steps[-1] if a.steps else None
    evidence = {x.tool_id: dict(x.outputs) for s in a.steps for x in s.runs if x.outputs}
    return {
        **{k: head[k] for k in ("round", "group", "chain_id", "node_id")},
        "qid": q.id,
        "part": head["part"],
        "task": q.task,
        "subtask": q.subtask,
        "question": q.question,
        "options": list(q.options),
        "gold": q.gold,
        "base_answer": b.final_answer if b is not None else None,
        "final_answer": a.final_answer,
        "base_correct": b.correct if b is not None else None,
        "final_correct": a.correct,
        "flip": flip_of(b, a) if b is not None else None,
        "fact": head.get("fact") or _fact(a, nid),
        "tools_run": list(a.tools_run),
        "tools_ok": list(a.tools_ok),
        "replaced_by": list(a.replaced_by),
        "decision": last.decision if last else "",
        "reason": last.reason if last else "",
        "evidence_json": json.dumps(evidence, sort_keys=True),
        "error": a.error,
        "arm": head["arm"],
    }


def _spec(tool: Tool | None) -> str:
    """A node's behaviour other than its source, as indented JSON (what a spec diff compares)."""
    if tool is None:
        return ""
    d: Mapping[str, Any] = tool.meta_dict()
    keep = ("kind", "contract", "guidance", "scope", "outputs", "calibration")
    return json.dumps({k: d[k] for k in keep}, indent=1, sort_keys=True, default=str)


def _diff(a: str, b: str, a_name: str, b_name: str) -> str:
    lines = difflib.unified_diff(
        a.splitlines(keepends=True), b.splitlines(keepends=True), a_name, b_name, n=2
    )
    return "".join(x if x.endswith("\n") else x + "\n" for x in lines)


def chain_diffs_df(run: Run) -> pd.DataFrame:
    """Per lineage node: its source and spec beside its parent's, columns :data:`CHAIN_DIFFS_COLUMNS`.

    One row per node of :func:`chain_lineage_df`. ``spec`` is the node's contract, guidance
    (text and reading rule), scope, outputs and calibration as indented JSON; ``source_diff`` and
    ``spec_diff`` are unified diffs from the parent (``""`` for a direct attempt, whose parent is
    the root library, or when the two are equal). Nodes without a saved candidate have empty text.
    """
    store = open_run(run)
    lineage = chain_lineage_df(store)
    rows = []
    tools: dict[tuple[int, str], Tool | None] = {}

    def tool(r: int, nid: str) -> Tool | None:
        if (r, nid) not in tools:
            tools[(r, nid)] = _candidate(store, r, nid) if nid else None
        return tools[(r, nid)]

    for n in lineage.to_dict("records"):
        r, nid, pid = int(n["round"]), str(n["node_id"]), str(n["parent_id"])
        t, p = tool(r, nid), tool(r, pid)
        src, psrc = (t.source if t else ""), (p.source if p else "")
        spec, pspec = _spec(t), _spec(p)
        rows.append(
            {
                "round": r,
                "group": n["group"],
                "chain_id": n["chain_id"],
                "node_id": nid,
                "parent_id": pid,
                "source": src,
                "parent_source": psrc,
                "source_diff": _diff(psrc, src, pid, nid) if pid else "",
                "spec": spec,
                "parent_spec": pspec,
                "spec_diff": _diff(pspec, spec, pid, nid) if pid else "",
            }
        )
    return pd.DataFrame(rows, columns=CHAIN_DIFFS_COLUMNS)


def chain_depth(run: Run) -> int:
    """The run's Mara chain depth (``protocol.marachain.depth`` of its config; 0: chains off)."""
    store = open_run(run)
    cfg = store.read_json_or(store.layout.config) or {}
    return int((cfg.get("protocol", {}).get("marachain") or {}).get("depth", 0))
