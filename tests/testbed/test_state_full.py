"""A full state directory (issue 41, case 9): ``testbed up`` says which file it could not write and
what to do, builds nothing and leaves no temporary file behind. The directory is a real 64 KiB
tmpfs filled to the last byte (root: it mounts one)."""
import errno
import os
import subprocess

import pytest
from tests.conftest import needs_root

from netrig.cli.main import main
from netrig.testbed import state as st

pytestmark = [needs_root, pytest.mark.root]


@pytest.fixture
def full_dir(tmp_path, monkeypatch):
    d = tmp_path / "testbeds"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "netrig-test", str(d)], check=True)
    try:
        with open(d / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"x" * 4096)
            except OSError as e:
                assert e.errno == errno.ENOSPC
        monkeypatch.setattr(st, "STATE_DIR", str(d))
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def test_testbed_up_on_a_full_state_dir_names_the_file_and_the_remedy(full_dir, capsys):
    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert main(["testbed", "up", "router"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"{full_dir}/" in err and ".json: cannot write" in err and "No space left on device" in err, err
    assert f"free space in {full_dir}" in err, err
    assert sorted(os.listdir(full_dir)) == ["filler"], "no temporary file left"
    assert subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout == before
