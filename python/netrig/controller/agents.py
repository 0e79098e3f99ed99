"""A controller's view of one agent: a `netrig serve` reached over the OTG API (docs/distributed.md).

Requests are the OTG endpoints through :class:`netrig.otgclient.client.OtgClient`, with the
controller's bearer token and, where the controller needs them, netrig's two request headers
(``X-Netrig-Tags``, ``X-Netrig-Receive``: :mod:`netrig.otgclient.headers`). Every answer carries
the agent's clock, which the heartbeat's exchange reads (:mod:`netrig.controller.clock`). An agent
that does not answer within the timeout, or refuses the connection, is
:class:`~netrig.otgclient.client.OtgDown`.
"""
from __future__ import annotations

import http.client
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass

from netrig.controller import clock
from netrig.controller.split import AGENT_NAME
from netrig.errors import ConfigError
from netrig.otgclient import headers
from netrig.otgclient.client import OtgClient, OtgDown

#: Longest wait for a heartbeat's answer, s (an agent slower than this is unreachable).
HEARTBEAT_TIMEOUT_S = 0.5


@dataclass(frozen=True)
class AgentSpec:
    """``--agent NAME=URL``."""

    name: str
    url: str

    @staticmethod
    def parse(text: str) -> AgentSpec:
        name, sep, url = text.partition("=")
        u = urllib.parse.urlsplit(url)
        if not sep or not AGENT_NAME.match(name) or u.scheme not in ("http", "https") or not u.hostname:
            raise ConfigError("--agent", f"{text!r}: give NAME=URL, e.g. agent-a=https://198.18.0.1:8443 (NAME: "
                                         "letters, digits, . _ -)")
        return AgentSpec(name, url.rstrip("/"))

    @property
    def endpoint(self) -> tuple[str, str, int]:
        """Where the agent is: (scheme, host, port), the port the scheme's when the URL gives none."""
        u = urllib.parse.urlsplit(self.url)
        scheme = u.scheme.lower()
        return scheme, (u.hostname or "").lower(), u.port or (443 if scheme == "https" else 80)


def distinct_agents(specs: list[AgentSpec]) -> None:
    """Each agent once: one agent under two names would be given two parts of a config, each replacing
    the other's on it (and its ports reached twice)."""
    seen: dict[tuple[str, str, int], str] = {}
    for s in specs:
        other = seen.setdefault(s.endpoint, s.name)
        if other != s.name:
            scheme, host, port = s.endpoint
            raise ConfigError("--agent", f"{other} and {s.name} are one agent ({scheme}://{host}:{port}): give each "
                                         "agent once, under one name")


class AgentClient(OtgClient):
    """A controller's requests to one agent, and the heartbeat's clock exchange."""

    def __init__(self, spec: AgentSpec, token: str | None, tls: ssl.SSLContext | None):
        super().__init__(f"agent {spec.name}", spec.url, token, tls)
        self.spec = spec
        self._beat: http.client.HTTPConnection | None = None
        # the heartbeat's connection: the heartbeat and the re-admission of a down agent use it,
        # one at a time (an agent marked down by a request may still be in a heartbeat)
        self._beat_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.spec.name

    def auth(self) -> dict[str, str]:
        """The token, and supervision on every request: the agent stops its flows when this
        controller falls silent (netrig.otg.supervision)."""
        return {**super().auth(), **headers.supervise()}

    def clock_sample(self) -> tuple[clock.Sample, headers.Ptp | None]:
        """One NTP-style exchange (``GET /capabilities/version``) on the heartbeat's own connection,
        kept open (no connect or new server thread in the round trip); :class:`OtgDown` on failure.
        One caller at a time."""
        with self._beat_lock:
            return self._clock_sample()

    def _clock_sample(self) -> tuple[clock.Sample, headers.Ptp | None]:
        try:
            if self._beat is None:
                self._beat = self.connection(HEARTBEAT_TIMEOUT_S)
                self._beat.connect()
            t0 = time.time_ns()
            self._beat.request("GET", "/capabilities/version", headers=self.auth())
            resp = self._beat.getresponse()
            t3 = time.time_ns()
            resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise self.down(e) from None
        stamps = headers.parse_stamps(resp.getheader(headers.CLOCK))
        if resp.status != 200 or stamps is None:
            self.close()
            raise OtgDown(f"agent {self.name}: answered {resp.status} without its clock: is it netrig serve, "
                          "and does it trust this controller's token?")
        return clock.Sample(t0, *stamps, t3), headers.parse_ptp(resp.getheader(headers.PTP))

    def close(self) -> None:
        """Close the heartbeat's connection (the caller holds it, or the heartbeat is over)."""
        if self._beat is not None:
            self._beat.close()
        self._beat = None
