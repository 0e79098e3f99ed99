"""JSON objects read into frozen dataclasses: what was given, the model's defaults for what was
not, nested objects and lists as their types, what a class has no field for refused or kept."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from netrig.otgclient.typed import MessageError, Reader, to_json


@dataclass(frozen=True, slots=True, kw_only=True)
class Inner:
    choice: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Outer:
    name: str
    inner: Inner
    maybe: Inner | None = None
    items: tuple[Inner, ...] = ()
    words: tuple[str, ...] = ()
    others: dict[str, Any] = field(default_factory=dict)


MODEL = {"Inner": {"choice": "a", "count": 3}, "Outer": {"name": "unnamed", "words": ["never used"]}}
read = Reader(defaults=lambda name: MODEL.get(name, {}))


def test_given_defaults_nested_and_lists():
    o = read(Outer, {"name": "x", "inner": {"count": 5}, "items": [{"choice": "b"}], "words": ["w"]})
    assert o == Outer(name="x", inner=Inner(choice="a", count=5), items=(Inner(choice="b", count=3),), words=("w",))
    # left out: a field without a default takes the model's default, a nested object every default;
    # a field with a default keeps it (the model's default of `words` is not taken: not given)
    assert read(Outer, {}) == Outer(name="unnamed", inner=Inner(choice="a", count=3))


def test_properties_without_a_field_go_to_others_or_are_refused():
    assert read(Outer, {"name": "x", "mtu": 9000}).others == {"mtu": 9000}
    with pytest.raises(MessageError, match="Inner: no property mtu"):
        read(Inner, {"mtu": 9000})
    with pytest.raises(MessageError, match="Inner"):
        read(Inner, ["not", "an object"])


def test_coerce_reads_integers_sent_as_strings():
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Row:
        frames: int | None = None

    assert Reader(coerce=True)(Row, {"frames": "18446744073709551615"}).frames == 2**64 - 1
    assert Reader()(Row, {"frames": "7"}).frames == "7"  # type: ignore[comparison-overlap]


def test_to_json_is_the_object_again():
    doc = {"name": "x", "inner": {"choice": "b", "count": 1}, "items": [{"choice": "c", "count": 2}], "mtu": 1}
    assert to_json(read(Outer, doc)) == doc
    assert read.many(Inner, [{}, {"count": 1}]) == (Inner(choice="a", count=3), Inner(choice="a", count=1))


def test_a_required_property_left_out_is_named():
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Needs:
        code: int

    with pytest.raises(MessageError, match="Needs: 'code' is required"):
        Reader()(Needs, {})
