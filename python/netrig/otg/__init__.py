"""netrig speaks OTG: `netrig serve` drives the engine's generator through the Open Traffic
Generator API (docs/otg.md).

* :mod:`netrig.otg.schema` — OTG objects checked against snappi's model tables, paths in errors;
* :mod:`netrig.otg.refusal` — what is supported, warned, refused (the docs' table);
* :mod:`netrig.otg.headers`, :mod:`netrig.otg.mapping` — an OTG config → the generator's specs;
* :mod:`netrig.otg.service` — the state machine behind the endpoints;
* :mod:`netrig.otg.server` — the HTTP(S) endpoints snappi and gosnappi speak.
"""
