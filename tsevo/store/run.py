"""The run store: one run folder, append-only, resumable, pandas-friendly.

:class:`RunStore` reads and writes the files that :class:`~tsevo.store.layout.RunLayout` names.
Killing a run at any point and rerunning the same command resumes it: finished steps are marked by
``step_done`` events and their artifacts are read back, and answer records already stored are never
recomputed.
"""

from __future__ import annotations

import io
import json
import platform
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from .files import RecordLog, atomic_write_bytes, atomic_write_text, check_no_secrets, dumps
from .files import read_jsonl as _read_jsonl
from .layout import RunLayout

__all__ = ["RunStore", "default_manifest"]


class RunStore:
    """One run folder. Create with :meth:`create` or reopen with :meth:`open`.

    Paths passed to the readers and writers are either relative to the run folder or paths from
    :attr:`layout` (which are absolute or rooted at the run folder).

    Args:
        root: The run folder.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.layout = RunLayout(self.root)

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def create(
        cls,
        root: str | Path,
        config: Mapping[str, Any],
        manifest: Mapping[str, Any] | None = None,
        *,
        resume: bool = True,
    ) -> RunStore:
        """Create a run folder, or reopen it when it holds the same config (resume).

        Raises:
            ValueError: when the folder holds a run with a different config (never overwritten).
        """
        store = cls(root)
        cfg_path = store.layout.config
        check_no_secrets(config, "config.json")
        if cfg_path.exists():
            old = json.loads(cfg_path.read_text(encoding="utf-8"))
            new = json.loads(dumps(config))
            if old != new:
                diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
                raise ValueError(
                    f"{store.root} already holds a run with a different config (differs in {diff}); "
                    "choose another --out or delete it"
                )
            if not resume:
                raise ValueError(
                    f"{store.root} already holds a run; pass resume=True to continue it"
                )
            store.event("resume")
            return store
        store.root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(cfg_path, dumps(config))
        man = dict(default_manifest())
        man.update(manifest or {})
        check_no_secrets(man, "manifest.json")
        atomic_write_text(store.layout.manifest, dumps(man))
        store.event("create")
        return store

    @classmethod
    def open(cls, root: str | Path) -> RunStore:
        """Open an existing run folder."""
        store = cls(root)
        if not store.layout.is_run():
            raise FileNotFoundError(f"{store.root} is not a tsevo run (no config.json)")
        return store

    # ------------------------------------------------------------------ files
    def path(self, rel: str | Path) -> Path:
        """Absolute path of a file inside the run."""
        return self.root / rel

    def exists(self, rel: str | Path) -> bool:
        """True when the file exists."""
        return (self.root / rel).exists()

    def write_json(self, rel: str | Path, obj: Any) -> Path:
        """Write JSON atomically (sorted keys, indented; credential-like keys refused)."""
        check_no_secrets(obj, self.layout.rel(self.root / rel))
        p = self.root / rel
        atomic_write_text(p, dumps(obj))
        return p

    def read_json(self, rel: str | Path) -> Any:
        """Read a JSON file."""
        return json.loads((self.root / rel).read_text(encoding="utf-8"))

    def read_json_or(self, rel: str | Path, default: Any = None) -> Any:
        """Read a JSON file, or return ``default`` when it does not exist."""
        p = self.root / rel
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else default

    def write_text(self, rel: str | Path, text: str) -> Path:
        """Write text atomically."""
        p = self.root / rel
        atomic_write_text(p, text)
        return p

    def read_text(self, rel: str | Path) -> str:
        """Read a text file."""
        return (self.root / rel).read_text(encoding="utf-8")

    def write_parquet(self, rel: str | Path, df: pd.DataFrame) -> Path:
        """Write a DataFrame as parquet atomically."""
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        p = self.root / rel
        atomic_write_bytes(p, buf.getvalue())
        return p

    def read_parquet(self, rel: str | Path) -> pd.DataFrame:
        """Read a parquet file as a DataFrame."""
        return pd.read_parquet(self.root / rel)

    def save(self, rel: str | Path, obj: Any) -> Path:
        """Write an object that saves itself into a folder atomically (a library: ``obj.save(path)``)."""
        p = self.root / rel
        obj.save(p)
        return p

    def records(self, arm: str, key: str = "qid") -> RecordLog:
        """The append-only record log of one evaluation arm."""
        return RecordLog(self.layout.eval_log(arm), key)

    @property
    def config(self) -> dict[str, Any]:
        """The run's config."""
        cfg: dict[str, Any] = self.read_json(self.layout.config)
        return cfg

    @property
    def manifest(self) -> dict[str, Any]:
        """The run's manifest."""
        man: dict[str, Any] = self.read_json(self.layout.manifest)
        return man

    def update_manifest(self, **fields: Any) -> None:
        """Set top-level manifest fields (e.g. which sandbox layers this session ran under)."""
        man = self.manifest
        man.update(fields)
        check_no_secrets(man, "manifest.json")
        atomic_write_text(self.layout.manifest, dumps(man))

    # ------------------------------------------------------------------ events
    def event(self, kind: str, **data: Any) -> None:
        """Append one event (``kind`` plus JSON data) to the event log."""
        check_no_secrets(data, "events.jsonl")
        rec = {"kind": kind, "t": round(time.time(), 3), **data}
        RecordLog(self.layout.events, key="kind").append([rec])

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """All events (optionally of one kind), in order."""
        evs = list(_read_jsonl(self.layout.events))
        return [e for e in evs if kind is None or e.get("kind") == kind]

    def step_done(self, round_: int, step: str) -> dict[str, Any] | None:
        """The ``step_done`` event of a round's step, or None if it has not finished."""
        for e in reversed(self.events("step_done")):
            if e.get("round") == round_ and e.get("step") == step:
                return e
        return None

    def mark_done(self, round_: int, step: str, **summary: Any) -> None:
        """Record that a round's step finished (its artifacts are on disk)."""
        self.event("step_done", round=round_, step=step, **summary)


def default_manifest() -> dict[str, Any]:
    """Versions of the interpreter and key packages (never credentials)."""
    versions: dict[str, str | None] = {}
    for pkg in (
        "tsevo",
        "numpy",
        "scipy",
        "pandas",
        "scikit-learn",
        "pyarrow",
        "pydantic",
        "openai",
    ):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "tsevo": versions.pop("tsevo") or "unknown",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
    }
