"""LLM paraphrase pools: one request, screened, cached by content, drawn as pool indices.

Every test that needs a model talks to ``MessagesServer`` on 127.0.0.1 through the real
anthropic SDK; none needs a key or the internet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.database import InMemoryExampleDatabase
from rapidfuzz import fuzz

from agentprop._modelapi.budget import Budget
from agentprop.errors import InputError, InvalidArgument
from agentprop.strategies._internal.llm_pool import (
    ParaphrasePoolError,
    llm_paraphrase_pool,
    llm_paraphrases,
    parse_candidates,
)
from agentprop.strategies._internal.paraphrase import Paraphrase, Step, apply_transforms
from agentprop.testing.messages_server import MessagesServer, malformed_reply, text_reply

ORIGINAL = "Cancel my order O-1001 right now! card last4 4242, zip 94107"
POOL_FILE = Path(__file__).parent / "data" / "paraphrase_pool_supportops.json"

GOOD = [
    "Please cancel my order O-1001 right away. Card last4 4242, zip 94107.",
    "I need order O-1001 cancelled right now. My card's last4 is 4242 and my zip is 94107.",
    "Cancel order O-1001 immediately, please! Card last4: 4242, zip: 94107.",
    "Can you cancel my order O-1001 right now? card last4 4242, zip 94107",
    "Could you cancel order O-1001 for me right now? The last4 on my card is 4242, zip code 94107.",
]
# Each bad candidate, with the one rule it breaks.
BAD: dict[str, object] = {
    "missing_slot": "Please cancel my order O-1002 right away. Card last4 4242, zip 94107.",
    "identical": "cancel my order O-1001 right now!  card last4 4242, zip 94107.",
    "too_different": "Hello there, hope you are having a good day. About the purchase O-1001 that "
    "I placed with your shop a little while ago: I have changed my mind about it entirely and no "
    "longer want it shipped, so kindly cancel that order straight away. For verification, the "
    "card used ends in last4 4242 and the billing zip is 94107. Many thanks in "
    "advance for your help!",
    "too_similar": "Cancel my order O-1001 right now, card last4 4242, zip 94107",
    "missing_keywords": "Stop O-1001 immediately, last4 4242, 94107.",
    "added_slot": "Please cancel my orders O-1001 and O-1003 right away. Card "
    "last4 4242, zip 94107.",
    "duplicate": GOOD[0],
    "not_text": 42,
}


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No key or endpoint from the environment, and a private working directory."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def json_reply(items: list[Any], **kw: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda request: text_reply(json.dumps(items), **kw)


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer(handler=json_reply(GOOD)) as s:
        yield s


def pool_args(server: MessagesServer, tmp_path: Path, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": "test-dummy-key",
        "cache_dir": tmp_path / "pools",
        "n": 10,
        "model": "claude-test",
    }
    args.update(kw)
    return args


def draw_all(strategy: Any, *, max_examples: int = 60) -> list[Paraphrase]:
    seen: list[Paraphrase] = []

    @settings(max_examples=max_examples, database=None, derandomize=True, deadline=None)
    @given(strategy)
    def collect(p: Paraphrase) -> None:
        seen.append(p)

    collect()
    return seen


# --- one request, cached by content -------------------------------------------------------------


def test_one_request_for_many_draws_and_across_strategy_creations(
    server: MessagesServer, tmp_path: Path
) -> None:
    first = draw_all(llm_paraphrases(ORIGINAL, **pool_args(server, tmp_path)))
    assert len(server.requests) == 1
    second = draw_all(llm_paraphrases(ORIGINAL, **pool_args(server, tmp_path)))
    assert len(server.requests) == 1, (
        "a second strategy with the same arguments must read the cache"
    )

    assert {str(p) for p in first + second} <= {ORIGINAL, *GOOD}
    assert len({str(p) for p in first}) >= 4  # the pool is actually drawn from
    pool = llm_paraphrase_pool(ORIGINAL, **pool_args(server, tmp_path))
    assert pool.source == "cache" and len(server.requests) == 1
    for p in first:
        index = pool.texts.index(str(p))
        assert p.original == ORIGINAL
        assert p.transforms == ((Step("pool", (("index", index),)),) if index else ())


def test_the_request_and_the_cache_file(server: MessagesServer, tmp_path: Path) -> None:
    pool = llm_paraphrase_pool(ORIGINAL, temperature=0.7, **pool_args(server, tmp_path))
    body = server.requests[0].json
    assert body["model"] == "claude-test" and body["temperature"] == 0.7
    prompt = body["messages"][0]["content"]
    for slot in ("O-1001", "last4", "4242", "94107"):
        assert f'"{slot}"' in prompt
    assert "10 " in prompt and ORIGINAL in prompt and "JSON array" in prompt
    assert server.requests[0].headers["authorization"] == "Bearer test-dummy-key"

    assert pool.path is not None and pool.path.parent == tmp_path / "pools"
    assert re.fullmatch(r"[0-9a-f]{64}\.json", pool.path.name)
    raw = pool.path.read_text(encoding="utf-8")
    assert "test-dummy-key" not in raw
    document = json.loads(raw)
    assert document["model"] == "claude-test"
    assert document["text"] == ORIGINAL and document["created"]
    assert [e["text"] for e in document["pool"]] == list(pool.entries)
    assert document["metadata"]["usage"]["output_tokens"] > 0


def test_the_key_covers_the_screen_but_not_the_temperature(
    server: MessagesServer, tmp_path: Path
) -> None:
    llm_paraphrase_pool(ORIGINAL, **pool_args(server, tmp_path))
    llm_paraphrase_pool(ORIGINAL, temperature=0.2, **pool_args(server, tmp_path))
    assert len(server.requests) == 1
    llm_paraphrase_pool(ORIGINAL, similarity=(0.2, 0.95), **pool_args(server, tmp_path))
    llm_paraphrase_pool(ORIGINAL, keywords=["cancel"], **pool_args(server, tmp_path))
    llm_paraphrase_pool(ORIGINAL, **pool_args(server, tmp_path, model="claude-other"))
    llm_paraphrase_pool(ORIGINAL, **pool_args(server, tmp_path, n=7))
    llm_paraphrase_pool(ORIGINAL, protect=["order"], **pool_args(server, tmp_path))
    # six pools; the one that differs only in its similarity bounds asks the model the same
    # request, so it screens the reply recorded in the API cache: five requests
    assert len(server.requests) == 5
    assert len(list((tmp_path / "pools").glob("*.json"))) == 6


def test_a_filled_cache_needs_no_key_and_no_server(tmp_path: Path) -> None:
    with MessagesServer(handler=json_reply(GOOD)) as s:
        made = llm_paraphrase_pool(ORIGINAL, **pool_args(s, tmp_path))
    # server gone, no key anywhere: the cache answers
    again = llm_paraphrase_pool(ORIGINAL, cache_dir=tmp_path / "pools", n=10, model="claude-test")
    assert again.source == "cache" and again.entries == made.entries


# --- the screen ---------------------------------------------------------------------------------


def test_invalid_candidates_are_filtered_with_reasons(tmp_path: Path) -> None:
    reply = [GOOD[0], *BAD.values(), *GOOD[1:]]
    with MessagesServer(handler=json_reply(reply)) as s:
        pool = llm_paraphrase_pool(ORIGINAL, **pool_args(s, tmp_path, n=20))
    assert sorted(pool.entries) == sorted(GOOD)
    reasons = {r.text: r.reason for r in pool.rejected}
    expected = {(json.dumps(v) if not isinstance(v, str) else v.strip()): k for k, v in BAD.items()}
    assert reasons == expected
    assert all(r.detail for r in pool.rejected)
    # most similar first, so shrinking prefers the least-changed rewrite
    scores = [fuzz.ratio(ORIGINAL.casefold(), " ".join(e.casefold().split())) for e in pool.entries]
    assert scores == sorted(scores, reverse=True)
    document = json.loads(pool.path.read_text(encoding="utf-8"))  # type: ignore[union-attr]
    assert {r["reason"] for r in document["rejected"]} == set(BAD)


def test_explicit_keywords_must_all_appear(tmp_path: Path) -> None:
    refund = "Refund my order O-1001 right now! card last4 4242, zip 94107"  # same words but one
    with MessagesServer(handler=json_reply([refund, *GOOD])) as s:
        default = llm_paraphrase_pool(ORIGINAL, **pool_args(s, tmp_path))
        strict = llm_paraphrase_pool(
            ORIGINAL, keywords=["cancel", "order"], **pool_args(s, tmp_path)
        )
    assert refund in default.entries  # the default majority rule cannot see a swapped verb ...
    assert refund not in strict.entries  # ... a named intent word can
    assert [r.reason for r in strict.rejected] == ["missing_keywords"]
    assert "cancel" in strict.rejected[0].detail
    assert set(strict.entries) == set(GOOD)


def test_chinese_uses_substring_keywords(tmp_path: Path) -> None:
    text = "帮我取消订单O-1001，谢谢"
    replies = [
        "麻烦您帮我取消一下订单O-1001，谢谢",
        "请把订单O-1001退款，谢谢",
        "帮我取消订单O-1002，谢谢",
    ]
    with MessagesServer(handler=json_reply(replies)) as s:
        pool = llm_paraphrase_pool(text, lang="zh", keywords=["取消"], **pool_args(s, tmp_path))
    assert pool.entries == (replies[0],)
    assert [r.reason for r in pool.rejected] == ["missing_keywords", "missing_slot"]


def test_when_nothing_survives_the_error_says_why_and_asks_once(tmp_path: Path) -> None:
    with MessagesServer(handler=json_reply([ORIGINAL, "Stop O-1001 now, last4 4242, 94107."])) as s:
        for _ in range(2):
            with pytest.raises(ParaphrasePoolError) as info:
                llm_paraphrase_pool(ORIGINAL, **pool_args(s, tmp_path))
            message = str(info.value)
            assert "identical x1" in message and "missing_keywords x1" in message
            assert "similarity=" in message and "keywords=" in message  # the fix
        assert len(s.requests) == 1


# --- parsing and bad replies ------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "Here you go:\n```json\n" + json.dumps(GOOD) + "\n```\nHope this helps!",
        json.dumps({"paraphrases": [{"text": g} for g in GOOD]}),
        "\n".join(f'{i}. "{g}"' for i, g in enumerate(GOOD, 1)),
        "\n".join(f"- {g}" for g in GOOD),
    ],
    ids=["fenced-json-in-prose", "object-with-list", "numbered-lines", "bullets"],
)
def test_reply_formats(reply: str, tmp_path: Path) -> None:
    with MessagesServer([text_reply(reply)]) as s:
        pool = llm_paraphrase_pool(ORIGINAL, **pool_args(s, tmp_path))
    assert sorted(pool.entries) == sorted(GOOD)


def test_a_truncated_json_array_keeps_its_complete_strings(tmp_path: Path) -> None:
    cut = json.dumps(GOOD)[:-30]
    with MessagesServer([text_reply(cut, stop_reason="max_tokens")]) as s:
        pool = llm_paraphrase_pool(ORIGINAL, **pool_args(s, tmp_path))
    assert sorted(pool.entries) == sorted(GOOD[:-1])
    assert pool.metadata["truncated"] is True and pool.metadata["stop_reason"] == "max_tokens"


def test_a_reply_without_a_list_is_a_clear_error_and_is_not_cached(tmp_path: Path) -> None:
    with MessagesServer(
        [text_reply("I'm sorry, I can't help with that."), text_reply(json.dumps(GOOD))]
    ) as s:
        with pytest.raises(ParaphrasePoolError, match="JSON array") as info:
            llm_paraphrase_pool(ORIGINAL, **pool_args(s, tmp_path))
        assert "can't help" in str(info.value)
        assert not any((tmp_path / "pools").glob("*.json"))
        pool = llm_paraphrase_pool(ORIGINAL, **pool_args(s, tmp_path))  # a later run asks again
        assert len(s.requests) == 2 and len(pool) == len(GOOD)


def test_a_strategy_that_failed_to_load_does_not_ask_again(tmp_path: Path) -> None:
    with MessagesServer(handler=lambda request: text_reply("No.")) as s:
        strategy = llm_paraphrases(ORIGINAL, **pool_args(s, tmp_path))
        for _ in range(3):
            with pytest.raises(ParaphrasePoolError, match="JSON array"):
                draw_all(strategy, max_examples=5)
        assert len(s.requests) == 1


def test_a_malformed_http_body_is_a_clear_error(tmp_path: Path) -> None:
    with MessagesServer([malformed_reply()]) as s:
        with pytest.raises(ParaphrasePoolError, match="Messages API call .* failed") as info:
            llm_paraphrase_pool(ORIGINAL, **pool_args(s, tmp_path))
        assert "pool_file=" in str(info.value)
        assert len(s.requests) == 1  # not retried: a broken body is not transient


def test_parse_candidates_rejects_prose() -> None:
    with pytest.raises(ParaphrasePoolError, match="expected: a JSON array of strings"):
        parse_candidates("Sure. Cancel it now, they said.")
    assert parse_candidates('["a", {"text": "b"}, 3]') == (["a", "b", 3], False)


# --- no key, no cache ---------------------------------------------------------------------------


def test_no_key_and_no_cache_names_both_remedies(tmp_path: Path) -> None:
    strategy = llm_paraphrases(ORIGINAL, cache_dir=tmp_path / "pools")  # creating it does no I/O
    with pytest.raises(ParaphrasePoolError) as info:
        draw_all(strategy, max_examples=1)
    message = str(info.value)
    assert isinstance(info.value, InputError)
    for remedy in (
        "ANTHROPIC_API_KEY",
        "api_key=",
        "client=",
        "pool_file=",
        str(tmp_path / "pools"),
        "run once",
    ):
        assert remedy in message, remedy
    with pytest.raises(ParaphrasePoolError, match="ANTHROPIC_API_KEY"):
        llm_paraphrase_pool(ORIGINAL, cache_dir=tmp_path / "pools")


def test_the_key_can_come_from_the_environment_or_a_client(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: MessagesServer
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-dummy-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    llm_paraphrase_pool(ORIGINAL, cache_dir=tmp_path / "a", n=10)
    assert server.requests[-1].headers["authorization"] == "Bearer env-dummy-key"
    client = anthropic.Anthropic(
        base_url=server.base_url, api_key="client-dummy-key", max_retries=0
    )
    budget = Budget()
    # (no API cache: the same request would replay the first one's recorded reply)
    pool = llm_paraphrase_pool(
        ORIGINAL, client=client, cache_dir=tmp_path / "b", n=10, budget=budget, api_cache=False
    )
    assert server.requests[-1].headers["authorization"] == "Bearer client-dummy-key"
    assert len(pool) == len(GOOD) and budget.snapshot().calls == 1


def test_the_pool_request_replays_from_the_api_cache_like_an_agent_call(tmp_path: Path) -> None:
    """The pool's request goes through the API cache: with the pool files gone and the cache in
    replay-only mode (CI), the pool is rebuilt from the recorded reply with no request at all,
    and a request that was never recorded is reported with the nearest recorded one."""
    from agentprop._modelapi.cache import CacheMode
    from agentprop._modelapi.context import ModelCallContext, model_call_context

    api = tmp_path / "api.sqlite"
    with MessagesServer(handler=json_reply(GOOD)) as s:
        # recording, whatever session runs the test
        with model_call_context(ModelCallContext(budget=Budget(), cache_mode=CacheMode.READ_WRITE)):
            made = llm_paraphrase_pool(ORIGINAL, api_cache=api, **pool_args(s, tmp_path))
        assert len(s.requests) == 1
        for pool_file in (tmp_path / "pools").glob("*.json"):
            pool_file.unlink()
        budget = Budget()
        # as a CI session
        with model_call_context(ModelCallContext(budget=budget, cache_mode=CacheMode.REPLAY_ONLY)):
            again = llm_paraphrase_pool(ORIGINAL, api_cache=api, **pool_args(s, tmp_path))
            assert len(s.requests) == 1  # zero network calls
            assert again.entries == made.entries and again.source == "api"
            assert budget.snapshot().cached_calls == 1 and budget.snapshot().calls == 0
            with pytest.raises(ParaphrasePoolError, match="replay-only") as info:
                llm_paraphrase_pool(ORIGINAL, api_cache=api, **pool_args(s, tmp_path, n=9))
            # the miss is the cache's own, explained (the nearest-request diff of a miss is
            # tested in test_cache.py), and nothing went out
            assert (
                "No recorded response for this request" in str(info.value) and len(s.requests) == 1
            )


# --- committed pool files -----------------------------------------------------------------------


def test_a_committed_pool_file_needs_no_server(tmp_path: Path) -> None:
    committed = json.loads(POOL_FILE.read_text(encoding="utf-8"))
    texts = {e["text"] for e in committed["pool"]}
    pool = llm_paraphrase_pool(committed["text"], pool_file=POOL_FILE)
    assert pool.source == "file" and set(pool.entries) == texts
    seen = draw_all(llm_paraphrases(committed["text"], pool_file=POOL_FILE), max_examples=80)
    assert {str(p) for p in seen} <= texts | {committed["text"]}
    assert committed["text"] in seen and len({str(p) for p in seen}) >= 5
    assert not (tmp_path / ".agentprop").exists()  # nothing cached, nothing asked


def test_a_pool_file_for_another_text_or_with_a_bad_entry_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ParaphrasePoolError, match="not for 'Cancel order O-9'"):
        llm_paraphrase_pool("Cancel order O-9", pool_file=POOL_FILE)
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"text": ORIGINAL, "pool": [GOOD[0], "Cancel O-1001 please"]}), encoding="utf-8"
    )
    with pytest.raises(ParaphrasePoolError, match="missing_slot") as info:
        llm_paraphrase_pool(ORIGINAL, pool_file=bad)
    assert str(bad) in str(info.value)
    broken = tmp_path / "broken.json"
    broken.write_text('{"text": "x",\n "pool": [', encoding="utf-8")
    with pytest.raises(ParaphrasePoolError, match=re.escape(f"{broken}:2:")):
        llm_paraphrase_pool(ORIGINAL, pool_file=broken)
    with pytest.raises(ParaphrasePoolError, match="not found"):
        llm_paraphrase_pool(ORIGINAL, pool_file=tmp_path / "missing.json")


# --- shrinking and replay -------------------------------------------------------------------------


def run_failing(
    strategy: Any, db: InMemoryExampleDatabase, word: str, calls: list[Paraphrase]
) -> None:
    @settings(
        database=db,
        max_examples=100,
        deadline=None,
        phases=[Phase.reuse, Phase.generate, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(strategy)
    def agent_understands(p: Paraphrase) -> None:
        calls.append(p)
        assert word not in p

    agent_understands()


def test_failures_shrink_to_the_original_and_replay_from_the_database(
    server: MessagesServer, tmp_path: Path
) -> None:
    db = InMemoryExampleDatabase()
    calls: list[Paraphrase] = []
    with pytest.raises(AssertionError):
        run_failing(llm_paraphrases(ORIGINAL, **pool_args(server, tmp_path)), db, "4242", calls)
    minimal = calls[-1]
    # every example fails: the original is minimal
    assert minimal == ORIGINAL and minimal.transforms == ()

    pool = llm_paraphrase_pool(ORIGINAL, **pool_args(server, tmp_path))
    word = "could"  # only in the least similar entry
    index = next(i for i, t in enumerate(pool.texts) if word in t.casefold())
    assert sum(word in t.casefold() for t in pool.texts) == 1
    calls = []
    db = InMemoryExampleDatabase()
    with pytest.raises(AssertionError):
        run_failing(llm_paraphrases(ORIGINAL, **pool_args(server, tmp_path)), db, "Could", calls)
    assert calls[-1] == pool.texts[index]
    assert calls[-1].transforms == (Step("pool", (("index", index),)),)
    assert apply_transforms(ORIGINAL, calls[-1].transforms, pool=pool.entries) == calls[-1]

    replayed: list[Paraphrase] = []
    with pytest.raises(AssertionError):
        run_failing(llm_paraphrases(ORIGINAL, **pool_args(server, tmp_path)), db, "Could", replayed)
    assert replayed[0] == pool.texts[index]  # the saved failure is replayed first, exactly
    assert len(server.requests) == 1


def test_local_transforms_compose_on_top_when_asked(server: MessagesServer, tmp_path: Path) -> None:
    seen = draw_all(
        llm_paraphrases(ORIGINAL, max_transforms=2, **pool_args(server, tmp_path)), max_examples=80
    )
    pool = llm_paraphrase_pool(ORIGINAL, **pool_args(server, tmp_path))
    assert any(len(p.transforms) > 1 and p.transforms[0].name == "pool" for p in seen)
    for p in seen:
        for slot in ("O-1001", "4242", "94107", "last4"):
            assert slot in p
        assert apply_transforms(ORIGINAL, p.transforms, pool=pool.entries) == p


# --- argument validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n": 0},
        {"n": True},
        {"n": 101},
        {"n": 2.0},
        {"similarity": (0.5, 0.5)},
        {"similarity": (0.6, 0.4)},
        {"similarity": (-0.1, 0.5)},
        {"similarity": (0.2, 1.2)},
        {"similarity": (0.2,)},
        {"similarity": "0.2,0.9"},
        {"similarity": (0.2, float("nan"))},
        {"keywords": "cancel"},
        {"keywords": ["refund"]},
        {"keywords": [""]},
        {"protect": ["not in the text"]},
        {"protect": "O-1001"},
        {"temperature": 1.5},
        {"model": ""},
        {"cache_dir": 3},
        {"pool_file": 3},
        {"client": object()},
        {"max_transforms": -1},
        {"transforms": ["no_such_transform"]},
        {"lang": "xx"},
        {"budget": "lots"},
    ],
    # deterministic ids (an object's repr holds its address): pytest-xdist workers must
    # collect the same test ids
    ids=lambda kwargs: ", ".join(
        f"{k}={type(v).__name__ if type(v) is object else repr(v)}" for k, v in kwargs.items()
    ),
)
def test_bad_arguments_are_refused_at_creation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        llm_paraphrases(ORIGINAL, **kwargs)


@pytest.mark.parametrize("text", ["", "   ", None, b"Cancel"])
def test_bad_text_is_refused(text: Any) -> None:
    with pytest.raises(InvalidArgument):
        llm_paraphrases(text)
