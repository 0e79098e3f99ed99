"""A study's record (``OUT/study.json``, written by ``netrig.run.study``) as its type: the variants
as run (name, directory, state, error, whether complete) and the study as given (each variant's
description; a sweep's key, label and values). Read once, strictly: a record without its variants
is a ``ResultError`` naming the file."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netrig.errors import ResultError
from netrig.results.typed import from_dict


@dataclass(frozen=True)
class VariantRun:
    """One variant as run (``VariantOutcome.to_dict``)."""

    name: str
    dir: str
    state: str = "pending"
    error: str | None = None
    complete: bool = False


@dataclass(frozen=True)
class VariantSource:
    """One variant as the study gives it."""

    name: str
    description: str = ""


@dataclass(frozen=True)
class SweepSource:
    """A sweep: the config ``key`` it sets, its ``label``, the ``values`` in order."""

    key: str
    label: str = "value"
    values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class StudySource:
    variants: tuple[VariantSource, ...] = ()
    sweep: SweepSource | None = None


@dataclass(frozen=True)
class StudyRecord:
    study: str
    variants: tuple[VariantRun, ...]
    title: str | None = None
    source: StudySource = StudySource()

    @property
    def heading(self) -> str:
        return self.title or self.study

    @property
    def sweep(self) -> SweepSource | None:
        return self.source.sweep

    @classmethod
    def load(cls, path: Path) -> StudyRecord:
        try:
            return from_dict(cls, json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, ResultError) as e:
            raise ResultError(f"{path}: not a study's record ({getattr(e, 'strerror', None) or e})") from None
