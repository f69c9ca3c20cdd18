"""Roles see a view, not the record: opaque per-run ids, no gold, metadata, subtask or source id.

* On the builtin backend, a suite whose metadata and subtasks are blanked and whose every source id
  is renamed gives a byte-identical library (the run cannot depend on what roles may not see).
* The ids are opaque, stable for a run, unique, and map back.
* A view carries nothing a role may not read, and pickles (planners fork).
"""

from __future__ import annotations

import json
import pickle
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from tests import round_fixtures as rf
from tsevo.data import Question, QuestionView, Suite
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.evolve.views import ViewIds
from tsevo.roles import RoleSet


def _rekeyed(suite: Suite) -> Suite:
    """The same questions under new ids, with metadata and subtask blanked; same split assignment."""
    new_id = {q.id: f"item{i:05d}" for i, q in enumerate(reversed(list(suite)))}
    qs = []
    for q in suite:
        d = q.to_dict()
        d.update(id=new_id[q.id], group=new_id[q.id], subtask="", metadata={})
        d.pop("fingerprint", None)
        qs.append(Question.from_dict(d))
    return Suite(suite.name, qs, {new_id[k]: v for k, v in suite.splits.items()})


def test_view_holds_only_what_a_role_may_see() -> None:
    names = {f.name for f in fields(QuestionView)}
    assert names == {
        "id",
        "question",
        "context",
        "options",
        "task",
        "series",
        "primary",
        "covariates",
        "candidates",
        "fingerprint",
    }
    assert not names & {"gold", "metadata", "subtask", "source", "group"}


def test_ids_are_opaque_unique_stable_and_map_back() -> None:
    suite = rf.tiny_suite()
    ids = ViewIds(suite, "7")
    assert len(ids) == len(suite)
    seen = set()
    for q in suite:
        oid = ids.opaque(q.id)
        assert oid not in seen and q.id not in oid and q.task not in oid
        seen.add(oid)
        assert ids.real(oid) == q.id
        v = ids.view(q)
        assert v.id == oid and v.fingerprint == q.fingerprint and v.options == q.options
    assert ViewIds(suite, "7").opaque(q.id) == ids.opaque(q.id)  # stable for a run
    assert ViewIds(suite, "8").opaque(q.id) != ids.opaque(q.id)  # another run, other ids
    # renaming the source ids does not move the opaque ids (they come from content)
    rk = _rekeyed(suite)
    assert {ViewIds(rk, "7").view(q).id for q in rk} == seen
    with pytest.raises(KeyError):
        ids.real("not-an-issued-id")


def test_view_pickles_and_keeps_its_series_read_only() -> None:
    q = next(iter(rf.tiny_suite()))
    v = QuestionView.of(q, "qabc")
    w = pickle.loads(pickle.dumps(v))
    assert w == v and list(w.series) == list(q.series)
    with pytest.raises(TypeError):
        w.series["x"] = q.series[q.primary[0]]  # type: ignore[index]


def test_library_ignores_source_ids_metadata_and_subtask(tmp_path: Path) -> None:
    """The shared tiny CLI run, and the same suite renamed and blanked: byte-identical library."""
    ref = rf.cli_run()
    suite = Suite.load(ref.path / "suite.parquet")
    rk = _rekeyed(suite)
    assert not {q.id for q in rk} & {q.id for q in suite}
    out = tmp_path / "rekeyed"
    res: Any = evolve(
        rk,
        roles=RoleSet.builtin(),
        config=ProtocolConfig.from_dict(
            json.loads((ref.path / "config.json").read_text())["protocol"]
        ),
        out=out,
        log=lambda s: None,
    )
    assert res.rounds[0].status == "accepted", "the comparison needs an admitted library"
    a, b = rf.tree_bytes(ref.path / "library"), rf.tree_bytes(out / "library")
    assert sorted(a) == sorted(b)
    assert {k: rf.digest(v) for k, v in a.items()} == {k: rf.digest(v) for k, v in b.items()}
