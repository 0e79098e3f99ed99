"""TLS for netrig serve: a self-signed certificate made on first start, and the server context (a
client's context and token: :mod:`netrig.otgclient.client`).

The certificate and its key live in the state directory (``$XDG_STATE_HOME/netrig/serve``, by
default ``~/.local/state/netrig/serve``: ``cert.pem``, ``key.pem``, the key readable by its owner
only), made once with ``openssl`` for ``localhost``, ``127.0.0.1`` and ``::1`` and kept for the next
start. ``--cert``/``--key`` give one's own instead. With a client CA (``--client-ca``) the server
asks every client for a certificate that CA signed (mutual TLS): what binding beyond loopback needs.
"""
from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from pathlib import Path

from netrig.errors import ConfigError
from netrig.otgclient.secrets import check_secret_file

#: Days the self-signed certificate is valid.
CERT_DAYS = 825


def state_dir() -> Path:
    """Where netrig serve keeps its certificate."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "netrig" / "serve"


def self_signed(directory: Path | None = None) -> tuple[Path, Path]:
    """The self-signed certificate and key in ``directory`` (the state directory), made if missing."""
    d = directory or state_dir()
    cert, key = d / "cert.pem", d / "key.pem"
    if cert.exists() and key.exists():
        return cert, key
    if shutil.which("openssl") is None:
        raise ConfigError("--cert", "no certificate yet and no openssl to make one: install openssl, or give "
                                    "--cert and --key, or use --http on loopback")
    d.mkdir(parents=True, exist_ok=True)
    cmd = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", str(key), "-out", str(cert), "-days", str(CERT_DAYS), "-subj", "/CN=netrig serve",
           "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1"]
    old = os.umask(0o077)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    finally:
        os.umask(old)
    if r.returncode != 0:
        raise ConfigError("--cert", f"openssl could not make a certificate in {d}: {r.stderr.strip()[:200]}")
    return cert, key


def server_context(cert: Path, key: Path, client_ca: Path | None) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 and later); with ``client_ca``, clients must present a
    certificate it signed. The key and the CA pass :func:`check_secret_file` first."""
    check_secret_file(key, "--key")
    if client_ca is not None:
        check_secret_file(client_ca, "--client-ca", secret=False)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as e:
        raise ConfigError("--cert", f"{cert} / {key}: cannot load: {e}") from None
    if client_ca is not None:
        try:
            ctx.load_verify_locations(str(client_ca))
        except (OSError, ssl.SSLError) as e:
            raise ConfigError("--client-ca", f"{client_ca}: cannot load: {e}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
