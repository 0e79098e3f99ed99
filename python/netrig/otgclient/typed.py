"""A JSON object as a frozen dataclass: the one place OTG messages are read by key.

``Reader()(FlowMetric, row)`` is a ``FlowMetric``: every property of the object goes to the field
of its name, a nested object to the field's dataclass, a list to a tuple (of the field's dataclass
where it names one). What a field's type says is all the reader knows; a class is compiled once
(its fields, their converters), so a 4096-flow config reads in a few milliseconds.

- A field without a default takes, when the object leaves it out, the default of the model class
  of the same name (``defaults``, a function of the class name: the OTG model's defaults, given
  by :mod:`netrig.otg.objects`), or, if its type is a dataclass, that class read from an empty
  object (every default); a field with a default (``None``, ``()``) keeps it: what was not given
  stays distinguishable.
- A field named ``others`` (``dict[str, Any]``) takes the properties the class has no field for,
  as given (properties netrig refuses, or never reads); a class without it refuses them.
- ``coerce``: integers sent as strings (protojson, so gosnappi and other OTG servers, sends 64-bit
  integers that way) become ints in ``int`` fields.
- ``checked``: the objects passed the model's check already, and a class without ``others`` has a
  field for every property of its model class (as ``tests/otg/test_objects.py`` holds): their
  properties are not compared with the fields again.

An object that does not fit (not an object, a property of no field, a required field missing) is
a :class:`MessageError` naming the class.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")
#: The field that takes the properties a class has no field for.
OTHERS = "others"

Build = Callable[[Any], Any]


class MessageError(ValueError):
    """A JSON object that is not the message it should be."""


#: A property no default stands in for.
_REQUIRED = object()


def _setattr(obj: Any, value: Any, name: str) -> None:
    object.__setattr__(obj, name, value)


def _slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """What writes field ``name`` of a frozen instance of ``cls`` (its slot, maybe a base class's)."""
    for k in cls.__mro__:
        slot = vars(k).get(name)
        if slot is not None and hasattr(slot, "__set__"):
            return slot.__set__
    return functools.partial(_setattr, name=name)


def _unknown(d: Mapping[str, Any], names: frozenset[str]) -> None:
    raise TypeError(f"no property {', '.join(sorted(d.keys() - names))}")


def _int(v: Any) -> Any:
    return int(v) if type(v) is str else v


class Reader:
    """Reads JSON objects into dataclasses (see the module doc); thread-safe once a class is compiled."""

    def __init__(self, defaults: Callable[[str], Mapping[str, Any]] | None = None, coerce: bool = False,
                 checked: bool = False):
        self._defaults = defaults
        self._coerce = coerce
        self._checked = checked
        self._built: dict[type, Build] = {}

    def __call__(self, cls: type[T], data: Any) -> T:
        build = self._compile_once(cls)
        try:
            return typing.cast(T, build(data))
        except KeyError as e:
            raise MessageError(f"{cls.__name__}: {e.args[0]!r} is required") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise MessageError(f"{cls.__name__}: {e}") from None

    def many(self, cls: type[T], items: Any) -> tuple[T, ...]:
        """Each object of a list as ``cls``."""
        build = self._compile_once(cls)
        try:
            return tuple(build(x) for x in items)
        except KeyError as e:
            raise MessageError(f"{cls.__name__}: {e.args[0]!r} is required") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise MessageError(f"{cls.__name__}: {e}") from None

    def _compile_once(self, cls: type) -> Build:
        return self._built.get(cls) or self._compile(cls)

    def _compile(self, cls: type) -> Build:
        """The reader of ``cls``: a function written for its fields, as ``dataclasses`` writes an
        ``__init__`` (a 4096-flow config is some 40 000 objects: a loop over each one's fields took
        twice the time). It makes the frozen instance slot by slot."""
        fields = [f for f in dataclasses.fields(cls) if f.init]
        names = frozenset(f.name for f in fields)
        hints = typing.get_type_hints(cls)
        convs = {f.name: self._converter(hints[f.name]) for f in fields if f.name != OTHERS}
        left = self._left_out(cls, fields, hints, convs)
        scope: dict[str, Any] = {"cls": cls, "names": names, "new": object.__new__, "setattr": object.__setattr__,
                                 "REQUIRED": _REQUIRED, "unknown": _unknown}
        slots = "__slots__" in vars(cls)
        lines = ["def build(d):", "    get = d.get", "    obj = new(cls)"]
        for i, (name, conv) in enumerate(convs.items()):
            scope[f"left{i}"], scope[f"conv{i}"] = left.get(name, _REQUIRED), conv
            scope[f"put{i}"] = _slot_setter(cls, name) if slots else functools.partial(_setattr, name=name)
            lines.append(f"    v = get({name!r}, left{i})")
            if name not in left:
                lines.append(f"    if v is REQUIRED: raise KeyError({name!r})")
            if conv is not None:
                lines.append(f"    if v is not None and v is not left{i}: v = conv{i}(v)")
            lines.append(f"    put{i}(obj, v)")
        if OTHERS in names:
            lines.append(f"    setattr(obj, {OTHERS!r}, {{}} if d.keys() <= names else "
                         "{k: v for k, v in d.items() if k not in names})")
        else:
            if not self._checked:
                lines.append("    if not d.keys() <= names: unknown(d, names)")
        if hasattr(cls, "__post_init__"):
            lines.append("    obj.__post_init__()")
        lines.append("    return obj")
        exec("\n".join(lines), scope)
        build: Build = scope["build"]
        self._built[cls] = build
        return build

    def _left_out(self, cls: type, fields: list[dataclasses.Field], hints: dict[str, Any],
                  convs: dict[str, Build | None]) -> dict[str, Any]:
        """What each property left out is: the field's default, else the model's (as the field's
        type), else, for an object, the class with every default."""
        out: dict[str, Any] = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
        model = self._defaults(cls.__name__) if self._defaults else {}
        for f in fields:
            if f.name in out or f.name == OTHERS:
                continue
            conv = convs[f.name]
            if f.name in model:
                out[f.name] = conv(model[f.name]) if conv is not None else model[f.name]
            elif dataclasses.is_dataclass(hints[f.name]):
                out[f.name] = self._compile_once(hints[f.name])({})
        return out

    def _converter(self, hint: Any) -> Build | None:
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            members = [a for a in args if a is not type(None)]
            return self._converter(members[0]) if len(members) == 1 else None
        if origin is tuple:
            item = self._converter(args[0]) if args else None
            return (lambda v: tuple(map(item, v))) if item is not None else tuple
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            return self._compile_once(hint)
        if hint is int and self._coerce:
            return _int
        return None


def to_json(obj: Any) -> Any:
    """A dataclass read by a :class:`Reader` back as JSON: the fields not given (``None``, or at
    their default) left out, ``others`` merged in, tuples as lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if f.name == OTHERS:
                out.update(v)
            elif v is not None and v != f.default:
                out[f.name] = to_json(v)
        return out
    if isinstance(obj, (tuple, list)):
        return [to_json(x) for x in obj]
    return obj
