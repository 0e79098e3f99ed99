"""Defaults every layer shares, defined once (methodology §2–§4).

The drain time is the engine's own default; the others are methodology choices.
"""
from __future__ import annotations

from netrig import _native

#: Wait after the last frame of a trial for frames in flight (methodology §2).
DRAIN_S: float = _native.DEFAULT_DRAIN_S
#: How long a served flow's frames may still be on their way after its last one left, by default
#: (`netrig serve --drain`), s.
SERVE_DRAIN_S: float = 0.1
#: RFC 2544 trial duration (§26.1 throughput, §26.3 frame loss).
TRIAL_DURATION_S: float = 60.0
#: Link speed assumed when an interface reports none (veth); every report says it is nominal.
NOMINAL_LINE_RATE_BPS: float = 10e9
#: RFC 8219 §9.2: the tester must prove this multiple of every rate it uses.
SELFTEST_FACTOR: float = 1.1
#: An achieved TX rate more than this far below the intended one makes a trial invalid (tester-limited).
TX_TOLERANCE_PCT: float = 2.0
#: A burst whose sending paused this long (its longest gap between departures) is not back to back
#: (nor one sent this much slower in all than the tester's burst rate):
#: the DUT drained meanwhile (a policer's bucket refilled 266 frames in a clean clone, its burst
#: read 1 333 frames against a 1 000-frame bucket). Bursts on veth here pause 0.28-0.37 ms between
#: batches; one of 16 paused 1.9 ms.
BURST_PAUSE_NS = 1_000_000
#: A trial stretched by more than this share of its duration was not slowed by a transient stall
#: (this VM class stalls for several ms): the tester cannot keep the rate, and repeating the trial
#: (``stall_retries``) would only fail again.
TRANSIENT_STRETCH_MAX: float = 0.1
#: An offered load whose peak in any 1 ms window is more than this above the intended count is
#: *bunched* (flagged: the DUT saw bursts from the tester).
SMOOTHNESS_TOLERANCE_PCT: float = 10.0
