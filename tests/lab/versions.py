"""Version hygiene: the widget packages in the venv against what the lab's front end loaded.

Three places must agree for a widget to come alive in a room:

* the kernel side: ``ipywidgets`` (and ``anywidget``) in the venv the ``tsevo`` kernel runs;
* the Python packages that ship the front end: ``jupyterlab_widgets`` (the widget manager,
  ``@jupyter-widgets/jupyterlab-manager``) and ``anywidget`` (its lab extension);
* what the browser actually loaded: the ``remoteEntry`` script of each federated extension and the
  ``package.json`` the server serves next to it.

:func:`widget_versions` collects all three; :func:`version_problems` lists every disagreement:
ipywidgets' own pins on ``jupyterlab_widgets``/``widgetsnbextension`` unmet, a front-end manager of
the wrong major for the kernel's ipywidgets (7 needs 3, 8 needs 5), a loaded bundle that is not the
one the installed package ships (a stale copy shadowing it from another data directory), an
extension the page never loaded, or a kernel that is not the venv's Python.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import sys
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from .servers import LabServer

#: Front-end extension name -> the Python distribution that ships it.
SHIPPED_BY = {
    "@jupyter-widgets/jupyterlab-manager": "jupyterlab_widgets",
    "anywidget": "anywidget",
}
#: ipywidgets major -> the jupyterlab-manager major that speaks its protocol.
MANAGER_MAJOR = {7: 3, 8: 5}
PYTHON_PACKAGES = (
    "ipywidgets",
    "jupyterlab_widgets",
    "widgetsnbextension",
    "anywidget",
    "jupyterlab",
)


def _shipped(dist: str, ext: str) -> dict[str, Any]:
    """The package.json of ``ext`` as installed by the distribution ``dist``."""
    for f in md.distribution(dist).files or ():
        if str(f).endswith(f"labextensions/{ext}/package.json"):
            d = json.loads(Path(str(f.locate())).read_text(encoding="utf-8"))
            return {"version": d["version"], "load": d["jupyterlab"]["_build"]["load"]}
    return {}


def widget_versions(lab: LabServer, loaded_scripts: list[str]) -> dict[str, Any]:
    """Versions in the venv, shipped by its packages, and loaded by the page."""
    venv = {name: md.version(name) for name in PYTHON_PACKAGES}
    front: dict[str, Any] = {}
    for ext, dist in SHIPPED_BY.items():
        prefix = f"{lab.base}/lab/extensions/{ext}/"
        loaded = [u for u in loaded_scripts if u.startswith(prefix) and "remoteEntry" in u]
        served = json.loads(lab.get_text(f"/lab/extensions/{ext}/package.json"))
        front[ext] = {
            "loaded": [u[len(prefix) :] for u in loaded],
            "served_version": served["version"],
            "served_load": served["jupyterlab"]["_build"]["load"],
            "shipped_by": dist,
            "shipped": _shipped(dist, ext),
        }
    spec = lab.api("GET", "/api/kernelspecs")["kernelspecs"]["tsevo"]["spec"]
    return {"venv": venv, "front_end": front, "kernel_argv0": spec["argv"][0]}


def version_problems(v: dict[str, Any]) -> list[str]:
    """Every disagreement between the venv, the shipped front end and the loaded front end."""
    problems = []
    venv = v["venv"]
    for req in md.requires("ipywidgets") or ():
        r = Requirement(req)
        if r.marker is None and r.name in venv and venv[r.name] not in r.specifier:
            problems.append(f"ipywidgets {venv['ipywidgets']} needs {req}, venv has {venv[r.name]}")
    for ext, f in v["front_end"].items():
        if not f["loaded"]:
            problems.append(f"the page never loaded {ext}'s front end")
        norm = [u.lstrip("./") for u in f["loaded"]]
        if f["served_load"].lstrip("./") not in norm and f["loaded"]:
            problems.append(
                f"{ext}: loaded {f['loaded']}, the server's package.json says {f['served_load']}"
            )
        shipped = f["shipped"]
        if not shipped:
            problems.append(f"{ext}: {f['shipped_by']} in the venv ships no front end")
        elif (shipped["version"], shipped["load"]) != (f["served_version"], f["served_load"]):
            problems.append(
                f"{ext}: the front end served is {f['served_version']} ({f['served_load']}), "
                f"{f['shipped_by']} {venv[f['shipped_by']]} in the venv ships {shipped['version']} "
                f"({shipped['load']}): a stale copy shadows it"
            )
    manager = v["front_end"]["@jupyter-widgets/jupyterlab-manager"]["served_version"]
    want = MANAGER_MAJOR.get(int(venv["ipywidgets"].split(".")[0]))
    if want is None or int(manager.split(".")[0]) != want:
        problems.append(
            f"ipywidgets {venv['ipywidgets']} needs jupyterlab-manager {want}.x, front end has {manager}"
        )
    anyw = v["front_end"]["anywidget"]["served_version"]
    if anyw != venv["anywidget"]:
        problems.append(f"anywidget {venv['anywidget']} in the venv, {anyw} in the front end")
    if Path(v["kernel_argv0"]).resolve().parent != Path(sys.executable).resolve().parent:
        problems.append(
            f"the tsevo kernel runs {v['kernel_argv0']}, not the venv's {sys.executable}"
        )
    return problems


def versions_table(v: dict[str, Any]) -> str:
    """The versions as printed by the tier."""
    lines = ["widget versions (venv | shipped by its package | served and loaded by the page):"]
    lines += [f"  venv  {k:22s} {ver}" for k, ver in v["venv"].items()]
    for ext, f in v["front_end"].items():
        lines.append(
            f"  front {ext:36s} served {f['served_version']} loaded {', '.join(f['loaded']) or '-'}"
            f" | shipped by {f['shipped_by']}: {f['shipped'].get('version', '-')}"
        )
    lines.append(f"  kernel tsevo: {v['kernel_argv0']}")
    return "\n".join(lines)
