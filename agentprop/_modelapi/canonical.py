"""Canonical model-API requests: the text an :class:`~agentprop._modelapi.cache.ApiCache` keys
and stores, scrubbed of secrets.

The request body as sent, less the fields that cannot change the answer, as sorted compact
JSON; the key of sample ``trial`` hashes a versioned prefix, the trial and that text.
Invariant: every path here gives byte-identical text for equal requests, so recorded caches
keep replaying.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import marshal
import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Final

from agentprop._util.scrub import CREDENTIAL_KEYS, SECRET_PATTERN, literal_secrets, scrub_secrets
from agentprop.errors import InvalidArgument

__all__ = [
    "CONVERSATION_FIELDS",
    "KEY_FIELDS",
    "SCHEMA_VERSION",
    "cache_key",
    "canonical_json",
    "canonical_request",
]

SCHEMA_VERSION = 1
"""Version of the SQLite layout and of the key derivation; stored in the
``schema_version`` table."""

KEY_FIELDS: tuple[str, ...] = (
    "model",
    "system",
    "messages",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "stop_sequences",
)
"""The request fields that always take part in the key (other answer-changing fields do too)."""

_IGNORED_FIELDS = frozenset(
    {
        "stream",
        "stream_options",
        "metadata",
        "service_tier",
        "timeout",
        "extra_headers",
        "extra_query",
    }
)

CONVERSATION_FIELDS = ("messages", "input")
"""Where a request body holds its conversation: ``messages`` (Anthropic Messages, OpenAI Chat
Completions) or ``input`` (OpenAI Responses)."""


_SECRET_VALUE = SECRET_PATTERN
_SECRET_IN_JSON = re.compile(rb"sk-[A-Za-z0-9_\-]{6,}")
"""Every match of :data:`_SECRET_VALUE` in a string shows in the string's JSON text as a match of
this (a superset: it has no look-behind, which an escape such as ``\\n`` could defeat)."""


def _is_sdk_sentinel(value: object) -> bool:
    return type(value).__name__ in ("NotGiven", "Omit")


def _to_plain(value: Any, where: str = "request") -> Any:
    """JSON-compatible data from dicts, lists/tuples, scalars and pydantic models."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidArgument(f"{where} is {value!r}; the cache needs finite numbers.")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArgument(f"{where} has a non-string key {k!r}; JSON keys are strings.")
            if _is_sdk_sentinel(v):
                continue
            out[k] = _to_plain(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_to_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _to_plain(dump(mode="json", exclude_unset=True, by_alias=True), where)
    raise InvalidArgument(
        f"{where} is a {type(value).__name__}, which the cache cannot turn into JSON; pass "
        "dicts, lists, strings, numbers, booleans, None or pydantic models."
    )


def _has_key(value: str) -> bool:
    """Whether the string holds something shaped like an API key (what the scrub redacts)."""
    return "sk-" in value and _SECRET_VALUE.search(value) is not None


def _plain_copy(value: Any) -> Any:
    """A copy of data already known to be plain JSON (dicts, lists, scalars), keys in order."""
    if type(value) is dict:
        return {k: _plain_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_plain_copy(v) for v in value]
    return value


def _slow_canonical_request(request: Mapping[str, Any], secrets: Iterable[str]) -> dict[str, Any]:
    """The reference derivation of :func:`canonical_request`: a plain copy, then a scrub."""
    plain = _to_plain(request)
    missing = [f for f in ("model",) if f not in plain] + (
        [] if any(f in plain for f in CONVERSATION_FIELDS) else ["messages"]
    )
    for required in missing:
        raise InvalidArgument(
            f"The request has no {required!r} field; the cache keys model API request bodies "
            f"(fields such as {', '.join(KEY_FIELDS)}; OpenAI's Responses API sends "
            "'input' for 'messages')."
        )
    kept = {k: v for k, v in plain.items() if k not in _IGNORED_FIELDS and v is not None}
    scrubbed: dict[str, Any] = scrub_secrets(kept, secrets)
    return scrubbed


class _NotPlainJSON(Exception):
    """Raised inside the fast serialisation for anything that needs :func:`_to_plain`."""


def _reject(value: object) -> Any:
    raise _NotPlainJSON


# ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
# allow_nan=False, default=_reject)``, without building an encoder on every call.
_PLAIN_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_reject
).encode
_DECODE = json.JSONDecoder().decode
# what json.dumps(ensure_ascii=False) writes for a str
_ENCODE_STRING = json.encoder.encode_basestring
# typeshed does not declare scan_once, which JSONDecoder.__init__ sets (the C
# scanner when there is one)
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _decode_stored(text: str) -> Any:
    """``json.loads(text)`` for the compact JSON the cache stores: one scan of the value when
    it spans the whole text (no leading or trailing whitespace); anything else goes to the
    full decoder, which gives the same value or raises the same error."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        return _DECODE(text)
    if end != len(text):
        return _DECODE(text)
    return value


def _secret_needles(secrets: Iterable[str]) -> tuple[bytes, ...]:
    """The registered secrets as they appear inside JSON text (escaped like a JSON string),
    UTF-8 encoded."""
    return tuple(json.dumps(s, ensure_ascii=False)[1:-1].encode() for s in literal_secrets(secrets))


_CREDENTIAL_KEY_TEXT = tuple(f'"{name}"'.encode() for name in sorted(CREDENTIAL_KEYS))
_CREDENTIAL_ENDINGS = tuple(
    sorted({f'{name.rsplit("_", 1)[-1]}"'.encode() for name in CREDENTIAL_KEYS})
)
_KELVIN_SIGN = "\u212a".encode()  # the one non-ASCII character whose lower() is an ASCII letter


def _may_hold_secrets(text: str, needles: tuple[bytes, ...]) -> bool:
    """Whether :func:`scrub_secrets` could change the data that ``text`` serialises.

    A sound over-approximation checked on the JSON text: a key-shaped string (``sk-...``), a
    registered secret or a key named like a credential in the data always shows up in its text
    (strings are escaped character by character, and credential names need no escaping), so when
    none shows up the scrub is the identity. (Searched in UTF-8 bytes, which is much faster.)
    """
    data = text.encode()
    if b"sk-" in data and _SECRET_IN_JSON.search(data):
        return True
    for needle in needles:
        if needle in data:
            return True
    if _KELVIN_SIGN in data:
        return True
    lowered = data.lower()
    for ending in _CREDENTIAL_ENDINGS:
        if ending in lowered:
            break
    else:
        return False
    lowered = lowered.replace(b"-", b"_")
    return any(name in lowered for name in _CREDENTIAL_KEY_TEXT)


def _fast_plain_json(
    value: dict[str, Any] | list[Any], needles: tuple[bytes, ...]
) -> tuple[str, Any] | None:
    """``(canonical JSON, a plain copy)`` of already-plain JSON data that holds no secret, or
    ``None`` when the data needs the general path (pydantic objects, SDK sentinels, tuples,
    non-string keys, non-finite numbers, anything the scrub would change).

    The text is exactly what ``canonical_json(scrub_secrets(_to_plain(value)))`` gives: for such
    data ``_to_plain`` and the scrub return equal data, and the round trip proves the data was
    plain (``json.dumps`` would otherwise have turned non-string keys into strings, say).
    """
    try:
        text = _PLAIN_ENCODE(value)
    except (_NotPlainJSON, TypeError, ValueError, RecursionError):
        return None
    loaded = _DECODE(text)
    if loaded != value or _may_hold_secrets(text, needles):
        return None
    return text, loaded


class _TextMemo:
    """A bounded memo of canonical texts: at most ``entries`` entries and about ``chars``
    characters (keys and texts); past either it starts afresh, and a text over an eighth of
    ``chars`` is not kept. ``None`` is a remembered answer (the part needs the general path)."""

    __slots__ = ("_chars", "_entries", "_limit_chars", "_texts")

    def __init__(self, entries: int, chars: int) -> None:
        self._texts: dict[Hashable, str | None] = {}
        self._entries = entries
        self._limit_chars = chars
        self._chars = 0

    def get(self, key: Hashable) -> str | None | _Sentinel:
        return self._texts.get(key, _MISSING)

    def put(self, key: Hashable, size: int, text: str | None) -> str | None:
        """Remember ``text`` under ``key`` (``size``: the key's length); returns ``text``."""
        size += len(text) if text is not None else 0
        if len(self._texts) >= self._entries or self._chars + size > self._limit_chars:
            self._texts.clear()
            self._chars = 0
        if size <= self._limit_chars // 8:  # a huge part is not worth keeping
            self._texts[key] = text
            self._chars += size
        return text


class _Sentinel(enum.Enum):
    MISSING = enum.auto()


_MISSING: Final = _Sentinel.MISSING

_TEXTS = _TextMemo(entries=2048, chars=16 << 20)
"""Canonical texts of request parts and strings. A part is keyed by its ``marshal``, which takes
only plain built-in types (no subclasses) and records them exactly (it tells 1, 1.0 and True
apart and keeps key order), so equal bytes mean equal canonical text: the tools and the system
prompt, sent unchanged with every request, and the earlier messages of a conversation are
serialised and checked once."""


@functools.lru_cache(maxsize=1024)
def _name_label(name: str) -> str | None:
    """``"name":`` as the canonical text writes a dict key, or ``None`` for a key named like a
    credential (the scrub replaces its value)."""
    if name.lower().replace("-", "_") in CREDENTIAL_KEYS:
        return None
    return _ENCODE_STRING(name) + ":"


def _string_text(value: str, needles: tuple[bytes, ...]) -> str | None:
    """The JSON text of a string that the scrub leaves alone, else ``None``."""
    key = (needles, value)
    found = _TEXTS.get(key)
    if found is not _MISSING:
        return found
    text = _ENCODE_STRING(value)
    scrubbed = _has_key(value) or (needles and any(needle in text.encode() for needle in needles))
    return _TEXTS.put(key, len(value), None if scrubbed else text)


def _container_text(value: dict[str, Any] | list[Any], needles: tuple[bytes, ...]) -> str | None:
    """The canonical text of a plain dict or list that the scrub leaves alone, else ``None``."""
    try:
        frozen = marshal.dumps(value)
    except ValueError:  # not plain built-in data: no memo
        fast = _fast_plain_json(value, needles)
        return None if fast is None else fast[0]
    key = (needles, frozen)
    found = _TEXTS.get(key)
    if found is not _MISSING:
        return found
    if type(value) is list:
        text = _list_text(value, needles)
    else:
        try:
            text = _composed_text(value, needles)
        except RecursionError:  # too deep (or circular): the general path decides
            text = None
    return _TEXTS.put(key, len(frozen), text)


def _composed_text(value: Any, needles: tuple[bytes, ...]) -> str | None:
    """The canonical text of plain JSON data that the scrub leaves alone, else ``None``;
    composed piece by piece exactly as ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` writes it (nothing memoised: for one-off parts, such as the newest
    message of a conversation).

    The scrub is checked where it acts: every dict key is normalised as :func:`scrub_secrets`
    normalises it, and every string is searched for ``sk-`` (which every key-shaped
    substring starts with) and for each registered secret (in its JSON-escaped form, found in
    the string's escaped text whenever the secret occurs in the string).
    """
    kind = type(value)
    if kind is str:
        text: str = _ENCODE_STRING(value)
        if _has_key(value) or (needles and any(needle in text.encode() for needle in needles)):
            return None
        return text
    if kind is dict:
        parts: list[str] = []
        try:
            names = sorted(value)
        except TypeError:  # names that do not sort (not all strings)
            return None
        for name in names:
            label = _name_label(name) if type(name) is str else None
            if label is None:
                return None
            v = value[name]
            item: str | None  # declared apart, so each assignment below narrows it
            if type(v) is str and "sk-" not in v and not needles:  # the common leaf, inline
                item = _ENCODE_STRING(v)
            else:
                item = _composed_text(v, needles)
                if item is None:
                    return None
            parts.append(label + item)
        return "{" + ",".join(parts) + "}"
    if kind is list:
        items: list[str] = []
        for v in value:
            if type(v) is str and "sk-" not in v and not needles:
                items.append(_ENCODE_STRING(v))
                continue
            item = _composed_text(v, needles)
            if item is None:
                return None
            items.append(item)
        return "[" + ",".join(items) + "]"
    return _value_text(value, needles)  # scalars; anything else is None


def _list_text(value: list[Any], needles: tuple[bytes, ...]) -> str | None:
    """A list's canonical text from its items' (each memoised: a conversation's earlier
    messages are not serialised again)."""
    items: list[str] = []
    for item in value:
        text = _value_text(item, needles)
        if text is None:
            return None
        items.append(text)
    return "[" + ",".join(items) + "]"


def _value_text(value: Any, needles: tuple[bytes, ...]) -> str | None:
    """The canonical text of one plain JSON value that the scrub leaves alone, else ``None``."""
    kind = type(value)
    if kind is dict or kind is list:
        return _container_text(value, needles)
    if kind is str:
        return _string_text(value, needles)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            return None  # the general path rejects non-finite numbers
        return float.__repr__(value)
    return None


def _fast_request_text(kept: dict[str, Any], needles: tuple[bytes, ...]) -> str | None:
    """The canonical text of a plain request body (top-level ``None`` and ignored fields
    already dropped), composed from memoised parts exactly as ``json.dumps(sort_keys=True)``
    writes it; ``None`` when the general path is needed."""
    parts: list[str] = []
    for name in sorted(kept):  # names that are not all strings make sorted() raise TypeError
        label = _name_label(name) if type(name) is str else None
        if label is None:
            return None
        text = _value_text(kept[name], needles)
        if text is None:
            return None
        parts.append(label + text)
    return "{" + ",".join(parts) + "}"


class _Canonical:
    """A request's canonical form: ``text`` (what is hashed and stored), the canonical request
    as data (parsed from the text on demand when the fast path did not build it) and its model."""

    __slots__ = ("_keys", "_model", "_value", "text")

    def __init__(
        self, text: str, value: dict[str, Any] | None = None, model: str | None = None
    ) -> None:
        self.text = text
        self._value = value
        self._model = model
        self._keys: dict[int, str] = {}

    def key(self, trial: int) -> str:
        """The cache key for sample ``trial`` (computed once: a miss looks it up, then stores)."""
        key = self._keys.get(trial)
        if key is None:
            key = self._keys[trial] = _key_from_canonical(self.text, trial)
        return key

    @property
    def value(self) -> dict[str, Any]:
        if self._value is None:
            self._value = json.loads(self.text)
        return self._value

    @property
    def model(self) -> str:
        """``str()`` of the request's model (a ``KeyError`` if it has none, as before)."""
        if self._model is None:
            self._model = str(self.value["model"])
        return self._model


def _canonical(
    request: Mapping[str, Any], secrets: Iterable[str], needles: tuple[bytes, ...] | None = None
) -> _Canonical:
    """The canonical form of a request: fast for plain JSON without secrets (what agentprop's
    agents send), the general path (:func:`_slow_canonical_request`) otherwise, with the same
    text either way."""
    if not isinstance(request, Mapping):
        raise InvalidArgument(
            f"request must be a mapping of Messages API fields, not {type(request).__name__}."
        )
    if type(request) is dict:
        kept: dict[str, Any] = {}
        general = False
        for k, v in request.items():
            if v is None or _is_sdk_sentinel(v):
                continue
            if k in _IGNORED_FIELDS:
                # the general path checks these values too (and may reject them): keep its errors
                general = True
                break
            kept[k] = v
        if not general and "model" in kept and ("messages" in kept or "input" in kept):
            secrets = literal_secrets(secrets)
            try:
                text = _fast_request_text(
                    kept, _secret_needles(secrets) if needles is None else needles
                )
            except TypeError:  # names that do not sort
                text = None
            if text is not None:
                model = kept["model"]
                return _Canonical(text, None, model if type(model) is str else None)
    canonical = _slow_canonical_request(request, secrets)
    return _Canonical(canonical_json(canonical), canonical)


class _RequestShape:
    """Every field of a request body but ``messages``, with its canonical text worked out once.

    The requests of a conversation differ only in their messages; keying one through its shape
    serialises and checks just the messages (each one memoised, so a conversation's earlier
    messages are not serialised again), and gives exactly the text :func:`_canonical` gives.

    A shape takes a private copy of the fields it is built from and builds every request body
    from that copy (:meth:`body`), so what is sent and what is keyed cannot drift apart; a
    shape is only ever used by the :class:`ApiCache` that made it (its secrets are part of the
    texts). :meth:`ApiCache._request_shape` returns ``None`` for fields that need the general
    path (pydantic objects, ignored fields, secrets ...): those requests are keyed as usual.
    """

    __slots__ = ("_fields", "_head", "_model", "_needles", "_tail", "field")

    def __init__(
        self,
        fields: dict[str, Any],
        head: str,
        tail: str,
        model: str | None,
        needles: tuple[bytes, ...],
        field: str = "messages",
    ) -> None:
        self._fields = fields
        self._head = head
        self._tail = tail
        self._model = model
        self._needles = needles
        self.field = field
        """The field holding the conversation (``messages``; ``input`` in
        OpenAI's Responses API)."""

    @classmethod
    def build(
        cls, request: Mapping[str, Any], needles: tuple[bytes, ...], field: str = "messages"
    ) -> _RequestShape | None:
        """The shape of ``request`` (a request body; its conversation ``field`` is left out), or
        ``None``."""
        if type(request) is not dict or field not in request or field not in CONVERSATION_FIELDS:
            return None
        private: dict[str, Any] = {
            k: None if k == field else _plain_copy(v) for k, v in request.items()
        }
        kept: dict[str, Any] = {}
        for k, v in private.items():
            if type(k) is not str or k in _IGNORED_FIELDS or _is_sdk_sentinel(v):
                return None
            if v is not None and k != field:
                kept[k] = v
        if "model" not in kept:
            return None
        parts: list[str] = []
        before = 0
        for name in sorted([*kept, field]):
            if name == field:
                before = len(parts)
                continue
            if name.lower().replace("-", "_") in CREDENTIAL_KEYS:
                return None
            text = _value_text(kept[name], needles)
            if text is None:
                return None
            parts.append(json.dumps(name, ensure_ascii=False) + ":" + text)
        head = "{" + "".join(p + "," for p in parts[:before]) + json.dumps(field) + ":"
        tail = "".join("," + p for p in parts[before:]) + "}"
        model = kept["model"]
        return cls(private, head, tail, model if type(model) is str else None, needles, field)

    def body(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The request body with this conversation (``messages``, or ``input``), a new dict,
        fields in the order given."""
        body = dict(self._fields)
        body[self.field] = messages
        return body

    def canonical(self, messages: list[Any]) -> _Canonical | None:
        """The canonical form of :meth:`body` of ``messages``, or ``None`` for the general path."""
        if type(messages) is not list:
            return None
        text = _list_text(messages, self._needles)
        if text is None:
            return None
        return _Canonical(self._head + text + self._tail, None, self._model)


def canonical_request(request: Mapping[str, Any], secrets: Iterable[str] = ()) -> dict[str, Any]:
    """The part of a Messages API request body that determines the answer, scrubbed of secrets."""
    return _canonical(request, secrets).value


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: equal data always gives equal text."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _validate_trial(trial: object) -> int:
    if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
        raise InvalidArgument(f"trial={trial!r} must be an int >= 0 (0 for the first sample).")
    return trial


def _key_from_canonical(canonical: str, trial: int) -> str:
    digest = hashlib.sha256()
    digest.update(f"agentprop-api-cache/v{SCHEMA_VERSION}\ntrial={trial}\n".encode())
    digest.update(canonical.encode())
    return digest.hexdigest()


def cache_key(request: Mapping[str, Any], trial: int, secrets: Iterable[str] = ()) -> str:
    """The SHA-256 hex key of ``request`` for sample number ``trial``."""
    return _key_from_canonical(_canonical(request, secrets).text, _validate_trial(trial))
