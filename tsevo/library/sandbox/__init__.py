"""Run LLM- or template-written tool source over questions, deterministically and within limits.

A tool is the source of exactly one zero-argument function. It sees only a curated namespace and
must return a flat dict of finite numbers or booleans (or ``None`` to abstain)::

    def level_gap():
        if not ctx.has("primary"):
            return None
        y = ctx.series("primary")                      # a float64 copy
        return {"gap": float(np.mean(y[-50:]) - np.mean(y[:50]))}

    with Sandbox(SandboxLimits(cpu_s_per_item=1, wall_s_per_item=2)) as sb:
        results = sb.run(source, [ToolInput.from_question(q) for q in questions])

**What this is and is not.** CPython cannot be sandboxed from the inside (its own developers say
so), so layers 1-4 are defence in depth against the mistakes and occasional mischief of generated
code: they make accidental I/O, accidental non-determinism, runaway loops and answer leakage fail
loudly instead of silently corrupting an experiment. The file, network and exec boundary is
layer 5, enforced by the kernel in every child (seccomp-bpf, and Landlock where the kernel has
it): code that got past layers 1-2 still cannot read outside the interpreter's and packages'
trees, write or create files, open sockets, run programs, fork or signal other processes. It is
not a VM: a tool can still read its own child's memory and encode it in its numbers.

The layers:

1. **AST gate** (:func:`check_source`, in the parent, before any fork): one top-level function, no
   arguments or decorators; a node-type allowlist without ``import``, ``while``, ``with``,
   ``lambda``, classes, nested functions, ``global``/``nonlocal``, ``yield``/``await``, ``del``,
   walrus, ``match``, bare ``except`` or ``finally``; no names or attributes starting with ``_``;
   attribute names from a closed allowlist (facade members plus data-ish container methods, so
   ``tofile``, ``format``, ``format_map``, ``gi_frame``, ``f_back`` and every dunder are out by
   construction); reflective and module names forbidden; facades cannot be rebound; the tool may
   not name itself (no recursion); caps on source size, AST size, integer literals (1e12) and
   constant exponents/shifts (64); no bytes literals.
2. **Curated namespace** (:mod:`.facades`): ``ctx`` (read-only view of one question; series come
   back as copies; a covariate may be read only when the question text mentions it), ``P`` (the
   primitives catalog), ``np`` and ``math`` (facades over allowlisted functions, no I/O, no
   ``random``, no ``ctypeslib``/``lib``/``load``/``memmap``), a small explicit ``__builtins__``.
   Facades refuse attribute assignment; no module object is reachable.
3. **Process limits** (:mod:`.worker` and :mod:`.child`; frame and record formats in :mod:`.wire`):
   a pre-warmed zygote (BLAS threads = 1, ``PYTHONHASHSEED=0``, numpy/scipy/primitives imported
   once, GC frozen) keeps a spare child forked in advance and hands
   each batch to fresh children (up to ``max_children`` in parallel for large batches; a new spare
   is forked after the answer). A child drops its file descriptors, sets ``RLIMIT_AS``
   (``memory_mb`` on top of the zygote), ``RLIMIT_FSIZE=0``, ``RLIMIT_NOFILE``, ``RLIMIT_CORE=0``,
   ``RLIMIT_CPU`` (the batch backstop: per-item CPU x items + 2 s), ``RLIMIT_NPROC=0`` when not
   root, ``PR_SET_NO_NEW_PRIVS`` and a parent-death signal, and runs each item under a per-item CPU
   timer (``ITIMER_PROF``, armed once per run). Series samples reach children through one shared
   memory region the parent writes and children can only read; results come back through a
   per-child shared result buffer. Before each item the child records its index and start time,
   so the zygote sleeps until that item's wall-clock deadline, SIGKILLs a child that misses it,
   reads back every result the child finished and gives the remaining items to a new child: a
   runaway item costs only itself. The spare child closes its descriptors, sets its limits and
   warms up before a batch arrives.
   What these limits add over the first two layers: runaway code really stops (unlike a thread
   timeout), memory bombs fail with ``MemoryError`` instead of swapping the machine, writing file
   contents fails (``EFBIG``), opening many files fails, and nothing a tool does survives its batch
   (no state poisoning across calls). The worker's environment carries no credentials
   (:func:`.process.worker_env`).
4. **Output contract** (:mod:`.contract`), checked in the parent on an inert description the child
   produced, JSON or packed float64 values with their keys checked once per schema (the parent
   never unpickles tool-influenced data): ``None`` or a flat dict of at
   most ``max_outputs`` identifier-like keys (<= 64 chars) with finite float/int/bool values; no
   strings, so no option text can be returned. With ``check_determinism=True`` each item runs twice
   in the same child and disagreeing runs are errors.
5. **OS layer** (:mod:`.oslayer`), installed by each child after its rlimits and before any
   tool code runs: a seccomp-bpf program compiled once in the zygote (``pyseccomp`` over
   libseccomp) refuses exec, fork/clone, sockets, ptrace, signals to other processes, opening a
   file for writing or creating one, every file-system change, and changes of limits, credentials
   and namespaces (``EPERM``); Landlock (where the kernel offers it) allows reading only beneath
   the interpreter's prefixes, the shared libraries and the imported packages' folders. The zygote
   probes both at start; ``SandboxLimits.os_layer="require"`` (the default) refuses to start when
   seccomp cannot be installed, and :meth:`Sandbox.os_layers` reports what is active (the engine
   records it in the run manifest).

Error kinds in :class:`ToolResult`: ``gate``, ``timeout``, ``cpu``, ``memory``, ``exception``,
``contract``, ``nondeterministic``, ``covariate``.

Threading: a :class:`Sandbox` serializes calls with a lock (safe to share, no parallelism); use one
per thread to evaluate in parallel. Linux only (``fork``, ``/proc``, ``prctl``).
"""

from __future__ import annotations

from .contract import Outputs
from .facades import CovariateAccessError, MissingSeriesError, ToolContext, build_base_namespace
from .gate import GateReport, check_source
from .runner import ErrorKind, Sandbox, SandboxError, SandboxLimits, Status, ToolResult

__all__ = [
    "CovariateAccessError",
    "ErrorKind",
    "GateReport",
    "MissingSeriesError",
    "Outputs",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "Status",
    "ToolContext",
    "ToolResult",
    "build_base_namespace",
    "check_source",
]
