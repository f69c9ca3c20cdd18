"""Scripted replies for the LLM Mara chain step, read off the step's own context.

The scripted server (:class:`~tsevo.testing.BuiltinResponder`) answers ``chain_analyse`` and
``chain_mutate`` requests with these functions. They read only what the prompt shows: the rows the
analysis must account for, the lineage, the score table, the node to edit and its raw records.

* :func:`analyse_reply` diagnoses every row to explain by the node's fact on it (A for O/S/A, I
  for K, B for a wrong replacement or a harmed probe row, H for a lost win, else E with a
  citation), each citing the row's ``fact`` field verbatim; credits each credited row to the last
  lineage node where its score went 0 -> 1 in the table; lists the inconsistency pairs given.
* :func:`mutate_reply` moves the reading rule's abstain band (wider when the analysis blames
  content or harm, narrower otherwise; the other way when there is nothing to narrow) with a scope
  patch that follows the leading category, or, for a node without a simple rule, marks the
  source so the artifact differs (a protocol exercise, not a repair).

Deterministic and model-free: the replies test the protocol (contracts, checks, ledger, cache),
they claim nothing about what a model would find.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

__all__ = ["analyse_reply", "mutate_reply"]

_RULE_KEYS = ("kind", "key", "bins", "labels", "scale", "offset", "prefix", "mode", "margin")


def _section(prompt: str, title: str) -> str:
    i = prompt.find(f"## {title}")
    if i < 0:
        return ""
    j = prompt.find("\n## ", i + 3)
    return prompt[i : j if j >= 0 else len(prompt)]


def _listed(prompt: str, label: str) -> list[str]:
    m = re.search(rf"^- {re.escape(label)}: (.*)$", prompt, re.M)
    if m is None or m.group(1).strip() == "none":
        return []
    return [x.strip() for x in m.group(1).split(",") if x.strip()]


def _node(prompt: str) -> dict[str, Any]:
    body = _section(prompt, "Node to edit").split("\n", 1)[1]
    obj, _ = json.JSONDecoder().raw_decode(body.strip())
    return dict(obj)


def _records(prompt: str, node_id: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in _section(prompt, "Raw records").splitlines()[1:]:
        if line.startswith("{"):
            rec = json.loads(line)
            if rec.get("node_id") == node_id:
                out[str(rec["qid"])] = rec
    return out


def _table(prompt: str) -> tuple[list[str], dict[str, list[int]]]:
    """Node ids (N1.. in order) and per row its credited values (root first)."""
    nodes = re.findall(r"; N\d+ = (\S+)", prompt)
    vals: dict[str, list[int]] = {}
    for line in prompt.splitlines():
        parts = line.split(" | ")
        if len(parts) == 4 and parts[1] in ("H", "P"):
            who = re.sub(r" \(\d+ rows\)$", "", parts[0])
            cells = [int(c) for c in parts[2].split()]
            for q in who.split(", "):
                vals[q] = cells
    return nodes, vals


def _category(rec: dict[str, Any] | None, lost: set[str], qid: str) -> str:
    if qid in lost:
        return "H"
    if rec is None:
        return "E"
    fact, wrong = rec.get("fact"), rec.get("answer") != rec.get("correct")
    if rec.get("part") == "P":
        return "B" if wrong else "E"
    if fact in ("O", "S", "A"):
        return "A"
    if fact == "K":
        return "I"
    if fact in ("R", "E") and wrong:
        return "B"
    return "E"


def _diagnoses(
    rows: list[str], node_id: str, recs: dict[str, dict[str, Any]], lost: set[str], src: str
) -> list[dict[str, Any]]:
    by_cat: dict[str, list[str]] = {}
    for q in rows:
        by_cat.setdefault(_category(recs.get(q), lost, q), []).append(q)
    out = []
    for cat, qs in sorted(by_cat.items()):
        cites = [
            {"node_id": node_id, "qid": q, "field": "fact", "quote": recs[q]["fact"]}
            for q in qs[:3]
            if q in recs and recs[q].get("fact")
        ]
        if not cites:
            cites = [{"node_id": node_id, "qid": "", "field": "source", "quote": src}]
        action = {
            "A": "let the tool reach these rows",
            "B": "measure more robustly or run on fewer rows",
            "H": "restore what the earlier node did on these rows",
            "I": "make the reading rule decide",
        }.get(cat, "none within this contract")
        out.append(
            {
                "category": cat,
                "responsible_node": node_id,
                "rows": qs,
                "citations": cites,
                "action": action,
            }
        )
    return out


def analyse_reply(prompt: str) -> dict[str, Any]:
    """A valid analysis of the prompt's node to edit (see the module docstring)."""
    node = _node(prompt)
    nid = str(node["node_id"])
    recs = _records(prompt, nid)
    src = next((ln for ln in str(node["source"]).splitlines() if ln.strip()), "def")
    lost = set(_listed(prompt, "lost wins"))
    explain = _listed(prompt, "explain (residual or regressed)")
    osc = _listed(prompt, "oscillating")
    nodes, vals = _table(prompt)
    credits = []
    for q in _listed(prompt, "credited (name the change behind each)"):
        cells = vals.get(q, [])
        ups = [i for i in range(1, len(cells)) if cells[i] and not cells[i - 1]]
        if ups:
            credits.append({"qid": q, "node_id": nodes[ups[-1] - 1]})
    pairs = []
    for p in _listed(prompt, "inconsistency pairs"):
        m = re.fullmatch(r"(\S+) vs (\S+) on (\S+)", p)
        if m:
            pairs.append({"node_a": m[1], "node_b": m[2], "qid": m[3], "explanation": "differs"})
    return {
        "delta_tracing": _diagnoses(explain, nid, recs, lost, src),
        "success_extraction": credits,
        "oscillation": _diagnoses(osc, nid, recs, lost, src),
        "inconsistency": pairs,
        "corroboration": [{"node_id": nid, "qid": "", "field": "source", "quote": src}],
        "data_quality_issues": [],
    }


def _margin(rule: dict[str, Any], wider: bool) -> float | None:
    m = float(rule.get("margin", 0.0))
    if wider:
        if m > 0:
            return m * 2
        spread = max((abs(float(b)) for b in rule.get("bins", ())), default=1.0) or 1.0
        return round(0.1 * spread, 6)
    return round(m / 2, 6) if m > 1e-6 else None


def mutate_reply(prompt: str) -> dict[str, Any]:
    """A valid edit of the prompt's node to edit (see the module docstring)."""
    node = _node(prompt)
    m = re.search(r"Analysis of the node to edit[^\n]*\n(\{.*?\})\n", prompt, re.S)
    analysis = json.loads(m.group(1)) if m else {}
    cats: Counter[str] = Counter()
    rows: list[str] = []
    for d in analysis.get("delta_tracing", ()):
        cats[d["category"]] += len(d["rows"])
        rows += d["rows"]
    lead = min(cats, key=lambda c: (-cats[c], c)) if cats else ""
    if not rows:
        rows = list(_records(prompt, str(node["node_id"])))[:1] or ["none"]
    rule = node.get("reading_rule")
    source = str(node["source"])
    step = re.search(r"chain step (\d+)", prompt)
    n = step.group(1) if step else "1"
    action = {"target": "reading_rule", "op": "edit", "resolves": rows[:8]}
    new_rule = None
    if isinstance(rule, dict) and rule.get("kind") in ("label", "nearest_number", "extremum"):
        wider = lead in ("B", "H")
        margin = _margin(rule, wider)
        if margin is None:
            wider, margin = True, _margin(rule, True)
        new_rule = {k: rule[k] for k in _RULE_KEYS if k in rule}
        new_rule["margin"] = margin
        action.update(
            issue=f"category {lead or 'none'} leads",
            change=f"{'widened' if wider else 'narrowed'} the abstain band to {margin}",
        )
    else:
        source = source.rstrip("\n") + f"\n# chain step {n}\n"
        action.update(target="source", issue="no simple reading rule", change="marked the source")
    func = re.search(r"def (\w+)\(", source)
    return {
        "actions": [action],
        "source": source,
        "function_name": func.group(1) if func else "tool",
        "outputs": list(node["outputs"]),
        "guidance": str(node["guidance"]) or "read the outputs",
        "reading_rule": new_rule,
        "scope_patch": {"A": "widen", "B": "narrow"}.get(lead, "keep"),
    }
