"""Notebook hygiene and anatomy (no kernel), plus one papermill execution against a shared run.

Executing EVERY notebook is nbval's job (``make test``)::

    TSEVO_RUN_DIR=<prepared run> pytest --nbval-lax --nbval-current-env \
        --nbval-sanitize-with notebooks/nbval_sanitize.cfg notebooks/

(``notebooks/conftest.py`` prepares the run when the variable is unset.) Here: committed notebooks
carry no outputs, use the ``tsevo`` kernel, follow the anatomy (title, tagged ``parameters`` cell
that maps 1:1 onto the config with the same defaults, imports, no helper definitions, metrics
recorded last), and papermill's parameter injection reaches the config and the metrics file.
"""

from __future__ import annotations

import ast
import configparser
import re
from dataclasses import fields
from pathlib import Path

import nbformat
import pytest

from tsevo import analysis, studies
from tsevo import notebook as nb

NOTEBOOKS = studies.default_notebooks()
EXPECTED = [
    "00_quickstart",
    "10_data",
    "20_base_pass_and_failures",
    "25_taxonomy",
    "30_planning_and_synthesis",
    "35_mara_chains",
    "40_prefilter_and_gate",
    "50_deployment_and_test",
    "90_study_base_vs_evolved_vs_expert",
    "91_study_main_table",
    "92_study_transfer",
    "93_study_ablations",
    "94_study_gate_calibration",
    "95_study_multi_round",
    "96_study_funnel",
    "97_study_marachain",
    "98_study_taxonomy_coded",
]
KEEP = {"keep_output", "nbval-check-output"}


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _tags(cell: nbformat.NotebookNode) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def test_the_notebooks_are_all_there() -> None:
    assert [p.stem for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_clean(path: Path) -> None:
    book = _read(path)
    nbformat.validate(book)
    assert book.metadata["kernelspec"]["name"] == "tsevo"
    assert "widgets" not in book.metadata  # no saved widget state
    for cell in book.cells:
        if cell.cell_type != "code" or _tags(cell) & KEEP:
            continue
        assert cell.outputs == [], f"{path.name}: a code cell carries outputs (run nbstripout)"
        assert cell.execution_count is None, f"{path.name}: execution counts are not stripped"
        assert not {"execution", "collapsed", "scrolled"} & set(cell.metadata)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_anatomy(path: Path) -> None:
    book = _read(path)
    cells = book.cells
    title = cells[0]
    assert title.cell_type == "markdown" and title.source.startswith("# ")
    assert len(title.source.split("\n\n", 1)[-1]) > 200, "title cell needs a purpose paragraph"
    tagged = [i for i, c in enumerate(cells) if "parameters" in _tags(c)]
    assert tagged == [1]
    assert "import" in cells[2].source and "from tsevo" in cells[2].source
    assert f"{nb.CONFIGS[path.stem].__name__}.from_params(" in cells[3].source
    assert cells[-1].cell_type == "code" and "nb.record_metrics(" in cells[-1].source
    for cell in cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        logic = (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.Lambda, ast.If)
        bad = [type(n).__name__ for n in ast.walk(tree) if isinstance(n, logic)]
        assert not bad, f"{path.name}: logic in a notebook cell ({bad}); move it to tsevo/"
        private = [
            n.module or ""
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom)
            and (n.module or "").startswith("tsevo")
            and (
                any(p.startswith("_") for p in (n.module or "").split("."))
                or any(a.name.startswith("_") for a in n.names)
            )
        ]
        private += [
            n.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr.startswith("_")
        ]
        assert not private, f"{path.name}: private names from tsevo ({private}); use public ones"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_parameters_cell_maps_one_to_one_onto_the_config(path: Path) -> None:
    book = _read(path)
    src = book.cells[1].source
    values: dict[str, object] = {}
    for stmt in ast.parse(src).body:
        assert isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
        target = stmt.targets[0]
        assert isinstance(target, ast.Name)
        values[target.id] = ast.literal_eval(stmt.value)
    for line in src.splitlines():
        assert re.search(r"#\s*\S", line), f"{path.name}: parameter without a comment: {line}"
    cls = nb.CONFIGS[path.stem]
    assert list(values) == [f.name for f in fields(cls)]
    assert cls.from_params(values) == cls()  # same defaults in the notebook and the config
    cfg_call = book.cells[3].source
    for name in values:
        assert f"{name}={name}" in cfg_call


def test_sanitizer_file_is_valid() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(Path(studies.default_notebooks()[0]).parent / "nbval_sanitize.cfg")
    assert cfg.sections()
    for section in cfg.sections():
        pattern = re.compile(cfg[section]["regex"])
        assert cfg[section]["replace"]
        assert pattern.pattern
    durations = re.compile(cfg["durations"]["regex"])
    assert durations.sub("D", "round 1: accepted in 7.4 s") == "round 1: accepted in D"


def test_unknown_parameter_fails_before_a_kernel_starts(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unknown parameters"):
        studies.execute_notebooks(
            tmp_path, notebooks=[NOTEBOOKS[0]], out_dir=tmp_path, parameters={"sead": 1}
        )


def test_make_notebooks_gives_a_study_on_another_protocol_its_own_run_beside_the_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One room for every notebook, except studies whose protocol differs (``variant()``).

    ``make notebooks`` passes the room as every notebook's ``run_dir``; the multi-round study
    (two rounds) would otherwise refuse the one-round room.
    """
    import papermill

    seen: dict[str, str] = {}
    monkeypatch.setattr(
        papermill,
        "execute_notebook",
        lambda src, dst, parameters, **_: seen.setdefault(Path(src).stem, parameters["run_dir"]),
    )
    room = tmp_path / "room"
    books = [p for p in NOTEBOOKS if p.stem in ("10_data", "95_study_multi_round")]
    studies.execute_notebooks(room, notebooks=books, out_dir=tmp_path, log=lambda _: None)
    variant = nb.MultiRoundConfig(run_dir=str(room)).variant()
    assert variant
    assert seen == {
        "10_data": str(room.resolve()),
        "95_study_multi_round": str(room.resolve().with_name(f"room-{variant}")),
    }


def _kernel() -> str:
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager().find_kernel_specs()
    return "tsevo" if "tsevo" in specs else "python3"


def test_papermill_injects_parameters_and_records_metrics(tiny_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "executed"
    (written,) = studies.execute_notebooks(
        tiny_run,
        notebooks=[NOTEBOOKS[0]],
        out_dir=out,
        kernel_name=_kernel(),
        parameters={"split": "val"},
        log=lambda _: None,
    )
    book = _read(written)
    injected = [c for c in book.cells if "injected-parameters" in _tags(c)]
    assert len(injected) == 1 and "split = " in injected[0].source
    assert not [
        o
        for c in book.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    cfg_repr = "".join(o.get("data", {}).get("text/plain", "") for o in book.cells[4].outputs)
    assert "split='val'" in cfg_repr and str(tiny_run) in cfg_repr
    assert nb.read_metrics(tiny_run, "00_quickstart") == analysis.run_metrics(tiny_run)
