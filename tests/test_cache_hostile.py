"""The API cache against rows and files it did not write (issue #27 items 6 and 17).

A row whose columns are NULL or of the wrong kind is a :class:`CacheError` (an infrastructure
error: the run is reported as not the agent's fault, never a FAIL that is shrunk and saved to
the corpus), and :meth:`ApiCache.verify` names it. A SQLite file of another application is
refused before anything in it changes: no tables added, no switch to WAL mode.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentprop._modelapi.cache import ApiCache
from agentprop.errors import CacheError, InfrastructureError

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}
RESPONSE = {
    "content": [{"type": "text", "text": "hello"}],
    "usage": {"input_tokens": 1, "output_tokens": 2},
}
COLUMNS = (
    "key, model, trial, request_json, response_json, input_tokens, output_tokens, usage_json, "
    "created_at, checksum"
)


def _recorded(path: Path, damage: str) -> None:
    """A cache with one entry, whose table is then rebuilt without its NOT NULL constraints
    and damaged by ``damage`` (an SQL ``SET`` clause), as another program could."""
    with ApiCache(path, mode="read-write") as cache:
        cache.put(REQUEST, trial=0, response=RESPONSE)
    db = sqlite3.connect(path)
    db.executescript(
        f"ALTER TABLE responses RENAME TO old; CREATE TABLE responses ({COLUMNS}, PRIMARY KEY "
        f"(key));INSERT INTO responses SELECT {COLUMNS} FROM old; DROP TABLE old; UPDATE "
        f"responses SET {damage};"
    )
    db.commit()
    db.close()


@pytest.mark.parametrize("mode", ["read-write", "replay-only", "read"])
@pytest.mark.parametrize(
    "damage",
    ["response_json = NULL", "usage_json = NULL, trial = NULL", "created_at = 'yesterday'"],
)
def test_a_row_with_null_or_mistyped_columns_is_a_cache_error_naming_it(
    tmp_path: Path, mode: str, damage: str
) -> None:
    path = tmp_path / "cache.sqlite"
    _recorded(path, damage)
    with pytest.raises(CacheError, match="is damaged") as info:
        ApiCache(path, mode=mode).get(REQUEST, trial=0)
    assert isinstance(info.value, InfrastructureError)  # not the agent's fault: never a FAIL
    assert str(path) in str(info.value) and "verify()" in str(info.value)


def test_verify_names_nulls_and_text_in_token_columns(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    _recorded(path, "input_tokens = 'many'")
    problems = ApiCache(path, mode="read").verify()
    assert len(problems) == 1 and "input_tokens is text, not an integer" in problems[0]
    _recorded(tmp_path / "b.sqlite", "response_json = NULL")
    assert [
        "response_json is NULL" in p for p in ApiCache(tmp_path / "b.sqlite", mode="read").verify()
    ] == [True]


@pytest.mark.parametrize("mode", ["read-write", "write", "replay-only", "read"])
def test_another_applications_sqlite_file_is_refused_and_left_unchanged(
    tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "notes.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.execute("INSERT INTO notes VALUES ('mine')")
    db.commit()
    db.close()
    before = path.read_bytes()
    cache = ApiCache(path, mode=mode)
    with pytest.raises(
        CacheError,
        match=r"not an agentprop API cache: the SQLite file holds other tables \(notes\)",
    ):
        cache.put(REQUEST, trial=0, response=RESPONSE) if mode in (
            "read-write",
            "write",
        ) else cache.get(REQUEST, trial=0)
    cache.close()
    assert path.read_bytes() == before
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["notes"]
    db.close()


def test_an_empty_or_own_cache_file_still_opens(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    sqlite3.connect(path).close()  # an empty SQLite file: no tables of anyone's
    with ApiCache(path, mode="read-write") as cache:
        cache.put(REQUEST, trial=0, response=RESPONSE)
    with ApiCache(path, mode="replay-only") as cache:
        got = cache.get(REQUEST, trial=0)
        assert got is not None and got.output_tokens == 2
        assert cache.verify() == []
