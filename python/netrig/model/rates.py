"""The three rates of a trial, each named once: the console prints these words, ``result.json``
and the metrics use the same ones in their keys and family names (docs/result-format.md,
*Rates*; docs/telemetry.md).

* **intended** — what a trial was asked to send (the offered load a method searches): a trial
  record's ``load.rate_pps`` and ``counts.intended_pps``, a method's search result (throughput,
  NDR, the soak's ``rate_pps``); ``netrig_intended_rate_pps``, ``netrig_trial_intended_rate_pps``.
* **achieved TX** — what the tester really sent, over its sending window: ``counts.achieved_pps``;
  ``netrig_achieved_rate_pps``, ``netrig_trial_achieved_rate_pps``.
* **received** — what arrived through the DUT (its forwarding rate): the iperf-like method's
  ``received_pps``, the soak's ``rx_pps``, frame loss's ``forwarded_pps``;
  ``netrig_received_rate_pps``, ``netrig_trial_received_rate_pps``.

All three are frames per second, aggregate over the trial's streams, one direction (both
directions of a stateful trial in both).
"""
from __future__ import annotations

#: What a trial was asked to send.
INTENDED = "intended"
#: What the tester really sent.
ACHIEVED = "achieved TX"
#: What arrived through the DUT.
RECEIVED = "received"
