"""Method results read back as their own types: ``from_dict(ThroughputResult, repetition, frame=…,
line_rate=…)`` is the inverse of the result's ``to_dict()``.

Generated from the dataclass, not written per type: every ``__init__`` field is taken from the key of
the same name (converted by its type hint: nested dataclasses, tuples, lists and dicts of them,
optionals, numbers; a nested type with its own ``from_dict`` reads itself), or from ``context`` (the
frame size and line rate a repetition is stored under, never repeated inside it), or left at its
default. Keys the dataclass has no field for are what
``to_dict`` derives (``rate``, ``typical_ns``…) and are ignored. A field that is neither in the
document, nor in the context, nor defaulted is a :class:`ResultError` naming the type and the
field — a renamed field fails loudly, never reads as ``None``. ``tests/results/test_typed.py`` holds
every method's ``to_dict`` and this reader equal on the golden result files.

``partial=True`` reads what a report must still draw although it lacks fields a run always writes
(hand-made fixtures, a document cut short): a missing field is ``None``, as the dict readers this
replaced saw it. The run's own results are read strictly.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

from netrig.errors import ResultError

T = TypeVar("T")


def from_dict(cls: type[T], d: Mapping[str, Any], *, partial: bool = False, **context: Any) -> T:
    """An instance of the dataclass ``cls`` from ``d`` (its ``to_dict()``) and ``context``; with
    ``partial``, a field ``d`` lacks is ``None`` instead of an error."""
    if not isinstance(d, Mapping):
        raise ResultError(f"{cls.__name__}: expected an object, got {type(d).__name__}")
    hints = _hints(typing.cast(type, cls))
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not f.init:
            continue
        if f.name in context:
            kwargs[f.name] = context[f.name]
        elif f.name in d:
            kwargs[f.name] = _convert(hints[f.name], d[f.name], context, partial)
        elif partial and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = None
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ResultError(f"{cls.__name__}: the result has no {f.name!r} (a field renamed or dropped "
                              "without a migration in netrig.results.reader)")
    return cls(**kwargs)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(hint: Any, v: Any, context: Mapping[str, Any], partial: bool) -> Any:
    """``v`` as the type ``hint`` says (what JSON lost: tuples, nested dataclasses, ints as floats)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if v is None:
        return None
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        return _convert(members[0], v, context, partial) if len(members) == 1 else v
    if origin is tuple:
        item = args[0] if args else Any
        return tuple(_convert(item, x, context, partial) for x in v)
    if origin is list:
        return [_convert(args[0] if args else Any, x, context, partial) for x in v]
    if origin is dict and isinstance(v, Mapping):
        return {k: _convert(args[1] if args else Any, x, context, partial) for k, x in v.items()}
    reads_itself = getattr(hint, "from_dict", None) if isinstance(hint, type) else None
    if callable(reads_itself):
        return reads_itself(v)  # a type that reads its own document (``EventResult``)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        nested = {k: c for k, c in context.items() if k in {f.name for f in dataclasses.fields(hint)}}
        return from_dict(hint, v, partial=partial, **nested)
    if hint is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    return v
