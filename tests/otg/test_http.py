"""HTTP as a server should speak it (issue 41, cases 5 and 10), without ports (no root): chunked
bodies read, an empty POST refused, every error OTG JSON (405 for a method no endpoint takes, never
an HTML page), a negative or malformed Content-Length a 400, the bearer scheme in any case, a busy
``--listen`` one line naming it, a token over plain HTTP beyond loopback said once."""
from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator

import pytest

from netrig.cli.main import main
from netrig.errors import ConfigError
from netrig.otg.mapping import ServePort
from netrig.otg.server import OtgServer
from netrig.otg.service import Service
from netrig.trial import Port

SERVE = [ServePort("va@na", Port("va", "na"), None)]
TOKEN = "b" * 32
#: A config refused by what it holds: only a server that read the body can say so.
DEVICES = json.dumps({"ports": [{"name": "p1", "location": "va@na"}],
                      "devices": [{"name": "d1", "ipv4_loopbacks": [{"name": "lo", "eth_name": "d1.eth"}]}]}).encode()


@pytest.fixture
def server() -> Iterator[OtgServer]:
    s = OtgServer(Service(SERVE), "127.0.0.1", 0, None, token=TOKEN)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def raw(server: OtgServer, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` as it is; the status, headers and body of the answer."""
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=10) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in fields.items()}, body


def request(server: OtgServer, method: str, path: str, body: bytes | None = None, auth: str = f"Bearer {TOKEN}",
            **headers: str) -> tuple[int, dict[str, str], bytes]:
    lines = [f"{method} {path} HTTP/1.1", "Host: x", "Connection: close", f"Authorization: {auth}"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    if body is not None and "Transfer_Encoding" not in headers and "Content_Length" not in headers:
        lines.append(f"Content-Length: {len(body)}")
    return raw(server, ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))


def otg_error(answer: tuple[int, dict[str, str], bytes]) -> tuple[int, str]:
    """The status and the one error line of an OTG Error answer (JSON, or the test fails)."""
    code, fields, body = answer
    assert fields["content-type"] == "application/json", (code, fields, body[:200])
    err = json.loads(body)
    assert err["code"] == code and len(err["errors"]) == 1
    return code, err["errors"][0]


def chunked(body: bytes, size: int = 7) -> bytes:
    parts = [body[i:i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def test_a_chunked_body_is_read(server):
    code, err = otg_error(request(server, "POST", "/config", chunked(DEVICES), Transfer_Encoding="chunked"))
    assert code == 400 and err.startswith("devices[0].ipv4_loopbacks: not supported"), err
    code, _, body = request(server, "POST", "/monitor/states", chunked(b'{"choice": "ipv6_neighbors"}', 4),
                            Transfer_Encoding="chunked")
    assert code == 200 and json.loads(body) == {"choice": "ipv6_neighbors", "ipv6_neighbors": []}
    assert server.service.get_config() == {}


def test_a_malformed_chunked_body_is_a_400(server):
    code, err = otg_error(request(server, "POST", "/config", b"zz\r\n{}\r\n0\r\n\r\n", Transfer_Encoding="chunked"))
    assert code == 400 and err.startswith("Transfer-Encoding: "), err
    code, err = otg_error(request(server, "POST", "/config", b"{}", Transfer_Encoding="gzip"))
    assert code == 411 and "Content-Length" in err, err


@pytest.mark.parametrize("body", [b"", b"  \n"])
def test_an_empty_post_is_a_400(server, body):
    code, err = otg_error(request(server, "POST", "/config", body))
    assert code == 400 and err.startswith("request: the body is empty"), err
    assert server.service.get_config() == {}


@pytest.mark.parametrize("length, words", [("-5", "-5"), ("abc", "'abc'"), ("1e3", "'1e3'")])
def test_a_bad_content_length_is_a_400(server, length, words):
    code, err = otg_error(request(server, "POST", "/config", b"{}", Content_Length=length))
    assert code == 400 and err.startswith("Content-Length: ") and words in err, err


@pytest.mark.parametrize("method, path", [("DELETE", "/config"), ("PUT", "/config"), ("GET", "/control/state"),
                                          ("FROB", "/config"), ("OPTIONS", "/config")])
def test_a_method_no_endpoint_takes_is_a_405_as_otg_json(server, method, path):
    answer = request(server, method, path)
    code, err = otg_error(answer)
    assert code == 405 and err.startswith(f"{method} {path}: ") and answer[1]["allow"], err


def test_a_bad_request_line_is_otg_json(server):
    code, err = otg_error(raw(server, b"GET /config extra HTTP/1.1\r\n\r\n"))
    assert code == 400 and err.startswith("Bad request syntax"), err


@pytest.mark.parametrize("auth", [f"bearer {TOKEN}", f"BEARER {TOKEN}", f"Bearer   {TOKEN}"])
def test_the_bearer_scheme_is_case_insensitive(server, auth):
    code, _, body = request(server, "GET", "/capabilities/version", auth=auth)
    assert code == 200, body


@pytest.mark.parametrize("auth", [f"Basic {TOKEN}", TOKEN, f"bearer {TOKEN}x", "bearer"])
def test_a_wrong_authorization_is_still_refused(server, auth):
    assert otg_error(request(server, "GET", "/capabilities/version", auth=auth))[0] == 401


def test_a_busy_listen_address_names_the_option():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError) as e:
            OtgServer(Service(SERVE), "127.0.0.1", port, None)
        assert e.value.field == "--listen" and f"127.0.0.1:{port} is in use" in e.value.message


def test_serve_on_a_busy_listen_address_says_so_in_one_line(capsys):
    agent = OtgServer(Service(SERVE), "127.0.0.1", 0, None)
    agent.start()
    try:
        port = int(agent.server_address[1])
        assert main(["serve", "--http", "--agent", f"a={agent.url}", "--listen", f"127.0.0.1:{port}"]) == 2
    finally:
        agent.stop()
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--listen: 127.0.0.1:{port} is in use" in err, err


def test_a_token_over_plain_http_beyond_loopback_is_said_once(capfd):
    server = OtgServer(Service(SERVE), "0.0.0.0", 0, None, token=TOKEN)
    server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", int(server.server_address[1]), timeout=10)
        for _ in range(3):
            conn.request("GET", "/capabilities/version", headers={"Authorization": f"Bearer {TOKEN}"})
            assert conn.getresponse().read()
        conn.close()
    finally:
        server.stop()
    err = capfd.readouterr().err
    assert err.count("crosses the network in clear") == 1, err


def test_a_token_on_loopback_or_without_one_is_not_warned(server, capfd):
    assert request(server, "GET", "/capabilities/version")[0] == 200
    assert "in clear" not in capfd.readouterr().err


def _flow_config(**flow: object) -> dict:
    f = {"name": "f", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p1"]}},
         "packet": [{"choice": "ethernet"}, {"choice": "vlan"}, {"choice": "ipv4"}], **flow}
    return {"ports": [{"name": "p1", "location": "va@na"}], "flows": [f]}


@pytest.mark.parametrize("rate, path", [({"choice": "pps", "pps": 0}, "flows[0].rate.pps: "),
                                        ({"choice": "percentage", "percentage": 500}, "flows[0].rate.percentage: "),
                                        ({"choice": "gbps", "gbps": 0}, "flows[0].rate.gbps: ")])
def test_a_rate_error_names_its_otg_path(server, rate, path):
    code, err = otg_error(request(server, "POST", "/config", json.dumps(_flow_config(rate=rate)).encode()))
    assert code == 400 and err.startswith(path), err


@pytest.mark.parametrize("size, mtu, path", [
    ({"choice": "fixed", "fixed": 9000}, 1500, "flows[0].size.fixed: 9000 B is above the largest frame port p1 "
                                               "sends, 1522 B (its MTU 1500 + 18, + 4 per VLAN tag)"),
    ({"choice": "increment", "increment": {"start": 64, "end": 1600, "step": 1}}, 1500, "flows[0].size.increment.end: "),
    ({"choice": "random", "random": {"min": 64, "max": 2000}}, 1500, "flows[0].size.random.max: 2000 B"),
])
def test_frames_above_the_mtu_are_refused_with_the_otg_path(size, mtu, path):
    from netrig.otg.mapping import check_frames, plan
    from netrig.otg.objects import Config, read

    p = plan(read(Config, _flow_config(size=size, rate={"choice": "pps", "pps": 10})), SERVE)
    with pytest.raises(ConfigError) as e:
        check_frames(p, [mtu])
    assert str(e.value).startswith(path), e.value
    check_frames(p, [9000])
    check_frames(p, [None])


def test_an_engine_error_is_named_by_its_otg_path():
    from netrig.otg.mapping import otg_error as named

    assert str(named(ConfigError("flows[3].frame_size", "too big"))) == "flows[3].size: too big"
    assert str(named(ConfigError("flows[3].rate", "too fast"))) == "flows[3].rate: too fast"
    assert str(named(ConfigError("ports[0]", "x"))) == "ports[0]: x"
