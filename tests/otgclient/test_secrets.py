"""Secret files as ssh treats them (issue 41, case 2): every reader of a token, key or CA file refuses
one that group or others may read (token, key) or write (any of them), naming the option, the file
and ``chmod``; a token accepted over plain HTTP beyond loopback is said once in the log."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from netrig.cli.main import main
from netrig.errors import ConfigError
from netrig.otg.tls import server_context
from netrig.otgclient.client import client_context, read_token
from netrig.otgclient.secrets import check_secret_file

TOKEN = "s" * 32


def _file(tmp_path: Path, name: str, mode: int, text: str = TOKEN + "\n") -> Path:
    p = tmp_path / name
    p.write_text(text)
    p.chmod(mode)
    return p


@pytest.mark.parametrize("mode, secret, words", [
    (0o644, True, "group or others may read it (mode 0644): chmod 600"),
    (0o640, True, "may read it (mode 0640)"),
    (0o620, True, "may write it (mode 0620)"),
    (0o666, False, "may write it (mode 0666): chmod go-w"),
])
def test_a_file_others_may_read_or_write_is_refused(tmp_path, mode, secret, words):
    p = _file(tmp_path, "f", mode)
    with pytest.raises(ConfigError) as e:
        check_secret_file(p, "--opt", secret=secret)
    assert e.value.field == "--opt" and str(p) in e.value.message and words in e.value.message


@pytest.mark.parametrize("mode, secret", [(0o600, True), (0o400, True), (0o644, False), (0o600, False)])
def test_a_private_file_passes(tmp_path, mode, secret):
    check_secret_file(_file(tmp_path, "f", mode), "--opt", secret=secret)


def test_read_token_refuses_a_world_readable_token(tmp_path):
    with pytest.raises(ConfigError, match=r"^otg.token_file: .*/t: group or others may read it .*chmod 600"):
        read_token(str(_file(tmp_path, "t", 0o644)), "otg.token_file")
    assert read_token(str(_file(tmp_path, "u", 0o600)), "otg.token_file") == TOKEN


@pytest.mark.parametrize("argv, option", [
    (["--port", "lo", "--http", "--token-file", "{t}"], "--token-file"),
    (["--http", "--agent", "a=http://127.0.0.1:1", "--agent-token-file", "{t}"], "--agent-token-file"),
])
def test_serve_refuses_a_world_readable_token(tmp_path, capsys, argv, option):
    t = _file(tmp_path, "t", 0o644)
    assert main(["serve", *(a.replace("{t}", str(t)) for a in argv)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{option}: {t}: group or others may read it" in err and f"chmod 600 {t}" in err


@pytest.fixture(scope="module")
def pem(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl")
    d = tmp_path_factory.mktemp("pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(d / "k.pem"), "-out", str(d / "c.pem"), "-days", "2", "-subj", "/CN=t"],
                   check=True, capture_output=True, timeout=60)
    return d / "c.pem", d / "k.pem"


def test_tls_keys_and_cas_are_checked(tmp_path, pem):
    cert, key = pem
    loose_key = _file(tmp_path, "key.pem", 0o644, key.read_text())
    with pytest.raises(ConfigError, match=r"^--key: .*key.pem: group or others may read it"):
        server_context(cert, loose_key, None)
    ca = _file(tmp_path, "ca.pem", 0o664, cert.read_text())
    key.chmod(0o600)
    with pytest.raises(ConfigError, match=r"^--client-ca: .*ca.pem: group or others may write it .*chmod go-w"):
        server_context(cert, key, ca)
    with pytest.raises(ConfigError, match=r"^otg.ca: .*ca.pem: group or others may write it"):
        client_context(ca, None, None, ("otg.ca", "otg.cert", "otg.key"))
    with pytest.raises(ConfigError, match=r"^--agent-key: .*key.pem: group or others may read it"):
        client_context(None, cert, loose_key)
    ca.chmod(0o644)
    server_context(cert, key, ca)
