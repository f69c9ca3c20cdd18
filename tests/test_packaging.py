"""Packaging: tsevo.widgets in editable and wheel installs, a light core import, environment.yml
agreeing with pyproject.toml, and the `tsevo` Jupyter kernel registered in the venv."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import tsevo
from tsevo import widgets

REPO = Path(__file__).resolve().parents[1]
HEAVY = (
    "torch",
    "chronos",
    "jupyter_client",
    "ipykernel",
    "transformers",
    "jupyterlab",
    "notebook",
)


def _is_editable_checkout() -> bool:
    return Path(tsevo.__file__).resolve().parent == REPO / "tsevo"


def test_widgets_maps_to_top_level_folder_in_editable_install() -> None:
    if not _is_editable_checkout():
        pytest.skip(
            f"tsevo is imported from {tsevo.__file__}, not from this checkout (not editable)"
        )
    assert Path(widgets.__file__).resolve() == REPO / "widgets" / "__init__.py"
    assert widgets.__name__ == "tsevo.widgets"
    assert not (REPO / "tsevo" / "widgets").exists(), "widgets/ must stay at the top level"


def test_import_tsevo_is_light() -> None:
    code = (
        "import sys, tsevo, tsevo.data, tsevo.widgets\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(heavy)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, "import tsevo pulled in heavy modules: " + r.stdout + r.stderr


def _copy_sources(dst: Path) -> Path:
    """Copy what a build needs into ``dst`` so the build writes nothing into the shared tree."""
    dst.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    for name in ("pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in", "README.md", "LICENSE"):
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, dst / name)
    for name in ("tsevo", "widgets"):
        shutil.copytree(REPO / name, dst / name, ignore=ignore)
    return dst


def test_wheel_installs_into_fresh_venv(tmp_path: Path) -> None:
    pytest.importorskip(
        "build", reason="the `build` package (dev extra) is needed to build a wheel"
    )
    src = _copy_sources(tmp_path / "src")
    dist = tmp_path / "dist"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(dist),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = dist.glob("tsevo-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    for must in (
        "tsevo/__init__.py",
        "tsevo/widgets/__init__.py",
        "tsevo/py.typed",
        "tsevo/data/question.py",
    ):
        assert must in names, f"{must} missing from {whl.name}"
    assert not [n for n in names if n.startswith(("widgets/", "tests/"))], (
        "stray top-level packages"
    )
    ep = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "tsevo = tsevo.cli:main" in zipfile.ZipFile(whl).read(ep).decode()

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    vpy = venv / "bin" / "python"
    # pip from this environment installs into the fresh interpreter (offline, no dependencies).
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(vpy),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(whl),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (venv / "bin" / "tsevo").exists(), "console script not installed"

    fresh_sp = Path(
        subprocess.run(
            [str(vpy), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # Make tsevo's own dependencies (numpy, ...) importable without downloading: a .pth file
    # appends this environment's site-packages *after* the fresh one, so the wheel's copy wins.
    main_sp = Path(sysconfig.get_paths()["purelib"])
    (fresh_sp / "zz_tsevo_test_deps.pth").write_text(str(main_sp) + "\n")
    code = (
        "import json, sys\n"
        "import tsevo, tsevo.widgets, tsevo.data, numpy\n"
        "from tsevo.data import Question\n"
        "q = Question(id='w', source='s', task='t', question='q?', options=('a', 'b'),"
        " series={'y': [1.0, 2.0]}, primary=('y',))\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'tsevo': tsevo.__file__, 'widgets': tsevo.widgets.__file__,"
        " 'numpy': numpy.__file__, 'path': sys.path, 'fp': q.fingerprint, 'heavy': heavy}))\n"
    )
    r = subprocess.run([str(vpy), "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert Path(out["tsevo"]).resolve() == (fresh_sp / "tsevo" / "__init__.py").resolve()
    assert (
        Path(out["widgets"]).resolve() == (fresh_sp / "tsevo" / "widgets" / "__init__.py").resolve()
    )
    assert REPO not in Path(out["widgets"]).resolve().parents
    path = [str(Path(p).resolve()) for p in out["path"]]
    assert path.index(str(fresh_sp.resolve())) < path.index(str(main_sp.resolve()))
    assert Path(out["numpy"]).resolve().is_relative_to(main_sp.resolve())
    assert out["heavy"] == []
    assert len(out["fp"]) == 16


def _req_key(spec: str) -> tuple[str, str]:
    req = Requirement(spec)
    return canonicalize_name(req.name), str(req.specifier)


def test_environment_yml_agrees_with_pyproject() -> None:
    yaml = pytest.importorskip("yaml")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    want = {_req_key(s) for s in project["dependencies"]}
    want |= {_req_key(s) for s in project["optional-dependencies"]["dev"]}

    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda: list[str] = []
    pip: list[str] = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip += [p for p in dep["pip"] if not p.startswith("-")]  # skip "-e ."
        else:
            conda.append(dep)
    got = [_req_key(s) for s in conda + pip]
    names = [n for n, _ in got]
    assert len(names) == len(set(names)), (
        f"listed twice: {[n for n in names if names.count(n) > 1]}"
    )
    by_name = dict(got)
    assert by_name.pop("python") == project["requires-python"] == ">=3.11"
    assert by_name.pop("pip") == ""
    assert by_name.pop("torch") == "==2.13.0"
    got_set = set(by_name.items())
    assert got_set == want, (
        f"only in environment.yml: {got_set - want}; only in pyproject: {want - got_set}"
    )


def test_jupyter_kernel_registered_in_venv() -> None:
    kdir = Path(sys.prefix) / "share" / "jupyter" / "kernels" / "tsevo"
    made_by_setup = (Path(sys.prefix) / ".tsevo-setup-stamp").exists()
    if not kdir.exists():
        if made_by_setup:
            pytest.fail(f"`make setup` ran but registered no kernel at {kdir}")
        pytest.skip(f"{sys.prefix} was not made by `make setup` (no stamp, no kernel at {kdir})")
    spec = json.loads((kdir / "kernel.json").read_text())
    assert spec["display_name"] == "tsevo" and spec["language"] == "python"
    assert Path(spec["argv"][0]).resolve() == Path(sys.executable).resolve()
    assert "ipykernel_launcher" in spec["argv"]
    from jupyter_client.kernelspec import KernelSpecManager

    found = KernelSpecManager().find_kernel_specs()
    assert Path(found["tsevo"]).resolve() == kdir.resolve()
