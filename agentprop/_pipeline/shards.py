"""Shards of a run: ``agentprop run --shard i/N`` decides the cases whose id hashes to shard i.

A case's shard depends only on its id and N (the SHA-256 of the id, modulo N), so a case keeps
its shard as cases are added or removed, every kind is spread over the shards alike (each shard
gets about 1/N of the cases of every kind), and the N shards of one run are disjoint and
together cover every case. Shard numbers are 1-based, as CI matrices count.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from agentprop.errors import InputError

__all__ = ["Shard", "parse_shard", "shard_of"]

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def shard_of(case_id: str, count: int) -> int:
    """The 1-based shard of ``count`` that decides ``case_id``."""
    return (
        int.from_bytes(hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).digest()[:8], "big")
        % count
        + 1
    )


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1 <= index <= count)."""

    index: int
    count: int

    def keeps(self, case_id: str) -> bool:
        return shard_of(case_id, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, *, option: str = "--shard") -> Shard:
    """``i/N`` (1 <= i <= N) as a :class:`Shard`; anything else is an input error naming the fix."""
    m = _SHARD.fullmatch(text)
    if m is None:
        raise InputError(
            f"{option} {text!r} is not of the form i/N",
            fix=f"write e.g. {option} 1/4 (shard 1 of 4; shards count from 1)",
        )
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1:
        raise InputError(
            f"{option} {text}: a run has at least 1 shard", fix=f"write e.g. {option} 1/4"
        )
    if not 1 <= index <= count:
        raise InputError(
            f"{option} {text}: shard {index} is not one of 1..{count}",
            fix=f"write {option} i/{count} with i from 1 to {count}",
        )
    return Shard(index, count)
