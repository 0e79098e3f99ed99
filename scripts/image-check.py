"""make image's check: two agent containers from the image, each in a network namespace of its own
(a management veth to a bridge here, and one end of a veth pair between them: the test ports), with
the capabilities the DaemonSet grants and nothing privileged; a controller (`netrig serve --agent`,
from this tree) over both; a flow of 10 000 frames from one agent's port to the other's, counted on
both sides. Everything is removed at the end, however it ends.

    .venv/bin/python scripts/image-check.py [IMAGE]     (root; default netrig-agent:latest)

Runtime: runc where installed (crun refuses this kind of VM's hybrid cgroups), the file and process
limits this machine allows (podman's defaults exceed them), as IMAGE_RUNTIME and the limits below."""
from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAMES, PPS = 10_000, 10_000
#: What the DaemonSet grants (deploy/k8s/agent-daemonset.yaml): AF_XDP's capabilities.
CAPS = "NET_ADMIN,NET_RAW,BPF,SYS_ADMIN,IPC_LOCK"
LIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]


def sh(*argv: str, check: bool = True) -> str:
    return subprocess.run(argv, check=check, capture_output=True, text=True).stdout


def podman() -> list[str]:
    runtime = os.environ.get("IMAGE_RUNTIME") or ("runc" if sh("sh", "-c", "command -v runc", check=False) else "")
    return ["podman", *(["--runtime", runtime] if runtime else [])]


@contextlib.contextmanager
def network(tag: str, net: str) -> Iterator[dict[str, str]]:
    """Namespaces a and b: each a management veth on bridge ``tag``m (``net``.1 here, .2 and .3
    there) and its test port (a1 ↔ b1)."""
    ns = {n: f"{tag}{n}" for n in "ab"}
    try:
        sh("ip", "link", "add", f"{tag}m", "type", "bridge")
        sh("ip", "addr", "add", f"{net}.1/24", "dev", f"{tag}m")
        sh("ip", "link", "set", f"{tag}m", "up")
        for k, n in enumerate("ab"):
            sh("ip", "netns", "add", ns[n])
            sh("ip", "link", "add", f"{tag}{n}", "type", "veth", "peer", "name", "mgmt", "netns", ns[n])
            sh("ip", "link", "set", f"{tag}{n}", "master", f"{tag}m", "up")
            sh("ip", "-n", ns[n], "addr", "add", f"{net}.{k + 2}/24", "dev", "mgmt")
            for dev in ("mgmt", "lo"):
                sh("ip", "-n", ns[n], "link", "set", dev, "up")
        sh("ip", "link", "add", "a1", "netns", ns["a"], "type", "veth", "peer", "name", "b1", "netns", ns["b"])
        for n in "ab":
            sh("ip", "-n", ns[n], "link", "set", f"{n}1", "up")
        yield ns
    finally:
        for n in ns.values():
            sh("ip", "netns", "del", n, check=False)
        sh("ip", "link", "del", f"{tag}m", check=False)


def wait_answering(url: str, proc: subprocess.Popen | None = None, limit_s: float = 60) -> None:
    """Until ``url`` answers (an agent: 401 without its token)."""
    end = time.monotonic() + limit_s
    while True:
        try:
            urllib.request.urlopen(url + "/capabilities/version", timeout=2).read()
            return
        except urllib.error.HTTPError as e:
            if e.code == 401:
                return
            raise
        except OSError:
            if time.monotonic() > end or (proc is not None and proc.poll() is not None):
                raise SystemExit(f"image check: {url} did not answer") from None
            time.sleep(0.2)


def count(url: str) -> tuple[int, int]:
    """The flow a/a1 → b/b1 of FRAMES frames through the controller: (sent, received)."""
    import snappi

    api = snappi.api(location=url, verify=False)
    c = api.config()
    c.ports.port(name="a1", location="a/a1").port(name="b1", location="b/b1")
    f = c.flows.flow(name="f")[-1]
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "a1", ["b1"]
    eth, ip, _ = f.packet.ethernet().ipv4().udp()[-3:]
    eth.src.value, eth.dst.value = "02:00:00:00:0a:01", "02:00:00:00:0b:01"
    ip.src.value, ip.dst.value = "198.18.0.1", "198.19.0.1"
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, PPS, FRAMES
    f.metrics.enable = True
    api.set_config(c)
    cs = api.control_state()
    cs.traffic.flow_transmit.state = "start"
    api.set_control_state(cs)
    end = time.monotonic() + 60
    while True:
        req = api.metrics_request()
        req.flow.flow_names = ["f"]
        m = api.get_metrics(req).flow_metrics[0]
        if m.transmit == "stopped" or time.monotonic() > end:
            return m.frames_tx, m.frames_rx
        time.sleep(0.2)


def main(image: str) -> int:
    tag, net = f"nri{secrets.token_hex(2)}", f"198.18.{150 + secrets.randbelow(40)}"
    names = [f"{tag}-{n}" for n in "ab"]
    controller = None
    with tempfile.TemporaryDirectory() as tmp, network(tag, net) as ns:
        token = Path(tmp) / "token"
        token.write_text(secrets.token_hex(32) + "\n")
        token.chmod(0o600)
        try:
            for k, n in enumerate("ab"):
                sh(*podman(), "run", "-d", "--rm", "--name", names[k], "--network", f"ns:/run/netns/{ns[n]}",
                   "--cap-drop", "ALL", "--cap-add", CAPS, *LIMITS, "-v", f"{tmp}:/etc/netrig:ro", image,
                   "--port", f"{n}1", "--listen", f"{net}.{k + 2}:8443", "--http", "--token-file", "/etc/netrig/token")
            for k in range(2):
                wait_answering(f"http://{net}.{k + 2}:8443")
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                url = f"http://127.0.0.1:{s.getsockname()[1]}"
            controller = subprocess.Popen(
                [sys.executable, "-m", "netrig.cli.main", "serve", "--http", "--listen", url[7:], "--agent-token-file",
                 str(token), "--agent", f"a=http://{net}.2:8443", "--agent", f"b=http://{net}.3:8443"],
                env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
            wait_answering(url, controller)
            sent, received = count(url)
        finally:
            if controller is not None:
                controller.send_signal(signal.SIGTERM)
                controller.wait(timeout=30)
            sh(*podman(), "rm", "-f", "-t", "10", *names, check=False)
    ok = sent == received == FRAMES
    print(f"image check: two agent containers from {image} under a controller: {received}/{sent} frames of "
          f"{FRAMES} counted{'' if ok else ': FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "netrig-agent:latest"))
