"""A controller's view of one agent: a `netrig serve` reached over the OTG API (docs/distributed.md).

Requests are the OTG endpoints, with the controller's bearer token (``Authorization: Bearer``,
which an agent started with ``--token-file`` requires) and, where the controller needs them, two
request headers of netrig's: ``X-Netrig-Tags`` (the tags a flow start sends under, one per flow
named) and ``X-Netrig-Receive`` (count the named flows' frames, sending nothing). Every answer
carries the agent's clock (:mod:`netrig.otg.clock`). An agent that does not answer within the
timeout, or refuses the connection, is :class:`AgentDown`.
"""
from __future__ import annotations

import http.client
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import orjson

from netrig.errors import ConfigError, NetrigError
from netrig.otg import clock
from netrig.otg.split import AGENT_NAME

#: Longest wait for an agent's answer to a control or config request, s.
REQUEST_TIMEOUT_S = 30.0
#: Longest wait for a heartbeat's answer, s (an agent slower than this is unreachable).
HEARTBEAT_TIMEOUT_S = 0.5


class AgentDown(NetrigError):
    """An agent (or any OTG server) that refused the connection or did not answer in time."""


class AgentRefused(NetrigError):
    """An agent's (or any OTG server's) OTG error answer (its message, the server named)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


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


class OtgClient:
    """Requests to one OTG server (a `netrig serve`): JSON over HTTP(S) with the bearer token, if
    any; thread-safe (a connection per request). ``label`` names the server in every error."""

    def __init__(self, label: str, url: str, token: str | None, tls: ssl.SSLContext | None):
        self.label, self.url, self.token, self.tls = label, url, token, tls
        u = urllib.parse.urlsplit(url)
        self.https, self.host, self.port = u.scheme == "https", u.hostname or "", u.port or (
            443 if u.scheme == "https" else 80)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                timeout: float = REQUEST_TIMEOUT_S) -> tuple[int, bytes, http.client.HTTPResponse, int, int]:
        """(status, body, response, t0, t3): ``t0``/``t3`` the realtime clock as it was sent and answered."""
        h = {"Content-Type": "application/json", **(headers or {})}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        data = orjson.dumps(body) if body is not None else None
        conn = self._connection(timeout)
        try:
            conn.connect()
            t0 = time.time_ns()
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            t3 = time.time_ns()
            out = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise AgentDown(f"{self.label} ({self.url}): {type(e).__name__}: {e}") from None
        finally:
            conn.close()
        return resp.status, out, resp, t0, t3

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
             timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """An OTG request; its JSON answer, or :class:`AgentRefused` with the server's error."""
        status, out, resp, _, _ = self.request(method, path, body, headers, timeout)
        if status != 200:
            try:
                errors = orjson.loads(out).get("errors") or [out.decode(errors="replace")]
            except (orjson.JSONDecodeError, AttributeError):
                errors = [out.decode(errors="replace")[:200]]
            raise AgentRefused(f"{self.label}: {' '.join(str(e) for e in errors)}", status)
        if resp.getheader("Content-Type") == "application/octet-stream":
            return out
        return orjson.loads(out) if out else {}


class AgentClient(OtgClient):
    """A controller's requests to one agent, and the heartbeat's clock exchange."""

    def __init__(self, spec: AgentSpec, token: str | None, tls: ssl.SSLContext | None):
        super().__init__(f"agent {spec.name}", spec.url, token, tls)
        self.spec = spec
        self._beat: http.client.HTTPConnection | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def clock_sample(self) -> tuple[clock.Sample, clock.Ptp | None]:
        """One NTP-style exchange (``GET /capabilities/version``) on the heartbeat's own connection,
        kept open (no connect or new server thread in the round trip); :class:`AgentDown` on failure.
        Only the heartbeat thread calls it."""
        h = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            if self._beat is None:
                self._beat = self._connection(HEARTBEAT_TIMEOUT_S)
                self._beat.connect()
            t0 = time.time_ns()
            self._beat.request("GET", "/capabilities/version", headers=h)
            resp = self._beat.getresponse()
            t3 = time.time_ns()
            resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise AgentDown(f"{self.label} ({self.url}): {type(e).__name__}: {e}") from None
        stamps = clock.parse_stamps(resp.getheader(clock.CLOCK_HEADER))
        if resp.status != 200 or stamps is None:
            self.close()
            raise AgentDown(f"agent {self.name}: answered {resp.status} without its clock: is it netrig serve, "
                            "and does it trust this controller's token?")
        return clock.Sample(t0, *stamps, t3), clock.parse_ptp(resp.getheader(clock.PTP_HEADER))

    def close(self) -> None:
        if self._beat is not None:
            self._beat.close()
        self._beat = None
