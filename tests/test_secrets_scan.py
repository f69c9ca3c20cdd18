"""A secrets scan after a scripted-server round: an injected fake key is found nowhere.

A fresh random key is put in the environment (``OPENAI_API_KEY`` and ``TSEVO_LLM_API_KEY``, where
tsevo reads it), a tiny round runs through the LLM backend against the scripted OpenAI-compatible
server, the run is exported as the offline HTML page, and then every file that the run, its caches
and the notebooks could have touched is scanned for the key: raw, base64- and hex-encoded. The
request bodies the server received are scanned too (the key belongs in the Authorization header
only), and the sandbox worker's environment must not carry it.
"""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path

import pytest

from tsevo.data.synthetic import make_suite
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.library.sandbox.process import worker_env
from tsevo.roles import RoleSet
from tsevo.roles.llm.config import LLMConfig, RoleConfigs
from tsevo.testing import BuiltinResponder, FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
MAX_BYTES = 64 << 20


def _needles(key: str) -> list[bytes]:
    raw = key.encode()
    return [raw, base64.b64encode(raw), raw.hex().encode(), key[8:].encode()]


def _scan(roots: list[Path], needles: list[bytes]) -> tuple[int, list[str]]:
    seen, hits = 0, []
    for root in roots:
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for p in files:
            if p.is_symlink() or p.stat().st_size > MAX_BYTES:
                continue
            data = p.read_bytes()
            seen += 1
            hits += [f"{p}: {n[:12]!r}..." for n in needles if n in data]
    return seen, hits


def test_fake_key_is_found_nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-proj-tsevoscan" + secrets.token_hex(20)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("TSEVO_LLM_API_KEY", key)
    for var, sub in (("TSEVO_FORECAST_CACHE_DIR", "forecast"), ("XDG_CACHE_HOME", "xdg")):
        monkeypatch.setenv(var, str(tmp_path / "caches" / sub))
    assert key not in json.dumps(worker_env({"OPENAI_API_KEY": key, "TSEVO_LLM_API_KEY": key}))

    suite = make_suite(8, seed=5)  # 96 questions: a whole round, quickly
    run = tmp_path / "run"
    with FakeOpenAIServer(BuiltinResponder(list(suite), seed=5)) as srv:
        cfg = RoleConfigs(
            LLMConfig(base_url=srv.base_url, model="scripted", concurrency=1, timeout_s=20.0)
        )
        with RoleSet.llm(cfg, run_dir=run) as roles:
            res = evolve(suite, roles=roles, config=ProtocolConfig(seed=5), out=run, log=print)
        bodies = json.dumps([r.body for r in srv.requests])
    assert res.rounds and srv.n_chat > 0
    assert (run / "llm_cache.sqlite").exists()  # the cache is part of the scan
    assert key not in bodies and key[8:] not in bodies

    from tsevo.widgets.export import default_assets_dir, export_html

    roots = [tmp_path, REPO / "notebooks"]
    if default_assets_dir().exists():  # the offline page needs the vendored widget assets
        export_html(run, tmp_path / "export" / "run.html")
    roots += [
        d for d in (REPO / ".cache" / "ipython", REPO / ".cache" / "jupyter-runtime") if d.exists()
    ]
    seen, hits = _scan(roots, _needles(key))
    assert seen > 20, f"scanned only {seen} files"
    assert not hits, "the key leaked:\n" + "\n".join(hits)
