"""The receiver counts only its own trial's frames, and only real loss (docs/methodology.md,
"What the receiver counts"). Frames are injected for real: a second trial on the same veth pair,
a raw socket sending stray and forged netrig frames, nftables mutating frames on their way, a link
taken down in the middle of a trial."""
from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
import threading
import time

import pytest
from tests.conftest import forwarding_namespace, inject, needs_root, sh, veth_pair

import netrig

pytestmark = [needs_root, pytest.mark.root]
NETRIG = [sys.executable, "-m", "netrig.cli.main"]

#: A signed frame's signature fields (docs/wire-format.md).
MAGIC = 0x4E52
TRIAL_MASK = (1 << 23) - 1


def netrig_frame(src_mac: str, dst_mac: str, *, tag: int, flow: int = 0, seq: int = 0, ts: int = 0,
                 warmup: bool = False, sport: int = 1024) -> bytes:
    """A 64-byte (60 without FCS) IPv4/UDP frame 198.18.0.1:sport → 198.19.0.1:1024 carrying a
    netrig signature with the given fields, built here from docs/wire-format.md, not with netrig's
    code."""
    tag_field = (int(warmup) << 23) | (tag & TRIAL_MASK)
    sig = (struct.pack(">H", MAGIC) + tag_field.to_bytes(3, "big") + flow.to_bytes(3, "big")
           + (seq & (1 << 40) - 1).to_bytes(5, "big") + (ts & (1 << 40) - 1).to_bytes(5, "big"))
    udp = struct.pack(">HHHH", sport, 1024, 8 + len(sig), 0) + sig
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                               bytes([198, 18, 0, 1]), bytes([198, 19, 0, 1])))
    csum = sum(struct.unpack(">10H", ip))
    csum = (csum & 0xFFFF) + (csum >> 16)
    csum = (csum & 0xFFFF) + (csum >> 16)
    ip[10:12] = struct.pack(">H", ~csum & 0xFFFF)
    mac = lambda m: bytes.fromhex(m.replace(":", ""))
    return mac(dst_mac) + mac(src_mac) + b"\x08\x00" + bytes(ip) + udp


def run_with(tx, rx, stream, during, **kw):
    """Run a trial; once it is running, call ``during(trial_tag)`` in a thread (the injection)."""
    state: dict = {}

    def progress(snap):
        if snap.phase == "running" and "thread" not in state:
            state["thread"] = threading.Thread(target=during, args=(snap.trial_tag,))
            state["thread"].start()

    res = netrig.run_trial(tx, rx, [stream], progress=progress, progress_interval_s=0.05, **kw)
    assert "thread" in state, "the trial ended before it was seen running"
    state["thread"].join()
    return res


def ports(ns_a, if_a, ns_b, if_b, io="af_packet", **rx_kw):
    tx, rx = netrig.Port(if_a, netns=ns_a, io="af_packet"), netrig.Port(if_b, netns=ns_b, io=io, **rx_kw)
    return tx, rx, tx.info().mac, rx.info().mac


def reason(r) -> str:
    return r.invalid_reason or ""


#: Reasons about the sender's pacing: on this shared 2-CPU VM the sender is sometimes descheduled
#: for milliseconds near a trial's end. The receiver tests below do not depend on it.
#: What an invalid reason says when the sender fell behind (smooth pacing stretches a trial that
#: loses CPU time; these tests are about what the receiver counts, not pacing).
#: The clauses of an invalid reason about the sender: its shortfall, its lag, its stretch, and who
#: held its CPUs meanwhile (``netrig trial``'s ``Judged``).
SENDER_REASONS = ("the tester could not keep the", "the TX workers fell up to", "the tester's sending was stretched",
                  "the tester's CPUs were held")


def receiver_rules_pass(invalid_reason: str | None) -> bool:
    """No rule about what the receiver counted fired (the trial is valid, or invalid only because
    the sender fell behind its schedule)."""
    parts = [p for p in (invalid_reason or "").split("; ") if p]
    return all(any(k in p for k in SENDER_REASONS) for p in parts)


# ----------------------------------------------------------------------------------- other trials
def test_two_concurrent_trials_on_the_same_ports_count_only_their_own_frames():
    """Two trials at once on one veth pair (af_packet: each receiver sees both streams): each
    counts its own frames exactly, the other's as stray (never received, never duplicates), and
    both are invalid — the DUT carried the other trial's load too."""
    with veth_pair("cc") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b)
        s = netrig.Stream(frame_size=64, rate_pps=50_000, src_mac=mac_a, dst_mac=mac_b)
        out: dict = {}

        def run(k):
            out[k] = netrig.run_trial(tx, rx, [s], frames=100_000, drain_s=0.3, learning=False)

        threads = [threading.Thread(target=run, args=(k,)) for k in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        a, b = out[1], out[2]
        assert a.trial_tag != b.trial_tag
        for r in (a, b):
            assert r.frames_sent == r.frames_received == 100_000, r.to_dict(flows=False)
            assert (r.frames_lost, r.duplicated, r.reordered, r.frames_forged) == (0, 0, 0, 0)
            assert r.frames_stray > 10_000, "the other trial's frames are counted apart"
            assert r.ports[1].rx_other_trial == r.frames_stray and r.ports[1].rx_earlier_trial == 0
            assert not r.valid and "frames of another netrig trial arrived" in reason(r), reason(r)


def test_a_second_cli_trial_on_ports_in_use_is_refused_naming_the_first():
    """Two `netrig trial` processes on one pair: the second is refused at once, naming the first's
    pid and command (ports are held like test beds, issue 41); the first is not disturbed. (Two
    trials that do share ports count each other's frames apart: the test above, through the API.)"""
    with veth_pair("cp") as (ns_a, if_a, ns_b, if_b):
        cmd = [*NETRIG, "trial", "--tx", if_a, "--tx-netns", ns_a, "--rx", if_b, "--rx-netns", ns_b, "--io",
               "af_packet", "--rate", "50kpps", "--frames", "200k", "--drain", "0.3s", "--json"]
        first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert first.stderr is not None
            lines = []
            while not any(" running " in line for line in lines):  # its ports are held: it is sending
                line = first.stderr.readline()
                assert line, "".join(lines)
                lines.append(line)
            second = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            assert second.returncode == 2, second.stderr
            err = second.stderr.strip()
            assert err.count("\n") == 0 and f"in use by pid {first.pid}" in err and "netrig.cli.main trial" in err, err
            out, rest = first.communicate(timeout=120)
            assert first.returncode in (0, 1), "".join(lines) + rest  # 1: the second's start took CPU from it
            r = json.loads(out)["result"]
            assert r["frames_sent"] == r["frames_received"] == 200_000 and r["frames_stray"] == 0
            assert "another netrig trial" not in (r["invalid_reason"] or "")
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate()


def test_an_af_packet_trial_beside_an_af_xdp_trial_knows_it_saw_nothing():
    """An af_xdp trial's XDP program takes every netrig frame on the interface; a concurrent
    af_packet trial on it never sees its frames. That is the tester's doing, not 90 % DUT loss:
    the af_packet trial is invalid and says why, the af_xdp trial counts the other's frames apart."""
    with veth_pair("cx") as (ns_a, if_a, ns_b, if_b):
        tx, rx_xdp, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b, io="af_xdp")
        rx_pkt = netrig.Port(if_b, netns=ns_b, io="af_packet")
        s = netrig.Stream(frame_size=64, rate_pps=50_000, src_mac=mac_a, dst_mac=mac_b)
        out: dict = {}

        def run(k, rx, delay):
            time.sleep(delay)
            out[k] = netrig.run_trial(tx, rx, [s], frames=100_000, drain_s=0.3, learning=False)

        threads = [threading.Thread(target=run, args=("xdp", rx_xdp, 0.0)),
                   threading.Thread(target=run, args=("pkt", rx_pkt, 0.5))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        xdp, pkt = out["xdp"], out["pkt"]
        assert xdp.io[1] == "af_xdp" and pkt.io[1] == "af_packet"
        assert xdp.frames_received == 100_000 and xdp.frames_stray > 10_000
        assert not xdp.valid and "frames of another netrig trial arrived" in reason(xdp)
        assert pkt.frames_received < 100_000
        assert not pkt.valid and "steered the netrig frames on this interface" in reason(pkt), reason(pkt)


def test_injected_stray_frames_never_hide_real_loss():
    """nftables drops exactly every 1000th test frame; meanwhile a raw socket injects 300 netrig
    frames of another tag for flow 0 with sequence numbers past the trial's end (a tester that
    counted them as received would report no loss at all). The loss is counted exactly, the 300
    frames as stray, and the trial says another trial's frames arrived."""
    with veth_pair("sd") as (ns_a, if_a, ns_b, if_b):
        # The injected frames come from port 1025, so the drop rule sees only the trial's frames.
        listen = forwarding_namespace(ns_b, if_b, "udp sport 1024 numgen inc mod 1000 == 0 counter drop")
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, listen)
        s = netrig.Stream(frame_size=64, rate_pps=100_000, src_mac=mac_a, dst_mac=mac_b)
        n = 150_000

        def during(tag):
            other = (tag + 0x1234) & TRIAL_MASK
            inject(ns_a, if_a, [netrig_frame(mac_a, mac_b, tag=other, seq=n + k, sport=1025) for k in range(300)])

        r = run_with(tx, rx, s, during, frames=n, drain_s=0.5, learning=False)
        assert r.frames_sent == n
        assert r.frames_lost == 150, r.to_dict(flows=False)
        assert (r.frames_received, r.reordered, r.duplicated) == (n - 150, 0, 0)
        assert r.frames_stray == r.ports[1].rx_other_trial == 300
        assert not r.valid and "300 frames of another netrig trial arrived" in reason(r), reason(r)


def test_a_frame_from_a_previous_trial_is_counted_as_such_and_changes_nothing():
    with veth_pair("pv") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b)
        s = netrig.Stream(frame_size=64, rate_pps=100_000, src_mac=mac_a, dst_mac=mac_b)
        first = netrig.run_trial(tx, rx, [s], frames=10_000, drain_s=0.2, learning=False, max_stretch_pct=50)
        assert first.valid, first.invalid_reason  # a 0.1 s trial: a vCPU stall alone stretches it 2 %

        def during(tag):
            assert tag != first.trial_tag
            inject(ns_a, if_a, [netrig_frame(mac_a, mac_b, tag=first.trial_tag, seq=k, ts=k) for k in range(50)])

        r = run_with(tx, rx, s, during, frames=100_000, drain_s=0.3, learning=False)
        assert r.frames_sent == r.frames_received == 100_000
        assert (r.reordered, r.duplicated, r.frames_forged) == (0, 0, 0)
        assert (r.ports[1].rx_earlier_trial, r.ports[1].rx_other_trial) == (50, 0)
        assert receiver_rules_pass(r.invalid_reason), r.invalid_reason


@pytest.mark.parametrize("io", ["af_xdp", "af_packet", "socket"])
def test_every_kind_of_frame_the_receive_port_sees_is_counted_on_every_backend(io):
    """Unsigned frames (not netrig's), another trial's frames and forged ones arrive on the receive
    port during a trial: each kind is counted apart, exactly, on every backend — under AF_XDP the
    steering program counts the unsigned frames it passes to the kernel, which the socket never
    sees."""
    with veth_pair("fk") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b, io=io)
        s = netrig.Stream(frame_size=64, rate_pps=50_000, src_mac=mac_a, dst_mac=mac_b)
        n = 50_000
        arp = bytes.fromhex(mac_b.replace(":", "")) + bytes.fromhex(mac_a.replace(":", "")) + b"\x08\x06" + bytes(46)

        def during(tag):
            other = (tag + 0x77) & TRIAL_MASK
            inject(ns_a, if_a, [arp] * 200 + [netrig_frame(mac_a, mac_b, tag=other, seq=k) for k in range(300)]
                   + [netrig_frame(mac_a, mac_b, tag=tag, flow=9, seq=k) for k in range(100)])

        r = run_with(tx, rx, s, during, frames=n, drain_s=0.3, learning=False, max_stretch_pct=50)
        p = r.ports[1]
        assert r.frames_sent == r.frames_received == n, r.to_dict(flows=False)
        assert (p.rx_foreign, r.frames_stray, r.frames_forged) == (200, 300, 100), (io, p.to_dict())


# ------------------------------------------------------------------------------- forged, mutated
@pytest.mark.parametrize("io", ["af_packet", "af_xdp"])
def test_forged_frames_with_the_trials_own_tag_are_implausible_not_received(io):
    """A raw socket sends frames with the running trial's own tag: a sequence number far beyond
    what was sent (2^39), one just past the end, a transmit time in the future, a flow the trial
    does not have, and 20 replays of genuine sequence numbers. None is received; the genuine
    frames after the forged sequence number are not reordered; the replays are duplicates."""
    with veth_pair("fg") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b, io=io)
        s = netrig.Stream(frame_size=64, rate_pps=100_000, src_mac=mac_a, dst_mac=mac_b)
        n = 150_000

        def during(tag):
            time.sleep(0.2)
            frames = [netrig_frame(mac_a, mac_b, tag=tag, seq=1 << 39),
                      netrig_frame(mac_a, mac_b, tag=tag, seq=(1 << 39) + 7),
                      netrig_frame(mac_a, mac_b, tag=tag, seq=n + 5_000_000),
                      netrig_frame(mac_a, mac_b, tag=tag, seq=3, ts=(1 << 39) - 1),  # TX time in the future
                      netrig_frame(mac_a, mac_b, tag=tag, flow=5, seq=3)]  # no such flow
            frames += [netrig_frame(mac_a, mac_b, tag=tag, seq=k) for k in range(20)]  # replays
            inject(ns_a, if_a, frames)

        r = run_with(tx, rx, s, during, frames=n, drain_s=0.3, learning=False)
        p = r.ports[1]
        assert r.frames_sent == r.frames_received == n, r.to_dict(flows=False)
        assert (r.frames_lost, r.reordered) == (0, 0), "one forged sequence number reorders nothing"
        assert r.duplicated == 20
        assert (p.rx_implausible, p.rx_unknown_flow, r.frames_forged, r.frames_stray) == (4, 1, 5, 0)
        assert receiver_rules_pass(r.invalid_reason), r.invalid_reason


@pytest.mark.parametrize("io", ["af_packet", "af_xdp"])
def test_frames_mutated_on_the_way_are_lost_and_counted_apart(io):
    """The path sets the top byte of the sequence number of every 1000th frame (a DUT corrupting
    frames): those frames are lost — the originals never arrived — and counted as implausible,
    never as received; nothing after them is reordered."""
    with veth_pair("mu") as (ns_a, if_a, ns_b, if_b):
        # @th,128,8: UDP header (8 bytes) + signature offset 8 = the sequence number's first byte.
        listen = forwarding_namespace(ns_b, if_b, "udp dport 1024 numgen inc mod 1000 == 0 @th,128,8 set 0x80")
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, listen, io=io)
        s = netrig.Stream(frame_size=64, rate_pps=100_000, src_mac=mac_a, dst_mac=mac_b)
        r = netrig.run_trial(tx, rx, [s], frames=200_000, drain_s=0.3, learning=False)
        assert r.frames_sent == 200_000
        assert (r.frames_lost, r.frames_received, r.reordered, r.duplicated) == (200, 199_800, 0, 0), \
            r.to_dict(flows=False)
        assert r.ports[1].rx_implausible == r.frames_forged == 200
        assert receiver_rules_pass(r.invalid_reason), r.invalid_reason


def test_frames_mutated_into_sequence_numbers_the_flow_never_sent_make_the_trial_invalid():
    """With 64 flows the receiver's bound on sequence numbers is what the whole trial has sent, so
    a mutation into a sequence number of the flow's near future passes it. After the trial the
    engine knows each flow's count: a flow that received sequence numbers beyond it counted frames
    that were not its own, and the trial is invalid (received > sent is never clamped away)."""
    with veth_pair("mf") as (ns_a, if_a, ns_b, if_b):
        # Every 500th frame: the sequence number's third byte (@th,144,8) becomes 1, so it reads
        # 65 536 + (the low 16 bits): beyond each flow's 3125 frames, below the trial's 200 000.
        listen = forwarding_namespace(ns_b, if_b, "udp dport 1024 numgen inc mod 500 == 0 @th,144,8 set 0x01")
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, listen)
        s = netrig.Stream(frame_size=64, rate_pps=100_000, src_mac=mac_a, dst_mac=mac_b, flows=64)
        r = netrig.run_trial(tx, rx, [s], frames=200_000, drain_s=0.3, learning=False)
        assert r.frames_sent == 200_000
        assert not r.valid
        assert "received sequence numbers they never sent" in reason(r), reason(r)


# --------------------------------------------------------------------------- the tester's own ports
@pytest.mark.parametrize("io", ["af_packet", "af_xdp"])
def test_a_receive_link_that_goes_down_mid_trial_makes_it_invalid(io):
    with veth_pair("ld") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b, io=io)
        s = netrig.Stream(frame_size=64, rate_pps=50_000, src_mac=mac_a, dst_mac=mac_b)

        def during(tag):
            time.sleep(0.4)
            sh("ip", "link", "set", if_b, "down", ns=ns_b)
            time.sleep(0.3)
            sh("ip", "link", "set", if_b, "up", ns=ns_b)

        r = run_with(tx, rx, s, during, duration_s=1.5, drain_s=0.3, learning=False)
        assert r.frames_lost > 0
        assert not r.valid
        assert f"port {if_b}: the link went down during the trial" in reason(r), reason(r)
        p = r.ports[1]
        assert p.link_watched and p.link_down_events >= 1


def test_tester_ring_drops_make_the_trial_invalid_in_the_engine():
    """A 16-frame receive ring on the CPU the sender spins on: the tester drops frames itself.
    `run_trial` (not only the measurer) marks the trial invalid: that loss is the tester's."""
    with veth_pair("rd") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b, ring_frames=16)
        s = netrig.Stream(frame_size=64, rate_pps=200_000, src_mac=mac_a, dst_mac=mac_b)
        r = netrig.run_trial(tx, rx, [s], frames=200_000, drain_s=0.3, learning=False, tx_cpus=[1], rx_cpus=[1])
        assert r.tester_rx_drops > 0, "the set-up must make the tester drop frames"
        assert not r.valid
        assert f"port {if_b}: the tester's receive ring dropped {r.tester_rx_drops} frames" in reason(r)


# ------------------------------------------------------------------------------ drain, late, rate
@pytest.mark.parametrize("io", ["af_packet", "af_xdp"])
def test_drain_zero_counts_what_arrived(io):
    with veth_pair("dz") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b, io=io)
        s = netrig.Stream(frame_size=64, rate_pps=100_000, src_mac=mac_a, dst_mac=mac_b)
        r = netrig.run_trial(tx, rx, [s], frames=50_000, drain_s=0, learning=False)
        assert r.drain_s == 0
        assert (r.frames_received, r.late, r.frames_lost) == (50_000, 0, 0), r.to_dict(flows=False)
        assert receiver_rules_pass(r.invalid_reason), r.invalid_reason


@pytest.mark.parametrize("late", [0, -1, math.nan, math.inf, "0s"])
def test_a_late_threshold_that_is_not_above_zero_is_a_clear_error(late):
    with veth_pair("lt") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b)
        s = netrig.Stream(frame_size=64, rate_pps=1000, src_mac=mac_a, dst_mac=mac_b)
        with pytest.raises(netrig.ConfigError, match="late_s"):
            netrig.run_trial(tx, rx, [s], frames=100, late_s=late)


@pytest.mark.parametrize("drain", [-1, math.nan])
def test_a_negative_or_nan_drain_is_a_clear_error(drain):
    with veth_pair("dn") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b)
        s = netrig.Stream(frame_size=64, rate_pps=1000, src_mac=mac_a, dst_mac=mac_b)
        with pytest.raises(netrig.ConfigError, match="drain_s"):
            netrig.run_trial(tx, rx, [s], frames=100, drain_s=drain)


def test_cli_drain_zero_is_valid_and_counts_every_frame():
    with veth_pair("cz") as (ns_a, if_a, ns_b, if_b):
        r = subprocess.run([*NETRIG, "trial", "--tx", if_a, "--tx-netns", ns_a, "--rx", if_b, "--rx-netns", ns_b,
                            "--io", "af_packet", "--rate", "50kpps", "--frames", "20k", "--drain", "0", "--json"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 1), r.stderr
        res = json.loads(r.stdout)["result"]
        assert res["frames_received"] == 20_000 and res["late"] == 0
        assert (r.returncode == 0) == res["valid"] and receiver_rules_pass(res["invalid_reason"]), res["invalid_reason"]


def test_a_count_stopped_trial_far_below_its_rate_is_invalid():
    """`frames=` stops after a count: a tester that needs 10× longer than the rate allows did not
    offer the rate, exactly as a timed trial that sent 10 % of its frames."""
    with veth_pair("cs") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = ports(ns_a, if_a, ns_b, if_b)
        s = netrig.Stream(frame_size=64, rate_pps=50_000_000, src_mac=mac_a, dst_mac=mac_b)
        r = netrig.run_trial(tx, rx, [s], frames=200_000, drain_s=0.3, learning=False)
        assert r.frames_sent == 200_000
        assert r.tx_rate_pps < 0.5 * 50_000_000
        assert not r.valid and "could not keep the rate" in reason(r), reason(r)
