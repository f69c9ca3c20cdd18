"""The architecture, checked: one-way layers, no import cycles, no hidden imports, small modules.

* import-linter's contract (``.importlinter``) holds: ``lint-imports`` also runs in ``make test``;
  here it runs once more so a failing contract shows up in pytest's report too.
* grimp builds the whole import graph, function-local imports included: no two modules and no two
  subpackages import each other, directly or through others.
* Imports inside functions name only the heavy or optional packages of
  :data:`tsevo.optional.LAZY_IMPORTS`.
* No module is over 500 lines, except data tables.
* No module outside ``tsevo.store`` spells a run-relative path.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tsevo.optional import LAZY_IMPORTS

REPO = Path(__file__).resolve().parents[1]
PACKAGE_FILES = sorted(
    [p for p in (REPO / "tsevo").rglob("*.py")] + [p for p in (REPO / "widgets").rglob("*.py")]
)
MAX_LINES = 500
#: Modules that are data tables, not logic (allowed past MAX_LINES).
DATA_TABLES: frozenset[str] = frozenset()


def _rel(p: Path) -> str:
    return p.relative_to(REPO).as_posix()


def _graph():
    grimp = pytest.importorskip("grimp")
    sys.path.insert(0, str(REPO))
    try:
        return grimp.build_graph("tsevo", "widgets", cache_dir=None)
    finally:
        sys.path.remove(str(REPO))


def _sccs(nodes, edges):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _package_of(module: str, depth: int) -> str:
    parts = module.split(".")
    return ".".join(parts[: min(depth, len(parts))])


def test_import_linter_contract_holds():
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.skip("import-linter is not installed")
    res = subprocess.run([str(exe)], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_no_module_cycles_counting_function_local_imports():
    g = _graph()
    edges = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    assert _sccs(g.modules, edges) == []


@pytest.mark.parametrize("depth", [2, 3])
def test_no_subpackage_cycles(depth):
    """Squash modules into their subpackages (``tsevo.roles``, ``tsevo.roles.llm``): still acyclic."""
    g = _graph()
    edges: dict[str, set[str]] = {}
    nodes = set()
    for m in g.modules:
        a = _package_of(m, depth)
        nodes.add(a)
        for n in g.find_modules_directly_imported_by(m):
            b = _package_of(n, depth)
            if a != b and not (a.startswith(b + ".") or b.startswith(a + ".")):
                edges.setdefault(a, set()).add(b)
    assert _sccs(nodes, edges) == []


def _local_imports(tree: ast.AST):
    """Imports inside a function body (at any depth)."""
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        yield node.lineno, a.name
                elif isinstance(node, ast.ImportFrom):
                    yield node.lineno, ("." * node.level) + (node.module or "")


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=_rel)
def test_function_local_imports_only_for_heavy_dependencies(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = sorted(
        {
            f"{_rel(path)}:{line} imports {name!r}"
            for line, name in _local_imports(tree)
            if name.split(".")[0] not in LAZY_IMPORTS
        }
    )
    assert not bad, "import at the top of the module instead:\n" + "\n".join(bad)


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=_rel)
def test_modules_stay_small(path):
    if _rel(path) in DATA_TABLES:
        pytest.skip("data table")
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{_rel(path)} has {n} lines (at most {MAX_LINES})"


_RUN_PATHS = re.compile(
    r"""["'](?:rounds/|evals/|llm/|notebook_metrics|suite\.parquet|round\.json|events\.jsonl|"""
    r"""manifest\.json|base_pass\.parquet|val_paired\.parquet|prefilter\.parquet|candidate_library/|"""
    r"""llm_cache\.sqlite|buckets\.json|contracts\.json|gate\.json|prune\.json|test\.json)"""
)


@pytest.mark.parametrize(
    "path", [p for p in PACKAGE_FILES if "tsevo/store/" not in _rel(p)], ids=_rel
)
def test_no_run_path_literals_outside_the_store(path):
    hits = [
        f"{_rel(path)}:{i}: {line.strip()}"
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _RUN_PATHS.search(line)
    ]
    assert not hits, "name run paths through tsevo.store.RunLayout:\n" + "\n".join(hits)
