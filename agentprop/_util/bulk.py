"""A base for pydantic models a run makes by the thousand (a case's report, its result, its
scenario and explored choices): every instance, copies included, shares its class's one set of
field names as ``model_fields_set`` instead of building its own (a set of 20 names takes 2 KB,
more than the rest of a small passing case).

Invariant: the shared set holds every field of the class, so the ``add`` pydantic makes on an
assignment (and the ``update`` of ``model_copy(update=...)``) never changes it. Such a model reports every field as set, so a dump of it with
``exclude_unset`` keeps the defaults too: never dump one that way (nothing does).
"""

from __future__ import annotations

import functools
import json
from typing import Any, Self, TypeVar, cast

from pydantic import BaseModel

T = TypeVar("T")


class BulkModel(BaseModel):
    """A pydantic model whose instances share one ``model_fields_set`` (every field)."""

    def model_post_init(self, context: Any, /) -> None:
        object.__setattr__(self, "__pydantic_fields_set__", every_field(type(self)))

    def __copy__(self) -> Self:
        """A copy (``model_copy``) shares the set too: pydantic's own copies it."""
        copied = super().__copy__()
        object.__setattr__(copied, "__pydantic_fields_set__", every_field(type(self)))
        return copied

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        copied = super().__deepcopy__(memo)
        object.__setattr__(copied, "__pydantic_fields_set__", every_field(type(self)))
        return copied


@functools.cache
def every_field(cls: type[BaseModel]) -> set[str]:
    """The one set of ``cls``'s field names its instances share (the same object every call)."""
    return set(cls.model_fields)


SHARED_VALUES = 4096
"""Distinct values :func:`shared` keeps (the most recently used): a run's cases repeat far fewer
worlds, paths and pass^k tables than that."""


def shared(value: T) -> T:
    """An equal value that equal ones share: a case's world, path or pass^k table, held by
    thousands of cases, is held once. ``value`` is JSON (lists, dicts, strings, numbers; a tuple
    of numbers is shared as a tuple). The value given back is shared: never change it in place."""
    if isinstance(value, tuple):
        return cast(T, _shared_tuple(value))
    return cast(T, _shared_json(json.dumps(value)))


@functools.lru_cache(maxsize=SHARED_VALUES)
def _shared_json(text: str) -> Any:
    return json.loads(text)


@functools.lru_cache(maxsize=SHARED_VALUES)
def _shared_tuple(value: tuple[Any, ...]) -> tuple[Any, ...]:
    return value
