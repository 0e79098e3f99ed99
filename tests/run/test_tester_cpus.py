"""A DUT that holds CPUs of this host with its own threads (a forwarder, a capture) keeps them: the
tester's workers go on the other CPUs, in the DUT's trials and in the self-test run beside it, and
the run records where they went. Also: the ports' tx_cpus / rx_cpus in a config are checked."""
from __future__ import annotations

import contextlib
import os
from dataclasses import replace

import pytest

from netrig.errors import ConfigError
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner
from netrig.run.session import TesterCpus, simulated_session
from netrig.testbed.state import TestbedState
from netrig.testbed.testbed import Testbed

CONFIG = {
    "testbed": {"name": "simulated", "simulator": {"capacity_pps": 400_000}},
    "trial": {"duration_s": "1s"},
    "frames": {"sizes": [64]},
    "methods": [{"rfc2544_throughput": {"resolution_pct": 5.0}}],
}


def test_the_selftest_runs_on_the_cpus_the_dut_session_gave_the_tester(tmp_path):
    seen: dict[str, tuple] = {}

    def provider(config, role):
        @contextlib.contextmanager
        def cm():
            seen[role] = (config.ports.tx_cpus, config.ports.rx_cpus)
            with simulated_session(config, role) as s:
                if role == "dut":  # what engine_session gives when the DUT holds CPU 1
                    s = replace(s, tester_cpus=TesterCpus((0,), (0,)))
                yield s

        return cm()

    Runner(config_from_dict(CONFIG), tmp_path / "r", provider=provider).run()
    assert seen["dut"] == ((), ())
    assert seen["selftest"] == ((0,), (0,))


def test_testbed_tester_cpus_are_those_the_dut_does_not_hold():
    tb = Testbed.__new__(Testbed)
    n = os.cpu_count() or 1
    tb.state = TestbedState("ab12", "forwarder")
    assert tb.tester_cpus() == ()  # a kernel DUT holds nothing: the engine's own split
    tb.state = TestbedState("ab12", "forwarder", dut_threads_cpus=[n - 1])
    assert tb.tester_cpus() == tuple(range(n - 1))
    tb.state = TestbedState("ab12", "forwarder", dut_threads_cpus=list(range(n)))
    assert tb.tester_cpus() == ()  # all held: share (nothing better to do)


@pytest.mark.parametrize("field", ["tx_cpus", "rx_cpus"])
def test_config_tester_cpus_must_exist_here(field):
    n = os.cpu_count() or 1
    with pytest.raises(ConfigError, match=f"{field}.*0..{n - 1}"):
        config_from_dict({**CONFIG, "ports": {field: [n]}})
    assert getattr(config_from_dict({**CONFIG, "ports": {field: [0]}}).ports, field) == (0,)


def test_the_config_sets_up_each_port_and_one_interface_is_one_port():
    from netrig.run.config import PortsConfig
    from netrig.run.session import ports_of

    p = PortsConfig(io="af_xdp", queues=2, ring_frames=65536, busy_poll_us=50, i_know_this_is_live=True)
    tx, rx = ports_of(p, ("veth0", "ns-a"), ("veth1", "ns-b"))
    assert [(q.ifname, q.netns, q.io, q.queues, q.ring_frames, q.busy_poll_us, q.i_know_this_is_live)
            for q in (tx, rx)] == [("veth0", "ns-a", "af_xdp", 2, 65536, 50, True),
                                   ("veth1", "ns-b", "af_xdp", 2, 65536, 50, True)]
    tx, rx = ports_of(PortsConfig(), ("eth0", None), ("eth0", None))
    assert tx is rx and tx.ring_frames == 0
