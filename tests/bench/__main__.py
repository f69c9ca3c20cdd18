"""``python -m tests.bench``: run every ``bench_*.py`` module's ``main()`` and print its numbers."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import tests.bench as pkg


def run(only: list[str]) -> int:
    names = sorted(
        m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("bench_")
    )
    if only:
        names = [n for n in names if any(o in n for o in only)]
    for name in names:
        mod = importlib.import_module(f"tests.bench.{name}")
        print(f"\n=== {name} ===", flush=True)
        t0 = time.perf_counter()
        mod.main()
        print(f"({name}: {time.perf_counter() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
