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

import functools
import socket
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from netrig import _native
from netrig.errors import ConfigError
from netrig.otg import refusal
from netrig.otg.schema import Prop, Schema, schema
from netrig.otgclient.typed import Reader

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


@dataclass(frozen=True, slots=True, kw_only=True)
class _Counter:
    """An increment or decrement (``PatternFlow…Counter``) as given (``None``: not given)."""

    start: Any = None
    step: Any = None
    count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Random:
    """A random pattern (``PatternFlow…Random``) as given."""

    min: Any = None
    max: Any = None
    seed: int | None = None
    count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pattern:
    """A field's pattern as given: the properties of every ``PatternFlow…`` class (each class has
    some of them, as its table says)."""

    choice: str | None = None
    value: Any = None
    values: tuple[Any, ...] | None = None
    increment: _Counter | None = None
    decrement: _Counter | None = None
    random: _Random | None = None
    metric_tags: tuple[Any, ...] | None = None
    auto: Any = None
    generated: str | None = None
    custom: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _CustomHeader:
    """A custom header (``FlowCustom``)."""

    bytes: str
    metric_tags: tuple[Any, ...] | None = None


#: Patterns, and the model's defaults of them, read as given (nothing filled in).
_AS_GIVEN = Reader()


def _or(v: Any, default: Any) -> Any:
    return default if v is None else v


@dataclass(frozen=True)
class _PatternInfo:
    """What converting one pattern class needs: its value converter and bounds, defaults, its
    properties and choice members, whether it is a checksum, and its plain choices' converter
    (None for a checksum)."""

    conv: Convert
    lo: int
    hi: int
    defaults: _Pattern
    keys: frozenset[str]
    members: frozenset[str]
    checksum: bool
    form: _native.PatternForm | None


@cache
def _info(pattern_class: str) -> _PatternInfo:
    s = schema(pattern_class)
    value = s.props.get("value") or s.props.get("custom") or Prop(kind=int)
    fmt_hi = 2**32 - 1 if value.format == "uint32" else 2**64 - 1
    fmt = value.format if value.format in _FORMATS else None
    conv, lo, hi = _FORMATS[fmt], int(_or(value.minimum, 0)), min(int(_or(value.maximum, fmt_hi)), fmt_hi)
    defaults, checksum = _AS_GIVEN(_Pattern, s.defaults), "generated" in s.props
    form = None if checksum else _form(s, fmt or "int", conv, lo, hi, defaults)
    return _PatternInfo(conv, lo, hi, defaults, frozenset(s.props), s.choices or frozenset(), checksum, form)


def _form(s: Schema, fmt: str, conv: Convert, lo: int, hi: int, d: _Pattern) -> _native.PatternForm:
    """The engine's converter of a pattern class's plain choices, with the model's defaults."""
    sub = [schema(str(p.kind)) for k, p in s.props.items() if k in ("increment", "random")]
    cd = next((_AS_GIVEN(_Counter, c.defaults) for c in sub if c.name.endswith("Counter")), _Counter())
    rd = next((_AS_GIVEN(_Random, c.defaults) for c in sub if c.name.endswith("Random")), _Random())
    sub_keys = sorted({k for c in sub for k in c.props})

    def dv(v: Any) -> int:  # a default: in the class's format, or a plain 0 or 1 where the model has none
        return v if type(v) is int else conv(v)
    return _native.PatternForm(fmt, lo, hi, dv(_or(d.value, 0)), [dv(v) for v in _or(d.values, (0,))],
                               (dv(_or(cd.start, 0)), dv(_or(cd.step, 1)), _or(cd.count, 1)),
                               (dv(_or(rd.min, 0)), dv(_or(rd.max, 0)), _or(rd.count, 1), _or(rd.seed, 1)),
                               sub_keys, sorted(s.props), sorted(s.choices or ()), _or(d.choice, "value"))


def pattern(d: dict, pattern_class: str, path: Callable[[], str], warnings: list[str],
            kind_field: str) -> _native.FieldPattern:
    """One field's OTG pattern object as the engine's pattern (``path()``: where it is, for errors).
    The header's check left it to here (``schema.check(defer_headers=True)``). The plain choices
    convert in the engine (``_native.PatternForm``); what is not plain, or does not convert, is
    checked against the model, whose error names the path."""
    info = _info(pattern_class)
    form = info.form
    try:
        p = form.convert(d) if form is not None else None
        if p is not None:
            return p
        given = _AS_GIVEN(_Pattern, d)  # a property of no pattern class: the model's check below names it
        members = d.keys() & info.members
        if not d.keys() <= info.keys or len(members) > 1 or (members and given.choice not in (None, *members)) \
                or None in d.values():
            schema(pattern_class).check(d, path())
        choice = given.choice or (next(iter(members)) if members else _or(info.defaults.choice, "value"))
        return _convert(given, info, choice, path, warnings, kind_field)
    except ConfigError:
        raise
    except (ValueError, TypeError, OSError, AttributeError) as e:
        schema(pattern_class).check(d, path())  # raises the model's error, with the path
        raise ConfigError(path(), str(e)) from None


def _int(v: Any, info: _PatternInfo) -> int:
    if type(v) is not int or not info.lo <= v <= info.hi:
        raise ValueError(f"{v!r} is not an integer in {info.lo}..{info.hi}")
    return v


def _convert(p: _Pattern, info: _PatternInfo, choice: str, path: Callable[[], str], warnings: list[str],
             kind_field: str) -> _native.FieldPattern:
    """What the engine's ``PatternForm`` leaves here: metric tags, checksums, ``auto``."""
    conv = info.conv if info.conv is not int else (lambda v: _int(v, info))
    defaults = info.defaults
    if p.metric_tags:  # a flow's tags are taken out before its headers convert (netrig.otg.tags.split)
        raise ConfigError(f"{path()}.metric_tags", "metric tags are counted in a flow's own metrics only")
    if info.checksum:
        generated = _or(p.generated, defaults.generated)
        if choice == "custom":
            return P.fixed(_int(_or(p.custom, 0), _CHECKSUM))
        if generated not in ("good", "bad"):
            raise ValueError("generated must be good or bad")
        return P.bad_checksum() if generated == "bad" else P.auto(0)
    if choice == "auto":
        auto = _or(p.auto, defaults.auto)
        if isinstance(auto, dict):
            raise refusal.refuse(f"flows[].packet[].{kind_field}.auto", f"{path()}.auto")
        if kind_field == "ethernet.dst":
            warnings.append(refusal.warning("flows[].packet[].ethernet.dst.auto", f"{path()}.auto"))
        return P.auto(conv(auto if auto is not None else _or(defaults.value, 0)))
    if choice == "value":  # a checksum class's
        return P.fixed(conv(_or(p.value, _or(defaults.value, 0))))
    raise ValueError(f"choice {choice!r}")


#: Bounds of a custom checksum.
_CHECKSUM = _PatternInfo(int, 0, 0xFFFF, _Pattern(), frozenset(), frozenset(), False, None)

#: How a header body's property is mapped: a field pattern (its class, the engine's name, the
#: field as refusals name it), a nested object to walk (its class), or refused (the table's entry).
_Action = tuple[str, str, str, str]


@cache
def _actions(kind: str, class_name: str, at: tuple[str, ...]) -> dict[str, _Action]:
    out: dict[str, _Action] = {}
    for prop, p in schema(class_name).props.items():
        t = p.kind
        if not isinstance(t, str):
            refused: _Action = ("refuse", f"flows[].packet[].{kind}.{prop}", "", "")
            out[prop] = ("skip", "", "", "") if prop == "choice" else refused
        elif kind == "ethernet" and prop == "pfc_queue":
            out[prop] = ("refuse", "flows[].packet[].ethernet.pfc_queue", "", "")
        elif t.startswith("PatternFlow"):
            out[prop] = ("pattern", t, NESTED.get((kind, (*at, prop)), prop) if at else prop, f"{kind}.{prop}")
        elif (kind, (*at, prop)) in _NESTS:
            out[prop] = ("nest", t, "", "")
        else:
            out[prop] = ("refuse", f"flows[].packet[].{kind}.{prop}", "", "")
    return out


def _path(path: str, at: tuple[str, ...], prop: str) -> str:
    return f"{path}.{'.'.join((*at, prop))}"


def _header_fields(kind: str, body: dict, path: str, warnings: list[str], out: list) -> None:
    """Append the fields set in one header's body to ``out`` (nested ones flattened to the engine's
    names)."""
    def walk(obj: dict, class_name: str, at: tuple[str, ...]) -> None:
        actions = _actions(kind, class_name, at)
        for prop, value in obj.items():
            what, arg, name, kind_field = actions[prop]
            if what == "pattern":
                out.append((name, pattern(value, arg, functools.partial(_path, path, at, prop), warnings, kind_field)))
            elif what == "nest":
                walk(value, arg, (*at, prop))
            elif what == "refuse" and value != []:
                raise refusal.refuse(arg, f"{path}.{'.'.join((*at, prop))}")
    walk(body, _BODY_CLASS[kind], ())


@dataclass(frozen=True)
class TaggedField:
    """A header field that carries OTG metric tags: the engine's name of it, its width in bits,
    its pattern as the engine writes it, the tags as given, and its OTG path."""

    name: str
    bits: int
    pattern: _native.FieldPattern
    tags: tuple[dict, ...]
    path: str


def untagged(kind: str, body: dict, path: str, warnings: list[str]) -> tuple[dict, list[TaggedField]]:
    """A header body with its fields' ``metric_tags`` taken out, and those fields (each one's
    pattern converted as :func:`pattern` does)."""
    found: list[TaggedField] = []

    def walk(obj: dict, class_name: str, at: tuple[str, ...]) -> dict:
        """``obj`` itself when none of its fields has tags (a 4096-flow config has none, mostly)."""
        actions = _actions(kind, class_name, at)
        out: dict | None = None
        for prop, value in obj.items():
            what, arg, name, kind_field = actions.get(prop, _NO_ACTION)
            if what == "pattern" and isinstance(value, dict) and value.get("metric_tags"):
                value = {k: v for k, v in value.items() if k != "metric_tags"}
                where = functools.partial(_path, path, at, prop)
                p = pattern(value, arg, where, warnings, kind_field)
                bits = next(b for n, _, b in _native.STACK_HEADERS[kind][1] if n == name)
                found.append(TaggedField(name, bits, p, tuple(obj[prop]["metric_tags"]), where()))
            elif what == "nest" and isinstance(value, dict):
                value = walk(value, arg, (*at, prop))
            else:
                continue
            if value is not obj[prop]:
                out = out if out is not None else dict(obj)
                out[prop] = value
        return out if out is not None else obj
    return walk(body, _BODY_CLASS[kind], ()), found


_NO_ACTION = ("", "", "", "")


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
        for prop, p in s.props.items():
            t = p.kind
            if not isinstance(t, str):
                continue
            if t.startswith("PatternFlow"):
                info = _info(t)
                d = info.defaults
                v = d.auto if d.choice == "auto" else d.value
                if not info.checksum and v not in (None, 0, "0.0.0.0", "::0", "00:00:00:00:00:00") and info.conv(v):
                    out.append((NESTED.get((kind, (*at, prop)), prop), P.auto(info.conv(v))))
            elif (kind, (*at, prop)) in _NESTS and (not at or s.default_choice in (None, prop)):
                walk(t, (*at, prop))
    walk(_BODY_CLASS[kind], ())
    return tuple(out)


def header(h: dict, flow_path: str, k: int, warnings: list[str]) -> _native.HeaderSpec:
    """One OTG ``Flow.Header`` (``flow_path``'s ``packet[k]``) as the engine's header; the config's
    check left it to here (``schema.check(defer_headers=True)``): a header the engine's
    :class:`_native.HeaderForm` does not take whole is checked against the model first, whose
    error names the path."""
    kind = h.get("choice")
    if kind not in KINDS or len(h) > 2 or (len(h) == 2 and kind not in h):
        path = f"{flow_path}.packet[{k}]"
        schema("FlowHeader", True).check(h, path)  # a choice left out is filled in
        kind = h.get("choice") or schema("FlowHeader").default_choice
        if kind not in KINDS:
            raise refusal.refuse("flows[].packet[].pfcpause", f"{path}.choice", f"{kind} headers")
    body = h.get(kind) or {}
    if kind == "custom":
        path = f"{flow_path}.packet[{k}]"
        custom = _AS_GIVEN(_CustomHeader, schema("FlowCustom").check(body, f"{path}.custom"))
        if custom.metric_tags:
            raise refusal.refuse("flows[].packet[].custom.metric_tags", f"{path}.custom.metric_tags")
        text = custom.bytes.replace(" ", "").replace(":", "")
        text = text[2:] if text[:2] in ("0x", "0X") else text
        if len(text) % 2:
            raise ConfigError(f"{path}.custom.bytes", "an odd number of hex digits: give whole bytes")
        return _native.HeaderSpec("custom", (), bytes.fromhex(text))
    spec = _header_form(kind).convert(body)  # the plain case, in one pass in the engine
    if spec is not None:
        return spec
    path = f"{flow_path}.packet[{k}].{kind}"
    return walked(kind, schema(_BODY_CLASS[kind], True).check(body, path), path, warnings)


def walked(kind: str, body: dict, path: str, warnings: list[str]) -> _native.HeaderSpec:
    """A header body mapped here, field by field: what :func:`header` does with a body the engine's
    :class:`_native.HeaderForm` leaves to it (and the reference that form is tested against)."""
    fields: list[tuple[str, _native.FieldPattern]] = []
    _header_fields(kind, body, path, warnings, fields)
    taken = {n for n, _ in fields}
    if kind in _OVERLAPS and taken & _OVERLAPS[kind]:
        taken |= _OVERLAPS[kind]
    fields += [(n, p) for n, p in defaults(kind) if n not in taken]
    return _native.HeaderSpec(kind, fields)


@cache
def _header_form(kind: str) -> _native.HeaderForm:
    """The engine's converter of a plain ``kind`` header body: this module's walk (``_actions``),
    each pattern's form, the defaults and overlaps, as one table."""
    props: list[tuple[str, str, _native.PatternForm | None, str]] = []

    def walk(class_name: str, at: tuple[str, ...]) -> None:
        for prop, (what, arg, name, _) in _actions(kind, class_name, at).items():
            path = ".".join((*at, prop))
            if what == "pattern":
                props.append((path, what, _info(arg).form, name))
            elif what in ("nest", "skip"):
                props.append((path, what, None, ""))
                if what == "nest":
                    walk(arg, (*at, prop))
    walk(_BODY_CLASS[kind], ())
    return _native.HeaderForm(kind, props, list(defaults(kind)), sorted(_OVERLAPS.get(kind, ())))


#: Engine fields that share bits: setting one of them leaves the others' defaults out.
_OVERLAPS: dict[str, frozenset[str]] = {
    "ipv4": frozenset(("tos", "dscp", "ecn", "precedence", "delay", "throughput", "reliability", "monetary",
                       "unused"))}


def otg_path(engine_field: str, flow_path: str) -> str:
    """An engine error's field (``packet[1].ipv4.dscp``) as the OTG path of the flow."""
    if not engine_field.startswith("packet["):
        return f"{flow_path}.{engine_field}"
    head, kind, field = engine_field.split(".", 2)
    for (k, at), name in NESTED.items():
        if k == kind and name == field:
            return f"{flow_path}.{head}.{kind}.{'.'.join(at)}"
    return f"{flow_path}.{engine_field}"
