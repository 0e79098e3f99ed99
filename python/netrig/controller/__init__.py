"""One OTG tester over agents on many hosts: the controller of ``netrig serve --agent NAME=URL``
(docs/distributed.md). `netrig serve`'s HTTP server serves it through
:class:`netrig.otg.api.OtgService`, as it serves a stand-alone server, without knowing its class.

* :mod:`netrig.controller.controller` — the state machine: config split and set, starts with fresh
  tags, metrics merged, the heartbeat and what an agent down means;
* :mod:`netrig.controller.split` — a config → one part per agent (pure);
* :mod:`netrig.controller.merge` — the agents' metric rows → one tester's (pure);
* :mod:`netrig.controller.clock` — each agent's clock offset and its bound (PTP where it runs);
* :mod:`netrig.controller.agents` — a controller's requests to one agent, the clock exchange.
"""
