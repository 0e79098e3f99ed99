"""netrig speaks OTG: `netrig serve` drives the engine's generator through the Open Traffic
Generator API (docs/otg.md).

* :mod:`netrig.otg.schema` — OTG objects checked against snappi's model tables, paths in errors;
* :mod:`netrig.otg.objects` — the requests read into frozen dataclasses, the model's defaults filled in;
* :mod:`netrig.otg.refusal` — what is supported, warned, refused (the docs' table);
* :mod:`netrig.otg.headers`, :mod:`netrig.otg.mapping` — an OTG config → the generator's specs;
* :mod:`netrig.otg.api` — the interface the server serves (:class:`~netrig.otg.api.OtgService`);
* :mod:`netrig.otg.service` — the state machine on this host's ports behind the endpoints;
* :mod:`netrig.otg.server` — the HTTP(S) endpoints snappi and gosnappi speak.

Many hosts as one tester: ``netrig.controller`` (another implementation of the interface); an OTG
server as a client reaches it: :mod:`netrig.otgclient`.
"""
