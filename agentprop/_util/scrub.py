"""Secrets never reach a file or the terminal: texts are scrubbed before they are kept.

:func:`scrub_text` replaces anything shaped like an API key, labelled credentials, the keys in
the provider environment variables and every :func:`register_secret` value with
``[REDACTED]``; :func:`scrub_data` does it through nested data. The runtime scrubs every trace
it returns, so everything made from a trace is clean.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"

SECRET_PATTERN = re.compile(r"sk-ant-[A-Za-z0-9_\-]{6,}|(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{20,}")
"""What an API key looks like: Anthropic's (``sk-ant-...``) and OpenAI's (``sk-...``,
``sk-proj-...``: 20 or more key characters after ``sk-``, not glued to a word such as ``task-``)."""

_LABELLED = re.compile(
    r"(?i)(\b(?:bearer|x-api-key|api[_-]?key|auth[_-]?token|access[_-]?token)[\"']?(?:\s+|\s*[:=]\s*)[\"']?)([A-Za-z0-9_\-.~+/]{12,})"
)
"""A credential after a label (``Bearer abc...``, ``x-api-key: abc...``, ``api_key='abc...'``)."""

_ENV_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")
MIN_SECRET = 16
"""Shorter literal secrets are not scrubbed as substrings: they would blank out ordinary text
(``ANTHROPIC_API_KEY=loopback`` turned a model ``loopback-writer`` into ``[REDACTED]-writer``,
and a key ``k`` made the cache refuse every entry). A real provider key is far longer."""

CREDENTIAL_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "anthropic_api_key",
        "authorization",
        "proxy_authorization",
        "auth_token",
        "access_token",
        "refresh_token",
        "client_secret",
    }
)
"""Keys whose value :func:`scrub_secrets` redacts whole (lower case, ``-`` read as ``_``)."""

_secrets: set[str] = set()
_lock = threading.Lock()


def literal_secrets(secrets: Iterable[str | None]) -> tuple[str, ...]:
    """The ``secrets`` long enough to scrub as substrings (:data:`MIN_SECRET`), in order."""
    return tuple(s for s in secrets if s and len(s) >= MIN_SECRET)


def register_secret(value: str | None) -> None:
    """Scrub ``value`` from every error text from now on (shorter than
    :data:`MIN_SECRET`: ignored)."""
    if literal_secrets((value,)):
        assert value is not None
        with _lock:
            _secrets.add(value)


def known_secrets() -> list[str]:
    """The registered secrets and the keys in the environment, longest first."""
    with _lock:
        found = set(_secrets)
    found.update(literal_secrets(os.environ.get(name) for name in _ENV_KEYS))
    return sorted(found, key=len, reverse=True)


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret it holds (and the given ``secrets``) replaced by
    ``[REDACTED]`` (see the module docstring)."""
    if not text:
        return text
    for secret in sorted({*known_secrets(), *literal_secrets(secrets)}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = SECRET_PATTERN.sub(REDACTED, text)
    return _LABELLED.sub(lambda m: m.group(1) + REDACTED, text)


def might_hold_secret(text: str, secrets: Iterable[str] = ()) -> bool:
    """Whether :func:`scrub_text` could change ``text`` (a cheap test over, say, a whole
    trace's JSON before scrubbing its strings one by one)."""
    if any(secret in text for secret in (*known_secrets(), *literal_secrets(secrets))):
        return True
    if "sk-" in text and SECRET_PATTERN.search(text) is not None:  # every match starts with sk-
        return True
    return _may_be_labelled(text) and _LABELLED.search(text) is not None


_LABEL_WORDS = (
    "bearer",
    "apikey",
    "api_key",
    "api-key",
    "authtoken",
    "auth_token",
    "auth-token",
    "accesstoken",
    "access_token",
    "access-token",
)
"""Every match of :data:`_LABELLED` holds one of these, in lower case."""
_FOLDED_TO_ASCII = ("\u0130", "\u0131", "\u017f")
"""The characters that ``(?i)`` matches to an ASCII letter of a label but ``str.lower()`` does
not map to it (İ, ı, ſ; the Kelvin sign's lower case is ``k``)."""


def _may_be_labelled(text: str) -> bool:
    """Whether :data:`_LABELLED` could match ``text``: a sound test by substring search, much
    faster than the case-insensitive pattern over a long text."""
    if not text.isascii() and any(c in text for c in _FOLDED_TO_ASCII):
        return True
    lowered = text.lower()
    return any(word in lowered for word in _LABEL_WORDS)


def scrub_data(value: Any, secrets: Iterable[str] = ()) -> Any:
    """``value`` (plain JSON-like data: dicts, lists, strings) with :func:`scrub_text` applied
    to every string in it, dict keys included; other values are returned as they are."""
    extra = tuple(secrets)
    if isinstance(value, str):
        return scrub_text(value, extra)
    if isinstance(value, dict):
        return {scrub_data(k, extra): scrub_data(v, extra) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(scrub_data(v, extra) for v in value)
    return value


def scrub_secrets(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of JSON-like ``value`` with credentials replaced by ``"[REDACTED]"``: the value of
    every key in :data:`CREDENTIAL_KEYS`, every substring that looks like an API key
    (:data:`SECRET_PATTERN`) and every occurrence of the given ``secrets`` long enough to scrub.
    What the API cache stores and hashes (so its keys depend on exactly this)."""
    literal = literal_secrets(secrets)

    def scrub(node: Any) -> Any:
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for k, v in node.items():
                norm = str(k).lower().replace("-", "_")
                out[k] = REDACTED if norm in CREDENTIAL_KEYS else scrub(v)
            return out
        if isinstance(node, list):
            return [scrub(v) for v in node]
        if isinstance(node, str):
            text = SECRET_PATTERN.sub(REDACTED, node)
            for secret in literal:
                text = text.replace(secret, REDACTED)
            return text
        return node

    return scrub(value)
