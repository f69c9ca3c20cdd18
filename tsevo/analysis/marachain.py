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

from ._runs import Run
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
    "chain_depth",
    "chain_diffs_df",
    "chain_funnel_counts",
    "chain_lineage_df",
    "chain_nodes_df",
    "chain_records_df",
    "chain_scores_df",
    "chains_df",
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
