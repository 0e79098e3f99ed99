"""Supervised traffic without ports (no root): a served service whose client asked for supervision
(``X-Netrig-Supervise``) has every flow stopped once that client falls silent, says so in
``GET /netrig/agents``, and is supervised again by its next request; requests without the header
neither arm nor feed it. tests/controller/test_distributed.py kills a real controller."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from netrig.otg.api import OtgService
from netrig.otg.objects import ControlState, StartTags
from netrig.otg.server import OtgServer
from netrig.otgclient import headers


class Recorder(OtgService):
    """A service that only records the traffic states it is asked for."""

    def __init__(self) -> None:
        self.states: list[str] = []

    def set_config(self, config: Any, document: dict[str, Any]) -> list[str]:
        return []

    def get_config(self) -> dict[str, Any]:
        return {}

    def control_state(self, req: ControlState, start: StartTags | None = None) -> list[str]:
        self.states.append(req.flow_transmit().state)
        return []

    def metrics(self, req: Any) -> dict[str, Any]:
        return {}

    def capture(self, req: Any) -> bytes:
        return b""

    def close(self) -> None:
        pass


@pytest.fixture
def served() -> Iterator[tuple[Recorder, str]]:
    service = Recorder()
    server = OtgServer(service, "127.0.0.1", 0, None)
    server.start()
    yield service, server.url
    server.stop()


def get(url: str, path: str, hdrs: dict[str, str] | None = None) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, headers=hdrs or {}), timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def supervision(url: str) -> dict:
    code, body = get(url, "/netrig/agents")
    assert code == 200, body
    return body["supervision"]


def test_a_silent_supervising_client_has_every_flow_stopped(served):
    service, url = served
    assert supervision(url) == {"state": "off"}
    time.sleep(0.4)
    assert service.states == []  # nobody asked: nothing is stopped
    get(url, "/capabilities/version", headers.supervise(0.3))
    assert supervision(url)["state"] == "supervised"
    first = last = time.monotonic()
    while last - first < 0.5:  # fed within the period: still supervised
        last = time.monotonic()  # the last feed arrives after this
        get(url, "/capabilities/version", headers.supervise(0.3))
        time.sleep(0.05)
    assert service.states == []
    while not service.states:
        assert time.monotonic() - last < 2, "never stopped"
        get(url, "/capabilities/version")  # another client's request does not feed it
        time.sleep(0.02)
    assert 0.3 <= time.monotonic() - last < 0.6
    assert service.states == ["stop"]
    state = supervision(url)
    assert state["state"] == "lapsed" and state["period_s"] == 0.3 and "every flow stopped" in state["reason"]
    time.sleep(0.4)
    assert service.states == ["stop"]  # stopped once
    get(url, "/capabilities/version", headers.supervise(0.3))
    assert supervision(url)["state"] == "supervised"


@pytest.mark.parametrize("value", ["0", "abc", "1e9", "-1"])
def test_a_bad_supervision_period_names_the_header(served, value):
    _, url = served
    code, body = get(url, "/capabilities/version", {headers.SUPERVISE: value})
    assert code == 400 and body["errors"][0].startswith(f"{headers.SUPERVISE}: {value!r}"), body
    assert supervision(url) == {"state": "off"}
