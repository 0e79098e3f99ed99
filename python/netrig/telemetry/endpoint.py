"""The HTTP endpoint: the Prometheus client library's server on one address, for one command.

``--metrics-listen ADDR:PORT`` (``[v6]:PORT``; ``PORT`` or ``:PORT`` alone: 127.0.0.1) is checked
and bound before anything else starts, so a malformed value, an address this host does not have or
a port in use is one error line naming the option, before any traffic. Loopback unless another
address is asked for. Port 0 takes a free port (the printed URL says which).

The library's application serves ``/metrics`` (only: every other path is a 404) from a thread of its
own (and one thread per request, started by it). That thread is placed as the caller asks
(:meth:`MetricsEndpoint.follow`): in a run, whose loop is tester bookkeeping, it is an observer of
the run (``placement.observer``: ``SCHED_IDLE`` on any CPU), so a scrape only ever uses time no
worker and no DUT thread wants. Requests are served by threads the server thread starts, which
inherit its placement. :meth:`close` stops the server and closes the socket; it is called however
the command ends (``with``), so nothing is left listening.
"""
from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import threading
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from netrig.errors import ConfigError
from netrig.testbed.placement import observer

#: The option every command names in its errors.
OPTION = "--metrics-listen"
LOOPBACK = "127.0.0.1"


def parse_listen(text: str, option: str = OPTION) -> tuple[str, int]:
    """``ADDR:PORT``, ``[V6]:PORT``, ``:PORT`` or ``PORT`` → (address, port); errors name ``option``."""
    value = text.strip()
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ConfigError(option, f"{text!r}: write an IPv6 address in brackets, e.g. [::1]:9464")
    host = host or LOOPBACK
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ConfigError(option, f"{text!r}: give ADDR:PORT with an IP address, e.g. 127.0.0.1:9464 or "
                                  "[::1]:9464 (PORT alone listens on loopback)") from None
    if not port.isdigit() or int(port) > 65535:
        raise ConfigError(option, f"{text!r}: the port must be a number from 0 to 65535 (0: any free port)")
    return host, int(port)


#: How often a server's loop looks whether it was told to stop (``serve_forever``'s poll interval):
#: its ``shutdown()`` waits up to this long. The standard 0.5 s made every stop of `netrig serve`
#: and of the metrics endpoint take ~0.5 s; an idle loop waking 20 times a second costs nothing.
STOP_POLL_S = 0.05


def bind_error(e: OSError, host: str, port: int, option: str) -> ConfigError:
    if e.errno == errno.EADDRINUSE:
        return ConfigError(option, f"{host}:{port} is in use: choose another port (or 0 for any free one)")
    if e.errno == errno.EADDRNOTAVAIL:
        return ConfigError(option, f"{host} is not an address of this host: give one of its addresses, or "
                                   f"leave it out for loopback ({LOOPBACK})")
    if e.errno == errno.EACCES:
        return ConfigError(option, f"port {port} needs privileges to bind: choose one above 1023")
    return ConfigError(option, f"{host}:{port}: cannot listen ({e.strerror or e})")


#: The one path served.
PATH = "/metrics"


class _Quiet(WSGIRequestHandler):
    """No line on stderr per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _metrics_only(registry: CollectorRegistry) -> Callable[..., list[bytes]]:
    """The library's WSGI application on :data:`PATH`, a 404 elsewhere (it answers every path)."""
    app = make_wsgi_app(registry)

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO") == PATH:
            return app(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [f"no such path: the metrics are at {PATH}\n".encode()]
    return serve


class MetricsEndpoint:
    """``/metrics`` of ``registry`` on ``host:port``, served until :meth:`close`."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, option: str = OPTION):
        server_class = type("Server", (ThreadingWSGIServer,), {"address_family": socket.AF_INET6 if ":" in host
                                                                else socket.AF_INET})
        try:
            server: Any = make_server(host, port, _metrics_only(registry), server_class, handler_class=_Quiet)
        except OSError as e:
            raise bind_error(e, host, port, option) from None
        thread = threading.Thread(target=server.serve_forever, args=(STOP_POLL_S,), name="netrig-metrics",
                                  daemon=True)
        thread.start()
        self._server: Any = server
        self._thread: threading.Thread | None = thread
        self.host = host
        self.port = int(server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.host).is_loopback

    def follow(self, idle: bool | None = None) -> None:
        """Place the server thread: when ``idle`` (by default: when the calling thread is tester
        bookkeeping, ``SCHED_IDLE``) as an observer of the run (``placement.observer``: SCHED_IDLE
        on the tester's CPUs, so a scrape never delays the DUT), else as an ordinary thread. New
        request threads inherit it. Where the kernel refuses (no privileges), it stays as it was."""
        thread = self._thread
        if thread is None or thread.native_id is None:
            return
        idle = os.sched_getscheduler(0) == os.SCHED_IDLE if idle is None else idle
        tid = thread.native_id
        if idle:
            observer(tid)
            return
        with contextlib.suppress(OSError):
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))

    def close(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._thread is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._thread = None
