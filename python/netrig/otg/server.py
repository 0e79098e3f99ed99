"""The OTG HTTP endpoints, as snappi's and gosnappi's HTTP transports speak them.

======================  ======  ===========================================================
path                    method  what
======================  ======  ===========================================================
/capabilities/version   GET     ``Version`` (``api_spec_version`` is the range of clients served)
/config                 POST    set_config: ``Warning``
/config                 GET     the config set
/config, /config/append,
/config/delete          PATCH   refused: send the whole config
/control/state          POST    traffic (start, stop, pause, resume), port capture: ``Warning``
/control/action         POST    refused (no devices, no protocols)
/monitor/metrics        POST    port and flow metrics
/monitor/states         POST    device states: empty (no devices)
/monitor/capture        POST    a port's capture, pcap or pcapng (application/octet-stream)
/netrig/agents          GET     a controller's agents: state, clock, stale flows (netrig's own)
======================  ======  ===========================================================

Distributed (docs/distributed.md): a server given a token (``--token-file``) answers only requests
with ``Authorization: Bearer TOKEN`` (401 otherwise); every answer carries the server's realtime
clock as the request arrived and as the answer left (``X-Netrig-Clock-Ns: T1 T2``) and, where
linuxptp runs, its state (``X-Netrig-Ptp``); a controller's start may name the tags to send under
(``X-Netrig-Tags``) or ask only to count (``X-Netrig-Receive``) (:mod:`netrig.otgclient.headers`).

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
from netrig.otg import refusal
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
from netrig.otgclient import headers

#: Largest request body read, bytes (a 4096-flow config with every pattern is a few MB).
MAX_BODY_BYTES = 256 << 20
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


def status_of(e: BaseException) -> tuple[int, str]:
    """HTTP status and OTG error kind of an exception."""
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
    server_version = "netrig-serve"

    def _route(self, method: str) -> Callable[[Any], tuple[Any, bool]] | None:
        s = self.server.service
        path = self.path.split("?", 1)[0].rstrip("/")
        routes: dict[tuple[str, str], Callable[[Any], tuple[Any, bool]]] = {
            ("GET", "/capabilities/version"): lambda _: (s.version(), False),
            ("GET", "/netrig/agents"): lambda _: (s.agents_report(), False),
            # headers: checked as they are mapped (netrig.otg.headers)
            ("POST", "/config"): lambda b: ({"warnings": s.set_config(read(Config, b, defer_headers=True), b)},
                                            False),
            ("GET", "/config"): lambda _: (s.get_config(), False),
            ("POST", "/control/state"): lambda b: ({"warnings": s.control_state(read(ControlState, b),
                                                                                self._start_tags())}, False),
            ("POST", "/control/action"): lambda b: (s.control_action(read(ControlAction, b)), False),
            ("POST", "/monitor/metrics"): lambda b: (s.metrics(read(MetricsRequest, b)), False),
            ("POST", "/monitor/states"): lambda b: (s.states(read(StatesRequest, b)), False),
            ("POST", "/monitor/capture"): lambda b: (s.capture(read(CaptureRequest, b)), True),
        }
        if method == "PATCH" and path in ("/config", "/config/append", "/config/delete"):
            return _refused
        return routes.get((method, path))

    def _start_tags(self) -> StartTags | None:
        """A controller's headers on a start (``X-Netrig-Tags``, ``X-Netrig-Receive``), if any."""
        tags, receive = self.headers.get(headers.TAGS), headers.is_receive(self.headers.get(headers.RECEIVE))
        if tags is None and not receive:
            return None
        return StartTags(tuple(headers.parse_tags(tags)) if tags is not None else None, receive)

    def _authorised(self) -> bool:
        token = self.server.token
        if token is None:
            return True
        given = self.headers.get("Authorization") or ""
        if hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return True
        self.server.log(f"{self.address_string()}: refused: no or a wrong bearer token")
        self.close_connection = True
        self._send(HTTPStatus.UNAUTHORIZED, error_body(401, "validation", "this agent serves only its "
                                                       "controller: send Authorization: Bearer with its token"))
        return False

    def parse_request(self) -> bool:
        self.received_ns = time.time_ns()  # the request line just read: the clock exchange's t1
        return super().parse_request()

    def _handle(self, method: str) -> None:
        if not self._authorised():
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
            body = self._body() if method != "GET" else None
            if route is None:
                return HTTPStatus.NOT_FOUND, error_body(404, "validation", f"{method} {self.path}: no such OTG "
                                                                            "endpoint"), False
            out, raw = route(body)
            return HTTPStatus.OK, out, raw
        except (NetrigError, ValueError) as e:
            code, kind = status_of(e)
            return code, error_body(int(code), kind, str(e)), False
        except Exception as e:  # a bug here: one line to the client and to the log, never a traceback
            self.server.log(f"internal error: {type(e).__name__}: {e}")
            return HTTPStatus.INTERNAL_SERVER_ERROR, error_body(500, "internal", f"{type(e).__name__}: {e}"), False

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY_BYTES:
            raise ConfigError("request", f"{n} bytes is above the limit of {MAX_BODY_BYTES}")
        data = self.rfile.read(n) if n else b""
        if not data.strip():
            return {}
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise ConfigError("request", f"not JSON: {e}") from None

    def _send(self, code: int, out: Any, raw: bool = False) -> None:
        data = out if raw else orjson.dumps(out)
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream" if raw else "application/json")
        self.send_header("Content-Length", str(len(data)))
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

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            self.server.log(f"{self.address_string()} {format % args}")


def _refused(_: Any) -> tuple[Any, bool]:
    raise refusal.refuse("config update, append, delete", "config")


class OtgServer(ThreadingHTTPServer):
    """The HTTP(S) server of an :class:`OtgService`; ``serve()`` until ``stop()``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, service: OtgService, host: str, port: int, tls: ssl.SSLContext | None,
                 verbose: bool = False, token: str | None = None):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), Handler)
        self.service, self.verbose, self.tls, self.token = service, verbose, tls, token
        self.ptp = PtpProbe()
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
        print(f"netrig serve: {line}", file=sys.stderr, flush=True)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), int(self.server_address[1])
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="netrig-serve", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, close the socket and the service (every flow stopped, ports closed)."""
        self.shutdown()
        self.server_close()
        self.service.close()
