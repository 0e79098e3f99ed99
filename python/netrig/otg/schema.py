"""OTG objects checked against the model snappi was generated from, fast.

snappi's generated classes carry the OTG model as tables: per class ``_TYPES`` (each property's
type, format, enum, bounds, item type), ``_REQUIRED`` and ``_DEFAULTS``. Building snappi objects
from a request costs ~9 ms per flow (38 s for 4096 flows), so this module compiles those tables,
once per class, into a :class:`Schema` and walks the request's JSON with it. It checks what the
model says (types, formats, enums, bounds, required properties) and what snappi lets through:
an unknown property (snappi drops it), a choice with two members, ``null`` where a value belongs.
Every error is a :class:`~netrig.errors.ConfigError` whose field is the JSON path
(``flows[0].packet[1].ipv4.src.value``).

:func:`check` also normalises in place: 64-bit integers sent as strings (protojson does that, so
gosnappi does) become ints, and a choice given only by its member gets its ``choice``.
"""
from __future__ import annotations

import difflib
import ipaddress
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from typing import Any

import snappi.snappi as _model

from netrig.errors import ConfigError

#: The snappi (OTG model) version this server validates with.
MODEL_VERSION = version("snappi")
#: The OTG API versions this server speaks: what its version check tells clients (a semver range
#: that snappi's and gosnappi's checks both read). Clients from 1.58.0 on know every property the
#: responses carry.
API_SPEC_RANGE = ">=1.58.0,<2.0.0"

_MAC = re.compile(r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$")
_INT_RANGES = {"uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1), "int32": (-(2**31), 2**31 - 1),
               "int64": (-(2**63), 2**63 - 1)}

Check = Callable[[Any], Any]


class _Bad(Exception):
    """A value the model refuses; the containers it sits in prepend their keys on the way up (no
    path is built while everything is right)."""

    def __init__(self, message: str, key: str | int | None = None):
        super().__init__(message)
        self.message = message
        self.keys: list[str | int] = [] if key is None else [key]

    def within(self, key: str | int) -> _Bad:
        self.keys.insert(0, key)
        return self

    def path(self, root: str) -> str:
        out = root
        for k in self.keys:
            out = f"{out}[{k}]" if isinstance(k, int) else _join(out, k)
        return out


_OCTET = r"(25[0-5]|2[0-4][0-9]|[01]?[0-9]?[0-9])"
_IPV4 = re.compile(rf"{_OCTET}(\.{_OCTET}){{3}}")


def _is_ipv4(v: str) -> bool:
    return _IPV4.fullmatch(v) is not None


def _is_ipv6(v: str) -> bool:
    try:
        ipaddress.IPv6Address(v)
    except ValueError:
        return False
    return True


def _is_hex(v: str) -> bool:
    try:
        int(v, 16)
    except ValueError:
        return False
    return True


_STRING_FORMATS: dict[str, tuple[Callable[[str], bool], str]] = {
    "mac": (lambda v: bool(_MAC.match(v)), "a MAC address such as 00:11:22:33:44:55"),
    "ipv4": (_is_ipv4, "an IPv4 address such as 198.18.0.1"),
    "ipv6": (_is_ipv6, "an IPv6 address such as 2001:2::1"),
    "hex": (_is_hex, "hexadecimal digits such as 0a1b"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Prop:
    """One property of a model class as snappi's ``_TYPES`` describes it."""

    #: A scalar type, ``list``, or the name of a model class (``…Iter``: a list of them) (snappi's
    #: ``type``).
    kind: type | str
    format: str | None = None
    itemtype: type = str
    itemformat: str | None = None
    enum: list[str] | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None


#: snappi's names of :class:`Prop`'s fields, where they differ.
_SNAPPI_NAMES = {"type": "kind", "minLength": "min_length", "maxLength": "max_length"}


def _prop(spec: dict[str, Any]) -> Prop:
    return Prop(**{_SNAPPI_NAMES.get(k, k): v for k, v in spec.items()})


def _scalar_check(kind: type, prop: Prop) -> Check:
    """A checker for one scalar (int, float, str, bool) with the model's format, bounds, enum."""
    fmt = prop.format or prop.itemformat
    enum = prop.enum
    lo, hi = prop.minimum, prop.maximum
    if kind is int:
        flo, fhi = _INT_RANGES.get(fmt or "", (None, None))
        if flo is not None and fhi is not None:
            lo = flo if lo is None else max(lo, flo)
            hi = fhi if hi is None else min(hi, fhi)
        wide = fmt in ("uint64", "int64")

        def check_int(v: Any) -> int:
            if wide and isinstance(v, str) and re.fullmatch(r"-?\d+", v):
                v = int(v)  # protojson sends 64-bit integers as strings
            if not isinstance(v, int) or isinstance(v, bool):
                raise _Bad(f"{v!r} is not an integer: give a whole number")
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise _Bad(f"{v} is out of range: give {lo}..{hi}")
            return v
        return check_int
    if kind is float:
        def check_float(v: Any) -> float:
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise _Bad(f"{v!r} is not a finite number")
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise _Bad(f"{v} is out of range: give {lo}..{hi}")
            return v
        return check_float
    if kind is bool:
        def check_bool(v: Any) -> bool:
            if not isinstance(v, bool):
                raise _Bad(f"{v!r} is not true or false")
            return v
        return check_bool
    return _string_check(prop, fmt, enum)


def _plain_str(v: Any) -> str:
    if type(v) is not str:
        raise _Bad(f"{_short(v)} is not a string")
    return v


def _string_check(prop: Prop, fmt: str | None, enum: list | None) -> Check:
    test, what = _STRING_FORMATS.get(fmt or "", (None, ""))
    min_len, max_len = prop.min_length, prop.max_length
    pattern = re.compile(prop.pattern) if prop.pattern else None
    if test is None and enum is None and pattern is None and min_len is None and max_len is None:
        return _plain_str

    def check_str(v: Any) -> str:
        if not isinstance(v, str):
            raise _Bad(f"{v!r} is not a string")
        if enum is not None and v not in enum:
            close = difflib.get_close_matches(v, enum, 1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise _Bad(f"{v!r} is not one of {', '.join(enum)}{hint}")
        if test is not None and not test(v):
            raise _Bad(f"{v!r} is not {what}")
        if (min_len is not None and len(v) < min_len) or (max_len is not None and len(v) > max_len):
            raise _Bad(f"{v!r} has {len(v)} characters: give {min_len or 0}..{max_len or 'any'}")
        if pattern is not None and not pattern.match(v):
            raise _Bad(f"{v!r} does not match {pattern.pattern}")
        return v
    return check_str


def _list_check(prop: Prop) -> Check:
    item = _scalar_check(prop.itemtype, prop)

    def check_list(v: Any) -> list:
        if not isinstance(v, list):
            raise _Bad(f"{_short(v)} is not a list")
        out = []
        for i, x in enumerate(v):
            try:
                out.append(item(x))
            except _Bad as e:
                raise e.within(i) from None
        return out
    return check_list


#: Model classes a check with ``defer_headers`` leaves to the code that maps them
#: (``netrig.otg.headers``, which checks each as it converts it): a flow's headers and their field
#: patterns. Most headers convert in one pass in the engine, which takes only what the model
#: accepts: checking them here first took 40 % of a 4096-flow config's check.
DEFERRED = ("FlowHeader", "PatternFlow")


def _object_check(class_name: str, defer: bool) -> Check:
    if defer and class_name.startswith(DEFERRED):
        def deferred(v: Any) -> dict:
            if not isinstance(v, dict):
                raise _Bad(f"{_short(v)} is not an object ({class_name})")
            return v
        return deferred
    walk: list[Callable[[Any], dict]] = []  # resolved on first use: classes refer to each other

    def check_object(v: Any) -> dict:
        if not walk:
            walk.append(schema(class_name, defer).walk)
        return walk[0](v)
    return check_object


def _iter_check(class_name: str, defer: bool) -> Check:
    item = class_name[: -len("Iter")]
    deferred = _object_check(item, defer) if defer and item.startswith(DEFERRED) else None

    def check_items(v: Any) -> list:
        if not isinstance(v, list):
            raise _Bad(f"{_short(v)} is not a list of {item} objects")
        walk = deferred or schema(item, defer).walk
        for i, x in enumerate(v):
            try:
                walk(x)
            except _Bad as e:
                raise e.within(i) from None
        return v
    return check_items


def _property_check(prop: Prop, defer: bool) -> Check:
    kind = prop.kind
    if isinstance(kind, str):
        return _iter_check(kind, defer) if kind.endswith("Iter") else _object_check(kind, defer)
    if kind is list:
        return _list_check(prop)
    return _scalar_check(kind, prop)


@dataclass(frozen=True)
class Schema:
    """One model class: its properties and their checkers, required properties, defaults, choice."""

    name: str
    props: dict[str, Prop]
    checks: dict[str, Check]
    required: tuple[str, ...]
    defaults: dict[str, Any]
    #: The members of the class's choice (``None``: the class has no ``choice``).
    choices: frozenset[str] | None
    #: Object properties whose check is the walk of their class's schema, made at this schema's
    #: first walk (classes refer to each other): property → (class, defer_headers).
    lazy: dict[str, tuple[str, bool]]

    def check(self, data: Any, path: str = "") -> dict:
        """``data`` checked (and normalised in place); errors name the path from ``path``."""
        try:
            return self.walk(data)
        except _Bad as e:
            raise ConfigError(e.path(path) or self.name, e.message) from None

    def walk(self, data: Any) -> dict:
        if not isinstance(data, dict):
            raise _Bad(f"{_short(data)} is not an object ({self.name})")
        if self.lazy:
            self._resolve()
        checks = self.checks
        changed = None
        for key, value in data.items():
            check = checks.get(key)
            if check is None:
                raise _unknown(self, key)
            if value is None:
                raise _Bad(f"null is not a value: leave {key} out for its default", key)
            try:
                new = check(value)
            except _Bad as e:
                raise e.within(key) from None
            if new is not value:
                changed = changed or {}
                changed[key] = new
        if changed:
            data.update(changed)
        for key in self.required:
            if key not in data:
                raise _Bad(f"is required ({self.name})", key)
        if self.choices is not None:
            chosen = data.get("choice")
            if chosen is None or len(data) != 2 or chosen not in data:
                self._check_choice(data)
        return data

    def _check_choice(self, data: dict) -> None:
        members = [k for k in data if k in self.choices]  # type: ignore[operator]
        chosen = data.get("choice")
        if chosen is None:
            if len(members) > 1:
                raise _Bad(f"{' and '.join(members)} are members of one choice: give one")
            if members:
                data["choice"] = members[0]
            return
        others = [k for k in members if k != chosen]
        if others:
            raise _Bad(f"choice is {chosen!r}: remove {others[0]} or set choice to it", others[0])

    def _resolve(self) -> None:
        """Each object property checked by its class's walk itself (no call in between)."""
        for name, (class_name, defer) in list(self.lazy.items()):
            self.checks[name] = schema(class_name, defer).walk
            self.lazy.pop(name, None)

    @property
    def default_choice(self) -> str | None:
        """The member the class's choice defaults to (``None``: no choice, or no default)."""
        return self.defaults.get("choice")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _unknown(s: Schema, key: str) -> _Bad:
    close = difflib.get_close_matches(key, list(s.checks), 1)
    hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(s.checks))}"
    return _Bad(f"is not a property of {s.name} in OTG {MODEL_VERSION}: {hint}", key)


@cache
def schema(class_name: str, defer_headers: bool = False) -> Schema:
    """The compiled schema of a model class (``"Config"``, ``"Flow"``, ``"PatternFlowIpv4Src"``);
    with ``defer_headers`` the headers and field patterns inside are only checked to be objects
    (:data:`DEFERRED`)."""
    cls = getattr(_model, class_name, None)
    if cls is None or not isinstance(getattr(cls, "_TYPES", None), dict):
        raise KeyError(f"{class_name} is not a class of the OTG model")
    props = {name: _prop(spec) for name, spec in cls._TYPES.items()}
    checks = {name: _property_check(p, defer_headers) for name, p in props.items()}
    lazy = {name: (p.kind, defer_headers) for name, p in props.items() if isinstance(p.kind, str)
            and not p.kind.endswith("Iter") and not (defer_headers and p.kind.startswith(DEFERRED))}
    choice = props.get("choice")
    return Schema(name=class_name, props=props, checks=checks, required=tuple(cls._REQUIRED or ()),
                  defaults=dict(cls._DEFAULTS or {}),
                  choices=frozenset(choice.enum) if choice is not None and choice.enum else None, lazy=lazy)


def check(class_name: str, data: Any, path: str = "", defer_headers: bool = False) -> dict:
    """``data`` checked against ``class_name`` of the model (see :class:`Schema.check`); with
    ``defer_headers`` the caller checks every header and field pattern itself."""
    return schema(class_name, defer_headers).check(data, path)
