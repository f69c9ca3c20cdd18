"""The processes the lab tier starts and stops by PID: ``jupyter lab`` and ``tsevo serve-scripted``.

:class:`LabServer` starts ``jupyter lab`` from the venv on 127.0.0.1 with a random free port and a
random token, headless (``--no-browser``), every Jupyter and IPython directory inside a private
folder (config, data, runtime, workspaces, user settings), so nothing of the user's setup takes part
and nothing is written outside it. :meth:`LabServer.stop` stops it by its PID (SIGTERM, then SIGKILL
after a grace period), then any kernel process it left behind by their PIDs, and checks the port is
free again.

:class:`ScriptedProcess` runs ``python -m tsevo serve-scripted --port 0`` and reads its base URL
from the banner.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.prefix) / "bin"
#: Front-end plugins disabled in every lab started here: the news prompt would cover the notebook.
QUIET_PLUGINS = ("@jupyterlab/apputils-extension:announcements",)


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def descendants(pid: int) -> list[int]:
    """PIDs of the process's children, grandchildren, ... (Linux /proc)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(x) for x in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def alive(pid: int) -> bool:
    """Whether a PID is running (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop_pid(proc: subprocess.Popen[Any], grace_s: float = 20.0) -> str:
    """Stop a process we started, by its PID, and what it had started; returns a report line."""
    pid = proc.pid
    kids = descendants(pid)
    t0 = time.perf_counter()
    if proc.poll() is None:
        os.kill(pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            proc.wait(timeout=10)
    left = [k for k in kids if alive(k)]
    for k in left:  # kernels the server did not shut down: stop them by their own PIDs
        os.kill(k, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(alive(k) for k in left) and time.monotonic() < deadline:
        time.sleep(0.1)
    return (
        f"stopped pid {pid} (exit {proc.returncode}) in {time.perf_counter() - t0:.1f} s; "
        f"{len(kids)} child process(es), {len(left)} needed a kill"
    )


class LabServer:
    """``jupyter lab`` from the venv, headless, on 127.0.0.1 with a random port and token.

    Args:
        root: The folder the lab serves (notebooks are opened relative to it).
        home: A private folder for Jupyter's and IPython's state, the log and the page config.
        env: Extra environment for the server and its kernels.
        disabled: Front-end extensions or plugins to disable (page config), e.g.
            ``@jupyter-widgets/jupyterlab-manager`` to show the tier failing.
    """

    def __init__(
        self,
        root: Path,
        home: Path,
        *,
        env: Mapping[str, str] | None = None,
        disabled: Iterable[str] = (),
    ) -> None:
        self.root, self.home = Path(root), Path(home)
        self.extra_env = dict(env or {})
        self.disabled = [*QUIET_PLUGINS, *disabled]
        self.port = 0
        self.token = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.home / "jupyter-lab.log"
        self.stop_report = ""
        self.started_s = 0.0

    # ------------------------------------------------------------------ lifecycle
    def environment(self) -> dict[str, str]:
        """The server's (and its kernels') environment: private Jupyter dirs, offline, seeded."""
        h = self.home
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "TSEVO_"))}
        env.pop("MPLBACKEND", None)  # kernels in the room use the inline backend
        env.update(
            JUPYTER_CONFIG_DIR=str(h / "config"),
            JUPYTER_DATA_DIR=str(h / "data"),
            JUPYTER_RUNTIME_DIR=str(h / "runtime"),
            JUPYTERLAB_WORKSPACES_DIR=str(h / "workspaces"),
            JUPYTERLAB_SETTINGS_DIR=str(h / "user-settings"),
            JUPYTER_PLATFORM_DIRS="1",
            IPYTHONDIR=str(h / "ipython"),
            XDG_CACHE_HOME=str(h / "xdg-cache"),
            XDG_CONFIG_HOME=str(h / "xdg-config"),
            HF_HUB_OFFLINE="1",
            PYTHONHASHSEED="0",
        )
        env.update(self.extra_env)
        return env

    def start(self, timeout_s: float = 90.0) -> LabServer:
        """Start the server and wait until its API answers with the token."""
        labconfig = self.home / "config" / "labconfig"
        labconfig.mkdir(parents=True, exist_ok=True)
        page = {"disabledExtensions": {name: True for name in self.disabled}}
        (labconfig / "page_config.json").write_text(json.dumps(page), encoding="utf-8")
        self.port, self.token = free_port(), secrets.token_hex(24)
        cmd = [
            str(VENV_BIN / "jupyter-lab"),
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.extension_manager=readonly",
        ]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        t0 = time.perf_counter()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.root,
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                self.api("GET", "/api/status")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"jupyter lab did not answer in {timeout_s} s") from None
                time.sleep(0.3)
        self.started_s = time.perf_counter() - t0
        return self

    def stop(self) -> str:
        """Stop the server by its PID (and kernels left behind by theirs); check the port is free."""
        if self.proc is None:
            return self.stop_report
        self.stop_report = "jupyter lab " + stop_pid(self.proc)
        deadline = time.monotonic() + 10
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.2)
        if port_open(self.port):
            raise RuntimeError(f"port {self.port} still open after stopping jupyter lab")
        self.proc = None
        return self.stop_report

    def __enter__(self) -> LabServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ access
    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, notebook: str) -> str:
        """The lab URL that opens a notebook alone (``reset``: no tabs restored from before)."""
        return f"{self.base}/lab/tree/{notebook}?reset&token={self.token}"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """A REST call with the token; the parsed JSON reply (None for an empty one)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def get_text(self, path: str) -> str:
        """A file the server serves (e.g. an extension's package.json), as text."""
        req = urllib.request.Request(
            self.base + path, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            return str(r.read().decode("utf-8"))

    def tail(self, n: int = 40) -> str:
        """The last lines of the server's log."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class ScriptedProcess:
    """``python -m tsevo serve-scripted --port 0`` as a child process, stopped by its PID.

    Args:
        log: File that receives the server's output (banner and status lines).
        args: Extra command-line arguments (``--suite``, ``--seed``).
    """

    def __init__(self, log: Path, *args: str) -> None:
        self.log = Path(log)
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""
        self.stop_report = ""

    def start(self, timeout_s: float = 60.0) -> ScriptedProcess:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}
        cmd = [sys.executable, "-m", "tsevo", "serve-scripted", "--port", "0", *self.args]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [*cmd, "--status-every", "2"],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while not self.base_url:
            for line in self.text().splitlines():
                if line.startswith("base_url: "):
                    self.base_url = line.split(": ", 1)[1].strip()
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve-scripted exited:\n{self.text()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"serve-scripted printed no base_url:\n{self.text()}")
            time.sleep(0.2)
        return self

    def text(self) -> str:
        """Everything the server printed so far."""
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> str:
        """Stop it by its PID (SIGTERM: it prints a last status line)."""
        if self.proc is not None:
            self.stop_report = "serve-scripted " + stop_pid(self.proc, grace_s=10)
            self.proc = None
        return self.stop_report

    def __enter__(self) -> ScriptedProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
