"""Mara chains of a run (issue 13): one row per chain node, and per node and batch question.

Both frames read the ``chain`` records of each round's ``synthesis.json`` (present only for groups
where a chain ran; a chain-off run gives empty frames with the same columns).

The inspection frames :class:`tsevo.widgets.ChainView` shows beside them (:func:`chains_df`,
:func:`chain_lineage_df`, :func:`chain_records_df`, :func:`chain_diffs_df`, :func:`chain_depth`
and their ``*_COLUMNS``) live in :mod:`tsevo.analysis.chain_inspect` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ._runs import Run, open_run
from .chain_inspect import (
    CHAIN_DIFFS_COLUMNS,
    CHAIN_LINEAGE_COLUMNS,
    CHAIN_RECORDS_COLUMNS,
    CHAINS_COLUMNS,
    _chains,
    chain_depth,
    chain_diffs_df,
    chain_lineage_df,
    chain_records_df,
    chain_walks,
    chains_df,
)

__all__ = [
    "CHAINS_COLUMNS",
    "CHAIN_DIFFS_COLUMNS",
    "CHAIN_FUNNEL_ORDER",
    "CHAIN_LINEAGE_COLUMNS",
    "CHAIN_NODES_COLUMNS",
    "CHAIN_RECORDS_COLUMNS",
    "CHAIN_SCORES_COLUMNS",
    "SELECTION_OPTIMISM_COLUMNS",
    "chain_depth",
    "chain_diffs_df",
    "chain_funnel_counts",
    "chain_lineage_df",
    "chain_nodes_df",
    "chain_records_df",
    "chain_scores_df",
    "chains_df",
    "selection_optimism_df",
]

CHAIN_NODES_COLUMNS = [
    "round",
    "group",
    "chain_id",
    "label",
    "acceptance",
    "node_id",
    "parent_id",
    "step",
    "axis",
    "subject",
    "measurement",
    "outcome",
    "repairs",
    "harms",
    "raw_sum",
    "n_fixed",
    "n_broke",
    "kept_parent",
    "winner",
    "survivor",
]
CHAIN_SCORES_COLUMNS = [
    "round",
    "group",
    "chain_id",
    "node_id",
    "step",
    "qid",
    "part",
    "raw",
    "credited",
    "d_root",
    "d_prev",
]
#: The chain steps :func:`tsevo.analysis.funnel_df` adds after the funnel (rounds with chains).
CHAIN_FUNNEL_ORDER = ("chain_groups", "chain_nodes", "chain_survivors")


def _walk_nodes(ch: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every walk's nodes (chain 1, further chains, polish runs) with their chain id and step."""
    return [
        {**n, "step": i, "cid": cid}
        for cid, nodes in chain_walks(ch)
        for i, n in enumerate(nodes, 1)
    ]


def chain_nodes_df(run: Run) -> pd.DataFrame:
    """One row per chain node (v0 as step 0), columns :data:`CHAIN_NODES_COLUMNS`.

    Nodes of further chains and polish runs carry their own ``chain_id`` and ``step``.

    ``winner`` marks the node the acceptance variant chose; ``survivor`` whether it went on to
    the gate as the group's candidate.
    """
    rows = []
    for r, g, ch in _chains(run):
        won = (ch.get("winner") or {}).get("node_id")
        v0 = ch["v0"]
        nodes = [
            {
                **v0,
                "parent_id": "",
                "axis": "start",
                "subject": "v0",
                "step": 0,
                "cid": ch["chain_id"],
            },
            *_walk_nodes(ch),
        ]
        for n in nodes:
            rows.append(
                {
                    "round": r,
                    "group": g["group_id"],
                    "chain_id": n["cid"],
                    "label": ch.get("label", ""),
                    "acceptance": ch.get("acceptance", ""),
                    "node_id": n["node_id"],
                    "parent_id": n.get("parent_id", ""),
                    "step": n["step"],
                    "axis": n.get("axis", ""),
                    "subject": n.get("subject", ""),
                    "measurement": n.get("measurement", ""),
                    "outcome": n.get("outcome", ""),
                    "repairs": n.get("repairs", 0),
                    "harms": n.get("harms", 0),
                    "raw_sum": n.get("raw_sum", 0),
                    "n_fixed": len(n.get("fixed", [])),
                    "n_broke": len(n.get("broke", [])),
                    "kept_parent": bool(n.get("kept_parent", False)),
                    "winner": n["node_id"] == won,
                    "survivor": n["node_id"] == g.get("survivor"),
                }
            )
    return pd.DataFrame(rows, columns=CHAIN_NODES_COLUMNS)


def chain_scores_df(run: Run) -> pd.DataFrame:
    """Per scored chain node and batch question, columns :data:`CHAIN_SCORES_COLUMNS`.

    ``part`` is ``H`` (held-out error) or ``P`` (harm probe); ``raw`` and ``credited`` the node's
    0/1 scores; ``d_root`` the credited difference against the root library (0 on ``H``, 1 on
    ``P``) and ``d_prev`` against the node's parent (v0 against the root).
    """
    rows = []
    for r, g, ch in _chains(run):
        batch = ch["batch"]
        qids = batch.get("qids", [])
        parts = ["H"] * int(batch["n_held_out"]) + ["P"] * int(batch["n_probe"])
        root = [0 if p == "H" else 1 for p in parts]
        credited: dict[str, list[int]] = {}
        v0 = ch["v0"]
        nodes = [{**v0, "parent_id": "", "step": 0, "cid": ch["chain_id"]}, *_walk_nodes(ch)]
        for n in nodes:
            if "credited" not in n or not qids:
                continue
            cred = [int(c) for c in n["credited"]]
            raw = [int(c) for c in n["raw"]]
            credited[n["node_id"]] = cred
            prev = credited.get(n.get("parent_id", ""), root)
            for j, q in enumerate(qids):
                rows.append(
                    {
                        "round": r,
                        "group": g["group_id"],
                        "chain_id": n["cid"],
                        "node_id": n["node_id"],
                        "step": n["step"],
                        "qid": q,
                        "part": parts[j],
                        "raw": raw[j],
                        "credited": cred[j],
                        "d_root": cred[j] - root[j],
                        "d_prev": cred[j] - prev[j],
                    }
                )
    return pd.DataFrame(rows, columns=CHAIN_SCORES_COLUMNS)


def chain_funnel_counts(run: Run) -> dict[int, dict[str, int]]:
    """Per round with chains: groups that ran one, chain nodes, and chain winners sent on."""
    out: dict[int, dict[str, int]] = {}
    for r, g, ch in _chains(run):
        c = out.setdefault(r, dict.fromkeys(CHAIN_FUNNEL_ORDER, 0))
        c["chain_groups"] += 1
        c["chain_nodes"] += sum(len(nodes) for _cid, nodes in chain_walks(ch))
        won = (ch.get("winner") or {}).get("node_id")
        c["chain_survivors"] += int(won is not None and g.get("survivor") == won)
    return out


#: Columns of :func:`selection_optimism_df`.
SELECTION_OPTIMISM_COLUMNS = [
    "round", "group", "node_id", "kind", "selected_on_batch", "batch_repairs", "batch_held_out",
    "batch_harms", "batch_probe", "val_helped", "val_harmed",
]  # fmt: skip


def _count(v: Any) -> int:
    return v if isinstance(v, int) else len(v or ())


def selection_optimism_df(run: Run) -> pd.DataFrame:
    """Report-only probe of the optimism of batch-selected winners (design §1.2, §7.2).

    One row per group candidate the round sent to the gate in a round where chains ran: its
    prefilter numbers (repairs of the held-out errors, harms of the probe; a chain winner's on the
    chain's batch, which it was selected on: ``selected_on_batch``) beside what it did on the
    gate's paired validation run (``val_helped``/``val_harmed``: flips where it replaced the
    answer, the prune's h_u and m_u). It reads validation after the gate has decided and feeds no
    decision. Empty when no round ran a chain.
    """
    store = open_run(run)
    rows = []
    rounds = sorted({r for r, _g, _c in _chains(store)})
    for r in rounds:
        paths = store.layout.round(r)
        if not paths.val_paired.exists():
            continue
        val = store.read_parquet(paths.val_paired)
        for g in store.read_json(paths.synthesis):
            u = g.get("survivor")
            if not u:
                continue
            ch = g.get("chain")
            walks = chain_walks(ch) if ch else []
            node = next((n for _c, ns in walks for n in ns if n["node_id"] == u), None)
            if ch and node is not None:
                held, probe = int(ch["batch"]["n_held_out"]), int(ch["batch"]["n_probe"])
                reps, harms = int(node.get("repairs", 0)), int(node.get("harms", 0))
            else:
                a = next(x for x in g.get("attempts", []) if x.get("tool_id") == u)
                held, probe = int(a.get("n_held_out", 0)), int(a.get("n_probe", 0))
                reps, harms = _count(a.get("repairs")), _count(a.get("harms"))
            mine = val[[u in list(ids) for ids in val["replaced_by"]]]
            rows.append(
                {
                    "round": r,
                    "group": g["group_id"],
                    "node_id": u,
                    "kind": "chain" if node is not None else "direct",
                    "selected_on_batch": node is not None,
                    "batch_repairs": reps,
                    "batch_held_out": held,
                    "batch_harms": harms,
                    "batch_probe": probe,
                    "val_helped": int((mine["flip"] == "helped").sum()),
                    "val_harmed": int((mine["flip"] == "harmed").sum()),
                }
            )
    return pd.DataFrame(rows, columns=SELECTION_OPTIMISM_COLUMNS)
