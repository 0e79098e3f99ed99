"""The OTG endpoints as snappi's HTTP transport speaks them, without ports (no root): the version
checks of snappi (the pinned one and 1.58.0), OTG Error objects with the path for everything
refused, TLS with a self-signed certificate and with client certificates, the CLI's listen rules."""
from __future__ import annotations

import json
import logging
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import snappi

from netrig.cli.main import main
from netrig.otg.mapping import ServePort
from netrig.otg.server import OtgServer
from netrig.otg.service import Service
from netrig.otg.tls import self_signed, server_context
from netrig.trial import Port

logging.getLogger("snappi").setLevel(logging.ERROR)
SERVE = [ServePort("va@na", Port("va", "na"), None), ServePort("vb@nb", Port("vb", "nb"), None)]


@pytest.fixture(scope="module")
def url():
    server = OtgServer(Service(SERVE), "127.0.0.1", 0, None)
    server.start()
    yield server.url
    server.stop()


def api(url: str):
    return snappi.api(location=url, verify=False, version_check=True)


def otg_error(exc: BaseException) -> dict:
    """The OTG Error object snappi raises (its ``Exception(Error)``)."""
    err = exc.args[0]
    return {"code": err.code, "kind": err.kind, "errors": list(err.errors)}


def post(url: str, path: str, body: bytes, method: str = "POST") -> tuple[int, dict]:
    req = urllib.request.Request(url + path, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_version_check_of_the_pinned_snappi(url):
    a = api(url)
    a.check_version_compatibility()
    assert a.get_config().serialize(a.config().DICT) == {}
    v = a.get_version()
    assert v.api_spec_version.startswith(">=1.58.0") and v.app_version.startswith("netrig")


def test_version_check_of_snappi_1_58(url, tmp_path):
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(tmp_path), "snappi==1.58.0"]
    if subprocess.run(pip, capture_output=True, timeout=300).returncode != 0:
        pytest.skip("snappi 1.58.0 could not be installed from PyPI (no network?)")
    code = ("import logging, snappi; logging.getLogger('snappi').setLevel(logging.ERROR); "
            f"a = snappi.api(location={url!r}, version_check=True); a.check_version_compatibility(); "
            "assert a.get_local_version().api_spec_version == '1.58.0'; a.get_config(); print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert r.stdout.strip() == "ok", r.stderr


def test_refusals_are_otg_errors_with_the_path(url):
    a = api(url)
    c = a.config()
    c.ports.port(name="p1", location="va@na")
    c.devices.device(name="d1")[-1].ipv4_loopbacks.add(name="lo", eth_name="d1.eth")
    with pytest.raises(Exception) as e:
        a.set_config(c)
    err = otg_error(e.value)
    assert err["code"] == 400 and err["kind"] == "validation"
    assert err["errors"][0].startswith("devices[0].ipv4_loopbacks: not supported: loopbacks and protocols")
    c = a.config()
    c.ports.port(name="p1", location="va@na")
    f = c.flows.flow(name="f")[-1]
    f.tx_rx.port.tx_name = "p1"
    f.packet.ethernet().ipv4()[-1].src.value = "198.18.0.1"
    f.rate.pps = 10
    body = json.loads(c.serialize())
    body["flows"][0]["packet"][1]["ipv4"]["src"]["value"] = "198.18.0.300"
    code, out = post(url, "/config", json.dumps(body).encode())
    assert code == 400 and out["errors"][0].startswith("flows[0].packet[1].ipv4.src.value: '198.18.0.300'")


def test_state_and_request_errors(url):
    a = api(url)
    cs = a.control_state()
    cs.traffic.flow_transmit.state = "start"
    with pytest.raises(Exception) as e:
        a.set_control_state(cs)
    assert otg_error(e.value)["code"] == 409 and "set_config first" in otg_error(e.value)["errors"][0]
    for path, body, method, code, words in [
        ("/config", b"{not json", "POST", 400, "not JSON"),
        ("/config", b"{}", "PATCH", 409, "set_config first"),  # update_flows needs a config
        ("/config/append", b"{}", "PATCH", 400, "set_config"),
        ("/control/action", json.dumps({"choice": "port", "port": {"choice": "reboot"}}).encode(), "POST", 400,
         "no port reboot"),
        ("/control/state", json.dumps({"choice": "port", "port": {"choice": "link", "link": {"state": "down"}}})
         .encode(), "POST", 409, "set_config first"),
        # a protocol state without its member stopped every BGP session (read as "not start")
        ("/control/state", json.dumps({"choice": "protocol", "protocol": {"choice": "all"}}).encode(), "POST", 400,
         "protocol.all: is required"),
        ("/control/state", json.dumps({"choice": "protocol", "protocol": {"choice": "bgp", "bgp": {"choice": "peers"}}})
         .encode(), "POST", 400, "protocol.bgp.peers: is required"),
        ("/control/state", json.dumps({"choice": "protocol", "protocol": {
            "choice": "isis", "isis": {"choice": "routers", "routers": {"state": "up"}}}}).encode(), "POST", 400,
         "protocol.isis"),
        ("/nothing", b"", "POST", 404, "no such OTG endpoint"),
        ("/monitor/metrics", json.dumps({"choice": "bgpv4"}).encode(), "POST", 409, "set_config first"),
        ("/monitor/states", json.dumps({"choice": "ipv4_neighbors"}).encode(), "POST", 200, ""),
    ]:
        got, out = post(url, path, body, method)
        assert got == code, (path, out)
        assert code == 200 or words in out["errors"][0], (path, out)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
def test_tls_self_signed_and_client_certificates(tmp_path: Path):
    cert, key = self_signed(tmp_path / "state")
    assert key.stat().st_mode & 0o077 == 0, "the key is its owner's alone"
    assert self_signed(tmp_path / "state") == (cert, key), "made once, kept"
    server = OtgServer(Service(SERVE), "127.0.0.1", 0, server_context(cert, key, None))
    server.start()
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(server.url + "/capabilities/version", context=ctx, timeout=10) as r:
            assert json.loads(r.read())["api_spec_version"].startswith(">=")
    finally:
        server.stop()
    # Mutual TLS: a CA, a client certificate it signed; a client without one is turned away.
    d = tmp_path
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
             str(d / "ca.key"), "-out", str(d / "ca.pem"), "-days", "2", "-subj", "/CN=test ca")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
             str(d / "c.key"), "-out", str(d / "c.csr"), "-subj", "/CN=client")
    _openssl("x509", "-req", "-in", str(d / "c.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
             "-CAcreateserial", "-out", str(d / "c.pem"), "-days", "2")
    server = OtgServer(Service(SERVE), "127.0.0.1", 0, server_context(cert, key, d / "ca.pem"))
    server.start()
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            urllib.request.urlopen(server.url + "/capabilities/version", context=ctx, timeout=10).read()
        ctx.load_cert_chain(str(d / "c.pem"), str(d / "c.key"))
        with urllib.request.urlopen(server.url + "/capabilities/version", context=ctx, timeout=10) as r:
            assert r.status == 200
    finally:
        server.stop()


@pytest.mark.parametrize("argv, words", [
    (["--http", "--listen", "0.0.0.0:8443"], "plain HTTP only on loopback"),
    (["--listen", "0.0.0.0:8443"], "give --client-ca"),
    (["--listen", "localhost:8443"], "give ADDR:PORT"),
    (["--listen", "127.0.0.1:0"], "1..65535"),
    (["--http", "--io", "dpdk"], "not an I/O mode"),
    (["--http", "--capture-mb", "1000000000"], "--capture-mb: must be at least 1 MiB and at most "),
])
def test_listen_rules(argv, words, capsys):
    assert main(["serve", "--port", "x", *argv]) == 2
    assert words in capsys.readouterr().err


def test_a_large_config_is_parsed_with_the_collector_held_off(monkeypatch):
    """A body above GC_PAUSE_BYTES is handled with the garbage collector off (its passes over a big
    config's objects cost more than the parse), and the collector is on again after the answer,
    also when the request failed; a small body leaves it alone. The collector is on again before
    the answer leaves: a slow switch-back (here 0.2 s) never lets the client's next request find
    it off (it did when the answer was sent first)."""
    import gc

    from netrig.otg import server as srv
    seen: list[bool] = []
    switch_back = srv._GcPause.__exit__

    def slow_exit(self, *exc):
        time.sleep(0.2)
        switch_back(self, *exc)
    monkeypatch.setattr(srv._GcPause, "__exit__", slow_exit)
    service = Service(SERVE)

    def set_config(config, document):
        seen.append(gc.isenabled())
        raise srv.ConfigError("flows[0].tx_rx", "no such port: name one of the config's ports")
    monkeypatch.setattr(service, "set_config", set_config)
    server = OtgServer(service, "127.0.0.1", 0, None)
    server.start()
    try:
        pad = "x" * (srv.GC_PAUSE_BYTES + 10)
        assert gc.isenabled()
        got, out = post(server.url, "/config", json.dumps({"ports": [{"name": pad}], "flows": []}).encode())
        assert got == 400 and "flows[0].tx_rx" in out["errors"][0]
        got, out = post(server.url, "/config", b"{" + pad.encode())
        assert got == 400 and "not JSON" in out["errors"][0]
        post(server.url, "/config", b'{"ports": []}')
        assert seen == [False, True], seen
        assert gc.isenabled()
    finally:
        server.stop()
