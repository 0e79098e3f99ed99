"""Files that hold a secret (a bearer token, a TLS key) or decide whom to trust (a CA), checked as
ssh checks its keys, before one is read: a token or key file neither readable nor writable by group
or others, a CA file not writable by them. Every reader of such a file (``netrig serve``'s
``--token-file``, ``--key``, ``--client-ca``, a controller's ``--agent-*``, ``netrig run``'s
``[otg]`` files) calls :func:`check_secret_file`; the error is one line naming the option, the
file, its mode and the remedy."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from netrig.errors import ConfigError

#: Mode bits of group and others a secret (token, key) must not have: read, write, execute.
SECRET_BITS = 0o077
#: Mode bits of group and others a trusted file (a CA) must not have: write.
TRUST_BITS = 0o022


def check_secret_file(path: str | Path, option: str, *, secret: bool = True) -> None:
    """Refuse ``path`` (``option``'s file) when group or others may read or write it (``secret``:
    a token or a key) or write it (a CA). A missing file is left to its reader, which says so."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return
    bad = mode & (SECRET_BITS if secret else TRUST_BITS)
    if not bad:
        return
    what = " and ".join(w for w, bits in (("read", 0o044), ("write", 0o022), ("run", 0o011)) if bad & bits)
    remedy = f"chmod 600 {path}" if secret else f"chmod go-w {path}"
    raise ConfigError(option, f"{path}: group or others may {what} it (mode {mode:04o}): {remedy}")
