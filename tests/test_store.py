import json

import pandas as pd
import pytest

from tsevo.store import RecordLog, RunStore


def test_create_resume_and_config_guard(tmp_path):
    s = RunStore.create(tmp_path / "r", {"seed": 1, "rounds": 1}, {"backend": "builtin"})
    assert s.config == {"seed": 1, "rounds": 1}
    assert s.manifest["backend"] == "builtin" and "python" in s.manifest
    s2 = RunStore.create(tmp_path / "r", {"seed": 1, "rounds": 1})
    assert [e["kind"] for e in s2.events()] == ["create", "resume"]
    with pytest.raises(ValueError, match="different config"):
        RunStore.create(tmp_path / "r", {"seed": 2, "rounds": 1})
    assert RunStore.open(tmp_path / "r").config["seed"] == 1
    with pytest.raises(FileNotFoundError):
        RunStore.open(tmp_path / "nope")


def test_no_credentials_stored(tmp_path):
    with pytest.raises(ValueError, match="credential"):
        RunStore.create(tmp_path / "r", {"llm": {"api_key": "sk-123"}})
    s = RunStore.create(tmp_path / "ok", {"llm": {"api_key": None}})
    with pytest.raises(ValueError, match="credential"):
        s.event("x", access_token="abc")
    s.event("tokens", prompt_tokens=120, completion_tokens=5)  # token counts are not credentials


def test_steps_json_parquet(tmp_path):
    s = RunStore.create(tmp_path / "r", {"a": 1})
    assert s.step_done(1, "base_pass") is None
    s.write_json("rounds/r1/buckets.json", {"b": [1, 2]})
    s.write_parquet("rounds/r1/base.parquet", pd.DataFrame({"qid": ["a", "b"], "x": [1, 2]}))
    s.mark_done(1, "base_pass", n=2)
    assert s.step_done(1, "base_pass")["n"] == 2
    assert s.read_json("rounds/r1/buckets.json") == {"b": [1, 2]}
    assert list(s.read_parquet("rounds/r1/base.parquet").qid) == ["a", "b"]
    assert not list((tmp_path / "r").rglob("*.tmp"))


def test_record_log_survives_torn_line(tmp_path):
    log = RecordLog(tmp_path / "e.jsonl")
    log.append([{"qid": "a", "v": 1}, {"qid": "b", "v": 2}])
    with log.path.open("a") as fh:  # a writer killed mid-line
        fh.write('{"qid": "c", "v"')
    assert set(log.load()) == {"a", "b"}
    log.append([{"qid": "c", "v": 3}, {"qid": "a", "v": 9}])
    got = log.load()
    assert got["c"]["v"] == 3 and got["a"]["v"] == 9
    assert all(json.loads(line) for line in log.path.read_text().splitlines())
