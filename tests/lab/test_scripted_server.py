"""``tsevo serve-scripted``: the scripted server for a room with no key says what it is (in make test).

The command is started as a child process on a free port and stopped by its PID; its banner, the
model list, a refused foreign model id and its last status line are checked. The served model id is
the one that lands in a run's manifest and in every reply (checked on the server object here, and
end to end in the lab tier's LLM notebook run).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tsevo.testing import SCRIPTED_MODEL, FakeOpenAIServer, scripted_server
from tsevo.testing.scripted import banner

from .servers import ScriptedProcess


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_serve_scripted_command_says_replies_are_computed(tmp_path: Path) -> None:
    with ScriptedProcess(tmp_path / "serve.log", "--suite", "synthetic:tiny", "--seed", "5") as srv:
        text = srv.text()
        with urllib.request.urlopen(srv.base_url + "/models", timeout=10) as r:
            models = [m["id"] for m in json.loads(r.read())["data"]]
        status, reply = _post(
            srv.base_url, {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        )
        bad_status, bad = _post(
            srv.base_url, {"model": SCRIPTED_MODEL, "messages": [{"role": "user", "content": "hi"}]}
        )
    assert srv.base_url.startswith("http://127.0.0.1:")
    assert "THE REPLIES ARE COMPUTED BY TSEVO'S BUILTIN ROLES, NOT BY A LANGUAGE MODEL" in text
    assert f'model = "{SCRIPTED_MODEL}"' in text and "288 questions, protocol seed 5" in text
    assert models == [SCRIPTED_MODEL]
    assert status == 404 and SCRIPTED_MODEL in reply["error"]["message"]
    assert bad_status == 400 and "not a tsevo role request" in bad["error"]["message"]
    final = srv.text().splitlines()[-1]
    assert final.startswith("stopped. [scripted]") and "not a model" in final
    assert "1 refused for another model id" in final and "1 refused (not a role" in final
    assert "exit 0" in srv.stop_report


def test_served_model_names_every_reply() -> None:
    with FakeOpenAIServer(["hello"], served_model="m-served") as srv:
        ok, reply = _post(
            srv.base_url, {"model": "m-served", "messages": [{"role": "user", "content": "x"}]}
        )
        status, _ = _post(
            srv.base_url, {"model": "other", "messages": [{"role": "user", "content": "x"}]}
        )
    assert ok == 200 and reply["model"] == "m-served"
    assert status == 404


def test_banner_tells_how_to_point_a_notebook() -> None:
    from tsevo import notebook as nb

    cfg = nb.QuickstartConfig()
    srv, service = scripted_server(
        list(cfg.suite()), seed=cfg.protocol().seed, suite_ref=cfg.suite_ref
    )
    srv.base_url = "http://127.0.0.1:8765/v1"
    text = banner(srv, service)
    assert 'backend = "llm"; base_url = "http://127.0.0.1:8765/v1"' in text
    assert "--suite synthetic:tiny --seed 5" in text
    assert "not a model" in service.status()


def test_status_counts_nothing_before_requests() -> None:
    from tsevo import notebook as nb

    cfg = nb.QuickstartConfig()
    _, service = scripted_server(list(cfg.suite()), seed=5, suite_ref=cfg.suite_ref)
    assert "0 replies computed by the builtin roles, not a model (none yet)" in service.status()
