"""The sandbox's OS layer (seccomp-bpf + Landlock) with the first layers assumed bypassed.

The attack primitives below are *trusted* code registered in the worker by a preload hook: they
call ``open``, ``socket``, ``os.execv`` and ``os.fork`` directly inside the child, exactly as tool
code would after getting past the AST gate and the facades. Each attack runs twice: under the OS
layer it must be refused, and with the layer off it must reach its target (a file read, a file
written, a TCP connection accepted by this test, a program executed), so the test can fail.

Under ``CI=true`` a machine where the layer cannot be installed fails these tests instead of
skipping them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_sandbox import make_input
from tsevo.library.sandbox import Sandbox, SandboxError, SandboxLimits
from tsevo.library.sandbox.limits import ALLOW_ENV
from tsevo.library.sandbox.oslayer import DENIED
from tsevo.library.sandbox.process import worker_env

PRELOAD = ("tests.test_sandbox_oslayer:register_attack_primitives",)
LIMITS = SandboxLimits(cpu_s_per_item=2.0, wall_s_per_item=4.0, memory_mb=256)
STRICT = os.environ.get("CI", "").lower() == "true"


def register_attack_primitives() -> None:
    """Raw I/O primitives: what escaped tool code could call (runs inside the worker)."""
    from tsevo.library.primitives import primitive

    @primitive(group="oslayer_test", outputs=("n",))
    def osl_read(path: str) -> dict[str, Any]:
        with open(path, "rb") as f:
            return {"n": len(f.read())}

    @primitive(group="oslayer_test", outputs=("n",))
    def osl_write(path: str) -> dict[str, Any]:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)
        return {"n": 1}

    @primitive(group="oslayer_test", outputs=("n",))
    def osl_connect(port: int) -> dict[str, Any]:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"x")
        s.close()
        return {"n": 1}

    @primitive(group="oslayer_test", outputs=("n",))
    def osl_exec(marker: str) -> dict[str, Any]:
        for fd in range(3, 16):  # keep the result pipe open until the program has run
            with contextlib.suppress(OSError):
                os.set_inheritable(fd, True)
        os.execv("/usr/bin/touch", ["touch", marker])
        return {"n": 0}  # never reached when exec succeeds

    @primitive(group="oslayer_test", outputs=("n",))
    def osl_fork() -> dict[str, Any]:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return {"n": 1}

    @primitive(group="oslayer_test", outputs=("n",))
    def osl_signal_parent() -> dict[str, Any]:
        os.kill(os.getppid(), 0)  # signal 0: only asks whether the zygote may be signalled
        return {"n": 1}

    @primitive(group="oslayer_test", outputs=("n",))
    def osl_secret_env() -> dict[str, Any]:
        return {"n": sum(1 for k in os.environ if k.endswith("_API_KEY"))}


def _box(mode: str) -> Sandbox:
    return Sandbox(SandboxLimits(**{**LIMITS.__dict__, "os_layer": mode}), preload=PRELOAD)


@pytest.fixture(scope="module")
def on() -> Iterator[Sandbox]:
    box = _box("best")
    layers = box.os_layers()
    if not layers.get("seccomp"):
        box.close()
        msg = f"the seccomp layer cannot be installed here: {layers}"
        if STRICT:
            pytest.fail(msg)
        pytest.skip(msg)
    yield box
    box.close()


@pytest.fixture(scope="module")
def off() -> Iterator[Sandbox]:
    box = _box("off")
    assert box.os_layers() == {
        "mode": "off",
        "seccomp": False,
        "landlock": False,
        "landlock_abi": 0,
        "problems": [],
    }
    yield box
    box.close()


def _need_landlock(box: Sandbox) -> None:
    if not box.os_layers().get("landlock"):
        msg = "Landlock is not available on this kernel (file reads are not confined)"
        if STRICT:
            pytest.fail(msg)
        pytest.skip(msg)


def _call(box: Sandbox, expr: str) -> Any:
    return box.run_one(f"def attack():\n    return {expr}\n", make_input())


def _refused(res: Any) -> None:
    assert res.status == "error" and res.error_kind == "exception", res
    assert "PermissionError" in (res.error or ""), res.error


# ------------------------------------------------------------------------------------------
# the four attack classes, each blocked with the layer on and reached with it off


def test_file_read(on: Sandbox, off: Sandbox, tmp_path: Path) -> None:
    _need_landlock(on)
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-not-for-tools")
    _refused(_call(on, f"P.osl_read({str(secret)!r})"))
    _refused(_call(on, "P.osl_read('/etc/passwd')"))
    _refused(_call(on, "P.osl_read('/proc/self/environ')"))
    reached = _call(off, f"P.osl_read({str(secret)!r})")
    assert reached.status == "ok" and reached.outputs == {"n": len("hunter2-not-for-tools")}


def test_file_write(on: Sandbox, off: Sandbox, tmp_path: Path) -> None:
    target = tmp_path / "planted.txt"
    _refused(_call(on, f"P.osl_write({str(target)!r})"))
    assert not target.exists()
    reached = _call(off, f"P.osl_write({str(target)!r})")
    assert reached.status == "ok" and target.exists()  # rlimits alone let an empty file appear


def test_socket(on: Sandbox, off: Sandbox) -> None:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        srv.settimeout(5)
        port = srv.getsockname()[1]
        _refused(_call(on, f"P.osl_connect({port})"))
        reached = _call(off, f"P.osl_connect({port})")
        assert reached.status == "ok", reached
        conn, _ = srv.accept()
        with conn:
            assert conn.recv(1) == b"x"


def test_exec(on: Sandbox, off: Sandbox, tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    _refused(_call(on, f"P.osl_exec({str(marker)!r})"))
    assert not marker.exists()
    res = _call(off, f"P.osl_exec({str(marker)!r})")
    assert res.status == "error"  # the child became `touch` and never answered
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), "with the layer off the exec reached its program"


def test_fork_and_signals(on: Sandbox, off: Sandbox) -> None:
    _refused(_call(on, "P.osl_fork()"))
    _refused(_call(on, "P.osl_signal_parent()"))
    assert _call(off, "P.osl_fork()").status == "ok"
    assert _call(off, "P.osl_signal_parent()").status == "ok"


def test_measurements_are_unchanged_under_the_layer(on: Sandbox, off: Sandbox) -> None:
    """Every single-series primitive gives the same result with the layer on and off."""
    from tsevo.library.primitives import CATALOG

    names = sorted(n for n, spec in CATALOG.items() if spec.arity == "single")
    assert len(names) >= 20
    inputs = [make_input(f"q{i}", n=200, seed=i) for i in range(3)]
    for name in names:
        src = f"def m():\n    return P.{name}(ctx.primary())\n"
        a, b = on.run(src, inputs), off.run(src, inputs)
        assert [(r.status, r.outputs, r.error) for r in a] == [
            (r.status, r.outputs, r.error) for r in b
        ], name
        assert all(r.status == "ok" for r in a) or "PermissionError" not in str(a), name


def test_layer_report_and_denied_list(on: Sandbox) -> None:
    rep = on.os_layers()
    assert rep["seccomp"] is True and rep["mode"] == "best"
    for name in ("execve", "socket", "connect", "ptrace", "clone", "openat2", "unlink"):
        assert name in DENIED


# ------------------------------------------------------------------------------------------
# refusing to start unconfined, and the explicit opt-out


def break_seccomp() -> None:
    """Preload hook: make libseccomp look missing in this worker."""
    from tsevo.library.sandbox import oslayer

    oslayer.pyseccomp = None
    oslayer._SECCOMP_MISSING = "disabled by the test"  # type: ignore[attr-defined]


def test_refuses_to_start_unconfined_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    lim = SandboxLimits(**{**LIMITS.__dict__, "os_layer": "require"})
    box = Sandbox(lim, preload=("tests.test_sandbox_oslayer:break_seccomp",))
    with pytest.raises(SandboxError) as err:
        box.start()
    msg = str(err.value)
    assert "seccomp" in msg and "--allow-unconfined-sandbox" in msg and ALLOW_ENV in msg
    box.close()
    monkeypatch.setenv(ALLOW_ENV, "1")
    with Sandbox(lim, preload=("tests.test_sandbox_oslayer:break_seccomp",)) as box:
        rep = box.os_layers()
        assert rep["seccomp"] is False and rep["mode"] == "best"
        assert any("disabled by the test" in p for p in rep["problems"])
        assert box.run_one("def f():\n    return {'n': 1}\n", make_input()).outputs == {"n": 1}


def test_worker_never_sees_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    assert "OPENAI_API_KEY" not in worker_env(os.environ)
    assert "TOKENIZERS_PARALLELISM" in worker_env({"TOKENIZERS_PARALLELISM": "false"})
    with contextlib.closing(_box("off")) as box:
        assert _call(box, "P.osl_secret_env()").outputs == {"n": 0}
