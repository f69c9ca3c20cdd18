"""Stages and the library chain ``L_r = (L_0, T_1, ..., T_r)``: save/load, scope catalog, matching.

A :class:`Stage` holds the artifacts admitted in one round; a :class:`Library` is a root stage plus
an ordered tuple of stages. Earlier stages are never edited: later stages may amend earlier tools
through ``usage_guidance`` (refine), ``scope_override`` (rescope) and ``tombstone`` (retire)
artifacts, which are applied when the *effective* chain is built for answering.

On disk a library is a folder you can read and diff::

    library.json                 root name, stage order, schema version
    stage_0/stage.json           the root stage's artifact metadata (no source)
    stage_0/<tool_id>.py         one file per tool's source
    stage_1/...

Everything is written canonically, so load -> save reproduces the bytes exactly.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tsevo.hashing import canonical_json

from .tool import Guidance, Scope, Tool, options_kind, question_tokens

if TYPE_CHECKING:
    from tsevo.data import Question, QuestionView

__all__ = ["Library", "ScopedTool", "Stage", "description_score", "scope_matches"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Stage:
    """The artifacts admitted in one round (``round`` 0 is the root).

    Attributes:
        round: Round number.
        tools: Artifacts in admission order.
        label: Short label (``"root:expert"``, ``"round 1"``).
        notes: Free text saved with the stage (e.g. the gate path that admitted it).
    """

    round: int
    tools: tuple[Tool, ...] = ()
    label: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        ids = [t.id for t in self.tools]
        if len(set(ids)) != len(ids):
            raise ValueError(f"stage {self.round}: duplicate artifact ids")

    @property
    def folder(self) -> str:
        """Folder name on disk."""
        return f"stage_{self.round}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (artifact metadata only; sources live in .py files)."""
        return {
            "round": self.round,
            "label": self.label,
            "notes": self.notes,
            "tools": [t.meta_dict() for t in self.tools],
        }

    def scope_catalog(self) -> str:
        """Structured text an LLM reads: one block per artifact of this stage."""
        lines = [f"## Stage {self.round}{' (' + self.label + ')' if self.label else ''}"]
        for t in self.tools:
            lines.append(f"- {t.id} [{t.kind}] {t.description}".rstrip())
            if t.kind == "tool":
                lines.append(f"  scope: {t.scope.describe()}")
                lines.append(f"  outputs: {', '.join(t.outputs) or '(unspecified)'}")
                if t.contract.measurement:
                    lines.append(f"  measures: {t.contract.measurement}")
            elif t.kind in ("usage_guidance", "scope_override", "tombstone"):
                lines.append(f"  amends: {t.target}")
                if t.kind == "scope_override":
                    lines.append(f"  new scope: {t.scope.describe()}")
            if t.guidance.text:
                lines.append(f"  guidance: {t.guidance.text}")
            if t.guidance.rule is not None:
                lines.append(f"  reading rule: {t.guidance.rule.describe()}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ScopedTool:
    """A tool as it applies at answer time, after later stages' amendments.

    Attributes:
        tool: The tool (with amended scope and guidance applied).
        stage: Index of the stage it belongs to in the chain (0 = root).
        amended_by: Ids of the artifacts that amended it.
    """

    tool: Tool
    stage: int
    amended_by: tuple[str, ...] = ()


def _arity_ok(scope: Scope, q: Question | QuestionView) -> bool:
    a = scope.arity
    if a == "any":
        return True
    if a == "single":
        return len(q.primary) == 1 and not q.candidates
    if a == "dual":
        return len(q.primary) == 2
    if a == "candidates":
        return bool(q.candidates)
    if a == "covariate":
        return bool(q.covariates)
    return False


def scope_matches(
    scope: Scope, q: Question | QuestionView, tokens: frozenset[str] | None = None
) -> bool:
    """True when a question falls in a scope (task, arity, option shape, matcher) and not its anti-scope."""
    if scope.tasks and q.task not in scope.tasks:
        return False
    if q.task in scope.anti_tasks:
        return False
    if not _arity_ok(scope, q):
        return False
    if scope.options_kind != "any" and options_kind(q.options, q.candidates) != scope.options_kind:
        return False
    toks = tokens if tokens is not None else question_tokens(q.question)
    if not scope.matcher.matches(toks) or not scope.matches_kind(toks):
        return False
    return scope.anti_matcher.is_trivial or not scope.anti_matcher.matches(toks)


@dataclass(frozen=True)
class Library:
    """The deployed chain: a root stage and the stages admitted by later rounds.

    Attributes:
        root: Root name (``empty`` | ``chronos`` | ``expert`` | a custom name).
        stages: Stage 0 (the root) first, then one stage per accepted round.
    """

    root: str = "empty"
    stages: tuple[Stage, ...] = field(default_factory=lambda: (Stage(0, (), "root:empty"),))

    def __post_init__(self) -> None:
        if not self.stages or self.stages[0].round != 0:
            raise ValueError("a library starts with its root stage (round 0)")
        rounds = [s.round for s in self.stages]
        if rounds != sorted(set(rounds)):
            raise ValueError(f"stage rounds must be strictly increasing, got {rounds}")
        seen: set[str] = set()
        for t in self.all_artifacts():
            if t.id in seen:
                raise ValueError(f"artifact id {t.id!r} appears twice in the chain")
            seen.add(t.id)

    # ------------------------------------------------------------------ structure
    def all_artifacts(self) -> Iterator[Tool]:
        """Every artifact of every stage, in chain order."""
        for s in self.stages:
            yield from s.tools

    @property
    def ids(self) -> list[str]:
        """Ids of every artifact in chain order (ids are never reused)."""
        return [t.id for t in self.all_artifacts()]

    @property
    def n_rounds(self) -> int:
        """Number of admitted rounds (stages after the root)."""
        return len(self.stages) - 1

    def get(self, tool_id: str) -> Tool:
        """Look up an artifact by id."""
        for t in self.all_artifacts():
            if t.id == tool_id:
                return t
        raise KeyError(tool_id)

    def append_stage(self, stage: Stage) -> Library:
        """Return a new library with ``stage`` appended (the chain write of an accepted round)."""
        if stage.round <= self.stages[-1].round:
            raise ValueError(f"stage round {stage.round} must follow {self.stages[-1].round}")
        return replace(self, stages=(*self.stages, stage))

    def without(self, ids: Sequence[str]) -> Library:
        """Return a copy with the given artifacts removed from the LAST stage (used by the prune)."""
        drop = set(ids)
        last = self.stages[-1]
        bad = drop - {t.id for t in last.tools}
        if bad:
            raise ValueError(f"can only remove artifacts of the last stage, not {sorted(bad)}")
        kept = tuple(t for t in last.tools if t.id not in drop)
        return replace(self, stages=(*self.stages[:-1], replace(last, tools=kept)))

    def fingerprint(self) -> str:
        """Hash of the chain's behaviour (artifact hashes in order); an answer-cache key."""
        body = "|".join(f"{s.round}:{t.id}:{t.hash}" for s in self.stages for t in s.tools)
        return hashlib.sha256(f"{self.root}|{body}".encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ answering view
    def effective(self) -> list[list[ScopedTool]]:
        """Per stage, the runnable tools with later amendments applied (retired tools removed)."""
        amend_guidance: dict[str, Guidance] = {}
        amend_scope: dict[str, Scope] = {}
        amended_by: dict[str, list[str]] = {}
        retired: set[str] = set()
        for t in self.all_artifacts():
            if t.kind == "usage_guidance":
                amend_guidance[t.target] = t.guidance
            elif t.kind == "scope_override":
                amend_scope[t.target] = t.scope
            elif t.kind == "tombstone":
                retired.add(t.target)
            else:
                continue
            amended_by.setdefault(t.target, []).append(t.id)
        out: list[list[ScopedTool]] = []
        for k, s in enumerate(self.stages):
            row = []
            for t in s.tools:
                if t.kind != "tool" or t.id in retired:
                    continue
                tt = t
                if t.id in amend_guidance:
                    tt = replace(tt, guidance=amend_guidance[t.id])
                if t.id in amend_scope:
                    tt = replace(tt, scope=amend_scope[t.id])
                row.append(ScopedTool(tt, k, tuple(amended_by.get(t.id, ()))))
            out.append(row)
        return out

    def prompt_patches(self) -> list[Tool]:
        """Prompt-patch artifacts in chain order (LLM reviewer only)."""
        return [t for t in self.all_artifacts() if t.kind == "prompt_patch"]

    def candidates(
        self,
        q: Question | QuestionView,
        effective: list[list[ScopedTool]] | None = None,
        *,
        scoped: bool = True,
    ) -> list[ScopedTool]:
        """The tools an answerer may inspect for ``q``, in the builtin's reading of the catalog.

        Scoped (the protocol): the tools whose scope matches ``q``, stage by stage, ranked within
        a stage by matcher score, then id. Unscoped (the ``w/o scope`` ablation): every tool is a
        candidate, ranked within a stage by :func:`description_score` (the builtin's matcher over
        tool descriptions alone), then id.
        """
        eff = effective if effective is not None else self.effective()
        tokens = question_tokens(q.question)
        out: list[ScopedTool] = []
        for row in eff:
            if scoped:
                hits = [st for st in row if scope_matches(st.tool.scope, q, tokens)]
                hits.sort(key=lambda st: (-st.tool.scope.matcher.score(tokens), st.tool.id))
            else:
                hits = sorted(row, key=lambda st: (-description_score(st.tool, tokens), st.tool.id))
            out.extend(hits)
        return out

    def shortlist(
        self,
        q: Question | QuestionView,
        max_tools: int = 3,
        effective: list[list[ScopedTool]] | None = None,
        *,
        scoped: bool = True,
    ) -> list[list[ScopedTool]]:
        """Per stage, the tools the builtin inspects for ``q``: at most ``max_tools`` over the chain.

        The first ``max_tools`` of :meth:`candidates` (stages taken in order), grouped by stage.
        """
        eff = effective if effective is not None else self.effective()
        chosen = self.candidates(q, eff, scoped=scoped)[: max(max_tools, 0)]
        return self.rows(eff, [st.tool.id for st in chosen])

    @staticmethod
    def rows(effective: list[list[ScopedTool]], ids: Sequence[str]) -> list[list[ScopedTool]]:
        """Per stage, the tools named in ``ids``, in the order ``ids`` names them."""
        rank = {tid: i for i, tid in enumerate(ids)}
        return [
            sorted((st for st in row if st.tool.id in rank), key=lambda st: rank[st.tool.id])
            for row in effective
        ]

    def scope_catalog(self) -> str:
        """Structured text of the whole chain for an LLM reviewer."""
        head = f"# Tool library (root: {self.root}; {self.n_rounds} evolved stage(s))"
        return "\n\n".join([head, *(s.scope_catalog() for s in self.stages)]) + "\n"

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Write the library folder, replacing an existing one.

        The new folder is written beside the old one and swapped in by two renames; a process killed
        between them leaves ``<name>.old``, which :meth:`load` and the next :meth:`save` restore.
        """
        dest = Path(path)
        _recover(dest)
        tmp = dest.with_name(dest.name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        head = {
            "schema_version": SCHEMA_VERSION,
            "root": self.root,
            "stages": [s.folder for s in self.stages],
        }
        (tmp / "library.json").write_text(canonical_json(head), encoding="utf-8")
        for s in self.stages:
            sd = tmp / s.folder
            sd.mkdir()
            (sd / "stage.json").write_text(canonical_json(s.to_dict()), encoding="utf-8")
            for t in s.tools:
                if t.source:
                    (sd / f"{t.id}.py").write_text(t.source, encoding="utf-8")
        if dest.exists():
            old = dest.with_name(dest.name + ".old")
            if old.exists():
                shutil.rmtree(old)
            dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old)
        else:
            tmp.rename(dest)
        return dest

    @classmethod
    def load(cls, path: str | Path) -> Library:
        """Read a library folder written by :meth:`save` (hashes are verified)."""
        src = Path(path)
        _recover(src)
        head_file = src / "library.json"
        if not head_file.exists():
            raise FileNotFoundError(f"{src} is not a tsevo library (no library.json)")
        head = json.loads(head_file.read_text(encoding="utf-8"))
        if head.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"{head_file}: unsupported schema_version {head.get('schema_version')}"
            )
        stages = []
        for folder in head["stages"]:
            sd = src / folder
            d = json.loads((sd / "stage.json").read_text(encoding="utf-8"))
            tools = []
            for td in d["tools"]:
                f = sd / f"{td['id']}.py"
                source = f.read_text(encoding="utf-8") if f.exists() else ""
                tools.append(_verified_tool(td, source, f, sd / "stage.json"))
            stages.append(
                Stage(
                    round=int(d["round"]),
                    tools=tuple(tools),
                    label=d.get("label", ""),
                    notes=d.get("notes", ""),
                )
            )
        return cls(root=head["root"], stages=tuple(stages))

    def summary(self) -> list[dict[str, Any]]:
        """One dict per artifact (stage, id, kind, description, measurement) for quick tables."""
        return [
            {
                "stage": s.round,
                "id": t.id,
                "kind": t.kind,
                "description": t.description,
                "measurement": t.contract.measurement,
                "target": t.target,
            }
            for s in self.stages
            for t in s.tools
        ]


def description_score(tool: Tool, tokens: frozenset[str]) -> float:
    """How much a tool's description speaks of a question: the share of its words the question has.

    The builtin answerer's matcher over tool descriptions alone (the ``w/o scope`` ablation, where
    tools carry no structured scope); 0 for a tool without a description.
    """
    words = question_tokens(tool.description)
    return len(words & tokens) / len(words) if words else 0.0


def _verified_tool(td: dict[str, Any], source: str, src_file: Path, stage_file: Path) -> Tool:
    """A tool read from a library folder, refused unless its stored content hash matches.

    Raises:
        ValueError: naming the file at fault: the tool's source (edited after saving, or
            missing) or ``stage.json`` (no hash, or edited metadata).
    """
    if not td.get("hash"):
        raise ValueError(
            f"{stage_file}: tool {td.get('id')!r} has no stored hash; a library folder whose "
            "content cannot be verified is refused (save it again with Library.save)"
        )
    try:
        return Tool.from_dict(td, source=source)
    except ValueError as e:
        where = src_file if src_file.exists() else stage_file
        raise ValueError(
            f"{where}: tool {td.get('id')!r} does not match the hash stored in {stage_file} "
            f"(edited after it was saved?): {e}"
        ) from e


def _recover(dest: Path) -> None:
    """Restore ``<dest>.old`` when a save was killed between its two renames."""
    old = dest.with_name(dest.name + ".old")
    if old.exists() and not dest.exists():
        old.rename(dest)
    elif old.exists() and dest.exists():
        shutil.rmtree(old)


def slug(text: str, maxlen: int = 24) -> str:
    """File- and id-safe slug of a text."""
    s = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return s[:maxlen] or "x"


def library_from_tools(root: str, tools: Sequence[Tool], label: str | None = None) -> Library:
    """A library whose root stage holds ``tools`` (used by the roots and tests)."""
    return Library(root=root, stages=(Stage(0, tuple(tools), label or f"root:{root}"),))
