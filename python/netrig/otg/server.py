"""The OTG HTTP endpoints, as snappi's and gosnappi's HTTP transports speak them.

======================  ======  ===========================================================
path                    method  what
======================  ======  ===========================================================
/capabilities/version   GET     ``Version`` (``api_spec_version`` is the range of clients served)
/config                 POST    set_config: ``Warning``
/config                 GET     the config set
/config                 PATCH   update_flows: flows' rate and size changed in place: ``Warning``
/config/append,
/config/delete          PATCH   refused: send the whole config
/control/state          POST    traffic (start, stop, pause, resume), port capture and link, BGP
                                peers and route ranges (protocol all, bgp, route): ``Warning``
/control/action         POST    ipv4 and ipv6 ping from a device; the rest refused
/monitor/metrics        POST    port, flow, LLDP and BGP (bgpv4, bgpv6) metrics
/monitor/states         POST    devices' IPv4 and IPv6 neighbours, LLDP neighbours, BGP prefixes
/monitor/capture        POST    a port's capture, pcap or pcapng (application/octet-stream)
/netrig/agents          GET     a controller's agents: state, clock, stale flows; every server's
                                supervision, ports' own drops, flows' duplicates and reordering
                                (netrig's own)
/netrig/controller      GET     what the controller of an agent left with it: the whole config
                        POST    and the agents it was split over (netrig's own: a controller that
                                starts later takes the run over from it)
======================  ======  ===========================================================

Distributed (docs/distributed.md): a server given a token (``--token-file``) answers only requests
with ``Authorization: Bearer TOKEN`` (401 otherwise); every answer carries the server's realtime
clock as the request arrived and as the answer left (``X-Netrig-Clock-Ns: T1 T2``) and, where
linuxptp runs, its state (``X-Netrig-Ptp``); a controller's start may name the tags to send under
(``X-Netrig-Tags``) or ask only to count (``X-Netrig-Receive``) (:mod:`netrig.otgclient.headers`). A
client that sends ``X-Netrig-Supervise: SECONDS`` (a controller, on every request) has every flow
stopped when it falls silent that long (:mod:`netrig.otg.supervision`).

The server serves an :class:`~netrig.otg.api.OtgService` (a stand-alone server's or an agent's
:class:`~netrig.otg.service.Service`, or a controller) without knowing which: it reads every request
into its type (:mod:`netrig.otg.objects`: checked against the OTG model) and hands it over.

Every failure is an OTG ``Error`` (``code``, ``kind``, ``errors``: one line naming the path and the
remedy): 400 ``validation`` for what the request asks (bad or unsupported), 409 for the wrong
state, 500 ``internal`` for what went wrong here (a port that would not open). Never a traceback.
"""
from __future__ import annotations

import contextlib
import gc
import hmac
import ipaddress
import re
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from netrig.errors import ConfigError, NetrigError, PortError
from netrig.otg import api, refusal
from netrig.otg.api import OtgService, StateError
from netrig.otg.objects import (
    CaptureRequest,
    Config,
    ControlAction,
    ControlState,
    MetricsRequest,
    StartTags,
    StatesRequest,
    read,
)
from netrig.otg.ptp import PtpProbe
from netrig.otg.supervision import Supervision
from netrig.otgclient import headers, report
from netrig.otgclient.typed import to_json
from netrig.telemetry.endpoint import STOP_POLL_S, bind_error

#: Largest request body read, bytes (a 4096-flow config with every pattern is a few MB).
MAX_BODY_BYTES = 256 << 20
#: Longest line of a chunked body's framing (a chunk's size, a trailer), bytes.
MAX_CHUNK_LINE = 1024
#: A request body above this holds the garbage collector off while it is handled (:class:`_GcPause`).
GC_PAUSE_BYTES = 1 << 20


class _GcPause:
    """The cyclic garbage collector held off while a large request (a body above
    :data:`GC_PAUSE_BYTES`: a big config) is handled. A 4096-flow config is ~600 000 new objects;
    with the collector on, its passes over them took 0.15-0.3 s of the parse alone, against 0.05 s
    without (measured, bench/otg.py's scale case). The collector runs again when the last such
    request is answered, with what is alive then frozen (``gc.freeze``): else its first pass
    after a big config walks the config's objects, all still young, and took 0.1-0.2 s of the
    traffic start that followed. Frozen objects are still freed by reference counting (a
    config and its plan hold no cycles) when the next config replaces them. The collector is on
    again before the answer leaves (:meth:`Handler._handle`): a client's next request never
    finds it still off for the one just answered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._was_enabled:
                gc.freeze()
                gc.enable()


_GC_PAUSE = _GcPause()


def error_body(code: int, kind: str, message: str) -> dict:
    return {"code": code, "kind": kind, "errors": [" ".join(message.split())]}


class FramingError(NetrigError):
    """A request whose body cannot be read as HTTP/1.1 frames it (a bad ``Content-Length``, a bad
    chunk, a transfer coding other than chunked): ``status`` (400 or 411), and the connection is
    closed after the answer."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


def status_of(e: BaseException) -> tuple[int, str]:
    """HTTP status and OTG error kind of an exception."""
    if isinstance(e, FramingError):
        return e.status, "validation"
    if isinstance(e, ConfigError):
        return HTTPStatus.BAD_REQUEST, "validation"
    if isinstance(e, StateError):
        return HTTPStatus.CONFLICT, "validation"
    if isinstance(e, PortError):
        return HTTPStatus.INTERNAL_SERVER_ERROR, "internal"
    return HTTPStatus.INTERNAL_SERVER_ERROR, "internal"


class Handler(BaseHTTPRequestHandler):
    """One request: route, read the body into its type, run on the service, answer JSON (or capture
    bytes)."""

    server: OtgServer
    protocol_version = "HTTP/1.1"
    #: The realtime clock when the request was read (the clock exchange's t1), ns.
    received_ns = 0
    #: The methods the request's path takes (a 405's ``Allow``).
    allowed: list[str] = []
    server_version = "netrig-serve"

    def _route(self, method: str) -> Callable[[Any], tuple[Any, bool]] | None:
        s = self.server.service
        path = self.path.split("?", 1)[0].rstrip("/")
        routes: dict[tuple[str, str], Callable[[Any], tuple[Any, bool]]] = {
            ("GET", "/capabilities/version"): lambda _: (s.version(), False),
            ("GET", "/netrig/agents"): lambda _: ({**s.agents_report(),
                                                   "supervision": self.server.supervision.state()}, False),
            # headers: checked as they are mapped (netrig.otg.headers)
            ("POST", "/config"): lambda b: ({"warnings": s.set_config(read(Config, b, defer_headers=True), b)},
                                            False),
            ("GET", "/config"): lambda _: (s.get_config(), False),
            ("PATCH", "/config"): lambda b: ({"warnings": s.update_config(b)}, False),
            ("GET", "/netrig/controller"): lambda _: (to_json(self.server.controller_record), False),
            ("POST", "/netrig/controller"): lambda b: (self.server.keep_record(b), False),
            ("POST", "/control/state"): lambda b: ({"warnings": s.control_state(read(ControlState, b),
                                                                                self._start_tags())}, False),
            ("POST", "/control/action"): lambda b: (s.control_action(read(ControlAction, b)), False),
            ("POST", "/monitor/metrics"): lambda b: (s.metrics(read(MetricsRequest, b)), False),
            ("POST", "/monitor/states"): lambda b: (s.states(read(StatesRequest, b)), False),
            ("POST", "/monitor/capture"): lambda b: (s.capture(read(CaptureRequest, b)), True),
        }
        if method == "PATCH" and path in _PATCHED:
            return _refused
        self.allowed = sorted({m for m, p in routes if p == path} | ({"PATCH"} if path in _PATCHED else set()))
        return routes.get((method, path))

    def _start_tags(self) -> StartTags | None:
        """A controller's headers on a start (``X-Netrig-Tags``, ``X-Netrig-Receive``), if any."""
        tags, receive = self.headers.get(headers.TAGS), headers.is_receive(self.headers.get(headers.RECEIVE))
        if tags is None and not receive:
            return None
        return StartTags(tuple(headers.parse_tags(tags)) if tags is not None else None, receive)

    def _authorised(self) -> bool:
        """The request carries the server's token, if it has one (the scheme in any case, RFC 7235)."""
        token = self.server.token
        if token is None:
            return True
        scheme, _, given = (self.headers.get("Authorization") or "").strip().partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            self.server.token_accepted()
            return True
        self.server.log(f"{self.address_string()}: refused: no or a wrong bearer token")
        self.close_connection = True
        self._send(HTTPStatus.UNAUTHORIZED, error_body(401, "validation", "this agent serves only its "
                                                       "controller: send Authorization: Bearer with its token"))
        return False

    def parse_request(self) -> bool:
        self.received_ns = time.time_ns()  # the request line just read: the clock exchange's t1
        return super().parse_request()

    def _supervised(self) -> bool:
        """Feed the supervision when the request asks for it; a bad value is answered 400."""
        try:
            period = headers.parse_supervise(self.headers.get(headers.SUPERVISE))
        except ConfigError as e:
            self.close_connection = True
            self._send(HTTPStatus.BAD_REQUEST, error_body(400, "validation", str(e)))
            return False
        if period is not None:
            self.server.supervision.fed(period)
        return True

    def _handle(self, method: str) -> None:
        if not self._authorised() or not self._supervised():
            return
        route = self._route(method)
        length = (self.headers.get("Content-Length") or "").strip()
        large = length.isdigit() and int(length) > GC_PAUSE_BYTES
        # The answer is sent after the pause ends: a client's next request is never handled
        # while the collector is still held off for this one.
        with _GC_PAUSE if large else contextlib.nullcontext():
            code, out, raw = self._answer(method, route)
        self._send(code, out, raw)

    def _answer(self, method: str, route: Callable[[Any], tuple[Any, bool]] | None) -> tuple[int, Any, bool]:
        """The status, body and whether it is raw bytes, of one request."""
        try:
            if route is None:
                return self._no_route(method)
            out, raw = route(self._body() if method != "GET" else None)
            return HTTPStatus.OK, out, raw
        except (NetrigError, ValueError) as e:
            code, kind = status_of(e)
            self.close_connection = self.close_connection or isinstance(e, FramingError)
            return code, error_body(int(code), kind, str(e)), False
        except Exception as e:  # a bug here: one line to the client and to the log, never a traceback
            self.server.log(f"internal error: {type(e).__name__}: {e}")
            return HTTPStatus.INTERNAL_SERVER_ERROR, error_body(500, "internal", f"{type(e).__name__}: {e}"), False

    def _no_route(self, method: str) -> tuple[int, Any, bool]:
        """404 for a path no endpoint has, 405 (with ``Allow``) for a method its endpoint does not
        take; the body, unread, closes the connection."""
        self.close_connection = True
        path = self.path.split("?", 1)[0]
        if self.allowed:
            return HTTPStatus.METHOD_NOT_ALLOWED, error_body(405, "validation", f"{method} {path}: not a method of "
                                                             f"this endpoint: use {', '.join(self.allowed)}"), False
        return HTTPStatus.NOT_FOUND, error_body(404, "validation", f"{method} {path}: no such OTG endpoint"), False

    def _body(self) -> Any:
        """The request's JSON: its body read as Content-Length or chunked frames it (never empty)."""
        data = self._read_chunked() if self.headers.get("Transfer-Encoding") is not None else self._read_sized()
        if not data.strip():
            raise ConfigError("request", "the body is empty: send the request's OTG JSON ({} for its defaults)")
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise ConfigError("request", f"not JSON: {e}") from None

    def _read_sized(self) -> bytes:
        text = (self.headers.get("Content-Length") or "0").strip()
        if not re.fullmatch(r"[0-9]{1,12}", text):
            raise FramingError(400, f"Content-Length: {text!r} is not a length: give the body's size in bytes")
        n = int(text)
        if n > MAX_BODY_BYTES:
            raise FramingError(400, f"Content-Length: {n} bytes is above the limit of {MAX_BODY_BYTES}")
        return self.rfile.read(n) if n else b""

    def _read_chunked(self) -> bytes:
        """A chunked body (RFC 9112 7.1), at most :data:`MAX_BODY_BYTES`; its trailers dropped."""
        coding = self.headers.get("Transfer-Encoding", "").strip().lower()
        if coding != "chunked":
            raise FramingError(411, f"Transfer-Encoding: {coding!r} is not read here: send the body with "
                                    "Content-Length, or chunked")
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(MAX_CHUNK_LINE)
            size = line.split(b";", 1)[0].strip()
            if not re.fullmatch(rb"[0-9a-fA-F]{1,8}", size):
                raise FramingError(400, f"Transfer-Encoding: chunked: {line[:40]!r} is not a chunk size line")
            n = int(size, 16)
            total += n
            if total > MAX_BODY_BYTES:
                raise FramingError(400, f"Transfer-Encoding: chunked: the body is above the limit of {MAX_BODY_BYTES} "
                                        "bytes")
            if n == 0:
                while self.rfile.readline(MAX_CHUNK_LINE).strip():
                    pass  # trailer fields: none is used
                return b"".join(parts)
            parts.append(self.rfile.read(n))
            if self.rfile.readline(MAX_CHUNK_LINE).strip():
                raise FramingError(400, f"Transfer-Encoding: chunked: a chunk of {n} bytes holds more")

    def _send(self, code: int, out: Any, raw: bool = False) -> None:
        data = out if raw else orjson.dumps(out)
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream" if raw else "application/json")
        self.send_header("Content-Length", str(len(data)))
        if code == HTTPStatus.METHOD_NOT_ALLOWED:
            self.send_header("Allow", ", ".join(self.allowed))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.send_header(headers.CLOCK, headers.stamps(self.received_ns, time.time_ns()))
        ptp = self.server.ptp.header()
        if ptp:
            self.send_header(headers.PTP, ptp)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors as OTG errors (JSON, never its HTML page): a method no handler
        has (its 501) is routed, so a known path answers 405; a request it could not parse, 400."""
        if code == HTTPStatus.NOT_IMPLEMENTED and getattr(self, "headers", None) is not None:
            self._handle(self.command)
            return
        self.close_connection = True
        self._send(code, error_body(code, "validation", message or HTTPStatus(code).phrase))

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            self.server.log(f"{self.address_string()} {format % args}")


#: The paths a PATCH is refused on (send the whole config).
_PATCHED = ("/config/append", "/config/delete")


def _refused(_: Any) -> tuple[Any, bool]:
    raise refusal.refuse("config append, delete", "config")


class OtgServer(ThreadingHTTPServer):
    """The HTTP(S) server of an :class:`OtgService`; ``serve()`` until ``stop()``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, service: OtgService, host: str, port: int, tls: ssl.SSLContext | None,
                 verbose: bool = False, token: str | None = None, ptp_socket: str | None = None):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            super().__init__((host, port), Handler)
        except OSError as e:
            raise bind_error(e, host, port, "--listen") from None
        self.service, self.verbose, self.tls, self.token = service, verbose, tls, token
        #: A token crosses the network in clear (plain HTTP beyond loopback): said at its first use.
        self._clear_token = tls is None and token is not None and not ipaddress.ip_address(host).is_loopback
        self._told = threading.Lock()
        self.ptp = PtpProbe(ptp_socket)
        #: What this agent's controller left with it (``/netrig/controller``).
        self.controller_record = report.ControllerRecord()
        self.supervision = Supervision(service.stop_traffic, self.log)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self._thread: threading.Thread | None = None

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        if isinstance(conn, ssl.SSLSocket):
            conn.settimeout(10)
            try:
                conn.do_handshake()
            except (ssl.SSLError, OSError) as e:
                self.log(f"{addr[0]}: TLS handshake failed: {e}")
                conn.close()
                raise
            conn.settimeout(None)
        return conn, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.log(f"{client_address[0]}: connection error: {sys.exc_info()[1]}")

    def log(self, line: str) -> None:
        api.log(line)

    def keep_record(self, body: Any) -> dict[str, Any]:
        """``POST /netrig/controller``: keep what this agent's controller left (the last one given)."""
        self.controller_record = report.read(report.ControllerRecord, body)
        return {"warnings": []}

    def token_accepted(self) -> None:
        """A request's token was accepted: over plain HTTP beyond loopback, said once in the log."""
        if not self._clear_token:
            return
        with self._told:
            told, self._clear_token = not self._clear_token, False
        if not told:
            self.log(f"{self.url}: a bearer token accepted over plain HTTP beyond loopback: it crosses the network "
                     "in clear; serve HTTPS (drop --http) unless this management network is closed")

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), int(self.server_address[1])
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, args=(STOP_POLL_S,), name="netrig-serve",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, close the socket and the service (every flow stopped, ports closed)."""
        self.supervision.close()
        self.shutdown()
        self.server_close()
        self.service.close()
