"""Requests to one OTG server (a `netrig serve`: stand-alone, an agent or a controller), as `netrig
run`'s OTG measurer and a controller make them (docs/distributed.md).

JSON over HTTP(S), with the bearer token a server started with ``--token-file`` requires
(``Authorization: Bearer``), the TLS context a client presents (:func:`client_context`), the token
read from a file (:func:`read_token`). A server that refuses the connection or does not answer in
time is :class:`OtgDown`; one that answers with an OTG ``Error`` is :class:`OtgRefused`.
"""
from __future__ import annotations

import http.client
import ssl
import time
import urllib.parse
from pathlib import Path
from typing import Any

import orjson

from netrig.errors import ConfigError, NetrigError
from netrig.otgclient.messages import Error, read
from netrig.otgclient.secrets import check_secret_file
from netrig.otgclient.typed import MessageError

#: Longest wait for an answer to a control or config request, s.
REQUEST_TIMEOUT_S = 30.0


class OtgDown(NetrigError):
    """An OTG server that refused the connection or did not answer in time; ``refused``: the
    connection was refused or reset (nothing listens there now), not merely unanswered."""

    def __init__(self, message: str, refused: bool = False):
        super().__init__(message)
        self.refused = refused


class OtgRefused(NetrigError):
    """An OTG server's error answer (its message, the server named) and its HTTP status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class OtgClient:
    """Requests to one OTG server: thread-safe (a connection per request); ``label`` names the
    server in every error."""

    def __init__(self, label: str, url: str, token: str | None, tls: ssl.SSLContext | None):
        self.label, self.url, self.token, self.tls = label, url, token, tls
        u = urllib.parse.urlsplit(url)
        self.https, self.host, self.port = u.scheme == "https", u.hostname or "", u.port or (
            443 if u.scheme == "https" else 80)

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        """A new connection to the server (not connected yet)."""
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def auth(self) -> dict[str, str]:
        """The bearer token's header (none without a token)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def down(self, e: Exception) -> OtgDown:
        return OtgDown(f"{self.label} ({self.url}): {failure(e)}",
                       refused=isinstance(e, (ConnectionRefusedError, ConnectionResetError)))

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                timeout: float = REQUEST_TIMEOUT_S) -> tuple[int, bytes, http.client.HTTPResponse, int, int]:
        """(status, body, response, t0, t3): ``t0``/``t3`` the realtime clock as it was sent and answered."""
        h = {"Content-Type": "application/json", **self.auth(), **(headers or {})}
        data = orjson.dumps(body) if body is not None else None
        conn = self.connection(timeout)
        try:
            conn.connect()
            t0 = time.time_ns()
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            t3 = time.time_ns()
            out = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise self.down(e) from None
        finally:
            conn.close()
        return resp.status, out, resp, t0, t3

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
             timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """An OTG request; its JSON answer (bytes for a capture), or :class:`OtgRefused` with the
        server's error."""
        status, out, resp, _, _ = self.request(method, path, body, headers, timeout)
        if status != 200:
            raise OtgRefused(f"{self.label}: {_error_text(out)}", status)
        if resp.getheader("Content-Type") == "application/octet-stream":
            return out
        return orjson.loads(out) if out else {}


def failure(e: Exception) -> str:
    """What a failed exchange with a server means, in words (the library's code kept where it
    names a TLS refusal)."""
    if isinstance(e, ConnectionRefusedError):
        return "connection refused: nothing listens there"
    if isinstance(e, (ConnectionResetError, BrokenPipeError, http.client.IncompleteRead,
                      http.client.RemoteDisconnected)):
        return "the connection closed before the answer: the server stopped or restarted"
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"its certificate is not trusted ({e.verify_message}: CERTIFICATE_VERIFY_FAILED)"
    if isinstance(e, ssl.SSLError):
        return f"TLS refused ({e.reason or e})"
    if isinstance(e, TimeoutError):
        return "no answer in time: a hung host, or its network down"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return f"{type(e).__name__}: {e}"


def _error_text(out: bytes) -> str:
    """An error answer's messages (its text, cut short, when it is no OTG ``Error``)."""
    try:
        return " ".join(str(e) for e in read(Error, orjson.loads(out)).errors) or out.decode(errors="replace")
    except (orjson.JSONDecodeError, MessageError):
        return out.decode(errors="replace")[:200]


def client_context(ca: Path | None, cert: Path | None, key: Path | None,
                   options: tuple[str, str, str] = ("--agent-ca", "--agent-cert", "--agent-key")) -> ssl.SSLContext:
    """A client's TLS context towards OTG servers (a controller's towards its agents, `netrig run`'s
    towards an OTG server): their certificates checked against ``ca`` (default: the system's CAs),
    ``cert``/``key`` presented to servers that ask (``--client-ca``); errors name ``options`` (the
    CA's, the certificate's, the key's). The CA and the key pass :func:`check_secret_file` first."""
    if ca is not None:
        check_secret_file(ca, options[0], secret=False)
    if cert is not None:
        check_secret_file(key or cert, options[2] if key else options[1])
    try:
        ctx = ssl.create_default_context(cafile=str(ca) if ca else None)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(options[0], f"{ca}: cannot load: {getattr(e, 'strerror', None) or e}: give the PEM of "
                                      "the CA (or the certificate) that signed the server's certificate") from None
    ctx.check_hostname = ca is None  # an agent's own CA names its agents; the system's: by host name
    if cert is not None:
        try:
            ctx.load_cert_chain(str(cert), str(key) if key else None)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(options[1], f"{cert}: cannot load: {getattr(e, 'strerror', None) or e}") from None
    return ctx


def read_token(path: str, option: str) -> str:
    """A bearer token from a file (its first line): never on the command line, where ps shows it;
    a file group or others may read is refused (:func:`check_secret_file`)."""
    check_secret_file(path, option)
    try:
        text = Path(path).read_text().strip().splitlines()
    except OSError as e:
        raise ConfigError(option, f"{path}: cannot read the token ({e.strerror})") from None
    if not text or len(text[0]) < 16:
        raise ConfigError(option, f"{path}: give a token of 16 characters or more on its first line (e.g. "
                                  "openssl rand -hex 32)")
    return text[0]
