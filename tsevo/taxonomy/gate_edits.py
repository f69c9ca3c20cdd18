"""The builtin gate's bounded edits between rounds (design §4.7).

* :func:`panel_edits`: ≤ ``max_merge`` merges (codes co-assigned on ≥ 2 errors with firing Jaccard
  ≥ 0.5 on the panel's base) and ≤ ``max_relabel`` relabels (used codes with per-code κ < 0.4 get
  ``when_not_to_use`` from the code most confused with them);
* :func:`mined_adds`: ≤ ``max_add`` codes for errors no code covered, mined (support, lift, BH) on
  the induction-pool traces no code fires on.

``panel`` is the gate's :class:`~tsevo.taxonomy.gate.Panel` (its ``ids`` and detector ``labels``
on the base) and ``cfg`` its :class:`~tsevo.taxonomy.gate.GateConfig`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .edits import Add, Edit, Merge, Relabel
from .induce import InduceConfig, active_roles, draft_code, fires, mine
from .model import Taxonomy
from .traces import FEATURES, Trace

__all__ = ["mined_adds", "panel_edits"]


def panel_edits(
    tax: Taxonomy,
    panel: Any,
    labels: list[dict[str, set[str]]],
    errors: list[str],
    per_code: Mapping[str, float],
    cfg: Any,
) -> list[Edit]:
    """At most ``max_merge`` merges and ``max_relabel`` relabels from a failed round's labels.

    ``labels`` are the annotators' phase-4 labels per error and ``per_code`` the round's per-code
    Fleiss κ.
    """
    edits: list[Edit] = []
    co: Counter[tuple[str, str]] = Counter()
    for e in errors:
        votes = Counter(i for lab in labels for i in lab.get(e, ()))
        cons = sorted(i for i, n in votes.items() if n >= cfg.quorum)
        co.update((a, b) for a in cons for b in cons if a < b)
    merged: set[str] = set()
    for (a, b), n in sorted(co.items()):
        if len(edits) >= cfg.max_merge or n < 2 or {a, b} & merged:
            continue
        ca, cb = tax[a], tax[b]
        if ca.category != cb.category or ca.applies_to_role != cb.applies_to_role:
            continue
        ja, jb = panel.labels[:, panel.ids.index(a)], panel.labels[:, panel.ids.index(b)]
        u = int((ja | jb).sum())
        if u and int((ja & jb).sum()) / u >= 0.5:
            keep, absorb = sorted([a, b], key=lambda i: (len(i), i))
            edits.append(Merge(keep, (absorb,)))
            merged |= {a, b}
    relabels = 0
    for code_id, k in sorted(per_code.items(), key=lambda kv: (kv[1], kv[0])):
        if relabels >= cfg.max_relabel or k >= 0.4 or code_id in merged:
            continue
        confused: Counter[str] = Counter()
        for e in errors:
            if any(code_id in lab.get(e, ()) for lab in labels):
                confused.update(i for lab in labels for i in lab.get(e, ()) if i != code_id)
        if not confused:
            continue
        other = tax[sorted(confused.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]]
        theirs = (other.detection_heuristics or (other.description,))[0]
        ours = (tax[code_id].detection_heuristics or ("this code's pattern",))[0]
        text = f"Not when the trace fits {other.id} {other.name} ({theirs}) without {ours}."
        edits.append(Relabel(code_id, {"when_not_to_use": text}))
        relabels += 1
    return edits


def mined_adds(
    tax: Taxonomy, pool: Sequence[Trace], uncovered: Sequence[Trace], cfg: Any
) -> list[Edit]:
    """At most ``max_add`` codes for errors no code covered.

    Mined (support, lift, BH, as in induction) on the induction-pool traces no code fires on; a
    code is kept only if it fires on an uncovered gate error.
    """
    residual = [t for t in pool if not any(fires(c.detector, t.features) for c in tax.codes)]
    fail = np.array([t.failed for t in residual], dtype=bool)
    roles = active_roles(residual, InduceConfig()) if residual else {}
    plan = [("system", "A", None)] + [(f"role:{r}", "B", r) for r in roles if roles[r]["active"]]
    found = []
    for family, axis, role in [*plan, ("domain", "C", None)]:
        feats = [n for n, f in FEATURES.items() if f.outcome_blind and f.family == family]
        chosen, _ = mine(feats, residual, InduceConfig(seed=cfg.seed))
        for c in chosen:
            det = {"any": [{"all": [a.to_dict() for a in c.atoms]}]}
            hits = sum(fires(det, t.features) for t in uncovered)
            if hits:
                code = draft_code(axis, c, role, residual, fail, None)
                found.append((-hits, -c.support, c.key, code))
    return [Add(code) for *_, code in sorted(found, key=lambda x: x[:3])[: cfg.max_add]]
