"""Layer 5: the OS-level confinement of every forked child (seccomp-bpf and Landlock).

The zygote prepares the layer once (:func:`prepare`): it compiles a seccomp-bpf program with
``pyseccomp`` (over libseccomp) and, where the kernel offers Landlock, builds a ruleset with the
``landlock`` bindings. It then forks one probe child that installs both and checks that a socket
is refused (:meth:`OsLayer.probe`), so the run knows at start which layers are really active.
Each child installs the layer (:meth:`OsLayer.install`) after its rlimits and before any tool code
runs: a ``prctl(PR_SET_SECCOMP)`` with the precompiled program and a ``landlock_restrict_self``
with the inherited ruleset, a few microseconds.

The seccomp program allows by default and refuses (``EPERM``) what a measurement never needs:
``execve``/``execveat``, creating processes or threads (``fork``, ``vfork``, ``clone``,
``clone3``), every socket call, ``ptrace`` and cross-process memory access, sending signals,
``open``/``openat`` with a write access mode or ``O_CREAT``/``O_TRUNC`` (and ``creat``,
``openat2``), every call that changes the file system (unlink, rename, mkdir, link, chmod,
chown, truncate, xattrs, mount), changing rlimits, credentials or namespaces, loading kernel
modules or BPF, ``io_uring``, ``userfaultfd``, ``memfd_create`` and ``prctl``. A syscall of
another architecture kills the process (libseccomp's default). Landlock handles every file
system access right the kernel knows and grants read access only beneath the interpreter's
prefixes, the import path and the shared libraries, so a child cannot read a run folder, a
home directory or ``/proc``; reading is the one thing seccomp cannot tell apart from an import.

Modes (:attr:`SandboxLimits.os_layer`): ``"require"`` (the default) refuses to start the sandbox
when the seccomp filter cannot be installed; ``"best"`` uses what is available and reports what
was active; ``"off"`` installs nothing (for comparisons and debugging). The environment variable
``TSEVO_ALLOW_UNCONFINED_SANDBOX=1`` (the command line's ``--allow-unconfined-sandbox``) turns
``"require"`` into ``"best"``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from .limits import ALLOW_ENV, MODES, effective_mode

try:  # the bindings load libseccomp / probe the kernel at import; a missing one is a problem
    import pyseccomp
except (ImportError, RuntimeError, OSError) as _e:  # pragma: no cover - no libseccomp
    pyseccomp = None
    _SECCOMP_MISSING = f"{type(_e).__name__}: {_e}"
try:
    import landlock
except (ImportError, OSError) as _e:  # pragma: no cover
    landlock = None
    _LANDLOCK_MISSING = f"{type(_e).__name__}: {_e}"

__all__ = ["ALLOW_ENV", "MODES", "OsLayer", "UnconfinedError", "effective_mode", "prepare"]

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SYS_LANDLOCK_RESTRICT_SELF = 446

_O_WRONLY, _O_RDWR, _O_CREAT, _O_TRUNC = os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC

#: Refused outright (EPERM). Names unknown on this architecture are skipped.
_DENIED_GROUPS = (
    # run another program, make processes or threads
    "execve execveat fork vfork clone clone3 ",
    # network
    "socket socketpair connect bind listen accept accept4 sendto sendmsg sendmmsg recvfrom ",
    "recvmsg recvmmsg getsockopt setsockopt shutdown getpeername getsockname ",
    # other processes
    "ptrace process_vm_readv process_vm_writev kcmp pidfd_open pidfd_getfd pidfd_send_signal ",
    "kill tkill tgkill rt_sigqueueinfo rt_tgsigqueueinfo process_madvise ",
    # changing the file system
    "creat openat2 unlink unlinkat rename renameat renameat2 mkdir mkdirat rmdir link linkat ",
    "symlink symlinkat chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat truncate ",
    "ftruncate fallocate mknod mknodat utime utimes utimensat futimesat setxattr lsetxattr ",
    "fsetxattr removexattr lremovexattr fremovexattr name_to_handle_at open_by_handle_at ",
    "mount umount2 pivot_root chroot move_mount open_tree fsopen fsconfig fsmount fspick ",
    "mount_setattr quotactl acct swapon swapoff ",
    # privileges, limits, namespaces, the kernel
    "setrlimit prlimit64 setuid setgid setreuid setregid setresuid setresgid setfsuid setfsgid ",
    "setgroups capset unshare setns bpf perf_event_open init_module finit_module delete_module ",
    "kexec_load kexec_file_load reboot settimeofday clock_settime clock_adjtime adjtimex ",
    "sethostname setdomainname iopl ioperm syslog keyctl add_key request_key userfaultfd ",
    "io_uring_setup io_uring_enter io_uring_register memfd_create memfd_secret personality prctl ",
    "seccomp landlock_create_ruleset landlock_add_rule",
)
DENIED = tuple(name for group in _DENIED_GROUPS for name in group.split())

#: Read-only trees a child may open files beneath (besides the interpreter's prefixes and path).
SYSTEM_READ = ("/usr/lib", "/usr/lib64", "/usr/local/lib", "/lib", "/lib64", "/usr/share/zoneinfo")


class UnconfinedError(RuntimeError):
    """The OS layer is required but cannot be installed on this machine."""


@dataclass
class OsLayer:
    """What the zygote prepared: the seccomp program, the Landlock ruleset, and what is active.

    Attributes:
        mode: ``"require"``, ``"best"`` or ``"off"``.
        bpf: The compiled seccomp program (``struct sock_filter`` array) or empty.
        ruleset_fd: The Landlock ruleset's descriptor (inherited by children) or -1.
        landlock_abi: The kernel's Landlock ABI version (0: none).
        problems: Why a layer is not available.
    """

    mode: str
    bpf: bytes = b""
    ruleset_fd: int = -1
    landlock_abi: int = 0
    problems: list[str] = field(default_factory=list)
    seccomp_active: bool = False
    landlock_active: bool = False
    _prog: Any = None

    def report(self) -> dict[str, Any]:
        """What the run manifest records: which layers were active, and why not."""
        return {
            "mode": self.mode,
            "seccomp": self.seccomp_active,
            "landlock": self.landlock_active,
            "landlock_abi": self.landlock_abi,
            "problems": list(self.problems),
        }

    def keep_fds(self) -> tuple[int, ...]:
        """Descriptors a child must keep open until it installs the layer."""
        return (self.ruleset_fd,) if self.ruleset_fd >= 0 and self.landlock_active else ()

    def install(self, lib: Any) -> None:  # pragma: no cover - in the child
        """Install the active layers in this process (a child); raise ``OSError`` on failure.

        Requires ``PR_SET_NO_NEW_PRIVS`` (set by the child before). Landlock goes first: the
        seccomp program refuses the Landlock calls.
        """
        if self.landlock_active:
            if lib.syscall(_SYS_LANDLOCK_RESTRICT_SELF, self.ruleset_fd, 0) != 0:
                e = ctypes.get_errno()
                raise OSError(e, f"landlock_restrict_self: {os.strerror(e)}")
            os.close(self.ruleset_fd)
        prog = ctypes.byref(self._prog) if self.seccomp_active else None
        if prog is not None and lib.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, prog, 0, 0):
            e = ctypes.get_errno()
            raise OSError(e, f"prctl(PR_SET_SECCOMP): {os.strerror(e)}")

    def probe(self, lib: Any) -> None:
        """Fork a child that installs the prepared layers; keep only what really worked."""
        if self.mode == "off" or not (self.bpf or self.ruleset_fd >= 0):
            return
        self.seccomp_active = bool(self.bpf)
        self.landlock_active = self.ruleset_fd >= 0
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the probe child
            code = 0
            try:
                lib.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
                try:
                    self.install(lib)
                except OSError:
                    code = 3
                else:
                    code = _self_test(self.seccomp_active, self.landlock_active)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 4
        if code:
            what = {1: "a socket was not refused", 2: "a file outside the allowed trees was read"}
            self.problems.append(
                "probe child failed: " + what.get(code, f"installing the layer failed ({code})")
            )
            self.seccomp_active = self.landlock_active = False


def _self_test(seccomp: bool, landlock: bool) -> int:  # pragma: no cover - in the probe child
    if seccomp:
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
            return 1
        except PermissionError:
            pass
    if landlock:
        try:
            with open("/proc/self/status", "rb"):
                return 2
        except PermissionError:
            pass
    return 0


def prepare(mode: str, lib: Any, extra_read: tuple[str, ...] = ()) -> OsLayer:
    """Build the layer in the zygote and probe it; raise :class:`UnconfinedError` when required.

    Args:
        mode: ``"require"``, ``"best"`` or ``"off"`` (after :func:`effective_mode`).
        lib: The C library (``prctl``, ``syscall``) or None.
        extra_read: More trees children may read (e.g. a configured forecast cache or model).
    """
    layer = OsLayer(mode)
    if mode == "off":
        return layer
    if lib is None or not sys.platform.startswith("linux"):
        layer.problems.append("not Linux, or no C library with prctl")
    else:
        try:
            layer.bpf = _compile_seccomp()
            layer._prog = _sock_fprog(layer.bpf)
        except Exception as e:  # libseccomp missing, unknown architecture, ...
            layer.problems.append(f"seccomp: {type(e).__name__}: {e}")
        try:
            layer.landlock_abi, layer.ruleset_fd = _landlock_ruleset(extra_read)
        except Exception as e:
            layer.problems.append(f"landlock: {type(e).__name__}: {e}")
        layer.probe(lib)
    if mode == "require" and not layer.seccomp_active:
        raise UnconfinedError(
            "the sandbox's OS layer (seccomp-bpf) cannot be installed here ("
            + "; ".join(layer.problems or ["unknown reason"])
            + "); refusing to run tools without a file, network and exec boundary. Opt out "
            f"explicitly with --allow-unconfined-sandbox, {ALLOW_ENV}=1 or "
            "SandboxLimits(os_layer='best')"
        )
    return layer


def _compile_seccomp() -> bytes:
    if pyseccomp is None:  # pragma: no cover
        raise RuntimeError(f"pyseccomp unavailable ({_SECCOMP_MISSING})")
    sc = pyseccomp
    eperm = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED:
        try:
            f.add_rule(eperm, name)
        except (ValueError, RuntimeError, OSError):
            continue  # not a syscall of this architecture
    writes = (
        (_O_WRONLY, _O_WRONLY),
        (_O_RDWR, _O_RDWR),
        (_O_CREAT, _O_CREAT),
        (_O_TRUNC, _O_TRUNC),
    )
    for name, arg in (("open", 1), ("openat", 2)):
        for mask, value in writes:
            try:
                f.add_rule(eperm, name, sc.Arg(arg, sc.MASKED_EQ, mask, value))
            except (ValueError, RuntimeError, OSError):
                continue
    with tempfile.TemporaryFile() as fh:
        f.export_bpf(fh)
        fh.seek(0)
        return fh.read()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _sock_fprog(bpf: bytes) -> Any:
    if not bpf or len(bpf) % 8:
        raise ValueError("empty or malformed seccomp program")
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(len(bpf) // 8, ctypes.cast(buf, ctypes.c_void_p))
    prog._buf = buf  # keep the program's memory alive with the struct
    return prog


def read_trees(extra: tuple[str, ...] = ()) -> list[str]:
    """The existing trees a child may read beneath (deduplicated, in a stable order).

    The interpreter's prefixes, the system's shared libraries, the folders of the packages this
    process has imported (e.g. tsevo itself; not the working directory), a configured forecast
    cache or Chronos model, and ``extra``.
    """
    cands = [sys.prefix, sys.base_prefix, sys.exec_prefix, *SYSTEM_READ, *extra]
    for name, mod in sorted(sys.modules.items()):
        if "." in name or mod is None:
            continue
        paths = list(getattr(mod, "__path__", None) or [])
        f = getattr(mod, "__file__", None)
        cands += [str(p) for p in paths] if paths else ([f] if isinstance(f, str) else [])
    env = os.environ
    cands += [env[v] for v in ("TSEVO_FORECAST_CACHE_DIR", "TSEVO_CHRONOS_MODEL") if env.get(v)]
    if env.get("TSEVO_CHRONOS_MODEL"):  # a model from the hub cache (never the token beside it)
        cands.append(env.get("HF_HUB_CACHE") or os.path.join(env.get("HF_HOME", ""), "hub"))
    out: list[str] = []
    for p in cands:
        rp = os.path.realpath(p)
        if os.path.exists(rp) and rp not in out and rp != "/":
            out.append(rp)
    return out


def _landlock_ruleset(extra: tuple[str, ...]) -> tuple[int, int]:
    if landlock is None:  # pragma: no cover
        raise RuntimeError(f"landlock bindings unavailable ({_LANDLOCK_MISSING})")
    abi = int(landlock.landlock_abi_version())
    rs = landlock.Ruleset()  # handles every access right this ABI knows: all refused by default
    read = landlock.FSAccess.READ_FILE | landlock.FSAccess.READ_DIR
    for tree in read_trees(extra):
        rules = read if os.path.isdir(tree) else landlock.FSAccess.READ_FILE
        rs.allow(tree, rules=rules)
    return abi, int(rs._fd)
