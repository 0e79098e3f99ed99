"""``netrig trial`` port topologies from the command line: several port pairs (bidirectional, four
ports), transmit only, and MAC demultiplexing (one stream per destination MAC, counted apart)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading

import pytest
from tests.conftest import forwarding_namespace, if_counter, needs_root, sh, veth_pair

pytestmark = [needs_root, pytest.mark.root]
NETRIG = [sys.executable, "-m", "netrig.cli.main"]
#: Short counting trials: these tests are about where frames go, not pacing precision.
COUNT = ["--frame-size", "128", "--rate", "20kpps", "--frames", "4000", "--drain", "0.3s", "--max-stretch", "50",
         "--json"]


def netrig(*args):
    return subprocess.run([*NETRIG, *args], capture_output=True, text=True, timeout=120)


def counted(r) -> dict:
    """The trial's result. These tests are about where frames go: a trial the tester flagged
    invalid only because a busy CPU stretched its sending still counted every frame; any other
    reason fails the test."""
    assert r.returncode in (0, 1), r.stderr
    res = json.loads(r.stdout)["result"]
    if r.returncode == 1:
        assert "the tester could not keep the rate" in res["invalid_reason"], res["invalid_reason"]
    return res


def streams_of(r) -> list[dict]:
    return counted(r)["streams"]


def test_bidirectional_pair_counts_each_direction():
    with veth_pair("bd") as (ns_a, if_a, ns_b, if_b):
        a, b = f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"
        streams = streams_of(netrig("trial", "--tx", a, "--rx", b, "--tx", b, "--rx", a, *COUNT))
        assert [s["name"] for s in streams] == [f"{if_a}>{if_b}", f"{if_b}>{if_a}"]
        assert [(s["tx_port"], s["rx_port"]) for s in streams] == [(0, 1), (1, 0)]
        for s in streams:
            assert s["frames_sent"] == s["frames_received"] == 4000, s


def test_four_ports_two_pairs():
    with veth_pair("q1") as (n0, i0, n1, i1), veth_pair("q2") as (n2, i2, n3, i3):
        r = netrig("trial", "--tx", f"{i0}@{n0}", "--rx", f"{i1}@{n1}", "--tx", f"{i2}@{n2}", "--rx", f"{i3}@{n3}",
                   *COUNT)
        streams = streams_of(r)
        assert [(s["tx_port"], s["rx_port"]) for s in streams] == [(0, 1), (2, 3)]
        assert all(s["frames_sent"] == s["frames_received"] == 4000 for s in streams), streams
        assert [p["name"] for p in json.loads(r.stdout)["result"]["ports"]] == [i0, i1, i2, i3]


def test_mac_demux_counts_each_destination_apart():
    """Three streams to three MACs on one port; the receiving namespace drops one MAC's frames at
    ingress, so only that stream loses them — the MACs are really on the wire and counted apart."""
    macs = ["02:00:00:00:0d:01", "02:00:00:00:0d:02", "02:00:00:00:0d:03"]
    with veth_pair("md") as (ns_a, if_a, ns_b, if_b):
        listen = forwarding_namespace(ns_b, if_b, f"ether daddr {macs[1]} drop")
        args = ["trial", "--tx", f"{if_a}@{ns_a}", "--rx", f"{listen}@{ns_b}"]
        for m in macs:
            args += ["--dst-mac", m]
        streams = streams_of(netrig(*args, *COUNT))
        assert [s["name"].split("@")[1] for s in streams] == macs
        assert [s["frames_received"] for s in streams] == [4000, 0, 4000], streams
        assert all(s["frames_sent"] == 4000 for s in streams)


def test_transmit_only_sends_without_a_receiver():
    with veth_pair("to") as (ns_a, if_a, ns_b, if_b):
        before = if_counter(ns_b, if_b, "rx_packets")
        res = counted(netrig("trial", "--tx", f"{if_a}@{ns_a}", "--dst-mac", "02:00:00:00:0e:01", *COUNT))
        assert res["frames_sent"] == 4000 and res["frames_received"] == 0
        # Everything sent reached the peer (plus the learning frame).
        assert if_counter(ns_b, if_b, "rx_packets") - before >= 4000


def send_raw(ns: str, ifname: str, ethertype: int, count: int) -> None:
    """``count`` frames of ``ethertype`` (not netrig's: no signature) out of ``ifname``."""
    code = (f"import socket; s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(({ifname!r}, 0)); "
            f"f = bytes.fromhex('0180c200000e020000000e01') + ({ethertype}).to_bytes(2, 'big') + bytes(46); "
            f"[s.send(f) for _ in range({count})]")
    sh(sys.executable, "-c", code, ns=ns)


def test_receive_only_counts_what_arrives():
    """``--rx`` without ``--tx`` for 4 s while another netrig sends 5000 frames over 4 flows through
    a namespace that drops every 10th IPv4 frame, and 7 LLDP frames arrive: the listen counts the
    sender's flows, infers the frames missing from their sequence numbers, and names the LLDP."""
    # stdout goes to a file: the reader thread alone owns the stderr pipe (communicate() would
    # read it too and close it beneath the thread).
    with veth_pair("ro") as (ns_a, if_a, ns_b, if_b), tempfile.TemporaryFile("w+") as out_file:
        listen_if = forwarding_namespace(ns_b, if_b, "ether type ip numgen inc mod 10 == 0 counter drop")
        p = subprocess.Popen([*NETRIG, "trial", "--rx", f"{listen_if}@{ns_b}", "--duration", "4s", "--json"],
                             stdout=out_file, stderr=subprocess.PIPE, text=True)
        started = threading.Event()
        errors: list[str] = []

        def read_stderr() -> None:
            assert p.stderr is not None
            for line in p.stderr:
                errors.append(line)
                if "listening" in line:
                    started.set()

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        try:
            assert started.wait(30), "".join(errors)
            sent = counted(netrig("trial", "--tx", f"{if_a}@{ns_a}", "--dst-mac", "02:00:00:00:0e:01", "--flows",
                                  "4", *COUNT[:4], "--frames", "5000", "--json"))
            assert sent["frames_sent"] == 5000
            send_raw(ns_a, if_a, 0x88CC, 7)
            p.wait(timeout=60)
        finally:
            p.kill()
            p.wait()
        reader.join(30)
        assert p.stderr is not None and not reader.is_alive()
        p.stderr.close()
        assert p.returncode == 0, "".join(errors)
        out_file.seek(0)
        res = json.loads(out_file.read())["listen"]
        dropped = int(sh("nft", "list", "chain", "netdev", "netrig_test", "in", ns=ns_b)
                      .split("counter packets ")[1].split()[0])
        assert 450 <= dropped <= 550
        flows = res["flows"]
        assert len(flows) == 4 and len({f["trial"] for f in flows}) == 1, flows
        assert sum(f["frames"] for f in flows) == 5000 - dropped
        # A flow's frames dropped before its first or after its last frame heard are unknowable.
        assert dropped - 8 <= res["missing"] <= dropped, (res["missing"], dropped)
        assert {(k["ethertype"], k["frames"]) for k in res["foreign"]} == {(0x88CC, 7)}
        assert res["ports"][0]["ring_drops"] == 0 and res["untracked"] == 0


def test_receive_only_stops_on_sigterm_with_what_it_counted():
    with veth_pair("rs") as (ns_a, if_a, ns_b, if_b):
        p = subprocess.Popen([*NETRIG, "trial", "--rx", f"{if_b}@{ns_b}", "--duration", "60s", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert p.stderr is not None
            for line in p.stderr:  # the first progress line: it is listening
                if "listening" in line:
                    break
            send_raw(ns_a, if_a, 0x88B6, 3)
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=30)
        finally:
            p.kill()
            p.wait()
        assert p.returncode == 143, err
        doc = json.loads(out)
        assert doc["interrupted"] and doc["listen"]["interrupted"]
        assert doc["listen"]["duration_s"] < 30
        assert [(k["ethertype"], k["frames"]) for k in doc["listen"]["foreign"]] == [(0x88B6, 3)]
        assert "nothing left running" in err


@pytest.mark.parametrize("args,needle", [
    (["--rx", "lo", "--rate", "5kpps"], "--rate: a receive-only trial (--rx without --tx) sends nothing"),
    (["--rx", "lo", "--rx", "lo"], "--rx: names the same interface twice"),
    (["--testbed", "ffff"], "--testbed"),
    (["--tx", "lo"], "--dst-mac: is required for a transmit-only trial"),
    (["--tx", "lo", "--rx", "lo", "--tx", "lo"], "--rx: 2 --tx but 1 --rx"),
    (["--tx", "lo@", "--rx", "lo"], "--tx: 'lo@': give IF or IF@NS"),
    (["--tx", "lo@x", "--tx-netns", "y", "--rx", "lo"], "--tx: 'lo@x' names its namespace and --tx-netns"),
    (["--tx", "lo", "--rx", "lo", "--dst-mac", "02:00:00:00:00:01", "--dst-mac", "02:00:00:00:00:01"],
     "--dst-mac: is given twice with the same MAC"),
    (["--tx", "lo", "--dst-mac", "02:00:00:00:00:01", "--event", "true", "--at", "1s"],
     "--event: needs a receiving port (--rx)"),
])
def test_topology_options_refuse_bad_input(args, needle):
    r = netrig("trial", *args, "--duration", "2s")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_trial_on_a_topology_built_for_it_and_removed_after():
    """--testbed NAME on trial as on every command (issue 27): built for the trial, with
    --testbed-option, and removed after it."""
    from netrig.testbed.state import all_states

    before = {s.id for s in all_states()}
    r = netrig("trial", "--testbed", "router", "--testbed-option", "mtu=1500", *COUNT)
    res = counted(r)
    assert res["frames_received"] == 4000, res
    assert {s.id for s in all_states()} == before, "the test bed built for the trial is gone"


def test_trial_in_process_gives_the_caller_its_thread_back(capsys):
    """On a test bed the trial makes its thread tester bookkeeping (the tester's CPUs, SCHED_IDLE);
    called in-process (the API, a test) the caller's thread gets its CPUs and policy back."""
    import os

    from netrig.cli.main import main

    affinity, policy = os.sched_getaffinity(0), os.sched_getscheduler(0)
    status = main(["trial", "--testbed", "router", *COUNT])
    assert status in (0, 1), capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["result"]["frames_received"] == 4000
    assert (os.sched_getaffinity(0), os.sched_getscheduler(0)) == (affinity, policy)
