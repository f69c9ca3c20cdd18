"""Library roots ``L_0``: ``empty`` (the default), ``chronos`` and ``expert`` (ablations and baselines).

* ``empty`` holds no tool: the agent is the bare base answerer.
* ``chronos`` holds one forecasting wrapper tool around ``P.forecast`` (the Chronos backend when
  ``$TSEVO_CHRONOS_MODEL`` names a local model, the statistical fallback otherwise) that reports
  forecast-versus-history evidence for questions about the future.
* ``expert`` is a hand-written library in the spirit of TimeART's 21 tools (numerical operators,
  pattern detectors, correlation analysers, forecast/anomaly; see ``research/ts_qa_sources.md``),
  written over the primitives catalog. Its scopes are keyword matchers over question words, and its
  reading rules carry thresholds set by judgement (textbook cut-offs such as p < 0.05 or
  |r| > 0.3), never fitted on any data. Like any human-written library it will help on some
  question kinds and hurt or stay silent on others: its option vocabulary (``"upward"``,
  ``"increase"``, ``"yes"``...) and its assumptions (series 1 is the cause in a Granger question)
  are an expert's guesses, which is exactly the human–agent tool misalignment the method studies.
  It is never the default root.

The ``chronos`` and ``expert`` roots are data, not code: each is a saved library folder
(``roots-data/<name>/``: ``library.json``, ``stage_0/stage.json`` and one ``stage_0/<id>.py`` per
tool source) shipped as package data and read with :meth:`Library.load`, which verifies every
tool's content hash. To change a root tool, load the root, ``dataclasses.replace`` the tool and
write the folder back with :meth:`Library.save` (hand edits of a source or of ``stage.json`` no
longer match the stored hash, so the root refuses to load until it is saved again).

Every root tool has the id ``root.<slug>`` (stable, never reused for other content), round 0 and
provenance ``action="root", author="human"``. Each source is one zero-argument function that the
sandbox gate accepts (no imports, no ``while``, no ``_`` names).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from .library import Library, library_from_tools
from .tool import Tool

__all__ = ["ROOTS_DATA", "ROOT_NAMES", "chronos_tools", "expert_tools", "make_root", "root_folder"]

ROOT_NAMES: tuple[str, ...] = ("empty", "chronos", "expert")
"""Names accepted by :func:`make_root`."""

ROOTS_DATA = "roots-data"
"""Package-data folder (inside ``tsevo.library``) holding one saved library folder per data root."""

_DATA_ROOTS = ("chronos", "expert")


def _copy_tree(src: Traversable, dest: Path) -> None:
    """Copy a resource folder to disk (for a package that is not on the file system, e.g. a zip)."""
    dest.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.is_dir():
            _copy_tree(item, dest / item.name)
        else:
            (dest / item.name).write_bytes(item.read_bytes())


@contextmanager
def root_folder(name: str) -> Iterator[Path]:
    """The package-data folder of a data root, as a path on disk while the context is open.

    Args:
        name: ``"chronos"`` or ``"expert"``.

    Yields:
        The folder :meth:`Library.load` reads (a temporary copy when the package is zipped).
    """
    if name not in _DATA_ROOTS:
        raise ValueError(f"{name!r} is not a data root; data roots: {', '.join(_DATA_ROOTS)}")
    res = resources.files("tsevo.library").joinpath(ROOTS_DATA, name)
    if isinstance(res, Path):
        yield res
        return
    tmp = Path(tempfile.mkdtemp(prefix=f"tsevo-root-{name}-"))
    try:
        _copy_tree(res, tmp / name)
        yield tmp / name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_root(name: str) -> Library:
    with root_folder(name) as folder:
        lib = Library.load(folder)
    if lib.root != name:
        raise ValueError(f"root folder {name!r} holds the {lib.root!r} library")
    return lib


def chronos_tools() -> list[Tool]:
    """The ``chronos`` root: one forecasting wrapper tool.

    Returns:
        A one-element list holding ``root.chronos_forecast``.
    """
    return list(_load_root("chronos").all_artifacts())


def expert_tools() -> list[Tool]:
    """The ``expert`` root: a hand-written library of ~25 tools over the primitives.

    Thresholds are set by judgement (textbook cut-offs), not fitted; see the module docstring.

    Returns:
        The tools in catalog order (ids ``root.<slug>``).
    """
    return list(_load_root("expert").all_artifacts())


def make_root(name: str = "empty") -> Library:
    """Build a root library ``L_0`` by name.

    Args:
        name: ``"empty"`` (default: no tools), ``"chronos"`` (one forecasting wrapper tool) or
            ``"expert"`` (the hand-written baseline library).

    Returns:
        A :class:`~tsevo.library.library.Library` whose only stage is the root (round 0).

    Raises:
        ValueError: For an unknown root name (the message lists the known names).
    """
    if name not in ROOT_NAMES:
        raise ValueError(f"unknown root {name!r}; known roots: {', '.join(ROOT_NAMES)}")
    if name == "empty":
        return library_from_tools(name, [])
    return _load_root(name)
