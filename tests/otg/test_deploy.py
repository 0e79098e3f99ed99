"""The deployment files (deploy/): the agent DaemonSet runs on labelled tester nodes with host
networking and only AF_XDP's capabilities; the controller needs none; selectors match labels."""
from __future__ import annotations

from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


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


def test_containerfile_runs_serve_with_no_privilege():
    text = (DEPLOY / "agent.Containerfile").read_text()
    assert 'ENTRYPOINT ["netrig", "serve"]' in text and "--privileged" not in text.replace("no --privileged", "")
