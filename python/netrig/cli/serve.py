"""``netrig serve``: an Open Traffic Generator (OTG) server on netrig's engine (docs/otg.md).

snappi, gosnappi, otgen or curl set a config (ports, flows of any header stack with field
patterns, frame sizes, rates, durations, captures), start and stop traffic, read port and flow
metrics and captures. Each ``--port IF[@NS]`` is a port the config's ``location`` names; every port
passes the transmit guard at start (``--i-know-this-is-live`` overrides it).

HTTPS on 127.0.0.1:8443 by default, with a self-signed certificate made on first start and kept in
``$XDG_STATE_HOME/netrig/serve`` (default ``~/.local/state/netrig/serve``; ``--cert``/``--key`` give
one's own); ``--http`` serves plain HTTP, on loopback only. Listening beyond loopback needs TLS and
``--client-ca``: clients then present a certificate that CA signed. Devices, protocols, LAGs and
the like are refused naming the config path (the table in docs/otg.md). Ctrl-C or SIGTERM stop
every flow, close the ports and the socket. ``--record DIR`` keeps each session as a netrig result
(`netrig report DIR` draws it).

Many hosts as one tester (docs/distributed.md): each host runs ``netrig serve --port … --token-file
F`` (an agent, answering only who sends the token); one ``netrig serve --agent NAME=URL …
--agent-token-file F`` (the controller, no ports of its own) takes configs whose port locations
are ``NAME/IF[@NS]``, gives each agent its part and merges their metrics.

``--json``: once it serves, one line of JSON on stdout says where and what (``url``, ``serving``: the
ports, or the agents), for a script that started it."""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from netrig import _native
from netrig.cli.common import add_metrics_listen, check_choice, check_range, metrics_endpoint, require_root
from netrig.errors import ConfigError, wait_for
from netrig.methodology.vocabulary import option
from netrig.model.defaults import SERVE_DRAIN_S as DEFAULT_DRAIN_S
from netrig.testbed.state import ports_held
from netrig.trial import IO_MODES, Port

# The server and the OTG model (snappi: ~0.5 s to import) load when `netrig serve` runs, not for
# every command's parser.
if TYPE_CHECKING:
    from netrig.controller.agents import AgentClient
    from netrig.otg.mapping import ServePort
    from netrig.otg.server import OtgServer

DEFAULT_LISTEN = "127.0.0.1:8443"


def register(sub) -> None:
    p = sub.add_parser("serve", help="an OTG server (snappi, gosnappi, otgen) on netrig's engine",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    option(p, "--port", "one to serve, in network namespace NS after @ (a config's ports name them by location, or "
                        "are taken in this order)", action="append", default=[])
    option(p, "--listen", f"where to listen (default {DEFAULT_LISTEN}; beyond loopback needs TLS and --client-ca)",
           default=DEFAULT_LISTEN)
    option(p, "--http", "plain HTTP instead of HTTPS (loopback only)")
    option(p, "--cert", "the server's certificate (PEM; default: self-signed, made on first start in "
                        "$XDG_STATE_HOME/netrig/serve)")
    option(p, "--key", "the certificate's key (PEM; with --cert)")
    option(p, "--client-ca", "accept only clients with a certificate this CA signed (mutual TLS)")
    option(p, "--token-file", "serve only requests with this bearer token (its first line): an agent trusting its "
                              "controller; lets --http and TLS without --client-ca listen beyond loopback")
    option(p, "--ptp-socket", "the management socket of this host's ptp4l (its uds_address; default ptp4l's, "
                              "/var/run/ptp4l): its offset from the grandmaster is told to the controller")
    option(p, "--agent", "be a controller: an agent (netrig serve) at URL, named NAME in port locations NAME/IF "
                         "(repeat; no --port then)", action="append", default=[])
    option(p, "--agent-token-file", "the bearer token the agents were given (their --token-file)")
    option(p, "--agent-ca", "the CA (or certificate) that signed the agents' certificates (https agents; default: "
                            "the system's CAs)")
    option(p, "--agent-cert", "the certificate a controller presents to agents that ask for one (their --client-ca)")
    option(p, "--agent-key", "the key of --agent-cert")
    option(p, "--io", f"{', '.join(IO_MODES)} (default auto)", default="auto")
    option(p, "--tx-cpus", "default: the engine's; two agents on one machine: give each its own")
    option(p, "--rx-cpus", "default: the engine's")
    option(p, "--drain", f"of a flow (default {int(DEFAULT_DRAIN_S * 1000)}ms): a flow is reported stopped after it, "
                         "and a stop waits for it", default=f"{int(DEFAULT_DRAIN_S * 1000)}ms")
    option(p, "--capture-mb", "capture buffer per port and receive queue, MiB (default 64; at most the machine's "
                              "memory)", default="64")
    option(p, "--record", "keep every session as a netrig result in DIR (netrig report)")
    option(p, "--i-know-this-is-live", "the ports (see netrig trial)")
    option(p, "--verbose", "log every request to stderr")
    option(p, "--json", "once it serves: one line, its URL and what it serves")
    add_metrics_listen(p, "every served flow's counts")
    p.set_defaults(func=run)


def listen_address(text: str) -> tuple[str, int]:
    """``ADDR:PORT`` (``[v6]:PORT`` for IPv6) → (address, port); errors name ``--listen``."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        raise ConfigError("--listen", f"{text!r}: give ADDR:PORT, e.g. 127.0.0.1:8443 or [::1]:8443") from None
    if not sep or not 0 < number < 65536:
        raise ConfigError("--listen", f"{text!r}: the port must be 1..65535")
    return host, number


def serve_ports(args) -> list[ServePort]:
    """The ``--port`` arguments as ports (each interface once)."""
    from netrig.otg.mapping import ServePort

    if not args.port:
        raise ConfigError("--port", "give at least one port to serve: --port IF[@NS]")
    out: list[ServePort] = []
    for text in args.port:
        ifname, _, netns = text.partition("@")
        if any(s.name == text for s in out):
            raise ConfigError("--port", f"{text} is given twice: each port once")
        port = Port(ifname, netns or None, args.io, i_know_this_is_live=args.i_know_this_is_live)
        info = _native.interface_info(ifname, netns or None)
        out.append(ServePort(text, port, float(info.speed_bps) if info.speed_bps else None))
    return out


def _tls(args, host: str):
    from netrig.otg.tls import self_signed, server_context

    loopback = ipaddress.ip_address(host).is_loopback
    if args.http:
        if not loopback and not args.token_file:
            raise ConfigError("--http", f"plain HTTP only on loopback ({host} is not): drop --http, and give "
                                        "--client-ca (or --token-file on a closed management network)")
        return None
    if not loopback and not args.client_ca and not args.token_file:
        raise ConfigError("--listen", f"{host} is beyond loopback: give --client-ca (clients' CA) so only clients "
                                      "with a certificate it signed are served, or --token-file")
    if bool(args.cert) != bool(args.key):
        raise ConfigError("--cert", "give --cert and --key together")
    cert, key = (Path(args.cert), Path(args.key)) if args.cert else self_signed()
    return server_context(cert, key, Path(args.client_ca) if args.client_ca else None)


def run(args) -> int:
    from netrig.otg.server import OtgServer
    from netrig.otg.service import Service

    if args.agent:
        return _run_controller(args)
    host, number = listen_address(args.listen)
    check_choice(args.io, IO_MODES, "--io", "an I/O mode")
    capture_mb = check_range(args.capture_mb, "--capture-mb", low=1, allow_low=True, high=_memory_mb(),
                             unit=" MiB")
    tls = _tls(args, host)
    token = _token(args)
    if args.ptp_socket and not Path(args.ptp_socket).is_socket():
        raise ConfigError("--ptp-socket", f"{args.ptp_socket} is no socket: give the uds_address of a running ptp4l, "
                                          "or leave --ptp-socket out")
    require_root("opening ports")
    if args.record:
        _record_dir(args.record)
    with metrics_endpoint(args.metrics_listen) as tel:  # bound before any port opens: a bad value stops here
        ports = serve_ports(args)
        # Held while this server runs: a second netrig process on one of them is refused at once.
        with ports_held([(s.port.ifname, s.port.netns) for s in ports], "--port"):
            # Every port opens once now: the transmit guard and the backends are checked before serving.
            _native.Generator([s.port for s in ports], []).close()
            service = Service(ports, drain_s=args.drain, capture_bytes=int(capture_mb) << 20,
                              tx_cpus=args.tx_cpus or (), rx_cpus=args.rx_cpus or ())
            if tel is not None:
                tel.watch_flow_groups(service.flow_groups)
            if args.record:
                from netrig.otg.record import Recorder

                service.on_change = Recorder(Path(args.record), " ".join(sys.argv)).on_change
            server = OtgServer(service, host, number, tls, verbose=args.verbose, token=token,
                               ptp_socket=args.ptp_socket)
            _serve(server, [s.name for s in ports], args.json)
    return 0


def _memory_mb() -> int:
    """This machine's memory, MiB: the most a capture buffer may take."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20


def _token(args) -> str | None:
    from netrig.otgclient.client import read_token

    return read_token(args.token_file, "--token-file") if args.token_file else None


def _agents(args) -> list[AgentClient]:
    """The ``--agent`` options as clients (each name once), checked before anything is reached."""
    from netrig.controller.agents import AgentClient, AgentSpec, distinct_agents
    from netrig.otgclient.client import client_context, read_token

    if args.port:
        raise ConfigError("--port", "a controller (--agent) has no ports of its own: give them to its agents")
    for name in ("--tx-cpus", "--rx-cpus"):
        if getattr(args, name[2:].replace("-", "_")):
            raise ConfigError(name, "a controller (--agent) runs no workers: give it to the agents")
    if args.ptp_socket:
        raise ConfigError("--ptp-socket", "a controller (--agent) measures latency with no clock of its own: give "
                                          "it to the agents on PTP hosts")
    specs = [AgentSpec.parse(a) for a in args.agent]
    names = [s.name for s in specs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ConfigError("--agent", f"{dup} is given twice: each agent once")
    distinct_agents(specs)
    if bool(args.agent_cert) != bool(args.agent_key):
        raise ConfigError("--agent-cert", "give --agent-cert and --agent-key together")
    token = read_token(args.agent_token_file, "--agent-token-file") if args.agent_token_file else None
    https = any(s.url.startswith("https:") for s in specs)
    ctx = client_context(Path(args.agent_ca) if args.agent_ca else None,
                         Path(args.agent_cert) if args.agent_cert else None,
                         Path(args.agent_key) if args.agent_key else None) if https else None
    return [AgentClient(s, token, ctx) for s in specs]


def _run_controller(args) -> int:
    """``netrig serve --agent …``: a controller of agents (no ports, no root), served as the
    stand-alone server's service is."""
    from netrig.controller.controller import Controller
    from netrig.otg.server import OtgServer

    agents = _agents(args)
    host, number = listen_address(args.listen)
    tls = _tls(args, host)
    token = _token(args)
    controller = Controller(agents)
    try:
        controller.start()
        server = OtgServer(controller, host, number, tls, verbose=args.verbose, token=token)
    except BaseException:
        controller.close()
        raise
    _serve(server, [f"{a.name} ({a.spec.url})" for a in agents], args.json, "agents ")
    return 0


def _serve(server: OtgServer, serving: list[str], as_json: bool, what: str = "") -> None:
    """Serve until a signal; ``serving``: the ports (or the agents, ``what`` = "agents "), said on stderr
    and, ``as_json``, as one line of JSON on stdout."""
    server.start()
    print(f"netrig serve: {server.url} serving {what}{', '.join(serving)} (Ctrl-C to stop)", file=sys.stderr,
          flush=True)
    if as_json:
        print(json.dumps({"url": server.url, "serving": serving}), flush=True)
    try:
        _wait_for_signal()
    finally:
        server.stop()
        print("netrig serve: stopped: every flow stopped, ports and socket closed", file=sys.stderr, flush=True)


def _wait_for_signal() -> None:
    """Block until Ctrl-C (KeyboardInterrupt) or SIGTERM/SIGHUP (``Terminated``, raised by netrig's
    main): the caller's ``finally`` stops the server, main reports the signal. ``wait_for``, as
    ``Event.wait`` can turn the signal into "release unlocked lock"."""
    wait_for(threading.Event())


def _record_dir(path: str) -> None:
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / ".netrig-write-test").touch()
        (Path(path) / ".netrig-write-test").unlink()
    except OSError as e:
        raise ConfigError("--record", f"{path}: cannot write results there ({e.strerror})") from None
