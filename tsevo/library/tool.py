"""Tools and the other artifacts a round can admit, with their scope, contract and guidance.

A *tool* is source for exactly one zero-argument function that reads a question through ``ctx`` and
the primitives facade ``P`` and returns a flat dict of finite numbers or booleans (or ``None`` to
abstain). Beside the source it carries metadata: a stable id (never reused), a content hash, the round
that admitted it, a :class:`Scope` (where it applies), a :class:`Contract` (what it must measure), a
:class:`Guidance` (how a reviewer reads it: text for an LLM and a machine-readable
:class:`ReadingRule` for the builtin reviewer), an optional calibration record and a
:class:`Provenance`.

Other artifact kinds live in the same record type: ``usage_guidance`` amends an earlier tool's
guidance (the *refine* action), ``prompt_patch`` adds reviewer text (LLM backend only),
``scope_override`` narrows an earlier tool (*rescope*) and ``tombstone`` retires one (*retire*).
Everything is frozen and JSON round-trips exactly.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, get_args

from tsevo.hashing import canonical_json

from ._scope import Arity, Matcher, Scope, as_tuple, merge_scopes, options_kind, question_tokens
from ._tree import (
    TREE_DEPTH,
    TREE_FEATURES,
    check_tree,
    tree_json,
    tree_keys,
    tree_text,
    tree_tuple,
)

__all__ = [
    "ARTIFACT_KINDS",
    "RULE_KINDS",
    "TREE_DEPTH",
    "TREE_FEATURES",
    "Arity",
    "ArtifactKind",
    "Contract",
    "Guidance",
    "Matcher",
    "Provenance",
    "ReadingRule",
    "Scope",
    "Tool",
    "merge_scopes",
    "options_kind",
    "question_tokens",
]

ArtifactKind = Literal["tool", "usage_guidance", "prompt_patch", "scope_override", "tombstone"]
ARTIFACT_KINDS: tuple[str, ...] = get_args(ArtifactKind)
RuleKind = Literal["label", "nearest_number", "extremum", "tree", "branches", "consensus"]
RULE_KINDS: tuple[str, ...] = get_args(RuleKind)
_NESTED = ("branches", "consensus")  # rule kinds that hold sub-rules in ``branches``


@dataclass(frozen=True)
class Contract:
    """What an artifact must deliver (the planner's contract card fields that are checked downstream).

    Attributes:
        measurement: The required measurement, e.g. ``"window_compare.level_gap_sigma"``.
        signature: Required inputs, e.g. ``("primary",)``, ``("primary", "covariate")``,
            ``("reference", "candidates")``.
        success_criterion: How a repair is recognised, in words.
        calibration: Optional calibration request (``{"kind": "binary_decision_tree_v1", ...}``).
        params: Measurement parameters chosen by the planner (windows, lags, bands).
    """

    measurement: str = ""
    signature: tuple[str, ...] = ("primary",)
    success_criterion: str = ""
    calibration: Mapping[str, Any] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "measurement": self.measurement,
            "signature": list(self.signature),
            "success_criterion": self.success_criterion,
            "calibration": dict(self.calibration) if self.calibration is not None else None,
            "params": dict(self.params),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Contract:
        """Inverse of :meth:`to_dict`."""
        cal = d.get("calibration")
        return cls(
            measurement=d.get("measurement", ""),
            signature=as_tuple(d.get("signature")) or ("primary",),
            success_criterion=d.get("success_criterion", ""),
            calibration=dict(cal) if cal is not None else None,
            params=dict(d.get("params") or {}),
        )


@dataclass(frozen=True)
class ReadingRule:
    """How the builtin reviewer turns a tool's evidence into an option (the rule lives here, not in the tool).

    Kinds:
        ``label``: ``value = outputs[key]`` is cut by ``bins`` (ascending) into ``labels`` (one more
        than bins); the option whose text matches the label is chosen. An abstain band of
        ``margin`` around every cut point gives no decision.
        ``nearest_number``: ``value = scale * outputs[key] + offset``; the option whose (first) number
        is nearest is chosen; no decision when the two nearest are within ``margin`` (relative).
        ``extremum``: ``outputs[prefix + name]`` is a score per candidate series; the candidate with
        the ``mode`` (``min`` | ``max``) score is chosen, mapped to the option naming it; no decision
        when the best two differ by less than ``margin`` (relative to their spread). When the
        question contains one of ``invert_words``, the opposite extremum is chosen (e.g. "mirrors":
        the least correlated candidate instead of the most).
        ``tree``: a two-feature rule, a decision tree of depth at most 2 over at most two outputs.
        ``tree`` is ``(key, cut, low, high)``; ``low`` (value < cut) and ``high`` are a class label
        or a nested ``(key, cut, low, high)``; the option matching the leaf's label is chosen. No
        decision when a value on the path lies within ``margin`` of its cut.
        ``branches``: one rule per branch of a composite tool. A composite tool answers every branch
        it fires on and prefixes its output keys with the branch (``b1_``, ``b2_``...); the first
        sub-rule whose outputs are present and that names an option decides.
        ``consensus``: at least two rules (in ``branches``), each on its own measurement of one
        question: the option at least ``quorum`` of them name (all of them by default); no
        decision otherwise (an abstaining rule names no option). With ``weights``, the share is
        of their total weight (ties between options go to the one more rules name, then the
        first option).

    Attributes:
        kind: ``label`` | ``nearest_number`` | ``extremum`` | ``tree`` | ``branches`` |
            ``consensus``.
        key: Output key read (``label``, ``nearest_number``).
        bins: Cut points (``label``).
        labels: Class label texts (``label``).
        scale: Affine scale (``nearest_number``).
        offset: Affine offset (``nearest_number``).
        prefix: Per-candidate output key prefix (``extremum``).
        mode: ``min`` or ``max`` (``extremum``).
        invert_words: Question words that flip ``mode`` (``extremum``; lower-case word tokens).
        margin: Abstain band (see kinds).
        confidence: Prior confidence of the rule in [0, 1] (cross-validated accuracy on train).
        tree: The decision tree (``tree``).
        branches: The per-branch rules (``branches``; none of them a ``branches`` rule), or the
            agreeing rules (``consensus``; none of them a ``branches`` or ``consensus`` rule).
        quorum: Least share of a ``consensus`` rule's rules that must name its option, in
            (0.5, 1] (1: all of them).
        lead_quorum: A lower share that suffices with the first rule, in (0.5, quorum) (0: none).
        weights: One vote weight >= 0 per rule of a ``consensus`` rule (empty: one each).
    """

    kind: RuleKind
    key: str = ""
    bins: tuple[float, ...] = ()
    labels: tuple[str, ...] = ()
    scale: float = 1.0
    offset: float = 0.0
    prefix: str = ""
    mode: Literal["min", "max"] = "min"
    margin: float = 0.0
    confidence: float = 0.5
    invert_words: tuple[str, ...] = ()
    tree: tuple[Any, ...] = ()
    branches: tuple[ReadingRule, ...] = ()
    quorum: float = 1.0
    weights: tuple[float, ...] = ()
    lead_quorum: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise ValueError(f"unknown reading rule kind {self.kind!r}")
        if (self.kind == "tree") != bool(self.tree):
            raise ValueError("a tree rule needs a tree, and only a tree rule has one")
        if self.tree:
            check_tree(self.tree, TREE_DEPTH)
            if len(tree_keys(self.tree)) > TREE_FEATURES:
                raise ValueError(f"a tree rule reads at most {TREE_FEATURES} outputs")
        if (self.kind in _NESTED) != bool(self.branches):
            raise ValueError(
                "a branches or consensus rule needs sub-rules, and only such a rule has them"
            )
        if any(b.kind == "branches" for b in self.branches):
            raise ValueError("branch rules do not nest")
        if self.kind == "consensus" and (
            len(self.branches) < 2 or any(b.kind == "consensus" for b in self.branches)
        ):
            raise ValueError("a consensus rule reads at least two non-consensus rules")
        if not 0.5 < self.quorum <= 1.0 or (self.quorum != 1.0 and self.kind != "consensus"):
            raise ValueError("only a consensus rule has a quorum, a share in (0.5, 1]")
        lead_ok = self.kind == "consensus" and 0.5 < self.lead_quorum < self.quorum
        if self.lead_quorum and not lead_ok:
            raise ValueError("only a consensus rule has a lead_quorum, a share in (0.5, quorum)")
        if self.weights and (
            self.kind != "consensus"
            or len(self.weights) != len(self.branches)
            or not all(math.isfinite(w) and w >= 0 for w in self.weights)
            or sum(self.weights) <= 0
        ):
            raise ValueError("weights: one finite weight >= 0 per rule of a consensus rule")
        if self.kind == "label" and len(self.labels) != len(self.bins) + 1:
            raise ValueError("a label rule needs exactly one more label than bins")
        if self.kind == "label" and list(self.bins) != sorted(self.bins):
            raise ValueError("label rule bins must be ascending")
        if self.invert_words and self.kind != "extremum":
            raise ValueError("only an extremum rule may have invert_words")
        if any(
            not w or w != w.lower() or not w.replace("_", "").isalnum() for w in self.invert_words
        ):
            raise ValueError("invert_words must be lower-case word tokens")
        for v in (*self.bins, self.scale, self.offset, self.margin, self.confidence):
            if not math.isfinite(v):
                raise ValueError("reading rule numbers must be finite")

    def read_keys(self) -> tuple[str, ...]:
        """Output keys the rule reads (an ``extremum`` rule reads ``prefix + candidate`` keys)."""
        if self.kind in ("label", "nearest_number"):
            return (self.key,)
        if self.kind == "tree":
            return tree_keys(self.tree)
        if self.kind in _NESTED:
            return tuple(k for b in self.branches for k in b.read_keys())
        return ()

    def applies(self, outputs: Mapping[str, Any], candidates: Sequence[str]) -> bool:
        """Whether ``outputs`` hold what the rule reads.

        A ``branches`` rule: one of its branches; a ``consensus`` rule: all of its rules.
        """
        if self.kind == "branches":
            return any(b.applies(outputs, candidates) for b in self.branches)
        if self.kind == "consensus":
            return all(b.applies(outputs, candidates) for b in self.branches)
        if self.kind == "extremum":
            return bool(candidates) and all(f"{self.prefix}{c}" in outputs for c in candidates)
        return all(k in outputs for k in self.read_keys())

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (fields a kind does not use are left out as before)."""
        d = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("tree", "branches")
        }
        d["bins"] = list(self.bins)
        d["labels"] = list(self.labels)
        d["invert_words"] = list(self.invert_words)
        if not self.invert_words:
            del d["invert_words"]  # rules without it serialize as before
        for k in ("quorum", "lead_quorum"):
            if getattr(self, k) in (1.0, 0.0):
                del d[k]  # at their defaults: serialized as before
        d["weights"] = list(self.weights)
        if not self.weights:
            del d["weights"]
        if self.tree:
            d["tree"] = tree_json(self.tree)
        if self.branches:
            d["branches"] = [b.to_dict() for b in self.branches]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReadingRule:
        """Inverse of :meth:`to_dict`."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["bins"] = tuple(float(x) for x in kw.get("bins", ()))
        kw["labels"] = tuple(kw.get("labels", ()))
        kw["invert_words"] = tuple(kw.get("invert_words", ()))
        kw["weights"] = tuple(float(w) for w in kw.get("weights", ()))
        kw["tree"] = tree_tuple(kw["tree"]) if kw.get("tree") else ()
        kw["branches"] = tuple(cls.from_dict(b) for b in kw.get("branches", ()))
        return cls(**kw)

    def describe(self) -> str:
        """Text rendering for an LLM reviewer and for humans."""
        if self.kind == "label":
            cuts = []
            for i, lab in enumerate(self.labels):
                lo = "-inf" if i == 0 else f"{self.bins[i - 1]:.4g}"
                hi = "+inf" if i == len(self.bins) else f"{self.bins[i]:.4g}"
                cuts.append(f"{lo} <= {self.key} < {hi} -> '{lab}'")
            return "; ".join(cuts)
        if self.kind == "nearest_number":
            return f"choose the option whose number is nearest {self.scale:.4g} * {self.key} + {self.offset:.4g}"
        if self.kind == "tree":
            return f"two-feature rule: {tree_text(self.tree)}; choose the option naming the class"
        if self.kind == "consensus":
            who = "all" if self.quorum == 1.0 else f"at least {self.quorum:.0%}"
            if self.lead_quorum:
                who += f" ({self.lead_quorum:.0%} with the first)"
            if self.weights:
                return f"the option {who} of these name by weight, none otherwise: " + " | ".join(
                    f"{b.describe()} (weight {w:.2f})"
                    for b, w in zip(self.branches, self.weights, strict=True)
                )
            return f"the option {who} of these name, none otherwise: " + " | ".join(
                b.describe() for b in self.branches
            )
        if self.kind == "branches":
            return "; ".join(
                f"when the outputs are {', '.join(b.read_keys()) or b.prefix + '<candidate>'}: "
                f"{b.describe()}"
                for b in self.branches
            )
        text = f"choose the candidate with the {self.mode}imum {self.prefix}<candidate> score"
        if self.invert_words:
            other = "max" if self.mode == "min" else "min"
            words = ", ".join(f"'{w}'" for w in self.invert_words)
            text += f" (the {other}imum when the question says {words})"
        return text


@dataclass(frozen=True)
class Guidance:
    """How to read an artifact's evidence.

    Attributes:
        text: Natural-language guidance for an LLM reviewer.
        rule: Machine-readable rule for the builtin reviewer (``None``: text only).
    """

    text: str = ""
    rule: ReadingRule | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {"text": self.text, "rule": self.rule.to_dict() if self.rule else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Guidance:
        """Inverse of :meth:`to_dict`."""
        r = d.get("rule")
        return cls(text=d.get("text", ""), rule=ReadingRule.from_dict(r) if r else None)


@dataclass(frozen=True)
class Provenance:
    """Where an artifact came from.

    Attributes:
        bucket: Failure bucket id that asked for it.
        attempt: Synthesis attempt number (1-based; 0 for hand-written).
        parent: Id of the artifact it was refined from (Mara chain lineage), if any.
        action: Planner action: ``create`` | ``refine`` | ``rescope`` | ``retire`` | ``root``.
        target: Earlier artifact an action targets (refine / rescope / retire).
        author: ``builtin``, an LLM model id, or ``human``.
        group: The (merged) work group whose synthesis produced it (``""`` for hand-written
            artifacts); the prune's dependents rule reads it.
    """

    bucket: str = ""
    attempt: int = 0
    parent: str = ""
    action: str = "create"
    target: str = ""
    author: str = "builtin"
    group: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (``group`` only when set: artifacts without one keep their bytes)."""
        d = asdict(self)
        if not self.group:
            del d["group"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Provenance:
        """Inverse of :meth:`to_dict`."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class Tool:
    """One admitted (or candidate) artifact. See the module docstring for the kinds.

    Attributes:
        id: Stable id, never reused (e.g. ``"r1.t03.level_gap"``).
        kind: Artifact kind.
        name: Python function name in ``source`` (tools) or a short slug.
        description: One line saying what it measures.
        source: Source of the zero-argument function (``""`` for non-tool kinds).
        round: Round that admitted it (0 = root).
        scope: Where it applies (for ``scope_override``: the narrowed scope of ``target``).
        contract: What it must measure.
        guidance: How to read it (for ``usage_guidance``: the amended guidance of ``target``).
        outputs: Output keys the tool returns.
        calibration: Calibration record (``CalibrationResult.to_dict()``) or ``None``.
        provenance: Origin.
    """

    id: str
    kind: ArtifactKind = "tool"
    name: str = "tool"
    description: str = ""
    source: str = ""
    round: int = 0
    scope: Scope = field(default_factory=Scope)
    contract: Contract = field(default_factory=Contract)
    guidance: Guidance = field(default_factory=Guidance)
    outputs: tuple[str, ...] = ()
    calibration: Mapping[str, Any] | None = None
    provenance: Provenance = field(default_factory=Provenance)

    def __post_init__(self) -> None:
        if not self.id or not re.fullmatch(r"[A-Za-z0-9_.\-]+", self.id):
            raise ValueError(f"tool id {self.id!r} must be non-empty [A-Za-z0-9_.-]")
        if self.kind not in ARTIFACT_KINDS:
            raise ValueError(f"unknown artifact kind {self.kind!r}")
        if self.kind == "tool" and not self.source.strip():
            raise ValueError(f"tool {self.id!r} has no source")
        if (
            self.kind in ("usage_guidance", "scope_override", "tombstone")
            and not self.provenance.target
        ):
            raise ValueError(f"{self.kind} artifact {self.id!r} needs provenance.target")

    @property
    def target(self) -> str:
        """The earlier artifact this one amends (empty for tools and prompt patches)."""
        return self.provenance.target

    @property
    def hash(self) -> str:
        """Content hash over source and every behavioural field (not id, round or provenance)."""
        body = {
            "kind": self.kind,
            "source": self.source,
            "scope": self.scope.to_dict(),
            "contract": self.contract.to_dict(),
            "guidance": self.guidance.to_dict(),
            "outputs": list(self.outputs),
        }
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()[:16]

    @property
    def source_hash(self) -> str:
        """Hash of the source alone (the sandbox result cache key)."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def meta_dict(self) -> dict[str, Any]:
        """Everything but the source, JSON-friendly (what ``stage.json`` stores)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "description": self.description,
            "round": self.round,
            "scope": self.scope.to_dict(),
            "contract": self.contract.to_dict(),
            "guidance": self.guidance.to_dict(),
            "outputs": list(self.outputs),
            "calibration": dict(self.calibration) if self.calibration is not None else None,
            "provenance": self.provenance.to_dict(),
            "hash": self.hash,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict including the source."""
        d = self.meta_dict()
        d["source"] = self.source
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str | None = None) -> Tool:
        """Inverse of :meth:`to_dict` (``source`` overrides ``d["source"]``).

        Raises:
            ValueError: when a stored ``hash`` does not match the content (a corrupted library).
        """
        cal = d.get("calibration")
        t = cls(
            id=d["id"],
            kind=d.get("kind", "tool"),
            name=d.get("name", "tool"),
            description=d.get("description", ""),
            source=source if source is not None else d.get("source", ""),
            round=int(d.get("round", 0)),
            scope=Scope.from_dict(d.get("scope") or {}),
            contract=Contract.from_dict(d.get("contract") or {}),
            guidance=Guidance.from_dict(d.get("guidance") or {}),
            outputs=as_tuple(d.get("outputs")),
            calibration=dict(cal) if cal is not None else None,
            provenance=Provenance.from_dict(d.get("provenance") or {}),
        )
        stored = d.get("hash")
        if stored is not None and stored != t.hash:
            raise ValueError(
                f"tool {t.id!r}: stored hash {stored} does not match its content ({t.hash})"
            )
        return t

    def with_round(self, round_: int) -> Tool:
        """Return a copy stamped with the round that admits it."""
        return replace(self, round=round_)
