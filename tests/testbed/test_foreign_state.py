"""A state file written by another netrig version (a topology or an option this one does not know)
never breaks ``netrig testbed status`` for the others: it is listed as foreign, with the remedy."""
import json
import os

import pytest

from netrig.errors import TestbedError
from netrig.testbed import Testbed, state, status


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(state, "STATE_DIR", str(tmp_path))
    return tmp_path


def _write(d, tb_id, **kw):
    s = {"id": tb_id, "topology": "router", "options": {}, "namespaces": [f"nr{tb_id}-dut"], "interfaces": [],
         "owner_pid": os.getpid(), "detached": True, "status": "down", **kw}
    (d / f"{tb_id}.json").write_text(json.dumps(s))


def test_foreign_state_files_are_listed_not_fatal(state_dir, capsys):
    _write(state_dir, "aaa1")
    _write(state_dir, "aaa2", options={"future_option": 10})
    _write(state_dir, "aaa3", topology="from-the-future")
    with pytest.raises(TestbedError, match="another netrig version .*option 'future_option'"):
        Testbed.attach("aaa2")
    with pytest.raises(TestbedError, match="topology 'from-the-future'"):
        Testbed.attach("aaa3")
    rows = {r["id"]: r for r in status()}
    assert set(rows) == {"aaa1", "aaa2", "aaa3"}
    assert not rows["aaa1"].get("foreign")
    assert rows["aaa2"]["foreign"] and rows["aaa3"]["status"] == "foreign"
    assert "testbed clean" in rows["aaa2"]["problems"][0]

    from netrig.cli.main import main
    rc = main(["testbed", "status"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "aaa1" in out and "aaa2  router" in out and "foreign" in out and "another netrig version" in out
    assert main(["testbed", "status", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d.get("error") is not None for d in doc] == [False, True, True]
