"""OTG capture filters (``captures[].filters``) as byte comparisons the receiver applies to each
frame before it keeps it: a frame is captured when every term matches.

The model leaves the meaning of ``value``, ``mask`` and ``negate`` open ("TBD"). netrig reads them
as IxNetwork does, the implementation scripts are written against (snappi-ixnetwork's capture
filters, and sonic-mgmt's "IP packets only" filter: custom offset 14, value ``40``, mask ``0f``):

- a field's ``value`` is written in place: the bytes that hold the field, from the header's byte
  at which the field starts (IPv4 version 4 is ``40``, a VLAN id 6 is ``0006``);
- a ``mask`` bit of 1 is a bit not compared ("don't care"); the default ``00`` compares all;
- ``negate`` captures the frames the term does not match; terms are and-ed;
- the header filters follow one another from the frame's start (ethernet 14 bytes, vlan 4 — the
  tag's TCI and the type after it —, ipv4 20, ipv6 40); a chain that does not start with
  ethernet starts after one;
- ``custom.offset`` counts bytes from the frame's start, as IxNetwork reads it (the model's text
  says bits); ``bit_length`` (a multiple of 8) widens the value.

Bits of a byte that belong to another field are not compared (``ipv4.version`` never compares the
header length). A value with bits outside its field that the mask does not exclude is refused: it
is a field value written as a number (``4``) instead of in place (``40``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netrig.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Term:
    """A frame matches when ``frame[at:at+len(value)]`` equals ``value`` on the ``care`` bits (a
    frame too short does not), or, with ``negate``, when it does not (the engine's ``CaptureTerm``)."""
    at: int
    value: bytes
    care: bytes
    negate: bool


#: A header's fields: (byte offset in the header, bytes that hold it, its bits over those bytes).
_HEADERS: dict[str, tuple[int, dict[str, tuple[int, int, int]]]] = {
    "ethernet": (14, {"dst": (0, 6, 0), "src": (6, 6, 0), "ether_type": (12, 2, 0)}),
    "vlan": (4, {"priority": (0, 1, 0xE0), "cfi": (0, 1, 0x10), "id": (0, 2, 0x0FFF), "protocol": (2, 2, 0)}),
    "ipv4": (20, {"version": (0, 1, 0xF0), "header_length": (0, 1, 0x0F), "priority": (1, 1, 0),
                  "total_length": (2, 2, 0), "identification": (4, 2, 0), "reserved": (6, 1, 0x80),
                  "dont_fragment": (6, 1, 0x40), "more_fragments": (6, 1, 0x20), "fragment_offset": (6, 2, 0x1FFF),
                  "time_to_live": (8, 1, 0), "protocol": (9, 1, 0), "header_checksum": (10, 2, 0),
                  "src": (12, 4, 0), "dst": (16, 4, 0)}),
    "ipv6": (40, {"version": (0, 1, 0xF0), "traffic_class": (0, 2, 0x0FF0), "flow_label": (1, 3, 0x0FFFFF),
                  "payload_length": (4, 2, 0), "next_header": (6, 1, 0), "hop_limit": (7, 1, 0),
                  "src": (8, 16, 0), "dst": (24, 16, 0)}),
}
#: A field the model gives that frames netrig captures cannot be filtered on, and why.
_NOT_FILTERED = {("ethernet", "pfc_queue"): "the PFC queue is in a pause frame's class-enable vector, not in a "
                                             "header field: filter on ethernet.ether_type 8808 and a custom term"}
#: Bytes a capture can hold of a frame (a custom term beyond them never matches).
MAX_FRAME = 65_536
#: The model's defaults: a field left at them was touched by a client library, not set.
_UNSET = ("00", "00", False)


def terms(filters: tuple[dict[str, Any], ...], where: str) -> list[Term]:
    """The terms of ``captures[i].filters`` (``where`` = ``captures[i].filters``); a ConfigError
    naming the field for what cannot be read."""
    out: list[Term] = []
    at = 0
    for k, f in enumerate(filters):
        choice = f.get("choice", "custom")
        path = f"{where}[{k}].{choice}"
        body = f.get(choice) or {}
        if choice == "custom":
            out += _custom(body, path)
            continue
        if choice not in _HEADERS:
            raise ConfigError(f"{where}[{k}].choice", f"{choice!r}: use custom, ethernet, vlan, ipv4 or ipv6")
        if choice != "ethernet" and at == 0:
            at = _HEADERS["ethernet"][0]
        size, fields = _HEADERS[choice]
        for name, field in sorted(body.items()):
            out += _field(choice, name, field, at, fields, f"{path}.{name}")
        at += size
    return out


def _field(header: str, name: str, field: dict[str, Any], at: int, fields: dict[str, tuple[int, int, int]],
           path: str) -> list[Term]:
    if (header, name) in _NOT_FILTERED:
        raise ConfigError(path, _NOT_FILTERED[(header, name)])
    if name not in fields:
        raise ConfigError(path, f"not a field of the {header} capture filter: use {', '.join(fields)}")
    value, mask, negate = str(field.get("value", "00")), str(field.get("mask", "00")), bool(field.get("negate", False))
    if (value.lower(), mask.lower(), negate) == _UNSET:
        return []
    offset, width, bits = fields[name]
    own = bits or (1 << 8 * width) - 1
    v, m = _hex(value, width, f"{path}.value"), _hex(mask, width, f"{path}.mask")
    care = own & ~m
    if v & ~own & ~m:
        raise ConfigError(f"{path}.value", f"{value} has bits outside the {name} field ({own:0{2 * width}x} of these "
                          f"{width} byte(s)): write the field in place, as it sits in its bytes, or mask the rest")
    return [Term(at + offset, v.to_bytes(width, "big"), care.to_bytes(width, "big"), negate)]


def _custom(body: dict[str, Any], path: str) -> list[Term]:
    value, mask, negate = str(body.get("value", "00")), str(body.get("mask", "00")), bool(body.get("negate", False))
    bit_length = int(body.get("bit_length", 8))
    if bit_length <= 0 or bit_length % 8:
        raise ConfigError(f"{path}.bit_length", f"{bit_length}: netrig compares whole bytes: use a multiple of 8")
    offset = body.get("offset")
    if not isinstance(offset, int) or not 0 <= offset < MAX_FRAME:
        raise ConfigError(f"{path}.offset", f"give the byte offset from the frame's start (IxNetwork's reading), "
                                            f"0 to {MAX_FRAME - 1}")
    width = max(bit_length // 8, (len(value.removeprefix("0x")) + 1) // 2)
    if offset + width > MAX_FRAME:
        raise ConfigError(f"{path}.bit_length", f"{8 * width} bits from byte {offset} end beyond a frame")
    v, m = _hex(value, width, f"{path}.value"), _hex(mask, width, f"{path}.mask")
    return [Term(offset, v.to_bytes(width, "big"), (~m & (1 << 8 * width) - 1).to_bytes(width, "big"), negate)]


def _hex(text: str, width: int, path: str) -> int:
    digits = text.lower().removeprefix("0x")
    try:
        n = int(digits, 16)
    except ValueError:
        raise ConfigError(path, f"{text!r} is not hex: give the bytes as hex digits, e.g. 0800") from None
    if n >> 8 * width:
        raise ConfigError(path, f"{text} is wider than the field's {width} byte(s)")
    return n
