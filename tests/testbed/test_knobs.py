"""Host tuning knobs: applied to a real test bed, read back, and restored byte for byte on every way
out (success, exception, Ctrl-C, SIGTERM, a killed run); what veth lacks is skipped with a reason;
bad specs name their field."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from testbed_helpers import ROOT, assert_gone, host_links, netns_names
from tests.conftest import sh, veth_pair

from netrig.errors import ConfigError, TestbedError
from netrig.run.config import config_from_dict
from netrig.testbed import Testbed
from netrig.testbed import state as st
from netrig.testbed.knobs import KnobInterface, KnobLayout, Knobs, _signals_deferred, applied_knobs

root = pytest.mark.skipif(not ROOT, reason="needs root: builds network namespaces and changes interface settings")

DUT_KNOBS = {
    "features": {"gro": "on", "tso": "off", "gso": "off", "rx": "off", "rx-gro-list": "on"},
    "coalesce": {"rx-usecs": 0},
    "sysfs": {"napi_defer_hard_irqs": 2, "gro_flush_timeout": 200000, "threaded": 1,
              "queues/rx-*/rps_cpus": "1"},
    "sysctl": {"net.core.somaxconn": 2048, "net.ipv4.tcp_rmem": "4096 65536 8388608"},
}
SYSFS_FILES = ("gro_flush_timeout", "napi_defer_hard_irqs", "threaded", "tx_queue_len", "queues/rx-0/rps_cpus",
               "queues/tx-0/xps_cpus")
SYSCTLS = ("net.core.rmem_max", "net.ipv4.tcp_rmem", "net.core.somaxconn")


def snapshot(ns: str | None, ifname: str) -> str:
    """Every setting a knob here touches, read by other tools (ethtool, cat, sysctl under
    `ip netns exec`, which mounts the namespace's own sysfs): text, compared byte for byte."""
    files = " ".join(f"/sys/class/net/{ifname}/{f}" for f in SYSFS_FILES)
    script = (f"ethtool -k {ifname}; ethtool -c {ifname} 2>&1; for f in {files}; do echo $f; cat $f; done; "
              f"sysctl {' '.join(SYSCTLS)}")
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["sh", "-c", script]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout


def feature(ns: str, ifname: str, name: str) -> str:
    for line in sh("ethtool", "-k", ifname, ns=ns).splitlines():
        if line.strip().startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{name} not in ethtool -k {ifname}")


def sysfs(ns: str, ifname: str, rel: str) -> str:
    return sh("cat", f"/sys/class/net/{ifname}/{rel}", ns=ns).strip()


# --------------------------------------------------------------------------------------------- #
# On a router test bed

@pytest.mark.root
@root
def test_router_knobs_flip_and_restore_exactly(tb_ids):
    spec = Knobs.from_dict({"dut": DUT_KNOBS, "tester": {"features": {"gro": "on", "gso": "off"},
                                                        "sysctl": {"net.core.somaxconn": 1024}}})
    with Testbed.create("router") as tb:
        tb_ids.append(tb.id)
        ifs = [(i.netns, i.ifname, i.role) for i in tb.state.interfaces]
        before = {i: snapshot(i[0], i[1]) for i in ifs}
        with applied_knobs(spec, KnobLayout.of_testbed(tb), state=tb.state) as rec:
            during = {i: snapshot(i[0], i[1]) for i in ifs}
            assert tb.state.knobs.undo, "the undo log is in the state file while knobs are held"
            for ns, ifname, role in ifs:
                assert during[(ns, ifname, role)] != before[(ns, ifname, role)]
                assert feature(ns, ifname, "generic-receive-offload") == "on"
                assert feature(ns, ifname, "generic-segmentation-offload") == "off"
                if role == "dut":
                    assert feature(ns, ifname, "tcp-segmentation-offload") == "off"
                    assert feature(ns, ifname, "rx-checksumming") == "off"
                    assert feature(ns, ifname, "rx-gro-list") == "on"
                    assert sysfs(ns, ifname, "threaded") == "1"
                    assert sysfs(ns, ifname, "napi_defer_hard_irqs") == "2"
                    assert sysfs(ns, ifname, "gro_flush_timeout") == "200000"
                    assert sysfs(ns, ifname, "queues/rx-0/rps_cpus") == "1"
                    assert sh("sysctl", "-n", "net.core.somaxconn", ns=ns).strip() == "2048"
                else:
                    assert sysfs(ns, ifname, "threaded") == "0"
                    assert sh("sysctl", "-n", "net.core.somaxconn", ns=ns).strip() == "1024"
            dtx, drx = tb.name("dtx"), tb.name("drx")
            # the record: what was there before, what reads back, what veth cannot do
            assert rec["before"]["dut"][dtx]["features.gro"] == "off"
            assert rec["applied"]["dut"][dtx]["features.gro"] == "on"
            assert rec["applied"]["dut"][dtx]["sysfs.queues/rx-0/rps_cpus"] == "1"
            assert rec["before"]["dut"][tb.dut_netns]["sysctl.net.core.somaxconn"] == "4096"
            assert rec["applied"]["dut"][tb.dut_netns]["sysctl.net.ipv4.tcp_rmem"] == "4096\t65536\t8388608"
            assert not rec["changed"], rec["changed"]
            skipped = {(s["knob"], s["where"]): s["reason"] for s in rec["skipped"]}
            assert set(skipped) == {("coalesce.rx-usecs", dtx), ("coalesce.rx-usecs", drx)}
            assert "veth has no interrupt coalescing" in skipped[("coalesce.rx-usecs", dtx)]
            assert "Operation not supported" in skipped[("coalesce.rx-usecs", dtx)]
            assert rec["restored"] is False
        assert rec["restored"] is True and rec["restore_problems"] == []
        assert tb.state.knobs is None and st.read_state(tb.id).knobs is None
        after = {i: snapshot(i[0], i[1]) for i in ifs}
        for i in ifs:
            assert after[i] == before[i], f"{i[1]} not restored byte for byte"


@pytest.mark.root
@root
def test_restored_after_an_exception(tb_ids):
    spec = Knobs.from_dict({"dut": {"features": {"gro": "on", "tx": "off"}, "sysfs": {"gro_flush_timeout": 5000}}})
    with Testbed.create("router") as tb:
        tb_ids.append(tb.id)
        ns, ifname = tb.dut_netns, tb.name("dtx")
        before = snapshot(ns, ifname)
        with pytest.raises(ZeroDivisionError), applied_knobs(spec, KnobLayout.of_testbed(tb), state=tb.state) as rec:
            assert feature(ns, ifname, "tx-checksumming") == "off"
            # the kernel drops TSO along with tx checksums: read back as "off [requested on]"
            assert "requested on" in feature(ns, ifname, "tx-tcp-segmentation")
            raise ZeroDivisionError("a failure while the knobs are held")
        assert rec["restored"] is True
        assert snapshot(ns, ifname) == before


@pytest.mark.root
@root
def test_unknown_interface_is_refused_before_anything_changes(tb_ids):
    with Testbed.create("router") as tb:
        tb_ids.append(tb.id)
        before = snapshot(tb.dut_netns, tb.name("dtx"))
        spec = Knobs.from_dict({"dut": {"features": {"gro": "on"}}, "interfaces": {"eth9": {"features": {"gro": "on"}}}})
        refused = pytest.raises(ConfigError, match=r"knobs\.interfaces\.eth9: no such interface in test bed .*dtx, drx")
        with refused, applied_knobs(spec, KnobLayout.of_testbed(tb), state=tb.state):
            pass
        assert snapshot(tb.dut_netns, tb.name("dtx")) == before
        # by its role suffix, an interface is addressed alone
        spec = Knobs.from_dict({"interfaces": {"drx": {"features": {"gro": "on"}}}})
        with applied_knobs(spec, KnobLayout.of_testbed(tb)) as rec:
            assert feature(tb.dut_netns, tb.name("drx"), "generic-receive-offload") == "on"
            assert feature(tb.dut_netns, tb.name("dtx"), "generic-receive-offload") == "off"
        assert list(rec["applied"]) == ["interfaces.drx"]


@pytest.mark.root
@root
def test_host_sysctl_restored():
    name = "net.core.busy_read"
    old = sh("sysctl", "-n", name).strip()
    new = "7" if old != "7" else "8"
    with applied_knobs(Knobs.from_dict({"host": {"sysctl": {name: int(new)}}}), KnobLayout()) as rec:
        assert sh("sysctl", "-n", name).strip() == new
    assert sh("sysctl", "-n", name).strip() == old
    assert rec["before"]["host"]["host"][f"sysctl.{name}"] == old and rec["restored"]


@pytest.mark.root
@root
def test_refused_and_host_wide_knobs_are_skipped_with_reasons():
    with veth_pair("k") as (ns_a, if_a, _ns_b, _if_b):
        before = snapshot(ns_a, if_a)
        lay = KnobLayout((KnobInterface("dut", ns_a, if_a),), {"dut": (ns_a,)})
        spec = Knobs.from_dict({"dut": {
            "features": {"lro": "on", "gro": "on"},
            "sysfs": {"queues/rx-0/rps_cpus": "1" + "0" * 32, "queues/rx-7/rps_cpus": "1", "threaded": 1},
            # not in the static table of host-wide sysctls: only the kernel can tell (no copy in a namespace)
            "sysctl": {"net.ipv4.route.gc_timeout": 300}}})
        with applied_knobs(spec, lay) as rec:
            assert sysfs(ns_a, if_a, "threaded") == "1"
        reasons = {s["knob"]: s["reason"] for s in rec["skipped"]}
        assert set(reasons) == {"features.lro", "sysfs.queues/rx-0/rps_cpus", "sysfs.queues/rx-7/rps_cpus",
                                "sysctl.net.ipv4.route.gc_timeout"}, reasons
        assert reasons["features.lro"].startswith(f"fixed on {if_a} (veth): the driver cannot change rx-lro")
        assert reasons["sysfs.queues/rx-0/rps_cpus"].startswith("refused: Value too large")  # CPU 128
        assert "does not exist" in reasons["sysfs.queues/rx-7/rps_cpus"]
        assert "host-wide" in reasons["sysctl.net.ipv4.route.gc_timeout"]
        assert "testbed.knobs.host.sysctl" in reasons["sysctl.net.ipv4.route.gc_timeout"]
        assert rec["restored"] and snapshot(ns_a, if_a) == before


@pytest.mark.root
@root
def test_threaded_napi_without_gro_on_veth_says_how_to_get_it():
    with veth_pair("k") as (ns_a, if_a, _ns_b, _if_b):
        lay = KnobLayout((KnobInterface("dut", ns_a, if_a),), {"dut": (ns_a,)})
        with applied_knobs(Knobs.from_dict({"dut": {"sysfs": {"threaded": 1}}}), lay) as rec:
            assert sysfs(ns_a, if_a, "threaded") == "0"
        (s,) = rec["skipped"]
        assert s["knob"] == "sysfs.threaded" and "Operation not supported" in s["reason"]
        assert 'features.gro = "on"' in s["reason"] and rec["restored"]


SESSION_KNOBS = {"dut": {"features": {"gro": "on"}, "coalesce": {"rx-usecs": 0}, "sysfs": {"threaded": 1}},
                 "tester": {"sysfs": {"gro_flush_timeout": 1000}}}


def _run_config(**testbed):
    return config_from_dict({"testbed": {**testbed, "knobs": SESSION_KNOBS}, "selftest": {"enabled": False},
                             "frames": {"sizes": [64]}, "methods": [{"iperf": {}}]})


@pytest.mark.root
@root
def test_run_sessions_apply_and_restore_on_new_and_existing_testbeds(tb_ids):
    from netrig.run.session import engine_session

    # a test bed built for the run: knobs after the build, restored before the teardown
    with engine_session(_run_config(name="router"), "dut") as s:
        tb_id, ns = s.testbed["id"], s.testbed["dut_netns"]
        tb_ids.append(tb_id)
        rec = s.testbed["knobs"]
        assert feature(ns, f"nr{tb_id}-dtx", "generic-receive-offload") == "on"
        assert sysfs(ns, f"nr{tb_id}-drx", "threaded") == "1"
        # the environment is captured with the knobs applied
        dtx = next(i for i in s.environment["interfaces"] if i["ifname"] == f"nr{tb_id}-dtx")
        assert dtx["offloads"]["generic-receive-offload"] == "on" and dtx["sysfs"]["threaded"] == "1"
        assert [x["knob"] for x in rec["skipped"]] == ["coalesce.rx-usecs"] * 2
        assert rec["restored"] is False
    assert rec["restored"] is True  # the record the run's result holds says so

    # an existing test bed (testbed.id): the same, and it is left standing as it was
    with Testbed.create("router") as tb:
        tb_ids.append(tb.id)
        ifs = [(i.netns, i.ifname) for i in tb.state.interfaces]
        before = [snapshot(*i) for i in ifs]
        with engine_session(_run_config(id=tb.id), "dut") as s:
            assert feature(tb.dut_netns, tb.name("dtx"), "generic-receive-offload") == "on"
            assert sysfs(tb.port("rx").netns, tb.port("rx").ifname, "gro_flush_timeout") == "1000"
            assert st.read_state(tb.id).knobs.undo
        assert s.testbed["knobs"]["restored"] and st.read_state(tb.id).knobs is None
        assert [snapshot(*i) for i in ifs] == before

    # the self-test's test bed (a bridge behind the same wire) gets the tester's and the host's knobs only
    with engine_session(_run_config(name="router"), "selftest") as s:
        tb_ids.append(s.testbed["id"])
        assert s.testbed["topology"] == "bridge"
        assert s.testbed["knobs"]["requested"] == {"tester": SESSION_KNOBS["tester"]}
        assert set(s.testbed["knobs"]["applied"]) == {"tester"}


# --------------------------------------------------------------------------------------------- #
# Signals and crashes

CHILD = r"""
import json, sys, time
from netrig.testbed.knobs import KnobInterface, KnobLayout, Knobs, applied_knobs
ns, ifname, spec = sys.argv[1], sys.argv[2], Knobs.from_dict(json.loads(sys.argv[3]))
layout = KnobLayout((KnobInterface("dut", ns, ifname),), {"dut": (ns,)})
rec = None
try:
    with applied_knobs(spec, layout) as rec:
        print("READY", flush=True)
        while True:
            time.sleep(0.05)
finally:
    print(json.dumps(rec), flush=True)
"""

HELD = {"features": {"gro": "on", "tso": "off", "rx": "off"}, "sysfs": {"gro_flush_timeout": 300000,
        "napi_defer_hard_irqs": 3, "threaded": 1}, "sysctl": {"net.core.somaxconn": 999}}


@pytest.mark.root
@root
@pytest.mark.parametrize("sig, codes", [(signal.SIGINT, (1, 130, -signal.SIGINT)), (signal.SIGTERM, (143,))])
def test_signal_while_held_restores(sig, codes):
    with veth_pair("k") as (ns_a, if_a, ns_b, _if_b):
        # a decoy: an interface of the same name in another namespace must never be touched
        sh("ip", "link", "add", if_a, "type", "veth", "peer", "name", if_a[:-1] + "d", ns=ns_b)
        before, decoy = snapshot(ns_a, if_a), snapshot(ns_b, if_a)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        p = subprocess.Popen([sys.executable, "-c", CHILD, ns_a, if_a, json.dumps({"dut": HELD})], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert p.stdout is not None and p.stdout.readline().strip() == "READY", p.stderr.read() if p.stderr else ""
            assert feature(ns_a, if_a, "generic-receive-offload") == "on"
            assert sysfs(ns_a, if_a, "gro_flush_timeout") == "300000" and sysfs(ns_a, if_a, "threaded") == "1"
            assert sh("sysctl", "-n", "net.core.somaxconn", ns=ns_a).strip() == "999"
            assert snapshot(ns_b, if_a) == decoy
            p.send_signal(sig)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode in codes, err
        rec = json.loads(out.strip().splitlines()[-1])
        assert rec["restored"] is True and not rec["restore_problems"], rec
        assert snapshot(ns_a, if_a) == before
        assert snapshot(ns_b, if_a) == decoy
    assert not {ns_a, ns_b} & netns_names() and if_a not in host_links()


KILLED = r"""
import json, os, sys
from netrig.testbed import Testbed
from netrig.testbed.knobs import KnobLayout, Knobs, applied_knobs
tb = Testbed.attach(sys.argv[1])
with applied_knobs(Knobs.from_dict(json.loads(sys.argv[2])), KnobLayout.of_testbed(tb), state=tb.state):
    os._exit(9)  # like kill -9: no restore runs
"""


@pytest.mark.root
@root
def test_knobs_a_killed_run_left_are_restored_by_the_next_one(tb_ids):
    spec = {"tester": {"features": {"gro": "on"}, "sysctl": {"net.core.somaxconn": 777}}}
    with Testbed.create("router") as tb:
        tb_ids.append(tb.id)
        ns, ifname = tb.port("tx").netns, tb.port("tx").ifname
        before = snapshot(ns, ifname)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        r = subprocess.run([sys.executable, "-c", KILLED, tb.id, json.dumps(spec)], capture_output=True, text=True,
                           env=env, timeout=30)
        assert r.returncode == 9, r.stderr
        assert snapshot(ns, ifname) != before  # left behind
        tb.state = st.read_state(tb.id)
        assert tb.state.knobs.undo
        with applied_knobs(Knobs.from_dict({"dut": {"features": {"gro": "on"}}}), KnobLayout.of_testbed(tb),
                           state=tb.state) as rec:
            assert snapshot(ns, ifname) == before  # restored before this run's own knobs
            assert "features.gro" in rec["leftovers_restored"]
        assert rec["restored"]


@pytest.mark.root
@root
def test_teardown_restores_host_knobs_a_killed_run_left(tb_ids):
    name = "net.core.busy_read"
    old = sh("sysctl", "-n", name).strip()
    new = "9" if old != "9" else "10"
    with Testbed.create("loopback") as tb:
        tb_ids.append(tb.id)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        r = subprocess.run([sys.executable, "-c", KILLED, tb.id, json.dumps({"host": {"sysctl": {name: int(new)}}})],
                           capture_output=True, text=True, env=env, timeout=30)
        assert r.returncode == 9, r.stderr
        assert sh("sysctl", "-n", name).strip() == new  # a host-wide value outlives the run
        tb.state = st.read_state(tb.id)  # as `netrig testbed down`/`clean` read it
    assert sh("sysctl", "-n", name).strip() == old


@pytest.mark.root
@root
def test_another_live_owner_is_refused(tb_ids):
    with Testbed.create("loopback") as tb:
        tb_ids.append(tb.id)
        p = subprocess.Popen(["sleep", "30"])
        try:
            tb.state.knobs = st.KnobHold(p.pid, None, (st.KnobUndo("sysctl", tb.namespaces[0], None, "sysctl.net.core.somaxconn",
                                                             "tester", "net.core.somaxconn", "4096"),))
            spec = Knobs.from_dict({"tester": {"features": {"gro": "on"}}})
            refused = pytest.raises(TestbedError, match=f"process {p.pid} holds tuning knobs")
            with refused, applied_knobs(spec, KnobLayout.of_testbed(tb), state=tb.state):
                pass
        finally:
            p.kill()
            p.wait()
            tb.state.knobs = None


def test_signals_are_held_while_values_are_written():
    with pytest.raises(KeyboardInterrupt), _signals_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        done = True  # reached: the signal waits for the end of the block
    assert done


# --------------------------------------------------------------------------------------------- #
# Bad specs

def _cfg(knobs, name="router", **testbed):
    return {"testbed": {"name": name, "knobs": knobs, **testbed}, "methods": [{"rfc2544_throughput": {}}]}


@pytest.mark.parametrize("data, message", [
    (_cfg({"dutt": {}}), "testbed.knobs.dutt: unknown target; did you mean 'dut'?"),
    (_cfg({"dut": {"featurs": {}}}), "testbed.knobs.dut.featurs: unknown knob kind; did you mean 'features'?"),
    (_cfg({"dut": {"features": {"grooo": "off"}}}), "testbed.knobs.dut.features.grooo: unknown feature; did you mean 'gro'?"),
    (_cfg({"dut": {"features": {"gro": "maybe"}}}), 'testbed.knobs.dut.features.gro: \'maybe\': must be "on" or "off"'),
    (_cfg({"dut": {"coalesce": {"rx-usecs": "fast"}}}), "testbed.knobs.dut.coalesce.rx-usecs: 'fast': must be an integer"),
    (_cfg({"dut": {"coalesce": {"rx-usecs": 1.5}}}), "testbed.knobs.dut.coalesce.rx-usecs: 1.5: must be an integer"),
    (_cfg({"dut": {"coalesce": {"rx-usec": 0}}}), "testbed.knobs.dut.coalesce.rx-usec: unknown coalescing parameter; did you mean 'rx-usecs'?"),
    (_cfg({"dut": {"sysfs": {"napi_defer": 2}}}), "testbed.knobs.dut.sysfs.napi_defer: unknown sysfs attribute; did you mean 'napi_defer_hard_irqs'?"),
    (_cfg({"dut": {"sysfs": {"queues/rx-0/rps_cpus": "cpu1"}}}), "testbed.knobs.dut.sysfs.queues/rx-0/rps_cpus: 'cpu1': must be a hex CPU mask"),
    (_cfg({"dut": {"sysfs": {"threaded": "yes"}}}), "testbed.knobs.dut.sysfs.threaded: 'yes': must be an integer >= 0"),
    (_cfg({"dut": {"sysctl": {"net.core.busy_poll": 50}}}), "testbed.knobs.dut.sysctl.net.core.busy_poll: host-wide, not per network namespace"),
    (_cfg({"dut": {"sysctl": {"kernel.panic": 1}}}), "testbed.knobs.dut.sysctl.kernel.panic: not a network sysctl name"),
    (_cfg({"host": {"features": {"gro": "off"}}}), "testbed.knobs.host.features: host takes only sysctl"),
    (_cfg({"interfaces": {"eth1": {"sysctl": {"net.core.somaxconn": 1}}}}), "testbed.knobs.interfaces.eth1.sysctl: sysctls belong to a namespace"),
    (_cfg({"dut": {"features": {"gro": "on"}}}, name="loopback"), "testbed.knobs.dut: topology loopback has no DUT interfaces"),
    (_cfg({"tester": {"features": {"gro": "on"}}}, name="simulated"), "testbed.knobs: the simulated test bed has no interfaces"),
    (_cfg({"dut": {"features": {"gro": "off"}}}, options={"dut_cpus": "0", "dut_placement": "threaded-napi"}),
     "testbed.knobs.dut.features.gro: off stops veth's NAPI, which dut_placement threaded-napi"),
    (_cfg(["gro"]), "testbed.knobs: must be a table of targets"),
])
def test_bad_specs_name_the_field(data, message):
    with pytest.raises(ConfigError) as e:
        config_from_dict(data)
    assert str(e.value).startswith(message), str(e.value)


def test_config_round_trips_and_accepts_the_documented_shape():
    import tomllib

    text = """
[testbed]
name = "router"
[testbed.knobs.dut]
features = { gro = "off", tso = "off", rx-gro-list = "on" }
coalesce = { rx-usecs = 0, adaptive-rx = "off" }
sysfs = { napi_defer_hard_irqs = 2, gro_flush_timeout = 200000, "queues/rx-*/rps_cpus" = [1] }
[testbed.knobs.dut.sysctl]
"net.core.rmem_max" = 4194304
[testbed.knobs.tester]
features = { generic-receive-offload = false }
[testbed.knobs.host.sysctl]
"net.core.busy_poll" = 50
[testbed.knobs.interfaces.dtx]
features = { rx-udp-gro-forwarding = "on" }
[[methods]]
rfc2544_throughput = {}
"""
    c = config_from_dict(tomllib.loads(text))
    k = c.testbed.knobs
    assert k.dut.features == {"gro": False, "tso": False, "rx-gro-list": True}
    assert k.dut.coalesce == {"rx-usecs": 0, "adaptive-rx": 0}
    assert k.dut.sysfs["queues/rx-*/rps_cpus"] == "2"  # CPU 1 as a mask
    assert k.host.sysctl == {"net.core.busy_poll": 50}
    d = c.to_dict()
    assert d["testbed"]["knobs"]["dut"]["features"] == {"gro": "off", "tso": "off", "rx-gro-list": "on"}
    assert d["testbed"]["knobs"]["tester"] == {"features": {"generic-receive-offload": "off"}}
    assert config_from_dict(d).to_dict() == d
    assert config_from_dict(_cfg({}))
    assert not config_from_dict(_cfg({})).testbed.knobs
    assert k.for_selftest().to_dict() == {"tester": d["testbed"]["knobs"]["tester"], "host": d["testbed"]["knobs"]["host"]}


# --------------------------------------------------------------------------------------------- #
# From the command line

RUN_TOML = """
[testbed]
name = "router"
[testbed.knobs.dut]
features = { gro = "on" }
coalesce = { rx-usecs = 0 }
sysfs = { napi_defer_hard_irqs = 2 }
[line_rate]
speed_bps = "100M"
[trial]
duration_s = "0.5s"
drain_s = "0.2s"
[selftest]
enabled = false
[frames]
sizes = [64]
[[methods]]
iperf = { rate_pct = 5, duration_s = "0.5s", interval_s = "0.5s" }
"""


@pytest.mark.root
@root
def test_netrig_run_records_the_knobs_in_the_result(tmp_path):
    from netrig.results import load_result

    (tmp_path / "k.toml").write_text(RUN_TOML)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-m", "netrig.cli.main", "run", str(tmp_path / "k.toml"), "--out",
                        str(tmp_path / "out"), "--quiet"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode in (0, 1), r.stderr  # 1: a trial that ran but is invalid (a busy host)
    doc = load_result(tmp_path / "out")
    knobs = doc["testbed"]["knobs"]
    assert knobs["restored"] is True and knobs["requested"]["dut"]["features"] == {"gro": "on"}
    assert {(s["knob"], s["reason"].split(" (")[0]) for s in knobs["skipped"]} == {
        ("coalesce.rx-usecs", "veth has no interrupt coalescing")}
    dtx = next(w for w in knobs["applied"]["dut"] if w.endswith("-dtx"))
    assert knobs["applied"]["dut"][dtx] == {"features.gro": "on", "sysfs.napi_defer_hard_irqs": "2"}
    assert doc["config"]["testbed"]["knobs"]["dut"]["sysfs"] == {"napi_defer_hard_irqs": 2}
    assert_gone(doc["testbed"]["id"])


@pytest.mark.parametrize("args, message", [
    (["--knob", "dut.features.grooo=off"], "--knob dut.features.grooo: unknown feature; did you mean 'gro'?"),
    (["--knob", "dut.features=off"], "--knob: must be TARGET.KIND.NAME=VALUE"),
    (["--knob", "dut.coalesce.rx-usecs=fast"], "--knob dut.coalesce.rx-usecs: 'fast': must be an integer"),
    (["--knob", "dut.sysctl.net.core.busy_poll=50"], "--knob dut.sysctl.net.core.busy_poll: host-wide"),
    (["--testbed", "simulated", "--knob", "tester.features.gro=off"], "--knob: the simulated test bed has no"),
])
def test_knob_option_errors_name_the_option(args, message, capsys, tmp_path):
    from netrig.cli.main import main

    assert main(["rfc2544", *args, "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err


def test_knob_options_type_values_like_a_config():
    from netrig.cli.shortcuts import knob_options

    assert knob_options(["dut.features.gro=off", "dut.coalesce.rx-usecs=0", "dut.sysfs.queues/rx-*/rps_cpus=2",
                         "dut.sysfs.threaded=1", "host.sysctl.net.core.busy_poll=50",
                         "tester.sysctl.net.ipv4.tcp_rmem=4096 65536 8388608",
                         "interfaces.dtx.features.rx-gro-list=on"]) == {
        "dut": {"features": {"gro": "off"}, "coalesce": {"rx-usecs": 0},
                "sysfs": {"queues/rx-*/rps_cpus": "2", "threaded": 1}},
        "host": {"sysctl": {"net.core.busy_poll": 50}},
        "tester": {"sysctl": {"net.ipv4.tcp_rmem": "4096 65536 8388608"}},
        "interfaces": {"dtx": {"features": {"rx-gro-list": "on"}}}}
