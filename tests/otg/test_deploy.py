"""The deployment files (deploy/): every manifest decodes strictly into Kubernetes' own types
(deploy/k8s/check, Go with k8s.io/api: a misspelt or mistyped field fails); the agent DaemonSet runs
on labelled tester nodes with host networking and only AF_XDP's capabilities; the controller needs
none; selectors match labels."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
#: Builds the check's test binary (in the background under `make test`, else here).
GO_PROGRAMS = ROOT / "scripts" / "gosnappi-client.sh"


@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed: the manifest check is a Go test "
                                                         "(k8s.io/api from the Go module proxy)")
def test_every_manifest_decodes_strictly_into_kubernetes_types():
    subprocess.run([str(GO_PROGRAMS), "wait"], check=True, timeout=600)
    subprocess.run([str(GO_PROGRAMS), "build"], check=True, timeout=600, capture_output=True)
    r = subprocess.run([str(ROOT / "target" / "gosnappi" / "k8s-check.test"), "-test.v"], cwd=DEPLOY / "k8s" / "check",
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("TestEveryManifestDecodesStrictly", "TestAMisspeltOrMistypedFieldFails"):
        assert f"--- PASS: {name}" in r.stdout, r.stdout


def docs(name: str) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text())}


def test_agent_daemonset():
    ds = docs("agent-daemonset.yaml")["DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True and spec["nodeSelector"] == {"netrig.dev/tester": "true"}
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    sc = spec["containers"][0]["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN", "NET_RAW", "BPF", "SYS_ADMIN", "IPC_LOCK"]}
    assert sc["privileged"] is False
    assert "--token-file" in spec["containers"][0]["args"][0]


def test_controller_deployment():
    d = docs("controller.yaml")
    dep, svc = d["Deployment"], d["Service"]
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]} and "--agent-token-file" in c["args"][0]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    # the controller's user gets its own 0600 copies of the root-owned Secret (netrig refuses a token
    # others may read, and cannot read one only root may)
    spec = dep["spec"]["template"]["spec"]
    [init] = spec["initContainers"]
    assert "install -o 65532 -g 65532 -m 600" in init["command"][-1]
    assert c["securityContext"]["runAsUser"] == 65532
    assert {m["name"] for m in c["volumeMounts"]} == {"secrets"}
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["secrets"]["emptyDir"] == {"medium": "Memory"} and vols["token"]["secret"]["defaultMode"] == 0o400

