"""The routing test beds' ``routes`` and ``hosts`` options (issue 43, the DUT's table scale): N host
routes per family in the DUT's FIB, loaded in one netlink batch (or learned over eBGP: issue 44) and
read back, or N tester hosts on
its receiving link that it resolves by ARP and neighbour discovery (its neighbour tables read back);
traffic spread over all of them (one destination each, RFC 4814 order) forwarded exact."""
from __future__ import annotations

import collections
import ipaddress
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testbed_helpers import needs_root
from tests.host_steal import steady_trial

from netrig.errors import ConfigError
from netrig.testbed import Testbed, bgp
from netrig.testbed.nsthread import read_sysctl, sysctl_in
from netrig.testbed.state import STATE_DIR

NETRIG = [sys.executable, "-m", "netrig.cli.main"]
ROUTES = 4_000
HOSTS = 2_000
GC = tuple(f"net.ipv{v}.neigh.default.gc_thresh{k}" for v in (4, 6) for k in (1, 2, 3))


def host_routes(ns: str, family: str) -> list[str]:
    out = subprocess.run(["ip", "-n", ns, family, "route", "show"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.split() and "/" not in line.split()[0]
            and line.split()[0] != "default"]


def spread_trial(tb_id: str, *extra: str, over: int = ROUTES) -> dict:
    """20 k frames to ``over`` destinations in pseudorandom order (exit 1 only for a trial the
    host's steal excuses), asserted exact; a loss says how it fell (:func:`loss_story`)."""
    res = steady_trial(tb_id, *extra, "--vary", f"dst_ips={over}", "--flow-order", "pseudorandom")["result"]
    assert res["frames_received"] == res["frames_sent"] == 20_000, loss_story(res, tb_id)
    return res


def loss_story(res: dict, tb_id: str) -> str:
    """What a lossy trial's record says of its loss: how it fell over the destinations (whole
    destinations lost point at the DUT's neighbours or routes, a few frames each at a stop), the
    platform's stalls, and the DUT's neighbours on its receiving link by state."""
    flows = [f for s in res["streams"] for f in s["flow_results"]]
    lossy = [f for f in flows if f["frames_lost"]]
    whole = sum(f["frames_received"] == 0 for f in lossy)
    st = res.get("stalls") or {}
    stops = {side: (v["count"], v["total_ms"]) for side, v in st.items() if isinstance(v, dict) and "count" in v}
    states = {fam: _neighbour_states(f"nr{tb_id}-dut", f"nr{tb_id}-drx", fam) for fam in ("-4", "-6")}
    return (f"{res['frames_sent']} sent, {res['frames_received']} received; of {len(flows)} destinations "
            f"reported, {len(lossy)} lost frames ({whole} all of theirs); stalls (count, ms) {stops}; "
            f"the DUT's ring {res.get('dut_ring_loss')}; the DUT's neighbours now {states}")


@needs_root
@pytest.mark.root
def test_routes_are_loaded_read_back_and_carry_the_traffic():
    up = subprocess.run([*NETRIG, "testbed", "up", "router", "--testbed-option", f"routes={ROUTES}"],
                        capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr
    tb_id = up.stdout.split()[1]
    try:
        dut = f"nr{tb_id}-dut"
        v4, v6 = host_routes(dut, "-4"), host_routes(dut, "-6")
        assert len(v4) == len(v6) == ROUTES, (len(v4), len(v6))
        assert v4[0].startswith("198.19.0.2 dev ") and any(x.startswith("198.19.15.161 via 198.19.0.2") for x in v4)
        spread_trial(tb_id)
        spread_trial(tb_id, "--family", "6", "--frame-size", "128")
        assert f"routes: {ROUTES} IPv4 /32 and {ROUTES} IPv6 /128 host routes" in notes(tb_id)
    finally:
        subprocess.run([*NETRIG, "testbed", "down", tb_id], capture_output=True, timeout=120)


@needs_root
@pytest.mark.root
@pytest.mark.skipif(shutil.which("bird") is None, reason="routing bgp needs BIRD 2 (apt install bird2: setup.sh)")
def test_routes_learned_over_bgp_are_in_the_fib_and_carry_the_traffic():
    """``routing = "bgp"``: the DUT's BIRD learns the routes from the tester's over eBGP and installs
    them (``proto bird``, via the rx port); traffic spread over all of them arrives exact, in both
    families; teardown stops both daemons and removes their files."""
    up = subprocess.run([*NETRIG, "testbed", "up", "router", "--testbed-option", f"routes={ROUTES}",
                         "--testbed-option", "routing=bgp"], capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr
    tb_id = up.stdout.split()[1]
    try:
        dut = f"nr{tb_id}-dut"
        for fam, first in (("-4", "198.19.0.2"), ("-6", "2001:2:0:1::2")):
            learnt = [x for x in host_routes(dut, fam) if " proto bird " in x]
            assert len(learnt) == ROUTES and all(x.split()[1:3] == ["via", first] for x in learnt), learnt[:3]
        spread_trial(tb_id)
        spread_trial(tb_id, "--family", "6", "--frame-size", "128")
        assert f"routes: {ROUTES} IPv4 /32 and {ROUTES} IPv6 /128 host routes learned by the DUT over eBGP" \
            in notes(tb_id)
        # The IPv6 next hop's host route is the build's like any other: without it the kernel drops
        # every route BIRD learnt over IPv6; a repair (after a link flap) puts it back.
        subprocess.run(["ip", "-n", dut, "-6", "route", "del", "2001:2:0:1::2/128", "metric", "1"], check=True)
        tb = Testbed.attach(tb_id)
        assert tb.health() == [f"route 2001:2:0:1::2/128 dev nr{tb_id}-drx (netns {dut}) is missing"]
        assert tb.repair() == [f"route 2001:2:0:1::2/128 dev nr{tb_id}-drx (netns {dut})"]
        assert tb.health() == []
    finally:
        subprocess.run([*NETRIG, "testbed", "down", tb_id], capture_output=True, timeout=120)
    ps = subprocess.run(["pgrep", "-f", f"/{tb_id}-bgp/"], capture_output=True, text=True).stdout
    assert not ps.strip(), f"BIRD still running: {ps}"
    assert not any(p.name == f"{tb_id}-bgp" for p in Path(STATE_DIR).iterdir())


@needs_root
@pytest.mark.root
def test_destinations_spread_over_the_link_subnet_reach_the_tester():
    """Without routes: the DUT's link subnet's other addresses (198.19.0.3 … .255, 2001:2:0:1::3 …)
    are behind the rx port like the rest of the receiving range; they were resolved on the link,
    where nothing answered, and 3 in 4 frames of ``--vary dst_ips=4`` counted as the DUT's loss."""
    up = subprocess.run([*NETRIG, "testbed", "up", "router"], capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr
    tb_id = up.stdout.split()[1]
    try:
        for over in (4, 300):
            spread_trial(tb_id, over=over)
        spread_trial(tb_id, "--family", "6", "--frame-size", "128", over=300)
        assert subprocess.run([*NETRIG, "testbed", "status", tb_id], capture_output=True, text=True).returncode == 0
    finally:
        subprocess.run([*NETRIG, "testbed", "down", tb_id], capture_output=True, timeout=120)


def test_bgp_routing_needs_routes_and_is_one_of_the_choices():
    with pytest.raises(ConfigError, match="^routing: bgp learns the routes option's routes: give routes"):
        Testbed.create("router", routing="bgp")
    with pytest.raises(ConfigError, match="^routing: 'ospf': must be one of static, bgp"):
        Testbed.create("router", routes=10, routing="ospf")


def test_the_tester_advertises_each_route_once_from_its_own_address(tmp_path):
    confs = bgp.write_configs(str(tmp_path), ("198.19.0.1", "2001:2:0:1::1"), ("198.19.0.2", "2001:2:0:1::2"), 3, 70)
    speaker = Path(confs["bgp-speaker"]).read_text().splitlines()
    routes = [x.split()[1] for x in speaker if x.strip().startswith("route ")]
    assert routes[:4] == ["198.19.0.2/32", "198.19.0.3/32", "198.19.0.4/32", "2001:2:0:1::2/128"]
    assert len(routes) == 73 and routes[-1] == "2001:2:0:1::47/128" and len(set(routes)) == 73
    dut = Path(confs["bgp-dut"]).read_text()
    assert "neighbor 198.19.0.2 as 65002" in dut and "export all" in dut and "import none" in dut
    if shutil.which("bird"):  # BIRD's own parser accepts both
        for conf in confs.values():
            r = subprocess.run(["bird", "-p", "-c", conf], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0 and not r.stderr, r.stderr


def test_a_backup_peer_advertises_all_but_the_first_peers_own_address_and_bird_parses_it(tmp_path):
    confs = bgp.write_configs(str(tmp_path), ("198.19.0.1", "2001:2:0:1::1"), ("198.19.0.2", "2001:2:0:1::2"), 3, 3,
                              backup=True)
    backup = Path(confs["bgp-backup"]).read_text().splitlines()
    routes = [x.split()[1] for x in backup if x.strip().startswith("route ")]
    assert routes == ["198.19.0.3/32", "198.19.0.4/32", "2001:2:0:1::3/128", "2001:2:0:1::4/128"]
    assert sum("bgp_path.prepend(65002);" in x for x in backup) == 2 and "strict bind yes" in "".join(backup)
    assert "neighbor 198.19.254.2 as 65002" in Path(confs["bgp-dut"]).read_text()
    if shutil.which("bird"):
        for conf in confs.values():
            r = subprocess.run(["bird", "-p", "-c", conf], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0 and not r.stderr, r.stderr


def test_configs_that_cannot_be_written_leave_no_directory(tmp_path, monkeypatch):
    """Nothing records the directory for teardown until a daemon starts: a failed write removes it."""
    def broken(*_a: object) -> list[str]:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(bgp, "backup_lines", broken)
    with pytest.raises(OSError):
        bgp.write_configs(str(tmp_path / "run"), ("198.19.0.1", "::1"), ("198.19.0.2", "::2"), 3, 3, backup=True)
    assert not (tmp_path / "run").exists()


def test_routes_are_bounded_by_the_test_range():
    with pytest.raises(ConfigError, match="^routes: 1048577: must be an integer from 0 to 1048576"):
        Testbed.create("router", routes=1_048_577)
    with pytest.raises(ConfigError, match="routes"):
        Testbed.create("loopback", routes=10)


def notes(tb_id: str) -> str:
    """The test bed's notes, as ``netrig testbed status --json`` gives them."""
    status = subprocess.run([*NETRIG, "testbed", "status", tb_id, "--json"], capture_output=True, text=True)
    return " ".join(json.loads(status.stdout).get("notes", []))


def gc_thresholds() -> list[int]:
    return [int(read_sysctl(name)) for name in GC]


@needs_root
@pytest.mark.root
def test_hosts_are_resolved_by_the_dut_and_carry_the_traffic():
    """``hosts``: the DUT holds a neighbour for each tester host on its receiving link, IPv4 and
    IPv6, resolved by its own ARP and neighbour discovery (not permanent: only the rx port's own
    entries are), traffic to all of them arrives exact, the rx port's namespace forwards nothing,
    and the host's neighbour-table limits are raised while the test bed lives and restored after."""
    before = gc_thresholds()
    up = subprocess.run([*NETRIG, "testbed", "up", "router", "--testbed-option", f"hosts={HOSTS}"],
                        capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr
    tb_id = up.stdout.split()[1]
    try:
        dut, drx = f"nr{tb_id}-dut", f"nr{tb_id}-drx"
        for family, first in (("-4", ipaddress.ip_address("198.19.0.2")), ("-6", ipaddress.ip_address("2001:2:0:1::2"))):
            neigh = subprocess.run(["ip", "-n", dut, family, "neigh", "show", "dev", drx], capture_output=True,
                                   text=True, check=True).stdout.splitlines()
            held = {ln.split()[0] for ln in neigh if "lladdr" in ln}
            assert {str(first + k) for k in range(HOSTS)} <= held, (family, len(held))
            assert sum("PERMANENT" in ln for ln in neigh) == 1, f"the DUT resolved the hosts itself ({family})"
        assert sysctl_in(f"nr{tb_id}-rx", "net.ipv6.conf.all.forwarding") == "0"
        assert all(g >= HOSTS + 4096 for g in gc_thresholds())
        spread_trial(tb_id, over=HOSTS)
        spread_trial(tb_id, "--family", "6", "--frame-size", "128", over=HOSTS)
        assert f"hosts: the DUT resolved {HOSTS} tester hosts on {drx} by ARP" in notes(tb_id)
        assert f"and {HOSTS} by neighbour discovery" in notes(tb_id)
    finally:
        subprocess.run([*NETRIG, "testbed", "down", tb_id], capture_output=True, timeout=120)
    assert gc_thresholds() == before


def _neighbour_states(dut: str, drx: str, family: str) -> dict[str, int]:
    out = subprocess.run(["ip", "-n", dut, family, "neigh", "show", "dev", drx], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(collections.Counter(line.split()[-1] for line in out))


@needs_root
@pytest.mark.root
def test_the_hosts_answer_the_duts_probes_of_a_stale_neighbour():
    """A host the DUT resolved stays resolved: once its entry is stale, the DUT's unicast probes
    (NUD: ARP and neighbour solicitation to the host's own address) are answered, as a host on the
    link would answer them. The DUT's timers are shortened so that a probe comes within a second
    or two: before the rx port took its link's IPv6 addresses for its own, every IPv6 host went
    FAILED at its first probe."""
    up = subprocess.run([*NETRIG, "testbed", "up", "router", "--testbed-option", "hosts=20"],
                        capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr
    tb_id = up.stdout.split()[1]
    dut, drx = f"nr{tb_id}-dut", f"nr{tb_id}-drx"
    ask = ("import socket, ipaddress, sys\n"
           "a = ipaddress.ip_address(sys.argv[1])\n"
           "s = socket.socket(socket.AF_INET6 if a.version == 6 else socket.AF_INET, socket.SOCK_DGRAM)\n"
           "for k in range(1, 20): s.sendto(b'', (str(a + k), 9))\n")
    families = (("-4", "198.19.0.2", "ipv4"), ("-6", "2001:2:0:1::2", "ipv6"))
    try:
        for family, _, v in families:
            subprocess.run(["ip", "netns", "exec", dut, "sysctl", "-qw", f"net.{v}.neigh.{drx}.base_reachable_time_ms=500",
                            f"net.{v}.neigh.{drx}.delay_first_probe_time=1", f"net.{v}.neigh.{drx}.retrans_time_ms=200"],
                           check=True)
            subprocess.run(["ip", "-n", dut, family, "neigh", "flush", "dev", drx], check=True)
        for wait in (1.5, 2.5):  # both families at once: resolved afresh with the short times; then stale, used, probed
            for _, first, _ in families:
                subprocess.run(["ip", "netns", "exec", dut, sys.executable, "-c", ask, first], check=True)
            time.sleep(wait)
        for family, _, _ in families:
            states = _neighbour_states(dut, drx, family)
            held = sum(states.get(k, 0) for k in ("REACHABLE", "STALE", "DELAY", "PROBE"))
            assert "FAILED" not in states and held >= 19, (family, states)
    finally:
        subprocess.run([*NETRIG, "testbed", "down", tb_id], capture_output=True, timeout=120)


def test_hosts_are_bounded_and_not_mixed_with_routes():
    with pytest.raises(ConfigError, match="^hosts: 65534: must be an integer from 0 to 65533"):
        Testbed.create("router", hosts=65_534)
    with pytest.raises(ConfigError, match="^hosts: routes and hosts together"):
        Testbed.create("router", hosts=10, routes=10)
    with pytest.raises(ConfigError, match="hosts"):
        Testbed.create("firewall", hosts=10)


@needs_root
@pytest.mark.root
def test_the_test_beds_routes_are_read_without_the_bulk_ones():
    """The health check and the description read the build's routes (static), the kernel's and
    ``ip route``'s, filtered by the kernel: the ``routes`` option's host routes (their own
    protocol) are never dumped. With a million of them pyroute2 parsed every route, two minutes
    before each trial."""
    from netrig.testbed.links import BULK_PROTO, read_broadcasts, read_permanent_neighbours, read_routes

    ns = "nr-rtread"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        batch = ["link add d0 type veth peer name d1", "link set d1 up", "link set d0 up", "addr add 198.18.7.1/24 dev d0",
                 "route add 198.19.7.0/24 via 198.18.7.2 proto static",
                 "route add 198.19.8.0/24 via 198.18.7.2",
                 *(f"route add 198.19.9.{k}/32 via 198.18.7.2 proto {BULK_PROTO}" for k in range(1, 201))]
        subprocess.run(["ip", "-n", ns, "-batch", "-"], input="\n".join(batch) + "\n", text=True, check=True)
        got = {(r.dst, r.gateway) for r in read_routes(ns) if r.family == 4}
        assert got == {("198.18.7.0/24", None), ("198.19.7.0/24", "198.18.7.2"), ("198.19.8.0/24", "198.18.7.2")}
        assert len(read_routes(ns, protos=(BULK_PROTO,))) == 200
        assert ("fe80::/64", None) in {(r.dst, r.gateway) for r in read_routes(ns)}, "IPv6's, the kernel's"
        # the broadcast routes and the permanent neighbours, also read without parsing the rest (the
        # health check before every trial took 12 s with 65 534 routes, pyroute2 parsing them all)
        index = int(subprocess.run(["ip", "-n", ns, "-o", "link", "show", "d0"], capture_output=True, text=True,
                                   check=True).stdout.split(":")[0])
        assert read_broadcasts(ns) == {(index, "198.18.7.255")}
        subprocess.run(["ip", "-n", ns, "-batch", "-"], text=True, check=True,
                       input="neigh add 198.18.7.9 lladdr 02:00:00:00:00:09 dev d0 nud permanent\n"
                             "neigh add 2001:2::9 lladdr 02:00:00:00:00:0a dev d0 nud permanent\n"
                             "neigh add 198.18.7.10 lladdr 02:00:00:00:00:10 dev d0 nud stale\n")
        got_n = {(n.index, n.ip, n.mac, n.permanent) for n in read_permanent_neighbours(ns)}
        assert got_n == {(index, "198.18.7.9", "02:00:00:00:00:09", True), (index, "2001:2::9", "02:00:00:00:00:0a", True)}
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
