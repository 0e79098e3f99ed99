"""OTG metric tags: a flow's frames counted per value of some bits of its header fields.

A tagged field (``flows[].packet[].ipv4.src.metric_tags``) names a range of its bits (``offset``
from the field's most significant bit, ``length`` bits). Every field pattern repeats: frame ``j``
of a start takes value ``j mod period`` of each (``netrig_wire::pattern``), so the values a frame
carries follow from its index alone. The engine therefore counts, per flow, the frames sent and
received at each index modulo the flow's *tag period* (the least common multiple of its tagged
fields' periods, at most ``MAX_TAG_PERIOD``): the sender by its own count, the receiver by the
sequence number in the frame's signature. Here each index is mapped to its tag values, and the
indices with the same values are summed: one ``Flow.TaggedMetric`` per distinct combination.

A flow with frames too small for the signature cannot be tagged (its receiver could not tell their
index); predefined tags and tags on custom headers are refused (docs/otg.md).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from netrig.errors import ConfigError
from netrig.otg import headers

#: Most frame indices the engine counts apart per flow (``generator::flow::MAX_TAG_PERIOD``).
MAX_TAG_PERIOD = 65_536


@dataclass(frozen=True)
class Tag:
    """One metric tag: its name, the bits of its field it reads, and the field's value per frame
    index over one period of the field's pattern."""

    name: str
    offset: int
    length: int
    bits: int
    values: tuple[int, ...]

    def at(self, j: int) -> int:
        """The tag's value in frame ``j``."""
        v = self.values[j % len(self.values)]
        return (v >> (self.bits - self.offset - self.length)) & ((1 << self.length) - 1)

    def hex(self, value: int) -> str:
        """As OTG's ``FlowMetricTagValue.hex``: ``0x`` and the digits of ``length`` bits."""
        return f"0x{value:0{max(1, (self.length + 3) // 4)}x}"


@dataclass(frozen=True)
class FlowTags:
    """A flow's tags and the period of their values together."""

    tags: tuple[Tag, ...]
    period: int

    def rows(self, tx: Sequence[int], rx: Sequence[int]) -> list[tuple[tuple[int, ...], int, int]]:
        """Per distinct combination of tag values (in order of first appearance): the values, the
        frames sent and received with them (``tx``/``rx``: per frame index modulo the period)."""
        out: dict[tuple[int, ...], list[int]] = {}
        for j in range(self.period):
            key = tuple(t.at(j) for t in self.tags)
            row = out.setdefault(key, [0, 0])
            row[0] += tx[j]
            row[1] += rx[j]
        return [(k, v[0], v[1]) for k, v in out.items()]


def split(packet: Sequence[dict[str, Any]], at: str, warnings: list[str]) -> tuple[list[dict], FlowTags | None]:
    """A flow's headers (``at``: its path) without metric tags, and its tags (None: none)."""
    out, fields = [], []
    for k, h in enumerate(packet):
        kind = h.get("choice")
        body = h.get(kind) if isinstance(kind, str) else None
        if kind not in headers.KINDS or kind == "custom" or not isinstance(body, dict):
            out.append(h)
            continue
        untagged, found = headers.untagged(kind, body, f"{at}.packet[{k}].{kind}", warnings)
        out.append(h if untagged is body else {**h, kind: untagged})
        fields += found
    if not fields:
        return out, None
    tags = [_tag(f, t, i) for f in fields for i, t in enumerate(f.tags)]
    names = [t.name for t in tags]
    if len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"{at}.packet", f"metric tag {dup!r} is named twice: give each tag its own name")
    period = math.lcm(*(len(t.values) for t in tags))
    if period > MAX_TAG_PERIOD:
        raise ConfigError(fields[0].path + ".metric_tags",
                          f"the tagged fields repeat every {period} frames together: at most {MAX_TAG_PERIOD} are "
                          "counted apart; tag fewer fields or give them shorter patterns")
    return out, FlowTags(tuple(tags), period)


def _tag(f: headers.TaggedField, t: Any, i: int) -> Tag:
    """Tag ``i`` of field ``f``, checked (its bits inside the field)."""
    at = f"{f.path}.metric_tags[{i}]"
    if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
        raise ConfigError(f"{at}.name", "give each metric tag a name")
    offset, length = t.get("offset", 0), t.get("length", f.bits)
    for key, v in (("offset", offset), ("length", length)):
        if type(v) is not int or v < 0:
            raise ConfigError(f"{at}.{key}", f"{v!r}: must be a whole number of bits")
    if length < 1 or offset + length > f.bits:
        raise ConfigError(f"{at}.length", f"bits {offset}..{offset + length - 1} are outside the {f.bits}-bit field")
    return Tag(t["name"], offset, length, f.bits, tuple(f.pattern.values_at(f.bits, f.pattern.period)))
