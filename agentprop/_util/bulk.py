"""A base for pydantic models a run makes by the thousand (a case's report, its result, its
scenario and explored choices): every instance, copies included, shares its class's one set of
field names as ``model_fields_set`` instead of building its own (a set of 20 names takes 2 KB,
more than the rest of a small passing case).

Invariant: the shared set holds every field of the class, so the ``add`` pydantic makes on an
assignment (and the ``update`` of ``model_copy(update=...)``) never changes it. Such a model reports
every field as set, so a dump of it with ``exclude_unset`` keeps the defaults too: never dump one
that way (nothing does)."""

from __future__ import annotations

import functools
import sys
import threading
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


SHARED_VALUES = 8192
"""Distinct lists and dicts :func:`shared` keeps (the most recently used): a run's cases repeat
far fewer worlds, paths, pass^k tables and explored choices than that."""

LONGEST_SHARED = 1024
"""A list or dict whose text is longer is not looked up (its parts are): a value that long is
seldom repeated, and the table would hold its text."""

_lock = threading.Lock()


def shared(value: T) -> T:
    """An equal value that equal ones share: a case's world, path or pass^k table, held by
    thousands of cases, is held once, and so is every list and dict inside ``value`` that other
    values repeat (the steps of explored choices); its strings are interned. ``value`` is JSON
    (a tuple of numbers is shared as a tuple). What comes back is shared: never
    change it in place."""
    if isinstance(value, tuple):
        return cast(T, _shared_tuple(value))
    return cast(T, _cons(value))


def _cons(value: Any) -> Any:
    if type(value) is str:
        return sys.intern(value)
    if isinstance(value, list):
        node: Any = [_cons(v) for v in value]
    elif isinstance(value, dict):
        node = {_cons(k): _cons(v) for k, v in value.items()}
    else:
        return value
    key = repr(node)  # tells 1 from "1" and 1.0 from 1, as equal JSON values do not
    if len(key) > LONGEST_SHARED:
        return node
    with _lock:  # one holder per text, and the first value offered fills it
        holder = _holder(key)
        if holder[0] is None:
            holder[0] = node
        return holder[0]


@functools.lru_cache(maxsize=SHARED_VALUES)
def _holder(key: str) -> list[Any]:
    """The one-item list that holds the shared value whose ``repr`` is ``key`` (``None`` until
    the first such value is offered): the cache keeps the text, the holder the value."""
    return [None]


@functools.lru_cache(maxsize=SHARED_VALUES)
def _shared_tuple(value: tuple[Any, ...]) -> tuple[Any, ...]:
    return value
