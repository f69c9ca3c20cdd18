"""Mara chains nested in the protocol config (issue 13).

``ProtocolConfig.marachain`` is saved only when not the default, so a chain-off run's
``config.json`` has no ``marachain`` key (its bytes as before chains); ``marachain.<knob>``
parameters round-trip through ``config.json``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import tsevo.evolve
from tsevo.evolve.config import ProtocolConfig
from tsevo.marachain import MaraConfig


def test_default_config_has_no_marachain_key() -> None:
    cfg = ProtocolConfig()
    assert cfg.marachain == MaraConfig()
    assert "marachain" not in cfg.to_dict()
    assert "marachain" not in json.loads(cfg.to_json())
    assert ProtocolConfig.from_params({"marachain.depth": 0}).to_json() == cfg.to_json()


def test_marachain_params_round_trip(tmp_path: Any) -> None:
    cfg = ProtocolConfig.from_params({"marachain.depth": 3})
    assert cfg.marachain.depth == 3 and cfg.marachain.enabled
    assert cfg.to_dict()["marachain"]["depth"] == 3
    back = ProtocolConfig.load(cfg.save(tmp_path / "config.json"))
    assert back == cfg and back.fingerprint() == cfg.fingerprint()
    assert ProtocolConfig.from_params({"seed": "2"}, base=cfg).marachain == cfg.marachain
    assert ProtocolConfig.from_params({"marachain": "marachain"}).marachain.depth == 5
    assert ProtocolConfig.from_params({"MARACHAIN.ACCEPTANCE": "code"}).marachain.acceptance == (
        "code"
    )
    with pytest.raises(TypeError):
        ProtocolConfig.from_params({"marachain.nope": 1})
    with pytest.raises(ValueError):
        ProtocolConfig.from_params({"marachain.depth": -1})
    rows = {r["name"]: r for r in cfg.describe()}
    assert rows["marachain"]["value"]["depth"] == 3 and rows["marachain"]["default"]["depth"] == 0


def _callers(name: str) -> set[tuple[str, str]]:
    """(module, top-level function) pairs of ``tsevo.evolve`` whose bodies call ``name``."""
    root = Path(tsevo.evolve.__file__).parent
    out = set()
    for path in sorted(root.glob("*.py")):
        for top in ast.parse(path.read_text()).body:
            if not isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            for node in ast.walk(top):
                if isinstance(node, ast.Call):
                    f = node.func
                    called = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                    if called == name:
                        out.add((path.stem, top.name))
    return out


def test_chains_start_only_in_the_synthesize_step() -> None:
    """Design §8.3, no chain after a failed gate or a prune: the round starts work groups (and so
    chains) in its synthesize step alone; the gate, prune and reconcile modules cannot reach a chain
    at all (an import-linter contract in pyproject.toml)."""
    assert _callers("run_group") == {("round", "synthesize")}
    assert _callers("_chain") == {("synthesize", "run_group")}
    assert _callers("run_chain") == {("synthesize", "_chain"), ("chain", "run_builtin_chain")}
    assert _callers("run_builtin_chain") <= {("synthesize", "_chain")}
