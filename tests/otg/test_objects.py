"""The OTG objects netrig reads are the model's classes: each dataclass of netrig.otg.objects and
netrig.otgclient.messages has the properties of snappi's class of its name (or keeps the others in
``others``), and a field without a default is one the model requires or gives a default (or an
object, read with every default). Requests read through the model's check: errors name the path."""
from __future__ import annotations

import dataclasses
import inspect

import pytest
import snappi.snappi as model

from netrig.errors import ConfigError
from netrig.otg import objects
from netrig.otg.objects import Config, ControlState, MetricsRequest, StatesRequest, read
from netrig.otgclient import messages

CLASSES = [c for mod in (objects, messages) for _, c in inspect.getmembers(mod, dataclasses.is_dataclass)
           if c.__module__ == mod.__name__ and c not in (objects.StartTags, objects.Time)]
#: netrig's names where the model's would shadow a builtin.
MODEL_NAME = {"Warnings": "Warning"}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_class_is_the_models(cls):
    m = getattr(model, MODEL_NAME.get(cls.__name__, cls.__name__))
    fields = {f.name: f for f in dataclasses.fields(cls)}
    props = set(m._TYPES)
    if "others" in fields:
        assert set(fields) - {"others"} <= props, cls
    else:
        assert set(fields) == props, cls
    hints = {f.name: f.type for f in fields.values()}
    for name, f in fields.items():
        bare = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if bare:
            nested = isinstance(m._TYPES[name]["type"], str) and not m._TYPES[name]["type"].endswith("Iter")
            assert name in (m._REQUIRED or ()) or name in (m._DEFAULTS or {}) or nested, (cls, name, hints[name])


def test_a_config_reads_with_the_models_defaults():
    doc = {"ports": [{"name": "p1", "location": "va"}],
           "flows": [{"name": "f", "tx_rx": {"port": {"tx_name": "p1", "rx_names": ["p1"]}},
                      "rate": {"percentage": 50}, "duration": {"fixed_packets": {"packets": 9}}}],
           "layer1": [{"name": "l", "port_names": ["p1"], "mtu": 9000}], "devices": [], "lags": []}
    c = read(Config, doc, defer_headers=True)
    f = c.flows[0]
    assert (f.tx_rx.choice, f.rate.choice, f.rate.percentage, f.size.choice, f.size.fixed) == \
        ("port", "percentage", 50, "fixed", 64)
    assert f.duration.fixed_packets is not None and (f.duration.fixed_packets.packets, f.duration.fixed_packets.gap) \
        == (9, 12)
    assert (f.metrics.loss, f.metrics.latency.mode, f.metrics.ratio(1)) == (False, "store_forward", 1.0)
    assert c.layer1[0].others == {"mtu": 9000} and c.others == {"lags": []} and c.devices == () and c.lldp == ()
    assert doc["flows"][0]["rate"] == {"choice": "percentage", "percentage": 50}  # the document, normalised


@pytest.mark.parametrize("cls, body, field, words", [
    (Config, {"flows": [{"name": "f", "tx_rx": {"port": {"tx_name": 1}}}]}, "flows[0].tx_rx.port.tx_name",
     "not a string"),
    (ControlState, {"choice": "traffic", "traffic": {"choice": "flow_transmit"}}, "traffic.flow_transmit",
     "give its state"),
    (ControlState, {"choice": "port", "port": {"choice": "capture"}}, "port.capture", "give its state"),
    (MetricsRequest, {"choice": "flows"}, "choice", "did you mean 'flow'"),
])
def test_a_bad_request_names_its_path(cls, body, field, words):
    with pytest.raises(ConfigError) as e:
        req = read(cls, body)
        if cls is ControlState:
            req.flow_transmit() if req.choice == "traffic" else req.capture()
    assert e.value.field == field and words in e.value.message


def test_states_default_to_ipv4_neighbours():
    assert read(StatesRequest, {}).choice == "ipv4_neighbors"
