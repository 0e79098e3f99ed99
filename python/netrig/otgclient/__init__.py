"""An OTG server as a client reaches it: `netrig run`'s OTG measurer (``[otg]``) and a controller's
agents (docs/distributed.md).

* :mod:`netrig.otgclient.client` — requests over HTTP(S) with a bearer token, the TLS context, the
  two ways a request fails (:class:`~netrig.otgclient.client.OtgDown`,
  :class:`~netrig.otgclient.client.OtgRefused`);
* :mod:`netrig.otgclient.headers` — netrig's own headers, as both ends write and read them;
* :mod:`netrig.otgclient.messages` — the answers a client reads (metric rows, errors, warnings) as
  frozen dataclasses;
* :mod:`netrig.otgclient.typed` — a JSON object as a frozen dataclass, compiled once per class.

No import of the OTG model (snappi: ~0.5 s): what a client needs is here.
"""
