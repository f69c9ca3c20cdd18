"""A scripted-server responder for the taxonomy's LLM steps: replies computed from the request.

:class:`TaxonomyResponder` plugs into :class:`~tsevo.testing.fake_openai.FakeOpenAIServer` and
answers the 8 induction steps, the annotators and the gate's edit call by reading only what the
request shows (the JSON blocks after ``(JSON):`` markers), the way a careful model would:

* domain and roles: every cluster and role named exactly once, with template prose;
* code steps: the shown signals with lift ≥ 1.25 and ≥ 3 failures become codes whose detector is
  the signal, with evidence lines quoted from the shown traces where it holds (≤ 3 per step);
* dedup: drafts with equal detectors; structure: names rebuilt in Title_Snake, prose filled from
  the fields; coverage: nothing (gaps stay open);
* annotators: the codes whose ``feature op value`` heuristics hold on a trace's shown features,
  each quoted at the event line of the feature's role; ``noise`` drops a seeded share of them per
  annotator, so annotators can disagree;
* gate edits: a sharper ``when_not_to_use`` for codes whose per-code κ is below 0.4;
* the event-level phases (design §4.2): *discovery* proposes the event lines that show a tool
  error, a fallback or a reviewer's no-tool/replace decision, and, in a failed trace, the
  answerer's first answer (quoted from the line, role from the line); *vote* confirms the
  proposals that rule would make and types tool/system events A, role events B; *assign* gives
  the offered codes whose heuristics hold on the trace's features; *deliberation* keeps an own
  code another annotator shares and adopts a code ≥ 2 others hold. ``noise`` drops a seeded share
  of proposals and codes per annotator and flips a seeded share (half of it) of the votes.

Replies are computed, not a model's. Faults are injected per kind with :meth:`inject`, as in
:class:`~tsevo.testing.responder.BuiltinResponder`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from tsevo.taxonomy.llm_induce import ROLE_TYPES
from tsevo.taxonomy.prompts import load
from tsevo.taxonomy.traces import FEATURES

__all__ = ["TAXONOMY_KINDS", "TaxonomyResponder"]

#: Request kind -> prompt asset whose first line identifies it.
TAXONOMY_KINDS: dict[str, str] = {
    "domain": "induce_domain",
    "roles": "induce_roles",
    "axis_a": "induce_axis_a",
    "axis_b": "induce_axis_b",
    "axis_c": "induce_axis_c",
    "dedup": "induce_dedup",
    "structure": "induce_structure",
    "coverage": "induce_coverage",
    "annotate": "gate_annotate",
    "edits": "gate_edits",
    "discover": "gate_discover",
    "vote": "gate_vote",
    "assign": "gate_assign",
    "deliberate": "gate_deliberate",
}

_MARK = re.compile(r"\(JSON[^)\n]*\):\n")
_ATOM = re.compile(r"^([a-z_]+\.[a-z_]+) (==|!=|<=|>=|<|>) (.+)$")
_LINE = re.compile(r"^\[#(\d+) ([A-Z]+) ")
_ROLE_OF = {"tool": "TOOL", "chain": "SYSTEM", "answer": "ANSWERER", "review": "REVIEWER"}
#: What the scripted annotators read as an error on an event line.
_ERRORISH = re.compile(r"\] (tool_error|fallback) |decision=(no_tool|replace) |text=abstain")


def _blocks(text: str) -> list[Any]:
    """Every JSON value that follows a ``(JSON...):`` marker, in order."""
    dec = json.JSONDecoder()
    return [dec.raw_decode(text, m.end())[0] for m in _MARK.finditer(text)]


def _value(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    return raw


def _atoms(heuristic: str) -> list[tuple[str, str, Any]] | None:
    out = []
    for part in heuristic.split(" AND "):
        m = _ATOM.match(part.strip())
        if not m or m.group(1) not in FEATURES:
            return None
        out.append((m.group(1), m.group(2), _value(m.group(3))))
    return out


_OPS = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _holds(atoms: list[tuple[str, str, Any]], feats: Mapping[str, Any]) -> bool:
    for f, op, v in atoms:
        x = feats.get(f)
        try:
            if x is None or not _OPS[op](x, v):
                return False
        except TypeError:
            return False
    return True


def _line(trace: Mapping[str, Any], feature: str) -> tuple[int, str]:
    """The event line that shows a feature (its role's first line, else the first line)."""
    want = _ROLE_OF.get(feature.split(".")[0], "")
    lines = [ln for ln in str(trace["trajectory"]).split("\n") if _LINE.match(ln)]
    pick = next((ln for ln in lines if f" {want} " in ln[:30]), lines[0])
    m = _LINE.match(pick)
    assert m is not None
    return int(m.group(1)), pick[:120]


def _noisy(share: float, *parts: Any) -> bool:
    h = hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()
    return int(h[:8], 16) / 16**8 < share


def _name(prompt: str) -> str:
    m = re.search(r"You are annotator (\w+)\.", prompt)
    return m.group(1) if m else "?"


def _errorish(trace: Mapping[str, Any]) -> list[str]:
    """The event lines a scripted annotator reads as errors, in order."""
    lines = [ln for ln in str(trace["trajectory"]).split("\n") if _LINE.match(ln)]
    out = [ln for ln in lines if _ERRORISH.search(ln)]
    if trace.get("final_correct") is False:
        first = next((ln for ln in lines if " ANSWERER " in ln[:30]), None)
        if first is not None and first not in out:
            out.append(first)
    return out


def _title(text: str, limit: int = 6) -> str:
    words = re.findall(r"[A-Za-z0-9]+", text)
    return "_".join(w[:1].upper() + w[1:] for w in words[:limit]) or "Unnamed_Failure"


class TaxonomyResponder:
    """Answers the taxonomy's LLM requests from their content (a ``FakeOpenAIServer`` responder).

    Args:
        noise: Share of the codes each annotator drops (seeded per annotator, trace and code).
        max_codes: Codes one code step proposes.

    Attributes:
        counts: Requests answered per kind (re-asks included).
    """

    def __init__(self, *, noise: float = 0.0, max_codes: int = 3) -> None:
        self.noise = noise
        self.max_codes = max_codes
        self.heads = {
            k: load(a).text.split("\n", 1)[0].split("$", 1)[0] for k, a in TAXONOMY_KINDS.items()
        }
        self.counts: Counter[str] = Counter()
        self._faults: dict[str, deque[Any]] = {}
        self._lock = threading.Lock()

    def inject(self, kind: str, *faults: Any) -> None:
        """Queue faults (a ``Fault``, a reply, or a function of the correct reply) for ``kind``."""
        if kind not in TAXONOMY_KINDS:
            raise ValueError(f"unknown request kind {kind!r}; one of {sorted(TAXONOMY_KINDS)}")
        with self._lock:
            self._faults.setdefault(kind, deque()).extend(faults)

    def kind_of(self, prompt: str) -> str:
        """The request kind of a first user message."""
        for kind, head in self.heads.items():
            if prompt.startswith(head):
                return kind
        raise ValueError(f"not a taxonomy prompt: {prompt[:80]!r}")

    def __call__(self, body: Mapping[str, Any]) -> Any:
        """Answer one chat-completion request body (an injected fault first, when queued)."""
        msgs = [m for m in body.get("messages", []) if m.get("role") == "user"]
        prompt = str(msgs[0].get("content", ""))
        kind = self.kind_of(prompt)
        with self._lock:
            self.counts[kind] += 1
            queue = self._faults.get(kind)
            fault = queue.popleft() if queue else None
        if fault is not None and not callable(fault):
            return fault
        reply = getattr(self, f"_{kind}")(prompt)
        return fault(reply) if fault is not None else reply

    # -- steps 1, 2 -------------------------------------------------------------------------------
    def _domain(self, prompt: str) -> dict[str, Any]:
        clusters = _blocks(prompt)[0]
        subs = [
            {
                "cluster": c["cluster"],
                "name": " ".join(c["terms"]) or c["cluster"],
                "terms": c["terms"],
            }
            for c in clusters
        ]
        terms = sorted({t for c in clusters for t in c["terms"]})
        return {
            "domain": "time-series multiple-choice questions",
            "summary": "Questions about series (periods, trends, matches) answered by a chain.",
            "subdomains": subs,
            "terminology": terms,
            "error_patterns": ["a tool fails and the first answer stands"],
        }

    def _roles(self, prompt: str) -> dict[str, Any]:
        counts = _blocks(prompt)[0]
        return {
            "roles": [
                {"role": r, "type": ROLE_TYPES.get(r, "solver"), "purpose": f"the {r} step"}
                for r in sorted(counts)
            ],
            "topology": "sequential: answerer, then tools, then reviewer",
        }

    # -- steps 3 to 5, 8 --------------------------------------------------------------------------
    def _drafts(self, prompt: str, axis: str, role: str | None, areas: list[str]) -> dict[str, Any]:
        blocks = _blocks(prompt)
        signals, traces = blocks[-2], blocks[-1]
        out: list[dict[str, Any]] = []
        used: set[str] = set()
        for s in signals:
            atoms = _atoms(s["signal"])
            if atoms is None or s["lift"] < 1.25 or s["failed"] < 3 or atoms[0][0] in used:
                continue
            hits = [t for t in traces if _holds(atoms, t["features"])][:3]
            if len(hits) < 2:
                continue
            feat = atoms[0][0]
            used.add(feat)
            evidence = []
            for t in hits:
                seq, quote = _line(t, feat)
                evidence.append({"trace_id": t["trace_id"], "event_seq": seq, "quote": quote})
            phrase = FEATURES[feat].phrase
            if axis == "C":
                subs = Counter(str(t["features"].get("domain.subdomain")) for t in hits)
                area = atoms[0][2] if feat == "domain.subdomain" else subs.most_common(1)[0][0]
            else:
                area = feat.split(".")[0] if axis == "A" else None
            if axis == "C" and area not in areas:
                continue
            out.append(
                {
                    "axis": axis,
                    "name": _title(f"{role} {phrase}" if role else phrase),
                    "description": f"Failed traces where {s['signal']} ({s['failed']} failed, lift {s['lift']}).",
                    "when_to_use": f"Assign when the trace shows {s['signal']}.",
                    "when_not_to_use": f"Not when {s['signal']} does not hold.",
                    "detection_heuristics": [s["signal"]],
                    "severity": "major" if s["lift"] >= 1.6 else "minor",
                    "area": area,
                    "applies_to_role": role,
                    "evidence": evidence,
                    "detector": {
                        "any": [
                            {"all": [{"feature": f, "op": op, "value": v} for f, op, v in atoms]}
                        ]
                    },
                }
            )
            if len(out) >= self.max_codes:
                break
        return {"codes": out}

    def _axis_a(self, prompt: str) -> dict[str, Any]:
        return self._drafts(prompt, "A", None, [])

    def _axis_b(self, prompt: str) -> dict[str, Any]:
        m = re.search(r'"applies_to_role": "([a-z]+)"', prompt)
        assert m is not None
        return self._drafts(prompt, "B", m.group(1), [])

    def _axis_c(self, prompt: str) -> dict[str, Any]:
        subs = [s["id"] for s in _blocks(prompt)[0]]
        return self._drafts(prompt, "C", None, subs)

    def _coverage(self, prompt: str) -> dict[str, Any]:
        return {"codes": []}

    # -- steps 6, 7 -------------------------------------------------------------------------------
    def _dedup(self, prompt: str) -> dict[str, Any]:
        seen: dict[str, str] = {}
        dups = []
        for d in _blocks(prompt)[0]:
            key = json.dumps(d.get("detector"), sort_keys=True)
            if d.get("detector") and key in seen:
                dups.append({"concept": d["name"], "keep": seen[key], "remove": d["key"]})
            else:
                seen.setdefault(key, d["key"])
        return {"duplicates": dups}

    def _structure(self, prompt: str) -> dict[str, Any]:
        fixes = []
        for d in _blocks(prompt)[0]:
            fix: dict[str, Any] = {"draft": d["key"], "name": _title(d["name"].replace("_", " "))}
            for f in ("description", "when_to_use", "when_not_to_use"):
                if len(str(d.get(f) or "").strip()) < 8:
                    fix[f] = f"{f.replace('_', ' ').capitalize()} for {fix['name']}."
            fixes.append(fix)
        return {"fixes": fixes}

    # -- gate -------------------------------------------------------------------------------------
    def _fires(self, code: Mapping[str, Any], features: Mapping[str, Any], *key: Any) -> list:
        """The code's heuristic atoms when they all hold on ``features`` and the noise keeps it.

        The seeded noise is keyed by ``key`` (annotator, item, code); else an empty list.
        """
        atoms = [a for h in code["detection_heuristics"] for a in (_atoms(h) or [])]
        if not atoms or not _holds(atoms, features) or _noisy(self.noise, *key):
            return []
        return atoms

    def _annotate(self, prompt: str) -> dict[str, Any]:
        name = _name(prompt)
        codes, traces = _blocks(prompt)[:2]
        labels = []
        for t in traces:
            assigned = []
            for c in codes:
                atoms = self._fires(c, t["features"], name, t["trace_id"], c["id"])
                if not atoms:
                    continue
                seq, quote = _line(t, atoms[0][0])
                assigned.append({"id": c["id"], "event_seq": seq, "quote": quote})
            labels.append({"trace_id": t["trace_id"], "codes": assigned})
        return {"labels": labels}

    def _edits(self, prompt: str) -> dict[str, Any]:
        codes, agreement = _blocks(prompt)[:2]
        low = sorted(i for i, k in agreement["per_code_kappa"].items() if k < 0.4)[:3]
        names = {c["id"]: c for c in codes}
        relabel = [
            {
                "id": i,
                "when_not_to_use": f"Not unless {names[i]['detection_heuristics'][0]} holds "
                "at the quoted event.",
            }
            for i in low
            if i in names
        ]
        return {"merge": [], "add": [], "relabel": relabel}

    # -- gate, event level ------------------------------------------------------------------------
    def _discover(self, prompt: str) -> dict[str, Any]:
        name, trace = _name(prompt), _blocks(prompt)[0]
        errors = []
        for ln in _errorish(trace):
            m = _LINE.match(ln)
            assert m is not None
            seq, role = int(m.group(1)), m.group(2).lower()
            if _noisy(self.noise, name, trace["trace_id"], seq, "discover"):
                continue
            kind = ln.split("] ", 1)[1].split(" ", 1)[0]
            errors.append(
                {
                    "event_seq": seq,
                    "role": role,
                    "description": f"The {role}'s {kind} at event {seq} went wrong.",
                    "quote": ln[:80],
                }
            )
        return {"errors": errors}

    def _vote(self, prompt: str) -> dict[str, Any]:
        name = _name(prompt)
        cands, trace = _blocks(prompt)[:2]
        lines = set(_errorish(trace))
        votes, types = [], []
        for c in cands:
            confirm = c["line"] in lines
            if _noisy(self.noise / 2, name, c["error_id"], "vote"):
                confirm = not confirm
            votes.append({"error_id": c["error_id"], "confirm": confirm})
            axis = "A" if c["role"] in ("tool", "system") else "B"
            types.append({"error_id": c["error_id"], "axis": axis})
        return {"votes": votes, "types": types}

    def _assign(self, prompt: str) -> dict[str, Any]:
        name = _name(prompt)
        error, codes, _base, trace = _blocks(prompt)[:4]
        out = []
        for c in codes:
            if not self._fires(c, trace["features"], name, error["error_id"], c["id"]):
                continue
            out.append({"id": c["id"], "quote": str(error["line"])[:80]})
        return {"codes": out}

    def _deliberate(self, prompt: str) -> dict[str, Any]:
        error, _codes, labels = _blocks(prompt)[:3]
        held = Counter(i for o in labels["others"] for i in o)
        keep = {i for i in labels["yours"] if held[i] >= 1}
        new = keep | {i for i, n in held.items() if n >= 2}
        return {"revisions": [{"error_id": error["error_id"], "codes": sorted(new)}]}
