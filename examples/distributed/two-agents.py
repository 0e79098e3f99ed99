"""A worked example (docs/distributed.md): RFC 2544 throughput and NDR/PDR (MLRsearch) across four
ports on two agents.

On one machine: agents a and b are `netrig serve` in network namespaces of their own, each with a
management address on a bridge here and two test ports; the four ports meet in a DUT namespace (a
Linux bridge forwarding by static entries only). A controller serves both agents, and `netrig run`
measures through it: pairs a1 → b1 and b2 → a2, each crossing the agents and the DUT, which polices
what it forwards to 10 000 frames a second (nftables, bridge family: the DUT's capacity, known). It
writes OUT/result.json and OUT/report.html (the config and token it made: OUT.setup), and removes
the namespaces and processes it made however it ends.

One machine runs both agents, the DUT and the controller here: each agent's workers get a CPU of
their own (--tx-cpus, --rx-cpus), and the loads stay where two agents sharing two CPUs send
smoothly (line rate 10 Mbit/s a port). Agents on hosts of their own need neither.

    .venv/bin/python examples/distributed/two-agents.py [OUT]        (root; default two-agents-out)

On real hosts, the same config with the agents' and controller's addresses (docs/distributed.md):
each host runs its agent, one runs the controller, and `netrig run` needs no root."""
from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PORTS = ("a1", "a2", "b1", "b2")
#: Both pairs cross the agents and the DUT.
PAIRS = (("a1", "b1"), ("b2", "a2"))
#: The DUT's capacity: what its bridge forwards, frames a second (both pairs together).
CAP_FPS = 10_000
CONFIG = """name = "RFC 2544 throughput and NDR/PDR across two agents"
[otg]
url = "{url}"
token_file = "{token}"
{pairs}
[selftest]
enabled = false                  # the tester's self-test runs on this host's loopback, not the agents'
[line_rate]
speed_bps = "10M"                # each sending port's: 14.88 kfps of 64-B frames, 29.76 k for both pairs
[frames]
sizes = [64]
[trial]
duration_s = "2s"
[[methods]]
rfc2544_throughput = {{ resolution_pct = 0.5 }}
[[methods]]
[methods.mlrsearch]
min_rate_pct = 1
goals = [{{ name = "NDR", loss_ratio = 0.0, final_trial_duration_s = 2, duration_sum_s = 4, relative_width = 0.01 }},
         {{ name = "PDR", loss_ratio = 0.005, final_trial_duration_s = 2, duration_sum_s = 4, relative_width = 0.01 }}]
"""


def mac(port: str) -> str:
    return f"02:00:00:00:0{port[0]}:0{port[1]}"


def sh(*argv: str, ns: str | None = None, check: bool = True) -> None:
    subprocess.run([*(["ip", "netns", "exec", ns] if ns else []), *argv], check=check, capture_output=True)


@contextlib.contextmanager
def bed(tag: str, net: str) -> Iterator[dict[str, str]]:
    """Namespaces a, b (agents: a management veth on bridge ``tag``m, two test ports) and d (the
    DUT: a bridge with one port per test port, static entries, no learning or flooding)."""
    ns = {n: f"{tag}{n}" for n in "abd"}
    try:
        for n in ns.values():
            sh("ip", "netns", "add", n)
        sh("ip", "link", "add", f"{tag}m", "type", "bridge")
        sh("ip", "addr", "add", f"{net}.1/24", "dev", f"{tag}m")
        sh("ip", "link", "set", f"{tag}m", "up")
        for k, n in enumerate("ab"):
            sh("ip", "link", "add", f"{tag}{n}", "type", "veth", "peer", "name", "mgmt", "netns", ns[n])
            sh("ip", "link", "set", f"{tag}{n}", "master", f"{tag}m", "up")
            sh("ip", "addr", "add", f"{net}.{k + 2}/24", "dev", "mgmt", ns=ns[n])
            sh("ip", "link", "set", "mgmt", "up", ns=ns[n])
        sh("ip", "link", "add", "dut0", "type", "bridge", ns=ns["d"])
        for port in PORTS:
            sh("ip", "link", "add", port, "netns", ns[port[0]], "address", mac(port), "type", "veth", "peer", "name",
               f"d{port}", "netns", ns["d"])
            sh("sysctl", "-qw", f"net.ipv6.conf.{port}.disable_ipv6=1", ns=ns[port[0]])
            sh("ip", "link", "set", port, "up", ns=ns[port[0]])
            sh("sysctl", "-qw", f"net.ipv6.conf.d{port}.disable_ipv6=1", ns=ns["d"])
            sh("ip", "link", "set", f"d{port}", "master", "dut0", "up", ns=ns["d"])
            sh("bridge", "link", "set", "dev", f"d{port}", "learning", "off", "flood", "off", "mcast_flood", "off",
               ns=ns["d"])
            sh("bridge", "fdb", "add", mac(port), "dev", f"d{port}", "master", "static", ns=ns["d"])
        sh("sysctl", "-qw", "net.ipv6.conf.dut0.disable_ipv6=1", ns=ns["d"])
        sh("ip", "link", "set", "dut0", "up", ns=ns["d"])
        police = f"limit rate over {CAP_FPS}/second burst 100 packets counter drop"
        sh("nft", "add table bridge dut; add chain bridge dut police { type filter hook forward priority 0; }; "
                  f"add rule bridge dut police {police}", ns=ns["d"])
        yield ns
    finally:
        for n in ns.values():
            sh("ip", "netns", "del", n, check=False)
        sh("ip", "link", "del", f"{tag}m", check=False)


def serve(argv: list[str], url: str, ns: str | None = None) -> subprocess.Popen:
    """`netrig serve` (in ``ns``), once it answers at ``url`` (an agent: 401 without its token)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    proc = subprocess.Popen([*(["ip", "netns", "exec", ns] if ns else []), sys.executable, "-m", "netrig.cli.main",
                             "serve", *argv], env=env)
    end = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/capabilities/version", timeout=2).read()
            return proc
        except urllib.error.HTTPError as e:
            if e.code == 401:
                return proc
            raise
        except OSError:
            if proc.poll() is not None or time.monotonic() > end:
                raise SystemExit(f"netrig serve did not start at {url}") from None
            time.sleep(0.2)


def main(out: Path) -> int:
    tag, net = f"nrx{secrets.token_hex(2)}", f"198.18.{100 + secrets.randbelow(40)}"
    procs: list[subprocess.Popen] = []
    work = out.with_name(out.name + ".setup")
    work.mkdir(parents=True, exist_ok=True)
    token = work / "token"
    token.write_text(secrets.token_hex(32) + "\n")
    token.chmod(0o600)
    try:
        with bed(tag, net) as ns:
            agents = {n: f"http://{net}.{k + 2}:8443" for k, n in enumerate("ab")}
            for k, (n, url) in enumerate(agents.items()):
                # one machine, two agents: each its own CPU (on their own hosts, the engine's defaults)
                cpu = str(k % (os.cpu_count() or 1))
                procs.append(serve(["--port", f"{n}1", "--port", f"{n}2", "--http", "--listen", url[7:], "--token-file",
                                    str(token), "--tx-cpus", f"{cpu},{cpu}", "--rx-cpus", f"{cpu},{cpu}"], url, ns[n]))
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                url = f"http://127.0.0.1:{s.getsockname()[1]}"
            procs.append(serve(["--http", "--listen", url[7:], "--agent-token-file", str(token),
                                *(a for n, u in agents.items() for a in ("--agent", f"{n}={u}"))], url))
            pairs = "".join(f'[[otg.pairs]]\ntx = "{tx[0]}/{tx}"\nrx = "{rx[0]}/{rx}"\nsrc_mac = "{mac(tx)}"\n'
                            f'dst_mac = "{mac(rx)}"\n' for tx, rx in PAIRS)
            cfg = work / "two-agents.toml"
            cfg.write_text(CONFIG.format(url=url, token=token, pairs=pairs))
            env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
            rc = subprocess.run([sys.executable, "-m", "netrig.cli.main", "run", str(cfg), "--out", str(out)],
                                env=env).returncode
            if rc == 0:
                subprocess.run([sys.executable, "-m", "netrig.cli.main", "report", str(out)], env=env, check=False)
            return rc
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "two-agents-out")))
