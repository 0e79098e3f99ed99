"""OTG packet headers → the engine's header stack (``_native.HeaderSpec`` with ``FieldPattern`` s).

A header's fields are the OTG model's pattern properties (``PatternFlowIpv4Src`` …): each becomes
a field pattern of the same name in the engine's layout (``_native.STACK_HEADERS``), except where
OTG nests (IPv4's priority: ``raw`` is the engine's ``tos``, ``dscp.phb``/``dscp.ecn`` its ``dscp``/
``ecn``, ``tos.*`` its precedence … unused bits; ICMP's ``echo.*``). A field left unset is derived
by the engine where the stack derives it (lengths, types, checksums), else it takes the model's
default (from snappi's tables, never restated here). Every value format is the model's: MAC,
IPv4, IPv6 addresses or integers.
"""
from __future__ import annotations

import secrets
import socket
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import snappi.snappi as _model

from netrig import _native
from netrig.errors import ConfigError
from netrig.otg import refusal
from netrig.otg.schema import schema

P = _native.FieldPattern

#: OTG header kinds the engine builds (the others are refused, see :mod:`netrig.otg.refusal`).
KINDS = tuple(k for k in _native.STACK_HEADERS if k != "custom") + ("custom",)

#: Where OTG nests a header's fields: (header, path inside it) → the engine's field.
NESTED: dict[tuple[str, tuple[str, ...]], str] = {
    ("ipv4", ("priority", "raw")): "tos",
    ("ipv4", ("priority", "dscp", "phb")): "dscp",
    ("ipv4", ("priority", "dscp", "ecn")): "ecn",
    **{("ipv4", ("priority", "tos", f)): f for f in ("precedence", "delay", "throughput", "reliability",
                                                     "monetary", "unused")},
    **{(k, ("echo", f)): f for k in ("icmp", "icmpv6") for f in ("type", "code", "checksum", "identifier",
                                                                  "sequence_number")},
}

Convert = Callable[[Any], int]


def _mac(v: str) -> int:
    return int(v.replace(":", ""), 16)


def _ipv4(v: str) -> int:
    return int.from_bytes(socket.inet_aton(v), "big")


def _ipv6(v: str) -> int:
    return int.from_bytes(socket.inet_pton(socket.AF_INET6, v), "big")


_FORMATS: dict[str | None, Convert] = {"mac": _mac, "ipv4": _ipv4, "ipv6": _ipv6, None: int}


@cache
def _field_info(pattern_class: str) -> tuple[Convert, dict[str, Any], bool]:
    """A pattern class's value converter, its defaults, and whether it is a checksum."""
    s = schema(pattern_class)
    spec = _native_types(pattern_class)
    value = spec.get("value") or spec.get("custom") or {}
    checksum = "generated" in spec
    return _FORMATS.get(value.get("format"), int), s.defaults, checksum


@cache
def _native_types(class_name: str) -> dict[str, dict]:
    """The model class's property table (snappi's ``_TYPES``)."""
    return getattr(_model, class_name)._TYPES


def _seed(seed: int) -> int:
    """OTG's seed 0 asks for values that differ from run to run."""
    return seed if seed else secrets.randbits(32)


def pattern(d: dict, pattern_class: str, path: str, warnings: list[str], kind_field: str) -> _native.FieldPattern:
    """One field's OTG pattern object as the engine's pattern."""
    conv, defaults, checksum = _field_info(pattern_class)
    if d.get("metric_tags"):
        raise refusal.refuse("flows[].packet[].*.*.metric_tags", f"{path}.metric_tags")
    choice = d.get("choice") or defaults.get("choice", "value")
    if checksum:
        if choice == "custom":
            return P.fixed(d.get("custom", 0))
        return P.bad_checksum() if d.get("generated", defaults.get("generated")) == "bad" else P.auto(0)
    if choice == "auto":
        auto = d.get("auto", defaults.get("auto"))
        if isinstance(auto, dict):
            raise refusal.refuse(f"flows[].packet[].{kind_field}.auto", f"{path}.auto")
        if kind_field == "ethernet.dst":
            warnings.append(refusal.warning("flows[].packet[].ethernet.dst.auto", f"{path}.auto"))
        return P.auto(conv(auto if auto is not None else defaults.get("value", 0)))
    if choice == "value":
        return P.fixed(conv(d.get("value", defaults.get("value", 0))))
    if choice == "values":
        return P.values([conv(v) for v in d.get("values", defaults.get("values", [0]))])
    if choice in ("increment", "decrement"):
        c = d.get(choice) or {}
        cd = schema(_native_types(pattern_class)[choice]["type"]).defaults
        start, step = c.get("start", cd.get("start", 0)), c.get("step", cd.get("step", 1))
        return P.counter(conv(start), conv(step), c.get("count", cd.get("count", 1)), choice == "decrement")
    if choice == "random":
        r = d.get("random") or {}
        rd = schema(_native_types(pattern_class)["random"]["type"]).defaults
        lo, hi = conv(r.get("min", rd.get("min", 0))), conv(r.get("max", rd.get("max", 0)))
        if lo > hi:
            raise ConfigError(f"{path}.random", f"min {r.get('min')} is above max {r.get('max')}: swap them")
        return P.random(lo, hi, r.get("count", rd.get("count", 1)), _seed(r.get("seed", rd.get("seed", 1))))
    raise refusal.refuse("", f"{path}.choice", f"choice {choice!r}")


def _header_fields(kind: str, body: dict, path: str, warnings: list[str]) -> Iterator[tuple[str, _native.FieldPattern]]:
    """The fields set in one header's body (nested ones flattened to the engine's names)."""
    def walk(obj: dict, class_name: str, at: tuple[str, ...]) -> Iterator[tuple[str, _native.FieldPattern]]:
        types = _native_types(class_name)
        for prop, value in obj.items():
            here = f"{path}.{'.'.join((*at, prop))}"
            t = types[prop]["type"]
            if value == []:
                continue
            if not isinstance(t, str):
                if prop == "choice":
                    continue
                raise refusal.refuse(f"flows[].packet[].{kind}.{prop}", here)
            if t.startswith("PatternFlow"):
                name = NESTED.get((kind, (*at, prop)), prop) if at else prop
                if kind == "ethernet" and prop == "pfc_queue":
                    raise refusal.refuse("flows[].packet[].ethernet.pfc_queue", here)
                yield name, pattern(value, t, here, warnings, f"{kind}.{prop}")
            elif (kind, (*at, prop)) in _NESTS:
                yield from walk(value, t, (*at, prop))
            else:
                raise refusal.refuse(f"flows[].packet[].{kind}.{prop}", here)
    yield from walk(body, _BODY_CLASS[kind], ())


#: Nested objects the mapping walks into, and the model class of each header's body.
_NESTS = {("ipv4", ("priority",)), ("ipv4", ("priority", "dscp")), ("ipv4", ("priority", "tos")),
          ("icmp", ("echo",)), ("icmpv6", ("echo",))}
_BODY_CLASS = {k: "Flow" + k.capitalize() for k in KINDS}


@cache
def defaults(kind: str) -> tuple[tuple[str, _native.FieldPattern], ...]:
    """The fields of ``kind`` whose model default is not 0, as the engine's patterns (derived
    where the stack derives them, else that default). Fields left out default to 0 or derived."""
    out: list[tuple[str, _native.FieldPattern]] = []

    def walk(class_name: str, at: tuple[str, ...]) -> None:
        s = schema(class_name)
        for prop, spec in _native_types(class_name).items():
            t = spec["type"]
            if not isinstance(t, str):
                continue
            if t.startswith("PatternFlow"):
                conv, d, checksum = _field_info(t)
                v = d.get("auto") if d.get("choice") == "auto" else d.get("value")
                if not checksum and v not in (None, 0, "0.0.0.0", "::0", "00:00:00:00:00:00") and conv(v) != 0:
                    out.append((NESTED.get((kind, (*at, prop)), prop), P.auto(conv(v))))
            elif (kind, (*at, prop)) in _NESTS and (not at or s.defaults.get("choice") in (None, prop)):
                walk(t, (*at, prop))
    walk(_BODY_CLASS[kind], ())
    return tuple(out)


def header(h: dict, path: str, warnings: list[str]) -> _native.HeaderSpec:
    """One OTG ``Flow.Header`` as the engine's header."""
    kind = h.get("choice", "ethernet")
    if kind not in KINDS:
        raise refusal.refuse("flows[].packet[].pfcpause", f"{path}.choice", f"{kind} headers")
    body = h.get(kind) or {}
    if kind == "custom":
        if body.get("metric_tags"):
            raise refusal.refuse("flows[].packet[].*.*.metric_tags", f"{path}.custom.metric_tags")
        text = body["bytes"].replace(" ", "").replace(":", "")
        text = text[2:] if text[:2] in ("0x", "0X") else text
        if len(text) % 2:
            raise ConfigError(f"{path}.custom.bytes", "an odd number of hex digits: give whole bytes")
        return _native.HeaderSpec("custom", (), bytes.fromhex(text))
    given = list(_header_fields(kind, body, f"{path}.{kind}", warnings))
    names = {n for n, _ in given}
    overlaps = _OVERLAPS.get(kind, {})
    taken = set().union(*(overlaps.get(n, {n}) for n in names)) if names else set()
    fields = given + [(n, p) for n, p in defaults(kind) if n not in taken]
    return _native.HeaderSpec(kind, fields)


#: Engine fields that share bits: setting one leaves the others' defaults out.
_TOS = ("tos", "dscp", "ecn", "precedence", "delay", "throughput", "reliability", "monetary", "unused")
_OVERLAPS: dict[str, dict[str, set[str]]] = {"ipv4": {f: set(_TOS) for f in _TOS}}


def otg_path(engine_field: str, flow_path: str) -> str:
    """An engine error's field (``packet[1].ipv4.dscp``) as the OTG path of the flow."""
    if not engine_field.startswith("packet["):
        return f"{flow_path}.{engine_field}"
    head, kind, field = engine_field.split(".", 2)
    for (k, at), name in NESTED.items():
        if k == kind and name == field:
            return f"{flow_path}.{head}.{kind}.{'.'.join(at)}"
    return f"{flow_path}.{engine_field}"
