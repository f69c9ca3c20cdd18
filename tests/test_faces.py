"""The faces of the package: ``import tsevo`` offers the main verbs lazily; subpackages list theirs."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VERBS = (
    "evolve",
    "load_suite",
    "Suite",
    "Question",
    "Library",
    "Agent",
    "RoleSet",
    "ProtocolConfig",
)
SUBPACKAGES = sorted(
    "tsevo." + p.parent.relative_to(REPO / "tsevo").as_posix().replace("/", ".")
    for p in (REPO / "tsevo").rglob("__init__.py")
    if p.parent != REPO / "tsevo" and "-" not in p.parent.name
)


def test_import_tsevo_imports_nothing_but_itself() -> None:
    code = (
        "import sys, tsevo\n"
        "mods = sorted(m for m in sys.modules if m.startswith('tsevo'))\n"
        "heavy = [m for m in ('torch', 'chronos', 'jupyter_client', 'ipykernel', 'matplotlib',"
        " 'pandas', 'sklearn', 'openai') if m in sys.modules]\n"
        "print(mods, heavy)\n"
        "sys.exit(0 if mods == ['tsevo'] and not heavy else 1)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_verbs_resolve_and_are_listed() -> None:
    import tsevo

    assert set(VERBS) <= set(tsevo.__all__) and set(VERBS) <= set(dir(tsevo))
    for name in VERBS:
        assert getattr(tsevo, name) is not None
    with pytest.raises(AttributeError):
        tsevo.no_such_name  # noqa: B018


def test_tsevo_evolve_is_the_engine_and_its_package() -> None:
    import tsevo
    import tsevo.evolve.run as run_mod

    assert callable(tsevo.evolve)
    assert tsevo.evolve.evolve is run_mod.evolve
    assert tsevo.evolve.ProtocolConfig is tsevo.ProtocolConfig


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_every_subpackage_lists_its_public_names(name: str) -> None:
    mod = importlib.import_module(name)
    names = getattr(mod, "__all__", None)
    assert names, f"{name} has no __all__"
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"


def test_the_readme_face_loads_a_file_of_ones_own_questions() -> None:
    import tsevo

    suite, report = tsevo.load_suite(REPO / "experiments" / "example_questions.jsonl")
    assert report.ok and len(suite) == 5
    assert suite.split(seed=0).splits
