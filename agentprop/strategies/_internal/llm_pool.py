"""LLM paraphrase pools: rewrites written once by a model, validated, cached on disk by content.

Strategies never ask a model at draw time: a drawn example is a pool index (0 = the original)
plus local transforms, so shrinking goes to the original and replays are exact. A candidate
enters the pool only if it passes :class:`PoolScreen` (every protected slot kept, no new slot,
similarity within bounds, the intent's key words kept). The cache key covers everything that
defines a valid pool, including :data:`PROMPT_VERSION`. The one request goes through
:mod:`agentprop._modelapi.client`; a pool that cannot be obtained raises
:class:`ParaphrasePoolError`, never falls back silently.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentprop._modelapi.budget import Budget
from agentprop._modelapi.cache import ApiCache, CacheMiss
from agentprop._modelapi.client import ModelClient
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES, TextPrompt
from agentprop._modelapi.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from agentprop._util.aio import run_sync
from agentprop._util.files import read_json, write_atomic
from agentprop.errors import (
    InvalidArgument,
    MissingApiKey,
    ParaphrasePoolError,  # noqa: F401 (re-exported: defined in errors.py)
    SourceLocation,
)
from agentprop.strategies._internal.packs import PhrasePack, resolve_pack
from agentprop.strategies._internal.paraphrase import Paraphrase, paraphrases
from agentprop.strategies._internal.slots import find_slots, has_placeholder_chars, validate_protect

if TYPE_CHECKING:  # Hypothesis is imported where a strategy is made: a run needs none
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_POOL_DIR",
    "DEFAULT_SIMILARITY",
    "POOL_FORMAT",
    "PROMPT_VERSION",
    "ParaphrasePool",
    "ParaphrasePoolError",
    "PoolScreen",
    "RejectedParaphrase",
    "llm_paraphrase_pool",
    "llm_paraphrases",
    "parse_candidates",
    "similarity_score",
]

PROMPT_VERSION = 1
"""Version of the prompt and of the screen; part of the cache key."""

POOL_FORMAT = "agentprop.paraphrase_pool/1"
"""The ``format`` field of pool files."""

DEFAULT_MODEL = "claude-haiku-4-5"
"""Paraphrasing one sentence is an easy task: the small, cheap model is the default."""

DEFAULT_POOL_DIR = Path(".agentprop") / "paraphrase_pools"
"""Where pools are cached when ``cache_dir`` is not given (relative to the current directory)."""

DEFAULT_SIMILARITY: tuple[float, float] = (0.3, 0.95)
"""Default ``similarity=(lo, hi)`` bounds (see the module docstring)."""

MAX_N = 100
"""The most candidates one request may ask for."""


Reason = Literal[
    "not_text",
    "empty",
    "reserved_chars",
    "identical",
    "duplicate",
    "missing_slot",
    "added_slot",
    "too_similar",
    "too_different",
    "missing_keywords",
    "surplus",
]

PoolSource = Literal["api", "cache", "file"]


# --- values -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RejectedParaphrase:
    """A candidate the screen refused: its text, a :data:`Reason` code and a human detail."""

    text: str
    reason: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"text": self.text, "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True)
class ParaphrasePool:
    """A validated pool of rewrites of ``text``.

    ``entries`` are the accepted rewrites, most similar to the original first;
    ``texts`` is ``(text, *entries)``, the list handed to ``paraphrases(pool=...)`` where
    index 0 is the original. ``source`` says where this object came from (``"api"``,
    ``"cache"`` or ``"file"``) and ``path`` is the JSON file it was read from or written to.
    """

    text: str
    entries: tuple[str, ...]
    similarities: tuple[float, ...]
    rejected: tuple[RejectedParaphrase, ...]
    model: str
    key: str
    source: PoolSource
    path: Path | None
    created: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def texts(self) -> tuple[str, ...]:
        """``(original, *entries)``: index 0 is the original, as in ``Paraphrase`` provenance."""
        return (self.text, *self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def rejections(self) -> Counter[str]:
        """How many candidates were rejected for each reason."""
        return Counter(r.reason for r in self.rejected)

    def describe(self) -> str:
        """One line: how many rewrites were kept and why the others were not."""
        why = ", ".join(f"{reason} x{count}" for reason, count in sorted(self.rejections().items()))
        rejected = f"; rejected {len(self.rejected)} ({why})" if self.rejected else ""
        return (
            f"{len(self.entries)} rewrites of {self.text!r} from {self.model} "
            f"[{self.source}]{rejected}"
        )


# --- the screen -------------------------------------------------------------------------------

# Function words, pronouns, auxiliaries and politeness/framing words (English). Content words
# are what remains; they stand in for "the intent's key words" when keywords= is not given.
_STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn doing
    don down during each either else even ever every few for from further get gets getting got
    had hadn has hasn have haven having he her here hers herself him himself his how however i
    if in into is isn it its itself just let lets like may me might mine more most must my
    myself need needs neither no nor not now of off on once one only or other our ours
    ourselves out over own please plz pls quite rather really same shall she should shouldn so
    some such than thank thanks thx that the their theirs them themselves then there these they
    this those though through thus to too under until up upon us very via want wanted wants was
    wasn way we were weren what whatever when where whether which while who whom whose why will
    with within without won would wouldn yes yet you your yours yourself yourselves hi hello hey
    dear kindly sir madam okay ok oh um uh well sure maybe perhaps possible possibly help know
    think wonder wondering hoping hope go going able
    """.split()
)
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*")
_SUFFIXES = ("ations", "ation", "ings", "ing", "ied", "ies", "ed", "es", "s", "ly")
_STEM_SLACK = 3
_TRAILING = re.compile(r"[\s.!?;:,\u3002\uff01\uff1f\u2026]+$")


def _normalise(text: str) -> str:
    """Case-folded, whitespace collapsed, final punctuation dropped (for 'identical')."""
    return _TRAILING.sub("", " ".join(text.casefold().split()))


def similarity_score(a: str, b: str) -> float:
    """The screen's similarity: ``fuzz.ratio`` / 100 of case-folded, whitespace-collapsed text."""
    from rapidfuzz import fuzz

    return float(fuzz.ratio(" ".join(a.casefold().split()), " ".join(b.casefold().split()))) / 100.0


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _same_stem(a: str, b: str) -> bool:
    short, long = sorted((a, b), key=len)
    return len(short) >= 3 and long.startswith(short) and len(long) - len(short) <= _STEM_SLACK


def _count_whole(text: str, slot: str) -> int:
    """Occurrences of ``slot`` in ``text`` not glued to a letter or digit (``O-1001`` is not in
    ``O-10011``); a slot edge that is not alphanumeric needs no boundary."""
    before = r"(?<![A-Za-z0-9])" if slot[:1].isalnum() else ""
    after = r"(?![A-Za-z0-9])" if slot[-1:].isalnum() else ""
    return len(re.findall(before + re.escape(slot) + after, text))


def _words(text: str) -> list[str]:
    """Lower-cased words of ``text``; an apostrophe ends a word (``don't`` -> ``don``)."""
    return [re.split("['\u2019]", w.casefold())[0] for w in _WORD.findall(text)]


def _without_slots(text: str, protect: Sequence[str | re.Pattern[str]]) -> str:
    out = list(text)
    for slot in find_slots(text, protect=protect):
        out[slot.start : slot.end] = [" "] * (slot.end - slot.start)
    return "".join(out)


def _content_words(text: str, protect: Sequence[str | re.Pattern[str]]) -> tuple[str, ...]:
    words = [
        w for w in _words(_without_slots(text, protect)) if len(w) >= 3 and w not in _STOP_WORDS
    ]
    return tuple(dict.fromkeys(words))


@dataclass(frozen=True)
class PoolScreen:
    """The rules a candidate rewrite must pass (see the module docstring for each rule).

    Build it with :meth:`for_text`; :meth:`check` screens one candidate and :meth:`screen` a
    whole reply.
    """

    original: str
    protect: tuple[str | re.Pattern[str], ...]
    slots: Mapping[str, int]
    lo: float
    hi: float
    latin: bool
    keywords: tuple[str, ...]
    required: int
    explicit_keywords: bool

    @classmethod
    def for_text(
        cls,
        text: str,
        *,
        protect: Sequence[str | re.Pattern[str]] = (),
        similarity: tuple[float, float] = DEFAULT_SIMILARITY,
        keywords: Sequence[str] | None = None,
        latin: bool = True,
    ) -> PoolScreen:
        items = validate_protect(protect)
        slots = Counter(s.text for s in find_slots(text, protect=items))
        lo, hi = _validate_similarity(similarity)
        if keywords is None:
            words = _content_words(text, items) if latin else ()
            required = len(words) // 2 + 1 if words else 0
            explicit = False
        else:
            words = tuple(dict.fromkeys(k.strip() for k in keywords))
            required = len(words)
            explicit = True
        screen = cls(text, items, dict(slots), lo, hi, latin, words, required, explicit)
        for keyword in words if explicit else ():
            if not screen._has_keyword(text, keyword):
                raise InvalidArgument(
                    f"keywords=[{keyword!r}] does not occur in text {text!r}; keywords name the "
                    "words of the original that every rewrite must keep (any "
                    "inflection: cancel ~ cancelled)"
                )
        return screen

    @property
    def rule(self) -> str:
        """The keyword rule in words (stored in pool files)."""
        if not self.keywords:
            return "no keyword check"
        which = (
            "all of the given keywords"
            if self.explicit_keywords
            else "a strict majority of the content words"
        )
        return f"{which}: at least {self.required} of {list(self.keywords)}"

    def _has_keyword(self, candidate: str, keyword: str) -> bool:
        if not self.latin:
            return keyword.casefold() in candidate.casefold()
        stems = [_stem(w) for w in _words(candidate)]
        parts = [_stem(w) for w in _words(keyword)] or [keyword.casefold()]
        return all(any(_same_stem(part, s) for s in stems) for part in parts)

    def check(self, candidate: object, seen: set[str] | None = None) -> RejectedParaphrase | float:
        """Screen one candidate: its similarity to the original if it passes, else why not.

        ``seen`` (normalised texts screened so far) is updated, for the duplicate rule.
        """
        if not isinstance(candidate, str):
            return RejectedParaphrase(
                json.dumps(candidate, default=str),
                "not_text",
                f"a {type(candidate).__name__}, not a string",
            )
        text = candidate.strip()
        if not text:
            return RejectedParaphrase(candidate, "empty", "blank text")
        if has_placeholder_chars(text):
            return RejectedParaphrase(
                text, "reserved_chars", "contains private-use characters U+E000-U+F8FF"
            )
        norm = _normalise(text)
        if norm == _normalise(self.original):
            return RejectedParaphrase(
                text, "identical", "the original up to case, spacing and final punctuation"
            )
        if seen is not None:
            if norm in seen:
                return RejectedParaphrase(text, "duplicate", "repeats an earlier candidate")
            seen.add(norm)
        missing = [s for s, count in self.slots.items() if _count_whole(text, s) < count]
        if missing:
            return RejectedParaphrase(
                text, "missing_slot", f"drops or changes protected slot(s) {missing}"
            )
        added = [
            s.text
            for s in find_slots(text, protect=self.protect)
            if s.text not in self.original
            and not any(_count_whole(s.text, mine) for mine in self.slots)
            and not (s.kind == "number" and not any(c.isdigit() for c in s.text))
        ]
        if added:
            return RejectedParaphrase(
                text, "added_slot", f"adds slot(s) {added} that the original does not have"
            )
        score = similarity_score(self.original, text)
        if score > self.hi:
            return RejectedParaphrase(text, "too_similar", f"similarity {score:.2f} > {self.hi:g}")
        if score < self.lo:
            return RejectedParaphrase(
                text, "too_different", f"similarity {score:.2f} < {self.lo:g}"
            )
        if self.keywords:
            kept = [k for k in self.keywords if self._has_keyword(text, k)]
            if len(kept) < self.required:
                lost = [k for k in self.keywords if k not in kept]
                return RejectedParaphrase(
                    text,
                    "missing_keywords",
                    f"keeps {len(kept)} of {len(self.keywords)} key words (needs "
                    f"{self.required}); missing {lost}",
                )
        return score

    def screen(
        self, candidates: Iterable[object], *, limit: int | None = None
    ) -> tuple[list[tuple[str, float]], list[RejectedParaphrase]]:
        """Screen candidates in order. Returns the accepted ``(text, similarity)`` sorted most
        similar first (ties keep the model's order) and the rejected ones. Candidates beyond
        ``limit`` are rejected as ``surplus``."""
        accepted: list[tuple[str, float]] = []
        rejected: list[RejectedParaphrase] = []
        seen: set[str] = set()
        for i, candidate in enumerate(candidates):
            if limit is not None and i >= limit:
                text = (
                    candidate if isinstance(candidate, str) else json.dumps(candidate, default=str)
                )
                rejected.append(
                    RejectedParaphrase(text, "surplus", f"more than the n={limit} asked for")
                )
                continue
            result = self.check(candidate, seen)
            if isinstance(result, RejectedParaphrase):
                rejected.append(result)
            else:
                accepted.append((str(candidate).strip(), round(result, 4)))
        accepted.sort(key=lambda pair: -pair[1])
        return accepted, rejected


# --- parsing a reply --------------------------------------------------------------------------

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_LIST_ITEM = re.compile(r"^\s*(?:\(?\d{1,3}[.):]|[-*\u2022])\s+(.+?)\s*$")
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u300c": "\u300d"}
_LIST_KEYS = ("paraphrases", "rewrites", "candidates", "items", "texts")


def _unquote(item: str) -> str:
    item = item.strip()
    if len(item) >= 2 and _QUOTES.get(item[0]) == item[-1]:
        return item[1:-1].strip()
    return item


def _items_of(value: Any) -> list[object] | None:
    if isinstance(value, Mapping):
        lists = [value[k] for k in _LIST_KEYS if isinstance(value.get(k), list)]
        if not lists:
            lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) != 1:
            return None
        value = lists[0]
    if not isinstance(value, list):
        return None
    out: list[object] = []
    for item in value:
        if isinstance(item, Mapping):
            text = next(
                (
                    item[k]
                    for k in ("text", "paraphrase", "rewrite")
                    if isinstance(item.get(k), str)
                ),
                None,
            )
            out.append(text if text is not None else dict(item))
        else:
            out.append(item)
    return out


def parse_candidates(reply: str) -> tuple[list[object], bool]:
    """Candidates from a model's reply, and whether they were salvaged from truncated JSON.

    Accepted, in order of preference: a JSON array (of strings, or of objects with a ``text``
    field), possibly inside a code fence or surrounded by prose; a JSON object with one list
    (``{"paraphrases": [...]}``); the complete string literals of a JSON array cut off by
    ``max_tokens``; numbered or bulleted lines (``1. ...``, ``- ...``), quotes stripped.
    Raises :class:`ParaphrasePoolError` if none of these is found.
    """
    if not isinstance(reply, str):
        raise InvalidArgument(f"reply must be a str, got {type(reply).__name__}")
    bodies = [m.group(1) for m in _FENCE.finditer(reply)] + [reply]
    for body in bodies:
        body = body.strip()
        attempts = [body]
        for opener, closer in (("[", "]"), ("{", "}")):
            start, end = body.find(opener), body.rfind(closer)
            if 0 <= start < end:
                attempts.append(body[start : end + 1])
        for attempt in attempts:
            try:
                items = _items_of(json.loads(attempt))
            except ValueError:
                continue
            if items:
                return items, False
    start = reply.find("[")
    if start >= 0:
        salvaged: list[object] = []
        for literal in _JSON_STRING.findall(reply[start:]):
            try:
                salvaged.append(json.loads(literal))
            except ValueError:
                continue
        if salvaged:
            return salvaged, True
    lines = [_unquote(m.group(1)) for line in reply.splitlines() if (m := _LIST_ITEM.match(line))]
    lines = [line for line in lines if line]
    if lines:
        return list(lines), False
    snippet = reply.strip()[:300] or "<empty reply>"
    raise ParaphrasePoolError(
        f"could not find a list of paraphrases in the model's reply: {snippet!r}",
        expected="a JSON array of strings (or a numbered list, one paraphrase per line)",
        fix="run again (the reply is not cached), try a more capable model=, or check that "
        "base_url points at a Messages API",
    )


# --- the request ------------------------------------------------------------------------------

_SYSTEM = (
    "You write paraphrases of messages that users send to a tool-using assistant (customer "
    "support, expenses, data questions). The paraphrases are test inputs: each must ask for "
    "exactly the same thing as the original, so that a correct assistant would act the same way."
)


def build_prompt(text: str, *, n: int, slots: Sequence[str], keywords: Sequence[str] = ()) -> str:
    """The user message asking for ``n`` paraphrases (part of :data:`PROMPT_VERSION`)."""
    rules = [
        (
            "Keep the meaning and the intent exactly: the same request and the same facts, "
            "nothing added and nothing left out."
        ),
        (
            "Vary the wording, the word order, the tone and the formality, as different people "
            "would write it. Do not merely add 'please' or change punctuation."
        ),
        "Write in the same language as the message.",
    ]
    if slots:
        quoted = ", ".join(json.dumps(s, ensure_ascii=False) for s in slots)
        rules.insert(
            1, f"Copy these exact strings into every paraphrase, character for character: {quoted}."
        )
    if keywords:
        quoted = ", ".join(json.dumps(k, ensure_ascii=False) for k in keywords)
        rules.insert(2, f"Keep these words (any form of them) in every paraphrase: {quoted}.")
    rules.append(f"Answer with only a JSON array of {n} strings, no other text.")
    body = "\n".join(f"- {r}" for r in rules)
    return (
        f"Write {n} different paraphrases of the message "
        f"below.\n\nRules:\n{body}\n\nMessage:\n<<<\n{text}\n>>>"
    )


def _max_tokens(text: str, n: int) -> int:
    return int(min(16000, max(1024, 256 + n * (len(text) // 2 + 40))))


def _protect_key(items: Sequence[str | re.Pattern[str]]) -> list[Any]:
    return [
        item if isinstance(item, str) else {"pattern": item.pattern, "flags": int(item.flags)}
        for item in items
    ]


def _describe_protect(items: Sequence[str | re.Pattern[str]]) -> list[str]:
    return [item if isinstance(item, str) else f"re:{item.pattern}" for item in items]


@dataclass(frozen=True)
class _PoolRequest:
    """Validated arguments of one pool: everything needed to find, fetch or check it."""

    text: str
    model: str
    n: int
    lang: str
    similarity: tuple[float, float]
    protect: tuple[str | re.Pattern[str], ...]
    keywords: tuple[str, ...] | None
    temperature: float
    cache_dir: Path
    pool_file: Path | None
    client: Any
    base_url: str | None
    api_key: str | None
    budget: Budget | None
    retry_policy: RetryPolicy
    timeout: float
    screen: PoolScreen = field(repr=False)
    api_cache: Any = None

    @property
    def key_fields(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "model": self.model,
            "n": self.n,
            "lang": self.lang,
            "prompt_version": PROMPT_VERSION,
            "similarity": list(self.similarity),
            "protect": _protect_key(self.protect),
            "keywords": None if self.keywords is None else sorted(self.keywords),
        }

    @property
    def key(self) -> str:
        canonical = json.dumps(
            self.key_fields, sort_keys=True, ensure_ascii=False, separators=(",", ":")
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @property
    def cache_path(self) -> Path:
        return self.cache_dir / f"{self.key}.json"

    # -- loading ---------------------------------------------------------------------------------

    def load(self) -> ParaphrasePool:
        if self.pool_file is not None:
            return _read_pool_file(self, self.pool_file)
        path = self.cache_path
        if path.exists():
            pool = _read_cache(self, path)
            if self.budget is not None and isinstance(pool.metadata.get("usage"), Mapping):
                self.budget.charge_usage(pool.model, pool.metadata["usage"], cached=True)
        else:
            pool = self._fetch()
        if not pool.entries:
            raise _empty_pool_error(pool)
        return pool

    def _model_client(self) -> ModelClient:
        """The model client of this pool's one request: the API cache (so the request replays
        like an agent's call, and never reaches the API in replay-only mode), the budget,
        retries and the offline-key rule."""
        return ModelClient(
            ANTHROPIC_MESSAGES,
            self.model,
            base_url=self.base_url,
            api_key=self.api_key,
            cache=self.api_cache,
            budget=self.budget,
            retry_policy=self.retry_policy,
            timeout=self.timeout,
            max_concurrent_requests=None,
            sdk_client=self.client,
        )

    def _fetch(self) -> ParaphrasePool:
        client = self._model_client()
        slots = list(self.screen.slots)
        prompt = build_prompt(self.text, n=self.n, slots=slots, keywords=self.keywords or ())
        max_tokens = _max_tokens(self.text, self.n)
        ask = TextPrompt(
            system=_SYSTEM, user=prompt, max_tokens=max_tokens, temperature=self.temperature
        )
        try:
            reply_text, reply = run_sync(
                client.text(ask, trial=0, seed_parts=("paraphrase-pool", self.key))
            )
        except MissingApiKey:
            raise _no_source_error(self) from None
        except CacheMiss as exc:
            raise ParaphrasePoolError(
                f"no paraphrase pool for {self.text!r}: it is not cached (looked for "
                f"{self.cache_path}) and the API cache is in replay-only mode, with no recorded "
                f"reply for its request.\n{exc}",
                expected="a cached pool file, or the pool's request recorded in the API cache",
                fix="run once with the cache in read-write mode (unset CI, or "
                "AGENTPROP_CACHE_MODE=read-write) and commit the pool file or the API "
                "cache; or pass pool_file=",
            ) from None
        except Exception as exc:
            if not _is_api_failure(exc):
                raise
            raise ParaphrasePoolError(
                client.scrub(
                    f"the Messages API call for a paraphrase pool of {self.text!r} failed: "
                    f"{type(exc).__name__}: {exc}"
                ),
                expected=f"a reply from model {self.model!r}",
                fix="check the model name, ANTHROPIC_API_KEY / api_key= and base_url=; or pass "
                "pool_file= with a committed pool to run without the API",
            ) from exc
        response = reply.response
        usage = (
            {k: v for k, v in (response.get("usage") or {}).items() if isinstance(v, int)}
            if isinstance(response.get("usage"), dict)
            else {}
        )
        try:
            candidates, truncated = parse_candidates(reply_text)
        except ParaphrasePoolError:
            client.forget(reply)  # the reply is not kept: a later run asks again
            raise
        accepted, rejected = self.screen.screen(candidates, limit=self.n)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        metadata = {
            "temperature": self.temperature,
            "max_tokens": max_tokens,
            "stop_reason": response.get("stop_reason"),
            "truncated": truncated,
            "response_id": response.get("id"),
            "response_model": response.get("model"),
            "usage": usage,
            "keyword_rule": self.screen.rule,
            "candidates": len(candidates),
            "system": _SYSTEM,
            "prompt": prompt,
        }
        pool = ParaphrasePool(
            text=self.text,
            entries=tuple(t for t, _ in accepted),
            similarities=tuple(s for _, s in accepted),
            rejected=tuple(rejected),
            model=self.model,
            key=self.key,
            source="api",
            path=self.cache_path,
            created=created,
            metadata=metadata,
        )
        _write_json(self.cache_path, _pool_document(self, pool))
        return pool


def _is_api_failure(exc: BaseException) -> bool:
    """An error of the API call itself (the SDK's errors, a body that is not JSON or not a
    message, the network), as opposed to a bug."""
    if isinstance(exc, (ValueError, ConnectionError, TimeoutError)):
        return True
    return any(cls.__name__ == "APIError" for cls in type(exc).__mro__)


def _no_source_error(request: _PoolRequest) -> ParaphrasePoolError:
    return ParaphrasePoolError(
        f"no paraphrase pool for {request.text!r}: it is not cached (looked for "
        f"{request.cache_path}), no pool_file= was given, and there is no Anthropic API key to "
        "ask the model for one",
        expected="an API key (to make the pool once), or a cached or committed pool file",
        fix="set ANTHROPIC_API_KEY (or pass api_key= or client=) and run once: the pool is then "
        f"cached under {request.cache_dir} and later runs need no key; or commit a pool file "
        "(copy the cached JSON, or write {'text': ..., 'pool': [...]}) and pass "
        "pool_file='tests/data/<name>.json'",
    )


def _empty_pool_error(pool: ParaphrasePool) -> ParaphrasePoolError:
    why = (
        ", ".join(f"{reason} x{count}" for reason, count in sorted(pool.rejections().items()))
        or "no candidates"
    )
    return ParaphrasePoolError(
        f"no paraphrase of {pool.text!r} passed the screen ({why}); see the rejected "
        f"candidates in {pool.path}",
        expected="at least one rewrite that keeps every protected slot and the key words, within "
        "the similarity bounds",
        fix="widen similarity=(lo, hi), pass keywords= naming only the words that carry the "
        "intent (or keywords=[] to skip that check), or raise n=; changing these "
        "arguments makes a new pool",
    )


# --- files ------------------------------------------------------------------------------------


def _pool_document(request: _PoolRequest, pool: ParaphrasePool) -> dict[str, Any]:
    return {
        "format": POOL_FORMAT,
        "key": pool.key,
        "text": pool.text,
        "model": pool.model,
        "n": request.n,
        "lang": request.lang,
        "prompt_version": PROMPT_VERSION,
        "similarity": list(request.similarity),
        "protect": _describe_protect(request.protect),
        "keywords": None if request.keywords is None else list(request.keywords),
        "created": pool.created,
        "pool": [{"text": t, "similarity": s} for t, s in zip(pool.entries, pool.similarities)],
        "rejected": [r.as_dict() for r in pool.rejected],
        "metadata": dict(pool.metadata),
    }


def _write_json(path: Path, document: Mapping[str, Any]) -> None:
    """Write atomically: a reader never sees half a pool."""
    write_atomic(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def _bad_file(path: Path, problem: str, *, expected: str, fix: str) -> ParaphrasePoolError:
    return ParaphrasePoolError(problem, location=SourceLocation(path), expected=expected, fix=fix)


def _read_document(path: Path, *, fix: str) -> dict[str, Any]:
    document = read_json(path, what="a paraphrase pool file", fix=fix, error=ParaphrasePoolError)
    if not isinstance(document, dict):
        raise _bad_file(
            path, f"the top level is a {type(document).__name__}", expected="a JSON object", fix=fix
        )
    return document


def _entries_of(path: Path, document: Mapping[str, Any], *, fix: str) -> list[object]:
    entries = document.get("pool")
    if not isinstance(entries, list):
        raise _bad_file(
            path,
            "missing or malformed 'pool'",
            expected="'pool': a list of strings or of objects with a 'text' field",
            fix=fix,
        )
    return [e.get("text") if isinstance(e, Mapping) else e for e in entries]


def _rejected_of(document: Mapping[str, Any]) -> tuple[RejectedParaphrase, ...]:
    out: list[RejectedParaphrase] = []
    for item in document.get("rejected") or []:
        if (
            isinstance(item, Mapping)
            and isinstance(item.get("text"), str)
            and isinstance(item.get("reason"), str)
        ):
            out.append(
                RejectedParaphrase(item["text"], item["reason"], str(item.get("detail", "")))
            )
    return tuple(out)


def _read_cache(request: _PoolRequest, path: Path) -> ParaphrasePool:
    fix = f"delete {path} to ask the model again (or restore it from version control)"
    document = _read_document(path, fix=fix)
    if (
        document.get("format") != POOL_FORMAT
        or document.get("key") != request.key
        or document.get("text") != request.text
    ):
        raise _bad_file(
            path,
            "this cached pool does not belong to the requested text and arguments",
            expected=f"format {POOL_FORMAT!r}, key {request.key}, text {request.text!r}",
            fix=fix,
        )
    entries = _entries_of(path, document, fix=fix)
    if not all(isinstance(e, str) for e in entries):
        raise _bad_file(path, "a 'pool' entry is not text", expected="strings", fix=fix)
    texts = [str(e) for e in entries]
    sims = [round(similarity_score(request.text, t), 4) for t in texts]
    metadata = document.get("metadata")
    return ParaphrasePool(
        text=request.text,
        entries=tuple(texts),
        similarities=tuple(sims),
        rejected=_rejected_of(document),
        model=str(document.get("model", request.model)),
        key=request.key,
        source="cache",
        path=path,
        created=str(document.get("created", "")),
        metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
    )


def _read_pool_file(request: _PoolRequest, path: Path) -> ParaphrasePool:
    """A committed pool: used as is (no request, no cache), every entry re-screened."""
    fix = (
        "pass the pool file written for this text (a cached pool from "
        ".agentprop/paraphrase_pools/ or {'text': ..., 'pool': [...]})"
    )
    document = _read_document(path, fix=fix)
    if document.get("text") != request.text:
        raise _bad_file(
            path,
            f"this pool file is for {document.get('text')!r}, not for {request.text!r}",
            expected=f"'text': {request.text!r}",
            fix="pass the pool file made for this text, or regenerate it (pool "
            "files are per sentence)",
        )
    entries = _entries_of(path, document, fix=fix)
    accepted, rejected = request.screen.screen(entries)
    if rejected:
        lines = "; ".join(f"{r.text!r}: {r.reason} ({r.detail})" for r in rejected[:5])
        raise _bad_file(
            path,
            f"{len(rejected)} pool "
            f"entr{'y fails' if len(rejected) == 1 else 'ies fail'} the screen: {lines}",
            expected=f"entries that pass the screen with similarity={request.similarity}, protect "
            "and keywords as given",
            fix="edit or remove those entries, or call llm_paraphrases with the arguments "
            "the file was made with",
        )
    if not accepted:
        raise _bad_file(path, "the pool is empty", expected="at least one rewrite", fix=fix)
    metadata = document.get("metadata")
    return ParaphrasePool(
        text=request.text,
        entries=tuple(t for t, _ in accepted),
        similarities=tuple(s for _, s in accepted),
        rejected=_rejected_of(document),
        model=str(document.get("model", "unknown")),
        key=str(document.get("key", request.key)),
        source="file",
        path=path,
        created=str(document.get("created", "")),
        metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
    )


# --- arguments --------------------------------------------------------------------------------


def _validate_similarity(value: object) -> tuple[float, float]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise InvalidArgument(
            f"similarity={value!r} must be a pair (lo, hi) with 0 <= lo < hi <= 1"
        )
    lo, hi = value
    for name, bound in (("lo", lo), ("hi", hi)):
        if (
            isinstance(bound, bool)
            or not isinstance(bound, (int, float))
            or not math.isfinite(bound)
        ):
            raise InvalidArgument(
                f"similarity {name}={bound!r} must be a finite number between 0 and 1"
            )
    if not 0 <= lo < hi <= 1:
        raise InvalidArgument(
            f"similarity={value!r} must satisfy 0 <= lo < hi <= 1 (lo rejects rewrites too "
            "different from the original, hi rejects near-copies)"
        )
    return float(lo), float(hi)


def _validate_path(name: str, value: object) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidArgument(
            f"{name}={value!r} must be a path (str or os.PathLike), got {type(value).__name__}"
        )
    return Path(value)


def _make_request(
    text: object,
    *,
    model: object,
    n: object,
    lang: object,
    packs: object,
    cache_dir: object,
    client: object,
    base_url: object,
    api_key: object,
    similarity: object,
    protect: object,
    keywords: object,
    temperature: object,
    pool_file: object,
    budget: object,
    retry_policy: object,
    timeout: object,
    api_cache: object = None,
) -> _PoolRequest:
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"text={text!r} must be a non-empty str")
    if not isinstance(model, str) or not model.strip():
        raise InvalidArgument(f"model={model!r} must be a model name such as {DEFAULT_MODEL!r}")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_N:
        raise InvalidArgument(
            f"n={n!r} must be an int between 1 and {MAX_N} (how many paraphrases to ask for)"
        )
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 <= temperature <= 1
    ):
        raise InvalidArgument(f"temperature={temperature!r} must be a number between 0 and 1")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InvalidArgument(f"timeout={timeout!r} must be a positive number of seconds")
    for name, value in (("base_url", base_url), ("api_key", api_key)):
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidArgument(
                f"{name} must be a non-empty str or None, got {type(value).__name__}"
            )
    if client is not None and not hasattr(client, "messages"):
        raise InvalidArgument(
            f"client={client!r} must be an anthropic.Anthropic client (something "
            "with .messages.create)"
        )
    if budget is not None and not isinstance(budget, Budget):
        raise InvalidArgument(f"budget must be an agentprop Budget, got {type(budget).__name__}")
    if not isinstance(retry_policy, RetryPolicy):
        raise InvalidArgument(
            f"retry_policy must be a RetryPolicy, got {type(retry_policy).__name__}"
        )
    if (
        api_cache is not None
        and api_cache is not False
        and not isinstance(api_cache, (ApiCache, str, os.PathLike))
    ):
        raise InvalidArgument(
            f"api_cache={api_cache!r} must be an ApiCache, a path to one, None (the default "
            ".agentprop/api-cache.sqlite) or False"
        )
    if keywords is not None:
        if isinstance(keywords, (str, bytes)) or not isinstance(keywords, Iterable):
            raise InvalidArgument(
                f"keywords={keywords!r} must be a list of words; wrap a single word: "
                f"keywords=[{keywords!r}]"
            )
        keywords = tuple(keywords)
        if not all(isinstance(k, str) and k.strip() for k in keywords):
            raise InvalidArgument(
                f"keywords={list(keywords)!r} must contain only non-empty strings"
            )
    # resolve_pack checks lang at run time
    pack: PhrasePack = resolve_pack(lang, packs)  # type: ignore[arg-type]
    protect_items = validate_protect(protect)
    screen = PoolScreen.for_text(
        text,
        protect=protect_items,
        similarity=similarity,  # type: ignore[arg-type]  # for_text checks it at run time
        keywords=keywords,
        latin=pack.resolved_script == "latin",
    )
    directory = _validate_path("cache_dir", cache_dir) or DEFAULT_POOL_DIR
    return _PoolRequest(
        text=text,
        model=model,
        n=n,
        lang=str(lang),
        similarity=(screen.lo, screen.hi),
        protect=protect_items,
        keywords=None if keywords is None else screen.keywords,
        temperature=float(temperature),
        cache_dir=directory if directory.is_absolute() else Path.cwd() / directory,
        pool_file=_validate_path("pool_file", pool_file),
        client=client,
        # checked above (a str or None); mypy does not narrow through the loop
        base_url=base_url,  # type: ignore[arg-type]
        # checked above (a str or None); mypy does not narrow through the loop
        api_key=api_key,  # type: ignore[arg-type]
        budget=budget,
        retry_policy=retry_policy,
        timeout=float(timeout),
        screen=screen,
        api_cache=api_cache,
    )


_REQUEST_ARGUMENTS = tuple(inspect.signature(_make_request).parameters)


def _request_of(arguments: Mapping[str, Any]) -> _PoolRequest:
    """The pool request of :func:`llm_paraphrases` or :func:`load_paraphrase_pool`, from their
    arguments (``locals()``): those named like :func:`_make_request`'s, passed on in one place."""
    return _make_request(**{name: arguments[name] for name in _REQUEST_ARGUMENTS})


# --- public API -------------------------------------------------------------------------------


def llm_paraphrase_pool(
    text: str,
    *,
    model: str = DEFAULT_MODEL,
    n: int = 20,
    lang: str = "en",
    cache_dir: str | os.PathLike[str] | None = None,
    client: Any = None,
    base_url: str | None = None,
    api_key: str | None = None,
    similarity: tuple[float, float] = DEFAULT_SIMILARITY,
    protect: Sequence[str | re.Pattern[str]] = (),
    keywords: Sequence[str] | None = None,
    temperature: float = 1.0,
    pool_file: str | os.PathLike[str] | None = None,
    packs: Sequence[str | os.PathLike[str] | PhrasePack] | None = None,
    budget: Budget | None = None,
    retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    timeout: float = 120.0,
    api_cache: ApiCache | str | os.PathLike[str] | bool | None = None,
) -> ParaphrasePool:
    """Load (or make, once) the validated paraphrase pool that :func:`llm_paraphrases` draws from.

    Same arguments as :func:`llm_paraphrases` minus the transform options; runs now rather than
    on first draw. Use it to fill the cache ahead of a run, to inspect ``pool.rejected``, or to
    find the file to commit (``pool.path``).
    """
    request = _request_of(locals())  # first: locals() holds only the arguments
    return request.load()


class _LazyPoolStrategy:
    """The definition behind ``st.deferred``: loads the pool once per strategy object.

    Hypothesis calls it when the strategy is first used; the result -- or the error -- is kept,
    so a strategy shared by many tests makes at most one request and fails the same way each time.
    """

    def __init__(self, request: _PoolRequest, options: dict[str, Any], description: str) -> None:
        self._request = request
        self._options = options
        self._description = description
        self._lock = threading.Lock()
        self._result: SearchStrategy[Paraphrase] | None = None
        self._error: BaseException | None = None
        self.pool: ParaphrasePool | None = None

    def __call__(self) -> SearchStrategy[Paraphrase]:
        with self._lock:
            if self._result is not None:
                return self._result
            if self._error is not None:
                raise self._error
            try:
                self.pool = self._request.load()
                self._result = paraphrases(
                    self._request.text, pool=self.pool.entries, **self._options
                )
            except Exception as exc:
                self._error = exc
                raise
            return self._result

    def __repr__(self) -> str:
        return self._description


def llm_paraphrases(
    text: str,
    *,
    model: str = DEFAULT_MODEL,
    n: int = 20,
    lang: str = "en",
    cache_dir: str | os.PathLike[str] | None = None,
    client: Any = None,
    base_url: str | None = None,
    api_key: str | None = None,
    similarity: tuple[float, float] = DEFAULT_SIMILARITY,
    protect: Sequence[str | re.Pattern[str]] = (),
    keywords: Sequence[str] | None = None,
    temperature: float = 1.0,
    pool_file: str | os.PathLike[str] | None = None,
    max_transforms: int = 0,
    max_typos: int = 2,
    transforms: Sequence[str] | None = None,
    packs: Sequence[str | os.PathLike[str] | PhrasePack] | None = None,
    budget: Budget | None = None,
    retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    timeout: float = 120.0,
    api_cache: ApiCache | str | os.PathLike[str] | bool | None = None,
) -> SearchStrategy[Paraphrase]:
    """Paraphrases of ``text`` written once by an LLM, validated, cached, drawn as pool indices.

    The first time the strategy is used it obtains a pool of rewrites -- from ``pool_file`` (a
    committed JSON pool; no request), else from the cache (``cache_dir``, default
    ``.agentprop/paraphrase_pools/``, keyed by the SHA-256 of text, model, n, lang, prompt
    version, similarity, protect and keywords), else with ONE Messages API request for ``n``
    candidates, screened (protected slots kept verbatim, no slot added, similarity within
    ``similarity=(lo, hi)``, key words kept, no duplicates; see :class:`PoolScreen`) and cached.
    It never asks the model again for the same key, and never per example.

    Examples are :class:`~agentprop.strategies._internal.paraphrase.Paraphrase` values drawn by
    ``paraphrases(text, pool=...)``: index 0 is the original, entries are ordered most similar
    first, and provenance records ``pool(index=i)``; failures shrink to the original.
    ``max_transforms`` (default 0: the pool alone) composes local transforms on top.

    The key comes from ``api_key=``, ``client=`` or ``ANTHROPIC_API_KEY`` (a ``base_url`` that
    is not Anthropic's, such as a local test server, needs none). With no pool file, no cached
    pool and no key, the first draw raises :class:`ParaphrasePoolError` saying how to provide
    one. Arguments are checked when the strategy is created (:class:`InvalidArgument`).
    """
    request = _request_of(locals())  # first: locals() holds only the arguments
    options: dict[str, Any] = {
        "lang": lang,
        "packs": packs,
        "protect": request.protect,
        "max_transforms": max_transforms,
        "max_typos": max_typos,
        "transforms": transforms,
    }
    paraphrases(text, **options)  # validate the transform options now, not on first draw
    parts = [repr(text), f"model={model!r}", f"n={n}"]
    if lang != "en":
        parts.append(f"lang={lang!r}")
    if pool_file is not None:
        parts.append(f"pool_file={str(pool_file)!r}")
    if max_transforms:
        parts.append(f"max_transforms={max_transforms}")
    lazy = _LazyPoolStrategy(request, options, f"llm_paraphrases({', '.join(parts)})")

    def definition() -> SearchStrategy[Paraphrase]:
        return lazy()

    definition.__name__ = definition.__qualname__ = repr(lazy)  # how Hypothesis prints the strategy
    from hypothesis import strategies as st

    return st.deferred(definition)
