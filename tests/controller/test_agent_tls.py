"""The agents' trust path over HTTPS (docs/distributed.md, Trust), without ports (no root): an agent
serving TLS with a client CA and a token; a controller with the CA, its client certificate and the
token reaches it (in process and as `netrig serve --agent`); a controller without the certificate,
with another CA's, with a wrong token, or that does not trust the agent's certificate is refused,
each with one line naming the agent."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.otg.conftest import ROOT, free_port

from netrig.controller.agents import AgentClient, AgentSpec
from netrig.controller.controller import Controller
from netrig.errors import ConfigError
from netrig.otg.mapping import ServePort
from netrig.otg.server import OtgServer
from netrig.otg.service import Service
from netrig.otg.tls import server_context
from netrig.otgclient.client import client_context
from netrig.trial import Port

TOKEN = "t" * 32
#: The agent's ports: never opened here (no config is set).
SERVE = [ServePort("va@na", Port("va", "na"), None)]


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    cert, key = d / f"{name}.pem", d / f"{name}.key"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
            "-out", str(cert), "-days", "2", "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return cert, key


def make_cert(d: Path, name: str, ca: tuple[Path, Path], usage: str, ip: str = "127.0.0.1") -> tuple[Path, Path]:
    """A certificate ``ca`` signed for ``ip`` (``usage``: serverAuth or clientAuth); its key only its owner's."""
    cert, key, csr, ext = d / f"{name}.pem", d / f"{name}.key", d / f"{name}.csr", d / f"{name}.ext"
    ext.write_text(f"subjectAltName=IP:{ip}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                   f"extendedKeyUsage={usage}\nauthorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
            "-out", str(csr), "-subj", f"/CN={name}")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
            "-out", str(cert), "-days", "2", "-extfile", str(ext))
    key.chmod(0o600)  # netrig serve refuses a key others may read
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    d = tmp_path_factory.mktemp("pki")
    ca, other = make_ca(d, "ca"), make_ca(d, "other-ca")
    return {"ca": ca, "other": other, "agent": make_cert(d, "agent", ca, "serverAuth"),
            "controller": make_cert(d, "controller", ca, "clientAuth"),
            "stranger": make_cert(d, "stranger", other, "clientAuth")}


@pytest.fixture
def agent(pki) -> Iterator[OtgServer]:
    """An agent: HTTPS with the CA's certificate, clients need a certificate the CA signed and the token."""
    cert, key = pki["agent"]
    server = OtgServer(Service(SERVE), "127.0.0.1", 0, server_context(cert, key, pki["ca"][0]), token=TOKEN)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def controller(url: str, ca: Path | None, client: tuple[Path, Path] | None, token: str = TOKEN) -> Controller:
    tls = client_context(ca, *(client or (None, None)))
    return Controller([AgentClient(AgentSpec("a", url), token, tls)], log=lambda line: None)


def test_a_controller_reaches_an_https_agent(agent, pki):
    c = controller(agent.url, pki["ca"][0], pki["controller"])
    try:
        c.start()
        (a,) = c.agents_report()["agents"]
        assert (a["name"], a["state"], a["url"]) == ("a", "up", agent.url)
        assert abs(a["clock_offset_ns"]) <= a["clock_uncertainty_ns"] + 1e6  # one host: one clock
        assert c.agents["a"].call("GET", "/config") == {}  # an OTG request through the trust path
        assert "controller" in c.version()["app_version"]
    finally:
        c.close()


@pytest.mark.parametrize("case", ["no client certificate", "another CA's certificate", "a wrong token",
                                  "the agent's certificate not trusted"])
def test_an_agent_refuses_an_untrusted_controller(agent, pki, case):
    ca, client, token = pki["ca"][0], pki["controller"], TOKEN
    if case == "no client certificate":
        client = None
    elif case == "another CA's certificate":
        client = pki["stranger"]
    elif case == "a wrong token":
        token = "w" * 32
    else:
        ca = None  # the system's CAs, which never signed the agent's certificate
    c = controller(agent.url, ca, client, token)
    try:
        with pytest.raises(ConfigError) as e:
            c.start()
    finally:
        c.close()
    assert e.value.field == "--agent" and "agent a" in e.value.message and "\n" not in str(e.value), e.value
    if case == "a wrong token":
        assert "answered 401" in e.value.message
    if case == "the agent's certificate not trusted":
        assert "CERTIFICATE_VERIFY_FAILED" in e.value.message


def start_controller(argv: list[str]) -> tuple[subprocess.Popen, str]:
    number = free_port()
    url = f"http://127.0.0.1:{number}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    proc = subprocess.Popen([sys.executable, "-m", "netrig.cli.main", "serve", "--http", "--listen",
                             f"127.0.0.1:{number}", *argv], env=env, stderr=subprocess.PIPE, text=True)
    return proc, url


def test_netrig_serve_controller_over_https(agent, pki, tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)  # a token file others may read is refused
    base = ["--agent", f"a={agent.url}", "--agent-token-file", str(token), "--agent-ca", str(pki["ca"][0])]
    proc, url = start_controller([*base, "--agent-cert", str(pki["controller"][0]), "--agent-key",
                                  str(pki["controller"][1])])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                report = json.loads(urllib.request.urlopen(url + "/netrig/agents", timeout=2).read())
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.1)
        assert [(a["name"], a["state"]) for a in report["agents"]] == [("a", "up")]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
    refused, _ = start_controller(base)  # no client certificate: the agent refuses the handshake
    _, err = refused.communicate(timeout=60)
    assert refused.returncode != 0 and "Traceback" not in err
    assert "--agent: agent a (" in err and "start it" in err, err
