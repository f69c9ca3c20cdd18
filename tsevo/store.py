"""The run store: one folder per run, append-only, resumable, pandas-friendly.

Layout (see DESIGN.md §3)::

    runs/<run_id>/
      config.json  manifest.json          protocol config; versions, backend, model ids (no credentials)
      events.jsonl                        append-only event log (one JSON object per line)
      suite.parquet                       the suite the run answers
      evals/<arm>.jsonl                   answer records per arm, appended as they are produced
      rounds/r1/...                       per-round artifacts (parquet / JSON / candidate folders)
      library/                            the deployed library (written once per accepted round)

Every file is written atomically (temp file + rename) except the append-only logs, whose readers
ignore a torn last line. Killing a run at any point and rerunning the same command resumes it:
finished steps are marked by ``step_done`` events and their artifacts are read back, and answer
records already stored are never recomputed.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["RecordLog", "RunStore", "atomic_write_bytes", "atomic_write_text"]

_SECRET_HINTS = (
    "api_key",
    "apikey",
    "access_token",
    "auth_token",
    "bearer",
    "secret",
    "password",
    "authorization",
)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (readers see the old or the new file, never half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    """Write text atomically (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _check_no_secrets(obj: Any, where: str) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if isinstance(k, str) and any(h in k.lower() for h in _SECRET_HINTS) and v:
                raise ValueError(f"refusing to store a credential-like field {k!r} in {where}")
            _check_no_secrets(v, where)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _check_no_secrets(v, where)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, default=_default) + "\n"


def _default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, set | frozenset):
        return sorted(o)
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"{type(o).__name__} is not JSON-serializable")


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if i >= len(lines) - 2:  # a torn last line from a killed writer: ignore it
                return
            raise


class RecordLog:
    """An append-only JSONL log of dicts keyed by a field (e.g. answer records by ``qid``).

    A record is appended (and flushed) as soon as it exists, so a killed run loses nothing it had
    computed; reading keeps the last record per key.
    """

    def __init__(self, path: Path, key: str = "qid") -> None:
        self.path = path
        self.key = key

    def load(self) -> dict[str, dict[str, Any]]:
        """All stored records by key (last write wins)."""
        return {str(r[self.key]): r for r in _read_jsonl(self.path)}

    def append(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append records and flush them to disk."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._heal()
        with self.path.open("a", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r, sort_keys=True, ensure_ascii=False, default=_default) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def _heal(self) -> None:
        """Truncate a torn last line left by a killed writer before appending."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
            cut = data.rfind(b"\n") + 1
            fh.seek(cut)
            fh.truncate()


class RunStore:
    """One run folder. Create with :meth:`create` or reopen with :meth:`open`.

    Args:
        root: The run folder.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

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
        cfg_path = store.root / "config.json"
        _check_no_secrets(config, "config.json")
        if cfg_path.exists():
            old = json.loads(cfg_path.read_text(encoding="utf-8"))
            new = json.loads(_dumps(config))
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
        atomic_write_text(cfg_path, _dumps(config))
        man = dict(default_manifest())
        man.update(manifest or {})
        _check_no_secrets(man, "manifest.json")
        atomic_write_text(store.root / "manifest.json", _dumps(man))
        store.event("create")
        return store

    @classmethod
    def open(cls, root: str | Path) -> RunStore:
        """Open an existing run folder."""
        store = cls(root)
        if not (store.root / "config.json").exists():
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
        """Write JSON atomically (sorted keys, indented)."""
        _check_no_secrets(obj, str(rel))
        p = self.root / rel
        atomic_write_text(p, _dumps(obj))
        return p

    def read_json(self, rel: str | Path) -> Any:
        """Read a JSON file."""
        return json.loads((self.root / rel).read_text(encoding="utf-8"))

    def write_text(self, rel: str | Path, text: str) -> Path:
        """Write text atomically."""
        p = self.root / rel
        atomic_write_text(p, text)
        return p

    def read_text(self, rel: str | Path) -> str:
        """Read a text file."""
        return (self.root / rel).read_text(encoding="utf-8")

    def write_parquet(self, rel: str | Path, df: Any) -> Path:
        """Write a DataFrame as parquet atomically."""
        import io

        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        p = self.root / rel
        atomic_write_bytes(p, buf.getvalue())
        return p

    def read_parquet(self, rel: str | Path) -> Any:
        """Read a parquet file as a DataFrame."""
        import pandas as pd

        return pd.read_parquet(self.root / rel)

    def records(self, name: str, key: str = "qid") -> RecordLog:
        """The append-only record log ``evals/<name>.jsonl``."""
        return RecordLog(self.root / "evals" / f"{name}.jsonl", key)

    @property
    def config(self) -> dict[str, Any]:
        """The run's config."""
        cfg: dict[str, Any] = self.read_json("config.json")
        return cfg

    @property
    def manifest(self) -> dict[str, Any]:
        """The run's manifest."""
        man: dict[str, Any] = self.read_json("manifest.json")
        return man

    # ------------------------------------------------------------------ events
    def event(self, kind: str, **data: Any) -> None:
        """Append one event (``kind`` plus JSON data) to ``events.jsonl``."""
        _check_no_secrets(data, "events.jsonl")
        rec = {"kind": kind, "t": round(time.time(), 3), **data}
        RecordLog(self.root / "events.jsonl", key="kind").append([rec])

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """All events (optionally of one kind), in order."""
        evs = list(_read_jsonl(self.root / "events.jsonl"))
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
    from importlib import metadata

    import tsevo

    versions: dict[str, str | None] = {}
    for pkg in ("numpy", "scipy", "pandas", "scikit-learn", "pyarrow", "pydantic", "openai"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "tsevo": tsevo.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
    }
